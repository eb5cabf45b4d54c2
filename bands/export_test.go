package bands

import "time"

// TakeAllAt runs the taking phase without the check phase: the state a
// request meets when another goroutine drained a band between its check and
// its take.
func (l *Limiter) TakeAllAt(now time.Time, n int) bool { return l.takeAll(l.src.At(now), n) }

// Word returns band i's state word.
func (l *Limiter) Word(i int) uint64 { return l.words[i].Load() }
