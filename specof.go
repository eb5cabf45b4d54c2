package atomiclimit

import "github.com/atomiclimit/atomiclimit/internal/algo"

// The remote limiters of the nested modules (redislimit) decide the same
// rules in another store and build them from the spec a Rule holds; they
// read it through algo.SpecOf, which this package sets, so that Rule shows
// users no accessor of an internal type.
func init() {
	algo.SpecOf = func(rule any) (algo.Spec, bool) {
		r, ok := rule.(Rule)
		return r.s, ok
	}
}
