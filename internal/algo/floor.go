package algo

// An atomicWord is atomic.Int64 or atomic.Uint64.
type atomicWord[T int64 | uint64] interface {
	Load() T
	CompareAndSwap(old, new T) bool
}

// Raise makes *w at least v: the floor a limiter's new states start from
// only grows. Every algorithm's floors are ordered as unsigned words (a TAT,
// a window index in the high bits with zero counts, an expiry, a slice
// index). Set raises the floors before it retires a state, so that a state
// created after the retired one's removal reads floors that cover it.
func Raise[T int64 | uint64, W atomicWord[T]](w W, v T) {
	for {
		// The CompareAndSwap fails only if another raise landed first; the
		// retry sees the larger floor.
		f := w.Load()
		if f >= v || w.CompareAndSwap(f, v) {
			return
		}
	}
}
