package atomicbucket

// TAT returns b's stored state, for the tests.
func TAT(b *Bucket) int64 { return b.b.Load() }
