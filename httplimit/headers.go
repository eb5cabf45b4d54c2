package httplimit

import (
	"net/http"
	"strconv"

	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/internal/door"
	"github.com/atomiclimit/atomiclimit/internal/ratefields"
)

// A HeaderSet selects the response headers the middleware writes.
type HeaderSet uint8

const (
	// HeaderRateLimit is the RateLimit field: "name";r=R;t=T.
	HeaderRateLimit HeaderSet = 1 << iota
	// HeaderPolicy is the RateLimit-Policy field: "name";q=Q;w=W.
	HeaderPolicy
	// HeaderRetryAfter is Retry-After on denials, in whole seconds rounded up.
	HeaderRetryAfter
	// HeaderLegacy is X-RateLimit-Limit (q), X-RateLimit-Remaining (r) and
	// X-RateLimit-Reset (seconds until the bucket is full, rounded up).
	HeaderLegacy
	// HeadersNone writes no header at all; it overrides every other bit.
	HeadersNone

	// DefaultHeaders is what a zero Config.Headers means. Every header is
	// DefaultHeaders | HeaderLegacy.
	DefaultHeaders = HeaderRateLimit | HeaderPolicy | HeaderRetryAfter
)

// Canonical header keys, assigned to the header map directly: the map
// wants them canonical and Set would canonicalize on every call.
const (
	hdrRateLimit  = "Ratelimit"
	hdrPolicy     = "Ratelimit-Policy"
	hdrRetryAfter = "Retry-After"
	hdrXLimit     = "X-Ratelimit-Limit"
	hdrXRemaining = "X-Ratelimit-Remaining"
	hdrXReset     = "X-Ratelimit-Reset"
)

// retryAfter returns the Retry-After of a denial in seconds, or -1 when the
// request can never be admitted (see ratefields.RetryAfter).
func retryAfter(d gcra.Decision) int64 { return ratefields.RetryAfter(d) }

// writeHeaders writes the selected headers for the outcomes of s's
// policies. ra is the Retry-After in seconds, or < 0 for none. A field an
// outer middleware already wrote is extended, not replaced: both lists
// hold their own policies.
//
// Without pk, the common values are shared field values built once
// (ratefields.Values), assigned to the map as they are: the policies'
// RateLimit-Policy, a RateLimit item with 1 ≤ r ≤ 128 or a denial's r = 0,
// and integers up to 3600. Each is a slice of capacity 1 that nothing
// writes to: a handler that sets, adds or deletes a header replaces the
// slice, never its element.
func (m *Middleware[K]) writeHeaders(h http.Header, s *door.Stack[K], out []door.Outcome, fs []*ratefields.Fields, key K, n int, ra int64) {
	set := m.headers
	if set&HeadersNone != 0 {
		return
	}
	var pk []byte
	if m.pk != nil {
		pk = m.pk(key)
	}
	// How many policies have items, and the most restrictive (fewest
	// remaining) for the legacy headers.
	policies, items, least, leastR := door.Count(out, fs, n)
	merge := len(h) > 0 // an outer middleware may have written its own fields
	if items > 0 && set&HeaderRateLimit != 0 {
		var v []string
		if pk == nil {
			v = door.RateLimitValues(out, fs, n, items)
		} else {
			v = ratefields.One(door.RateLimitValue(out, fs, n, items, pk))
		}
		setList(h, hdrRateLimit, v, merge)
	}
	if policies > 0 && set&HeaderPolicy != 0 {
		var v []string
		if pk == nil {
			v = s.PolicyValues(fs, policies)
		} else {
			v = ratefields.One(s.PolicyValue(fs, policies, pk))
		}
		setList(h, hdrPolicy, v, merge)
	}
	if least >= 0 && set&HeaderLegacy != 0 {
		// One integer each, not a list: of an outer middleware's set and
		// ours, the one with the fewest remaining stays.
		keepOuter := false
		if old := h[hdrXRemaining]; merge && len(old) > 0 {
			prev, err := strconv.Atoi(old[0])
			keepOuter = err == nil && prev <= leastR
		}
		if !keepOuter {
			h[hdrXLimit] = fs[least].LimitValue
			h[hdrXRemaining] = ratefields.IntValue(int64(leastR))
			h[hdrXReset] = ratefields.IntValue(ratefields.CeilSeconds(out[least].D.ResetAfter))
		}
	}
	if ra >= 0 && set&HeaderRetryAfter != 0 {
		if old := h[hdrRetryAfter]; merge && len(old) > 0 {
			if prev, err := strconv.ParseInt(old[0], 10, 64); err == nil {
				ra = max(ra, prev) // the longer wait of an outer middleware's denial
			}
			delete(h, hdrRetryAfter)
		}
		h[hdrRetryAfter] = ratefields.IntValue(ra)
	}
}

// setList sets the list field name to v, after an outer middleware's list
// if merge and there is one.
func setList(h http.Header, name string, v []string, merge bool) {
	if merge {
		if old := h[name]; len(old) > 0 && old[0] != "" {
			v = ratefields.One(old[0] + ", " + v[0]) // an outer middleware's list, then ours
		}
	}
	h[name] = v
}
