package window

import (
	"time"

	"github.com/atomiclimit/atomiclimit/gcra"
	iw "github.com/atomiclimit/atomiclimit/internal/window"
)

// LogParams are exactly at most n admissions in every rolling window of
// length period: a log of the expiry times of the last n admissions, one
// request at a time.
type LogParams struct{ p iw.LogParams }

// NewLogParams validates 1 ≤ n ≤ 2^24 and 0 < period ≤ gcra.MaxSpan.
func NewLogParams(n int, period time.Duration) (LogParams, error) {
	p, err := iw.NewLogParams(n, period)
	return LogParams{p}, err
}

// Limit returns n.
func (p *LogParams) Limit() int { return p.p.Limit() }

// Decide decides one request at now on a log whose oldest of its last n
// expiries is oldest and whose latest is latest: admitted if oldest has
// passed, the admission's expiry u = max(now + period, latest) taking the
// oldest's place; the decision describes the log after it.
func (p *LogParams) Decide(oldest, latest, now int64) (u int64, d gcra.Decision) {
	return p.p.Decide(oldest, latest, now)
}
