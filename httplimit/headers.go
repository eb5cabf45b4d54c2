package httplimit

import (
	"net/http"
	"strconv"
	"sync/atomic"

	"github.com/atomiclimit/atomiclimit"
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

// writeHeaders writes the selected headers for the outcomes of s's
// policies. ra is the Retry-After in seconds, or < 0 for none. A field an
// outer middleware already wrote is extended, not replaced: both lists
// hold their own policies.
//
// Without pk, the common values are shared field values built once
// (values), assigned to the map as they are: the policies'
// RateLimit-Policy, a RateLimit item with 1 ≤ r ≤ 128 or a denial's r = 0,
// and integers up to 3600. Each is a slice of capacity 1 that nothing
// writes to: a handler that sets, adds or deletes a header replaces the
// slice, never its element.
func (m *Middleware[K]) writeHeaders(h http.Header, s *stack[K], out []atomiclimit.Outcome, key K, n int, ra int64) {
	set := m.headers
	if set&HeadersNone != 0 {
		return
	}
	// The field values of each policy's quota, as its outcome found it.
	var buf [atomiclimit.MaxPolicies]*fields
	fs := buf[:len(out)]
	for j := range fs {
		fs[j] = s.fields[j].of(out[j].Quota)
	}
	var pk []byte
	if m.pk != nil {
		pk = m.pk(key)
	}
	// How many policies have items, and the most restrictive (fewest
	// remaining) for the legacy headers.
	policies, items, least, leastR := count(out, fs, n)
	merge := len(h) > 0 // an outer middleware may have written its own fields
	if items > 0 && set&HeaderRateLimit != 0 {
		var v []string
		if pk == nil {
			v = rateLimitValues(out, fs, n, items)
		} else {
			v = one(rateLimitValue(out, fs, n, items, pk))
		}
		setList(h, hdrRateLimit, v, merge)
	}
	if policies > 0 && set&HeaderPolicy != 0 {
		var v []string
		if pk == nil {
			v = s.joined.policyValues(fs, policies)
		} else {
			v = one(s.joined.policyValue(fs, policies, pk))
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
			h[hdrXLimit] = fs[least].limitValue
			h[hdrXRemaining] = intValue(int64(leastR))
			h[hdrXReset] = intValue(ceilSeconds(out[least].Decision.ResetAfter))
		}
	}
	if ra >= 0 && set&HeaderRetryAfter != 0 {
		if old := h[hdrRetryAfter]; merge && len(old) > 0 {
			if prev, err := strconv.ParseInt(old[0], 10, 64); err == nil {
				ra = max(ra, prev) // the longer wait of an outer middleware's denial
			}
			delete(h, hdrRetryAfter)
		}
		h[hdrRetryAfter] = intValue(ra)
	}
}

// setList sets the list field name to v, after an outer middleware's list
// if merge and there is one.
func setList(h http.Header, name string, v []string, merge bool) {
	if merge {
		if old := h[name]; len(old) > 0 && old[0] != "" {
			v = one(old[0] + ", " + v[0]) // an outer middleware's list, then ours
		}
	}
	h[name] = v
}

// count returns how many of the policies (fs, parallel to out) are limited
// and so have a RateLimit-Policy item, how many of those have a RateLimit
// item (an outcome that describes a state), and the one with the fewest
// remaining (least, -1 if none, and its r).
func count(out []atomiclimit.Outcome, fs []*fields, n int) (policies, items, least, leastR int) {
	least = -1
	for j, f := range fs {
		if !f.limited {
			continue
		}
		policies++
		if r, ok := out[j].Remaining(n); ok {
			items++
			if least < 0 || r < leastR {
				least, leastR = j, r
			}
		}
	}
	return policies, items, least, leastR
}

// rateLimitValues is rateLimitValue without pk, as a field value (values):
// the common item of one policy, with 1 ≤ r ≤ 128 or a denial's r = 0,
// allocates nothing; any other value is built in one allocation.
func rateLimitValues(out []atomiclimit.Outcome, fs []*fields, n, items int) []string {
	if items == 1 {
		for j, f := range fs {
			if !f.limited {
				continue
			}
			o := &out[j]
			if r, ok := o.Remaining(n); ok {
				return f.values(r, o.Decision.TokenAfter)
			}
		}
	}
	var buf [256]byte
	return stringValue(appendRateLimit(buf[:0], out, fs, n, nil))
}

// rateLimitValue is the RateLimit value: an item `"name";r=R[;t=T][;pk=:…:]`
// (fields.appendItem) per policy with a state to describe, in the
// configured order (items as count returns it). The common admission, one
// item with 1 ≤ r ≤ 128 and no pk, allocates nothing.
func rateLimitValue(out []atomiclimit.Outcome, fs []*fields, n, items int, pk []byte) string {
	if items == 1 && pk == nil {
		for j, f := range fs {
			if !f.limited {
				continue
			}
			if r, ok := out[j].Remaining(n); ok {
				if v, ok := f.kept(r); ok {
					return v // the common admission: no allocation
				}
			}
		}
	}
	var buf [256]byte
	return string(appendRateLimit(buf[:0], out, fs, n, pk))
}

// appendRateLimit appends the RateLimit value's items.
func appendRateLimit(b []byte, out []atomiclimit.Outcome, fs []*fields, n int, pk []byte) []byte {
	for j, f := range fs {
		if !f.limited {
			continue
		}
		o := &out[j]
		r, ok := o.Remaining(n)
		if !ok {
			continue
		}
		if len(b) > 0 {
			b = append(b, ", "...)
		}
		b = f.appendItem(b, r, o.Decision.TokenAfter, pk)
	}
	return b
}

// joined keeps the RateLimit-Policy value of the fields last used by a
// stack: the items of every policy, built once per combination of quotas.
// Its zero value is ready to use; it is safe for concurrent use.
type joined struct {
	last atomic.Pointer[joinedPolicy]
}

type joinedPolicy struct {
	fs     [atomiclimit.MaxPolicies]*fields
	value  string
	values []string // value as a field value (values)
}

// policyValue is the RateLimit-Policy value of a stack's policies: every
// limited policy's item (fs, parallel to the policies), in the configured
// order (policies as count returns it). Without pk it is built once per
// combination of quotas and kept.
func (j *joined) policyValue(fs []*fields, policies int, pk []byte) string {
	if pk == nil {
		if policies == 1 {
			for _, f := range fs {
				if f.limited {
					return f.policy
				}
			}
		}
		if jp := j.last.Load(); jp != nil && jp.matches(fs) {
			return jp.value
		}
	}
	var b []byte
	for _, f := range fs {
		if !f.limited {
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
	jp.values = one(jp.value)
	copy(jp.fs[:], fs)
	j.last.Store(jp)
	return jp.value
}

// policyValues is policyValue without pk, as a field value (values), built
// once per combination of quotas and kept.
func (j *joined) policyValues(fs []*fields, policies int) []string {
	if policies == 1 {
		for _, f := range fs {
			if f.limited {
				return f.policyValue
			}
		}
	}
	if jp := j.last.Load(); jp != nil && jp.matches(fs) {
		return jp.values
	}
	j.policyValue(fs, policies, nil)
	if jp := j.last.Load(); jp != nil && jp.matches(fs) {
		return jp.values
	}
	return one(j.policyValue(fs, policies, nil)) // another combination raced in
}

func (jp *joinedPolicy) matches(fs []*fields) bool {
	for j, f := range fs {
		if jp.fs[j] != f {
			return false
		}
	}
	return true
}
