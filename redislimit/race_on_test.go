//go:build race

package redislimit_test

const raceEnabled = true
