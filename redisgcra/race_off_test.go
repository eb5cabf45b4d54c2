//go:build !race

package redisgcra_test

const raceEnabled = false
