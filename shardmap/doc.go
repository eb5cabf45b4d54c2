// Package shardmap is a concurrent map from comparable keys to stable values
// (usually pointers), split into shards that are each an xsync MapOf, so that
// growing one shard never pauses writers to the others and sweeping proceeds
// one shard at a time.
//
// It knows nothing of rate limiting. What it offers beyond a plain MapOf:
//
//   - Load is lock-free and allocation-free: one hash (hash/maphash, seeded
//     per map) to pick the shard, then MapOf.Load, which hashes with its own.
//   - LoadOrCreate runs its constructor at most once per key, even when many
//     goroutines miss on the same key at once.
//   - An optional size bound: LoadOrCreate returns ErrFull instead of growing
//     the map past it, exactly, under any concurrency.
//   - Sweeping with a caller's predicate, one shard per step, removing an entry
//     only if the map still holds the value the predicate saw.
//
// Why shards: an xsync MapOf grows by copying its whole table while writers
// wait. Split into S shards, each copy moves a 1/S share and holds up only the
// writers of that shard. The shard is picked by the top bits of a hash that
// MapOf does not use, so the keys of one shard spread over its buckets.
package shardmap
