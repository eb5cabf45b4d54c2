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
	// One backing array for all the one-element slices: one allocation.
	var k int
	if items > 0 && set&HeaderRateLimit != 0 {
		k++
	}
	if policies > 0 && set&HeaderPolicy != 0 {
		k++
	}
	if least >= 0 && set&HeaderLegacy != 0 {
		k += 3
	}
	if ra >= 0 && set&HeaderRetryAfter != 0 {
		k++
	}
	if k == 0 {
		return
	}
	vals := make([]string, k)
	merge := len(h) > 0 // an outer middleware may have written its own fields
	// set1 writes v; list writes v after an outer middleware's list, if any.
	set1 := func(name, v string) {
		vals[0] = v
		h[name] = vals[:1:1]
		vals = vals[1:]
	}
	list := func(name, v string) {
		if merge {
			if old := h[name]; len(old) > 0 && old[0] != "" {
				v = old[0] + ", " + v // an outer middleware's list, then ours
			}
		}
		set1(name, v)
	}
	if items > 0 && set&HeaderRateLimit != 0 {
		list(hdrRateLimit, door.RateLimitValue(out, fs, n, items, pk))
	}
	if policies > 0 && set&HeaderPolicy != 0 {
		list(hdrPolicy, s.PolicyValue(fs, policies, pk))
	}
	if least >= 0 && set&HeaderLegacy != 0 {
		// One integer each, not a list: of an outer middleware's set and
		// ours, the one with the fewest remaining stays.
		keepOuter := false
		if old := h[hdrXRemaining]; merge && len(old) > 0 {
			prev, err := strconv.Atoi(old[0])
			keepOuter = err == nil && prev <= leastR
		}
		if keepOuter {
			vals = vals[3:]
		} else {
			set1(hdrXLimit, fs[least].Limit)
			set1(hdrXRemaining, strconv.Itoa(leastR))
			set1(hdrXReset, strconv.FormatInt(ratefields.CeilSeconds(out[least].D.ResetAfter), 10))
		}
	}
	if ra >= 0 && set&HeaderRetryAfter != 0 {
		if old := h[hdrRetryAfter]; merge && len(old) > 0 {
			if prev, err := strconv.ParseInt(old[0], 10, 64); err == nil {
				ra = max(ra, prev) // the longer wait of an outer middleware's denial
			}
			delete(h, hdrRetryAfter)
		}
		set1(hdrRetryAfter, strconv.FormatInt(ra, 10))
	}
}
