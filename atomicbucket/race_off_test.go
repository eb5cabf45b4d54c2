//go:build !race

package atomicbucket_test

const raceEnabled = false
