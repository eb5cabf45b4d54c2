package main

// windowAlgorithms returns the window algorithms of atomiclimit for the
// accuracy table.
func windowAlgorithms() []algorithm { return nil }
