package atomicbucket

import (
	"sync/atomic"

	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/internal/keyed"
)

// gcraCells tells the key store how to evict GCRA cells, and holds the floor
// new cells start from. It holds no reference to the Keyed limiter.
type gcraCells struct {
	// floor is at least the TAT of every cell retired as idle; new cells
	// start at TAT = floor. It only grows.
	floor atomic.Int64
}

// RetireIdle retires c if it is idle at now (TAT ≤ now: a full bucket). It
// raises the floor to the cell's own TAT, not to now: the floor is what new
// cells start from, and a floor ahead of the requests' times would put every
// new key in debt.
func (g *gcraCells) RetireIdle(c *cell, now int64) bool {
	tat := c.TAT()
	if tat > now || tat == gcra.Retired {
		return false // active, or already retired by someone else
	}
	keyed.Raise(&g.floor, tat)
	return c.retireFrom(tat) // fails if admitted meanwhile: active again
}

// IdleFrom is the cell's TAT: the bucket is full from then on.
func (g *gcraCells) IdleFrom(c *cell) (int64, bool) {
	t := c.TAT()
	return t, t != gcra.Retired
}

// RetireStale retires c if its TAT is at most limit. An idle cell raises the
// floor first (see RetireIdle); an active one loses its debt instead, as
// EvictStalest says.
func (g *gcraCells) RetireStale(c *cell, limit, now int64) (retired, idle bool) {
	t := c.TAT()
	if t > limit || t == gcra.Retired {
		return false, false
	}
	if t <= now {
		keyed.Raise(&g.floor, t)
	}
	return c.retireFrom(t), t <= now
}

// IsRetired reports whether c is retired.
func (g *gcraCells) IsRetired(c *cell) bool { return c.IsRetired() }
