package httplimit

import "github.com/atomiclimit/atomiclimit"

// statser is implemented by *atomiclimit.Keyed.
type statser interface {
	Stats() atomiclimit.Stats
}
