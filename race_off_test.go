//go:build !race

package atomiclimit_test

const raceEnabled = false
