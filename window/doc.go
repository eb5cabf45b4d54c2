// Package window is the arithmetic of the window rules on their packed
// states: the fixed window, the sliding-window counter, the anchored
// window, the exact sliding log and the rolling window kept in slices. It
// has no clock and no maps: every function takes the time and the state,
// and returns the decision (a gcra.Decision) and the state to store.
//
// The limiters of package atomiclimit decide every window rule through this
// arithmetic (it is theirs, not a copy), and a store that keeps window
// states elsewhere mirrors it: redislimit's scripts decide in Redis as it
// does, and redislimit describes their results with it; the tests hold
// the two to the same decision vectors. Use it to keep window states in a
// store of your own and decide exactly as the in-process limiters do.
//
// Build parameters with the constructors (NewFixedParams, …): they
// validate the count and the window as atomiclimit's rules do, with the
// same errors. Times are nanoseconds on the caller's time base, as gcra.Nanos
// converts them; start is where slice or window 0 begins on that base.
package window
