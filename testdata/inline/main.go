// Command inline instantiates the limiters' hot paths, and a stack's
// Report, so that TestFastPathInlines and TestReportInlines can read the
// compiler's inlining decisions on them.
package main

import "github.com/atomiclimit/atomiclimit"

func main() {
	k, _ := atomiclimit.NewKeyed[string](atomiclimit.PerSecond(10), 5)
	l, _ := atomiclimit.New(atomiclimit.PerSecond(10), 5)
	println(k.Allow("a"), l.Allow())
	var s atomiclimit.Stack[string]
	s.Report(nil, atomiclimit.Pass, nil, 1)
}
