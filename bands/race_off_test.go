//go:build !race

package bands_test

const raceEnabled = false
