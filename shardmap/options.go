package shardmap

// defaultShards is the number of shards New uses unless WithShards says
// otherwise. Each empty shard costs about 2 KiB (xsync's smallest table), so
// an empty map holds about 32 KiB; growth copies a 1/16 share at a time.
const defaultShards = 16

// maxShards bounds WithShards: 65,536 empty shards hold about 128 MiB.
const maxShards = 1 << 16

// An Option configures a Map.
type Option func(*config)

type config struct {
	shards  int
	limit   int
	presize int
}

// WithShards sets the number of shards, rounded up to a power of two, at
// least 1 and at most 65,536. More shards make each growth step shorter and
// each empty map larger.
func WithShards(n int) Option { return func(c *config) { c.shards = n } }

// WithLimit bounds the number of entries: LoadOrCreate returns ErrFull rather
// than exceed it. n ≤ 0 means no bound.
func WithLimit(n int) Option { return func(c *config) { c.limit = n } }

// WithPresize sizes the shards for n entries in all, so that the map does not
// grow until it holds them (each shard is sized for its share of n plus four
// standard deviations of the spread, see shardShare), and never shrinks below
// that. It spends at construction the table memory a map of n entries holds
// anyway: 64 bytes per 3.75 entries, rounded up to a power of two per shard.
func WithPresize(n int) Option { return func(c *config) { c.presize = n } }
