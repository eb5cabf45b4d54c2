package core

import "github.com/atomiclimit/atomiclimit/internal/algo"

// SpecOf returns the algorithm and parameters r names, as the user stated
// them, for the remote limiters of nested modules (redisgcra), which decide
// the same rules in another store and build them from the spec. r.Bands, if
// any, is r's own slice: read it, do not modify it.
func SpecOf(r Rule) algo.Spec { return r.s }
