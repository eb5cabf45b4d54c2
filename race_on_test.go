//go:build race

package atomiclimit_test

// raceEnabled scales the long concurrency tests down under the race detector,
// which slows every memory access by an order of magnitude.
const raceEnabled = true
