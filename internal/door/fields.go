package door

import (
	"sync/atomic"

	"github.com/atomiclimit/atomiclimit/internal/ratefields"
)

// Scratch is what a door decides one request with: its outcomes and its
// policies' field values, parallel to the stack's policies. A door declares
// one as a local variable (Scratch1 for the common single policy: zeroing
// MaxPolicies outcomes costs a request measurable time), so that a
// request allocates none.
type Scratch struct {
	Out    [MaxPolicies]Outcome
	Fields [MaxPolicies]*ratefields.Fields
}

// Scratch1 is a Scratch for a stack of one policy.
type Scratch1 struct {
	Out    [1]Outcome
	Fields [1]*ratefields.Fields
}

// Fields fills fs (parallel to s.Policies) with the field values of key's
// quota under each policy.
func (s *Stack[K]) Fields(key K, fs []*ratefields.Fields) {
	for j, p := range s.Policies {
		fs[j] = p.Fields(key)
	}
}

// Count returns how many of the policies (fs, parallel to out) are limited
// and so have a RateLimit-Policy item, how many of those have a RateLimit
// item (an outcome that describes a state), and the one with the fewest
// remaining (least, -1 if none, and its r). A nil Fields is skipped.
func Count(out []Outcome, fs []*ratefields.Fields, n int) (policies, items, least, leastR int) {
	least = -1
	for j, f := range fs {
		if f == nil || !f.Limited {
			continue
		}
		policies++
		if r, ok := out[j].Remaining(n, f.Quota.Limit); ok {
			items++
			if least < 0 || r < leastR {
				least, leastR = j, r
			}
		}
	}
	return policies, items, least, leastR
}

// RateLimitValues is RateLimitValue without pk, as a field value
// (ratefields.Values): the common item of one policy, with 1 ≤ r ≤ 128 or
// a denial's r = 0, allocates nothing; any other value is built in one
// allocation.
func RateLimitValues(out []Outcome, fs []*ratefields.Fields, n, items int) []string {
	if items == 1 {
		for j, f := range fs {
			if f == nil || !f.Limited {
				continue
			}
			o := &out[j]
			if r, ok := o.Remaining(n, f.Quota.Limit); ok {
				return f.Values(r, o.D.TokenAfter)
			}
		}
	}
	var buf [256]byte
	return ratefields.StringValue(appendRateLimit(buf[:0], out, fs, n, nil))
}

// RateLimitValue is the RateLimit value: an item `"name";r=R[;t=T][;pk=:…:]`
// (ratefields.Fields.AppendItem) per policy with a state to describe, in
// the configured order (items as Count returns it). The common admission,
// one item with 1 ≤ r ≤ 128 and no pk, allocates nothing.
func RateLimitValue(out []Outcome, fs []*ratefields.Fields, n, items int, pk []byte) string {
	if items == 1 && pk == nil {
		for j, f := range fs {
			if f == nil || !f.Limited {
				continue
			}
			if r, ok := out[j].Remaining(n, f.Quota.Limit); ok {
				if v, ok := f.Item(r); ok {
					return v // the common admission: no allocation
				}
			}
		}
	}
	var buf [256]byte
	return string(appendRateLimit(buf[:0], out, fs, n, pk))
}

// appendRateLimit appends the RateLimit value's items.
func appendRateLimit(b []byte, out []Outcome, fs []*ratefields.Fields, n int, pk []byte) []byte {
	for j, f := range fs {
		if f == nil || !f.Limited {
			continue
		}
		o := &out[j]
		r, ok := o.Remaining(n, f.Quota.Limit)
		if !ok {
			continue
		}
		if len(b) > 0 {
			b = append(b, ", "...)
		}
		b = f.AppendItem(b, r, o.D.TokenAfter, pk)
	}
	return b
}

// joined keeps the RateLimit-Policy value of the fields last used by a
// stack. Its zero value is ready to use; it is safe for concurrent use.
type joined struct {
	last atomic.Pointer[joinedPolicy]
}

type joinedPolicy struct {
	fs     [MaxPolicies]*ratefields.Fields
	value  string
	values []string // value as a field value (ratefields.Values)
}

// PolicyValue is the RateLimit-Policy value of s's policies: every limited
// policy's item (fs, parallel to s.Policies), in the configured order
// (policies as Count returns it). Without pk it is built once per
// combination of quotas and kept.
func (s *Stack[K]) PolicyValue(fs []*ratefields.Fields, policies int, pk []byte) string {
	if pk == nil {
		if policies == 1 {
			for _, f := range fs {
				if f != nil && f.Limited {
					return f.Policy
				}
			}
		}
		if jp := s.joined.last.Load(); jp != nil && jp.matches(fs) {
			return jp.value
		}
	}
	var b []byte
	for _, f := range fs {
		if f == nil || !f.Limited {
			continue
		}
		if len(b) > 0 {
			b = append(b, ", "...)
		}
		b = append(b, f.Policy...)
		if pk != nil {
			b = ratefields.AppendPK(b, pk)
		}
	}
	if pk != nil {
		return string(b)
	}
	jp := &joinedPolicy{value: string(b)}
	jp.values = ratefields.One(jp.value)
	copy(jp.fs[:], fs)
	s.joined.last.Store(jp)
	return jp.value
}

// PolicyValues is PolicyValue without pk, as a field value
// (ratefields.Values), built once per combination of quotas and kept.
func (s *Stack[K]) PolicyValues(fs []*ratefields.Fields, policies int) []string {
	if policies == 1 {
		for _, f := range fs {
			if f != nil && f.Limited {
				return f.PolicyValue
			}
		}
	}
	if jp := s.joined.last.Load(); jp != nil && jp.matches(fs) {
		return jp.values
	}
	s.PolicyValue(fs, policies, nil)
	if jp := s.joined.last.Load(); jp != nil && jp.matches(fs) {
		return jp.values
	}
	return ratefields.One(s.PolicyValue(fs, policies, nil)) // another combination raced in
}

func (jp *joinedPolicy) matches(fs []*ratefields.Fields) bool {
	for j, f := range fs {
		if jp.fs[j] != f {
			return false
		}
	}
	return true
}
