// Command inline instantiates the limiters' hot paths so that
// TestFastPathInlines can read the compiler's inlining decisions on them.
package main

import (
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/internal/core"
)

func main() {
	k, _ := core.NewKeyed[string](core.GCRA(gcra.PerSecond(10), 5))
	l, _ := core.New(core.GCRA(gcra.PerSecond(10), 5))
	println(k.Allow("a"), l.Allow())
}
