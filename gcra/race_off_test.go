//go:build !race

package gcra_test

const raceEnabled = false
