//go:build race

package redisgcra_test

const raceEnabled = true
