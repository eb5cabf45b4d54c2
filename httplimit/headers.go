package httplimit

import (
	"encoding/base64"
	"fmt"
	"math"
	"math/bits"
	"net/http"
	"strconv"
	"time"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/internal/door"
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

// tableMax bounds the precomputed RateLimit values: an item with
// 1 ≤ r ≤ tableMax (and so no t) is a string built in advance.
const tableMax = 128

// fields is what a policy's headers need from a quota, built once per quota
// and rebuilt when the quota the limiter reports changes (SetRule, a key on
// another tier).
type fields struct {
	quota   atomiclimit.Quota
	limited bool   // false for Unlimited: no quota to describe, no headers
	q       int    // the advertised quota (see advertise)
	limit   string // q in decimal
	policy  string // the RateLimit-Policy item without pk
	item    string // `"name";r=`: the start of the RateLimit item
	table   []string
}

func newFields(quota atomiclimit.Quota, name, unit string) *fields {
	f := &fields{quota: quota, limited: quota.Limit != math.MaxInt}
	if !f.limited {
		return f
	}
	q, w := advertise(quota)
	f.q = q
	f.limit = strconv.Itoa(q)
	item := appendSFString(nil, name)
	pol := append(append([]byte(nil), item...), ";q="...)
	pol = strconv.AppendInt(pol, int64(q), 10)
	if q > 0 {
		pol = append(pol, ";w="...)
		pol = strconv.AppendInt(pol, w, 10)
	}
	if unit != "" {
		pol = append(pol, ";qu="...)
		pol = appendSFString(pol, unit)
	}
	f.policy = string(pol)
	f.item = string(item) + ";r="
	f.table = make([]string, min(quota.Limit, tableMax)+1)
	for r := 1; r < len(f.table); r++ {
		f.table[r] = f.item + strconv.Itoa(r)
	}
	return f
}

// advertise returns the q and w (whole seconds, at least 1) of a quota's
// RateLimit-Policy item. The window is rounded up to whole seconds, and the
// quota scaled to the rounded window, so that q/w is the limit's own rate
// (rounded down), never a slower one: GCRA at 1000/s with burst 1 has a
// window of 1ms and is advertised q=1000;w=1, not q=1;w=1. The quota is
// never below the limit's own (a full burst is admitted at once). A window
// that is already whole seconds is advertised as it is.
func advertise(quota atomiclimit.Quota) (q int, w int64) {
	q, w = quota.Limit, max(ceilSeconds(quota.Window), 1)
	if q <= 0 || quota.Window <= 0 {
		return q, w
	}
	// ⌊q·w·1s / Window⌋ in 128 bits: q·w·1s can pass 2^63.
	hi, lo := bits.Mul64(uint64(q), uint64(w)*uint64(time.Second))
	if hi >= uint64(quota.Window) {
		return math.MaxInt, w // beyond any count a client can send
	}
	scaled, _ := bits.Div64(hi, lo, uint64(quota.Window))
	return int(min(max(scaled, uint64(q)), math.MaxInt)), w
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

// writeHeaders writes the selected headers for the outcomes of s's
// policies. ra is the Retry-After in seconds, or < 0 for none. A field an
// outer middleware already wrote is extended, not replaced: both lists
// hold their own policies.
func (m *Middleware[K]) writeHeaders(h http.Header, s *stack[K], out []door.Outcome, fs []*fields, key K, n int, ra int64) {
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
	items, policies, least, leastR := 0, 0, -1, 0
	for j, f := range fs {
		if f == nil || !f.limited {
			continue
		}
		policies++
		if r, ok := out[j].Remaining(n, f.quota.Limit); ok {
			items++
			if least < 0 || r < leastR {
				least, leastR = j, r
			}
		}
	}
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
	put := func(name, v string) {
		if merge {
			if old := h[name]; len(old) > 0 && old[0] != "" {
				v = old[0] + ", " + v // an outer middleware's list, then ours
			}
		}
		vals[0] = v
		h[name] = vals[:1:1]
		vals = vals[1:]
	}
	if items > 0 && set&HeaderRateLimit != 0 {
		put(hdrRateLimit, rateLimitValue(out, fs, n, items, pk))
	}
	if policies > 0 && set&HeaderPolicy != 0 {
		put(hdrPolicy, s.policyValue(fs, policies, pk))
	}
	if least >= 0 && set&HeaderLegacy != 0 {
		put(hdrXLimit, fs[least].limit)
		put(hdrXRemaining, strconv.Itoa(leastR))
		put(hdrXReset, strconv.FormatInt(ceilSeconds(out[least].D.ResetAfter), 10))
	}
	if ra >= 0 && set&HeaderRetryAfter != 0 {
		if old := h[hdrRetryAfter]; merge && len(old) > 0 {
			if prev, err := strconv.ParseInt(old[0], 10, 64); err == nil {
				ra = max(ra, prev) // the longer wait of an outer middleware's denial
			}
			delete(h, hdrRetryAfter)
		}
		put(hdrRetryAfter, strconv.FormatInt(ra, 10))
	}
}

// rateLimitValue is the RateLimit value: an item `"name";r=R[;t=T][;pk=:…:]`
// per policy with a state to describe, in the configured order. t, the
// draft's time until more quota is available, is sent when r = 0: it is
// ⌈TokenAfter⌉, the time until one unit is. With r ≥ 1 there is quota now,
// and t is left out (it is optional).
func rateLimitValue(out []door.Outcome, fs []*fields, n, items int, pk []byte) string {
	if items == 1 && pk == nil {
		for j, f := range fs {
			if f == nil || !f.limited {
				continue
			}
			if r, ok := out[j].Remaining(n, f.quota.Limit); ok && r >= 1 && r < len(f.table) {
				return f.table[r] // the common admission: no allocation
			}
		}
	}
	var buf [256]byte
	b := buf[:0]
	for j, f := range fs {
		if f == nil || !f.limited {
			continue
		}
		o := &out[j]
		r, ok := o.Remaining(n, f.quota.Limit)
		if !ok {
			continue
		}
		if len(b) > 0 {
			b = append(b, ", "...)
		}
		b = append(b, f.item...)
		b = strconv.AppendInt(b, int64(r), 10)
		if r == 0 && o.D.TokenAfter > 0 && o.D.TokenAfter != gcra.Never {
			b = append(b, ";t="...)
			b = strconv.AppendInt(b, ceilSeconds(o.D.TokenAfter), 10)
		}
		if pk != nil {
			b = appendPK(b, pk)
		}
	}
	return string(b)
}

// policyValue is the RateLimit-Policy value: every limited policy's item,
// in the configured order. Without pk it is built once per combination of
// quotas and kept.
func (s *stack[K]) policyValue(fs []*fields, policies int, pk []byte) string {
	if pk == nil {
		if policies == 1 {
			for _, f := range fs {
				if f != nil && f.limited {
					return f.policy
				}
			}
		}
		if jp := s.joined.Load(); jp != nil && jp.matches(fs) {
			return jp.value
		}
	}
	var b []byte
	for _, f := range fs {
		if f == nil || !f.limited {
			continue
		}
		if len(b) > 0 {
			b = append(b, ", "...)
		}
		b = append(b, f.policy...)
		if pk != nil {
			b = appendPK(b, pk)
		}
	}
	if pk != nil {
		return string(b)
	}
	jp := &joinedPolicy{value: string(b)}
	copy(jp.fs[:], fs)
	s.joined.Store(jp)
	return jp.value
}

func (jp *joinedPolicy) matches(fs []*fields) bool {
	for j, f := range fs {
		if jp.fs[j] != f {
			return false
		}
	}
	return true
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
