//go:build race

package gcra_test

// raceEnabled scales the exhaustive tests down under the race detector.
const raceEnabled = true
