package window

// Test hooks: the ring's idle and retire steps, which the log's algorithm
// (rules.go) reaches through algo.State, on a LogRing directly.

// A LogMark is a ring's position as Idle saw it, for RetireFrom.
type LogMark struct{ k, cur uint64 }

// Idle reports when the ring became or becomes idle (latest, its latest
// expiry) and whether it is idle at now; the mark lets RetireFrom retire it
// only if nothing was admitted since.
func (l *LogRing) Idle(now int64) (m LogMark, latest int64, ok bool) {
	m.k, m.cur, latest, ok = l.idle(now)
	return m, latest, ok
}

// RetireFrom retires the ring if nothing was admitted since Idle returned m.
func (l *LogRing) RetireFrom(m LogMark) bool { return l.retireFrom(m.k, m.cur) }

// IsRetired reports whether the ring has been retired.
func (l *LogRing) IsRetired() bool { return l.isRetired() }

// AnchorOf returns the anchor of state's window in ns, and whether a window
// is open (its count is not 0).
func (p *AnchoredParams) AnchorOf(state uint64) (int64, bool) {
	return int64(state>>p.shift) << p.gshift, state&p.mask > 0
}
