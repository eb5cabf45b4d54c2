package main

import (
	"time"

	"github.com/atomiclimit/atomiclimit"
)

// windowAlgorithms returns atomiclimit's window algorithms for the accuracy
// table, each at the same limit of accuracyLimit per second.
func windowAlgorithms() []algorithm {
	type allowN interface {
		AllowN(now time.Time, n int) bool
	}
	mk := func(build func(c *fixedClock) (allowN, error)) func(time.Time) func(time.Time) bool {
		return func(t0 time.Time) func(time.Time) bool {
			l := must(build(&fixedClock{t0}))
			return func(t time.Time) bool { return l.AllowN(t, 1) }
		}
	}
	return []algorithm{
		{"atomiclimit fixed window (interval refill)", mk(func(c *fixedClock) (allowN, error) {
			return atomiclimit.NewRule(atomiclimit.FixedWindow(accuracyLimit, time.Second), atomiclimit.WithClock(c))
		})},
		{"atomiclimit sliding-window counter", mk(func(c *fixedClock) (allowN, error) {
			return atomiclimit.NewRule(atomiclimit.SlidingCounter(accuracyLimit, time.Second), atomiclimit.WithClock(c))
		})},
		{"atomiclimit sliding log (exact)", mk(func(c *fixedClock) (allowN, error) {
			return atomiclimit.NewRule(atomiclimit.SlidingLog(accuracyLimit, time.Second), atomiclimit.WithClock(c))
		})},
	}
}
