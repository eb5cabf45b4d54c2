//go:build race

package window_test

// raceEnabled scales the long concurrency tests down under the race detector.
const raceEnabled = true
