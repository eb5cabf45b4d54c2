package main

import (
	"time"

	"github.com/atomiclimit/atomiclimit/window"
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
			return window.NewFixed(accuracyLimit, time.Second, window.WithClock(c))
		})},
		{"atomiclimit sliding-window counter", mk(func(c *fixedClock) (allowN, error) {
			return window.NewCounter(accuracyLimit, time.Second, window.WithClock(c))
		})},
		{"atomiclimit sliding log (exact)", mk(func(c *fixedClock) (allowN, error) {
			return window.NewLog(accuracyLimit, time.Second, window.WithClock(c))
		})},
	}
}
