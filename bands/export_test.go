package bands

import "time"

// TakeAllAt runs the taking phase without the check phase: the state a
// request meets when another goroutine drained a band between its check and
// its take.
func (l *Limiter) TakeAllAt(now time.Time, n int) bool {
	return l.bands.takeAll(&l.c, l.src.At(now), n)
}

// Word returns band i's state word.
func (l *Limiter) Word(i int) uint64 { return l.words[i].Load() }

// RetireKey retires key's cell as a sweep does at now, without removing it
// from the map: the state a caller meets between the sweep's two steps.
func (k *Keyed[K]) RetireKey(key K, now time.Time) bool {
	c, ok := k.m.Load(key)
	return ok && k.st.RetireIdle(c, k.src.At(now))
}
