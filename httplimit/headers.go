package httplimit

import (
	"encoding/base64"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
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

	// DefaultHeaders is what a zero Config.Headers means.
	DefaultHeaders = HeaderRateLimit | HeaderPolicy | HeaderRetryAfter
	// AllHeaders is every header, the legacy ones included.
	AllHeaders = DefaultHeaders | HeaderLegacy
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

// tableMax bounds the precomputed RateLimit values: an admission that leaves
// r ≤ tableMax tokens (and so t = 0) writes a string built in advance.
const tableMax = 128

// fields is what a policy's headers need from a quota, built once per quota
// and rebuilt when the quota the limiter reports changes (SetRule, a key on
// another tier).
type fields struct {
	quota   atomiclimit.Quota
	limited bool   // false for Unlimited: no quota to describe, no headers
	q       int    // quota: the burst B, or the window's count
	limit   string // q in decimal
	policy  string // the RateLimit-Policy value without pk
	item    string // `"name";r=`: the start of the RateLimit value
	table   []string
}

func newFields(quota atomiclimit.Quota, name, unit string) *fields {
	f := &fields{quota: quota, limited: quota.Limit != math.MaxInt}
	if !f.limited {
		return f
	}
	f.q = quota.Limit
	f.limit = strconv.Itoa(f.q)
	item := appendSFString(nil, name)
	pol := append(append([]byte(nil), item...), ";q="...)
	pol = strconv.AppendInt(pol, int64(f.q), 10)
	if w := ceilSeconds(quota.Window); f.q > 0 {
		pol = append(pol, ";w="...)
		pol = strconv.AppendInt(pol, max(w, 1), 10)
	}
	if unit != "" {
		pol = append(pol, ";qu="...)
		pol = appendSFString(pol, unit)
	}
	f.policy = string(pol)
	f.item = string(item) + ";r="
	f.table = make([]string, min(f.q, tableMax)+1)
	for r := range f.table {
		f.table[r] = f.item + strconv.Itoa(r) + ";t=0"
	}
	return f
}

// ceilSeconds converts d to whole seconds, rounding up: a client that waits
// what it was told is admitted. d must not be gcra.Never.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}

// retryAfter returns the Retry-After of a denial in seconds, or -1 when the
// request can never be admitted (cost above the burst, DenyAll). It is
// ⌈RetryAfter⌉, and never less than the RateLimit field's t = ⌈TokenAfter⌉
// (RetryAfter ≥ TokenAfter holds for every denial; max makes it explicit).
func retryAfter(d gcra.Decision) int64 {
	if d.RetryAfter == gcra.Never {
		return -1
	}
	s := ceilSeconds(d.RetryAfter)
	if d.TokenAfter != gcra.Never {
		s = max(s, ceilSeconds(d.TokenAfter))
	}
	return max(s, 1) // a denial always waits: at least one second
}

// writeHeaders writes the selected headers for decision d. pk is the
// partition key (nil: none). ra is the Retry-After in seconds, or < 0 for
// none.
func writeHeaders(h http.Header, set HeaderSet, f *fields, d gcra.Decision, pk []byte, ra int64) {
	if set&HeadersNone != 0 {
		return
	}
	// One backing array for all the one-element slices: one allocation.
	var n int
	if f.limited {
		if set&HeaderRateLimit != 0 {
			n++
		}
		if set&HeaderPolicy != 0 {
			n++
		}
		if set&HeaderLegacy != 0 {
			n += 3
		}
	}
	if ra >= 0 && set&HeaderRetryAfter != 0 {
		n++
	}
	if n == 0 {
		return
	}
	vals := make([]string, n)
	put := func(k, v string) {
		vals[0] = v
		h[k] = vals[:1:1]
		vals = vals[1:]
	}
	if f.limited {
		if set&HeaderRateLimit != 0 {
			put(hdrRateLimit, rateLimitValue(f, d, pk))
		}
		if set&HeaderPolicy != 0 {
			v := f.policy
			if pk != nil {
				v = string(appendPK([]byte(v), pk))
			}
			put(hdrPolicy, v)
		}
		if set&HeaderLegacy != 0 {
			put(hdrXLimit, f.limit)
			put(hdrXRemaining, strconv.Itoa(d.Remaining))
			put(hdrXReset, strconv.FormatInt(ceilSeconds(d.ResetAfter), 10))
		}
	}
	if ra >= 0 && set&HeaderRetryAfter != 0 {
		put(hdrRetryAfter, strconv.FormatInt(ra, 10))
	}
}

// rateLimitValue is the RateLimit value `"name";r=R;t=T[;pk=:…:]`.
func rateLimitValue(f *fields, d gcra.Decision, pk []byte) string {
	r := max(d.Remaining, 0)
	if d.TokenAfter == 0 && pk == nil && r < len(f.table) {
		return f.table[r] // the common admission: no allocation
	}
	var buf [96]byte
	b := append(buf[:0], f.item...)
	b = strconv.AppendInt(b, int64(r), 10)
	if d.TokenAfter != gcra.Never {
		b = append(b, ";t="...)
		b = strconv.AppendInt(b, ceilSeconds(d.TokenAfter), 10)
	}
	if pk != nil {
		b = appendPK(b, pk)
	}
	return string(b)
}

// appendPK appends the pk parameter, an sf-binary (RFC 9651, 3.3.5).
func appendPK(b, pk []byte) []byte {
	b = append(b, ";pk=:"...)
	b = base64.StdEncoding.AppendEncode(b, pk)
	return append(b, ':')
}

// appendSFString appends s as an sf-string (RFC 9651, 4.1.6). s must have
// passed checkSFString.
func appendSFString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '"' || c == '\\' {
			b = append(b, '\\')
		}
		b = append(b, s[i])
	}
	return append(b, '"')
}

// checkSFString reports whether s can be an sf-string: printable ASCII only.
func checkSFString(what, s string) error {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return fmt.Errorf("%w: %s %q: only printable ASCII can be a structured-field string", ErrConfig, what, s)
		}
	}
	return nil
}
