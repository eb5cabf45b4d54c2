package httplimit

import (
	"encoding/base64"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
)

// tableMax bounds the precomputed RateLimit values: an item with
// 1 ≤ r ≤ tableMax (and so no t) is a string built in advance.
const tableMax = 128

// fields are the field values of one policy under one quota, built once
// per quota and rebuilt when the quota the limiter reports changes
// (SetRule, a key on another tier). They never change once built.
type fields struct {
	quota   atomiclimit.Quota
	limited bool   // false for Unlimited: no quota to describe, no fields
	limit   string // the advertised quota (Advertise) in decimal
	policy  string // the RateLimit-Policy item without pk
	// policyValue and limitValue are policy and limit as field values
	// (see values): shared, never written.
	policyValue, limitValue []string
	item                    string // `"name";r=`: the start of the RateLimit item
	table                   []string
	full                    []string                                // the item of r = Limit−1 beyond the table: a full bucket after one request
	denied                  [deniedSlots]atomic.Pointer[deniedItem] // values' cache for r = 0
}

// newFields returns the fields of the policy name (printable ASCII: see
// validString) under quota; unit, if not empty, is its qu parameter.
func newFields(quota atomiclimit.Quota, name, unit string) *fields {
	f := &fields{quota: quota, limited: quota.Limit != math.MaxInt}
	if !f.limited {
		return f
	}
	q, w := Advertise(quota)
	f.limit = strconv.Itoa(q)
	item := appendString(nil, name)
	pol := append(append([]byte(nil), item...), ";q="...)
	pol = strconv.AppendInt(pol, int64(q), 10)
	if q > 0 {
		pol = append(pol, ";w="...)
		pol = strconv.AppendInt(pol, w, 10)
	}
	if unit != "" {
		pol = append(pol, ";qu="...)
		pol = appendString(pol, unit)
	}
	f.policy = string(pol)
	f.policyValue, f.limitValue = one(f.policy), one(f.limit)
	f.item = string(item) + ";r="
	f.table = make([]string, min(quota.Limit, tableMax)+1)
	for r := 1; r < len(f.table); r++ {
		f.table[r] = f.item + strconv.Itoa(r)
	}
	if r := quota.Limit - 1; r >= len(f.table) {
		f.full = one(f.item + strconv.Itoa(sfInt(uint64(r))))
	}
	return f
}

// Advertise returns the q and w (whole seconds, at least 1) of a quota's
// RateLimit-Policy item (see "Headers" in the package doc). The window is
// rounded up to whole seconds, and the quota scaled to the rounded window,
// so that q/w is the limit's own rate (rounded down), never a slower one:
// GCRA at 1000/s with burst 1 has a window of 1ms and is advertised
// q=1000;w=1, not q=1;w=1. The quota is never below the limit's own (a
// full burst is admitted at once). A window that is already whole seconds
// is advertised as it is. q is at most 999,999,999,999,999, the largest
// Structured Field integer (and the largest int, where int has 32 bits),
// which is what an Unlimited quota gets (it has no item: see
// PolicyFields.Policy). grpclimit's QuotaFailure reports q as the
// quota_value of a violation.
func Advertise(quota atomiclimit.Quota) (q int, w int64) {
	q, w = sfInt(uint64(max(quota.Limit, 0))), max(ceilSeconds(quota.Window), 1)
	if q <= 0 || quota.Window <= 0 {
		return q, w
	}
	// ⌊q·w·1s / Window⌋ in 128 bits: q·w·1s can pass 2^63.
	hi, lo := bits.Mul64(uint64(q), uint64(w)*uint64(time.Second))
	if hi >= uint64(quota.Window) {
		return sfInt(maxSFInt), w // beyond any count a client can send
	}
	scaled, _ := bits.Div64(hi, lo, uint64(quota.Window))
	return sfInt(max(scaled, uint64(q))), w
}

// maxSFInt is the largest Structured Field Integer (RFC 9651, 3.3.1: at
// most 15 digits). An advertised q above it is sent as it: a strict parser
// rejects a whole field with a longer integer.
const maxSFInt uint64 = 999_999_999_999_999

// sfInt returns v as an int, at most the largest sf-integer (and the
// largest int, where int has 32 bits).
func sfInt(v uint64) int { return int(min(v, maxSFInt, uint64(math.MaxInt))) }

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

// kept returns the RateLimit item `"name";r=R` built in advance, for
// 1 ≤ r ≤ 128 (a quota's most common values), and false for any other r.
func (f *fields) kept(r int) (string, bool) {
	if r >= 1 && r < len(f.table) {
		return f.table[r], true
	}
	return "", false
}

// appendItem appends the RateLimit item `"name";r=R[;t=T][;pk=:…:]`. t,
// the draft's time until more quota is available, is sent when r = 0: it is
// ⌈tokenAfter⌉, the time until one unit is (none when tokenAfter is 0 or
// gcra.Never). With r ≥ 1 there is quota now, and t is left out (it is
// optional). pk, if not nil, is the partition key.
func (f *fields) appendItem(b []byte, r int, tokenAfter time.Duration, pk []byte) []byte {
	b = append(b, f.item...)
	b = strconv.AppendInt(b, int64(sfInt(uint64(max(r, 0)))), 10)
	if r == 0 && tokenAfter > 0 && tokenAfter != gcra.Never {
		b = append(b, ";t="...)
		b = strconv.AppendInt(b, ceilSeconds(tokenAfter), 10)
	}
	if pk != nil {
		b = appendPK(b, pk)
	}
	return b
}

// appendPK appends the pk parameter, an sf-binary (RFC 9651, 3.3.5).
func appendPK(b, pk []byte) []byte {
	b = append(b, ";pk=:"...)
	b = base64.StdEncoding.AppendEncode(b, pk)
	return append(b, ':')
}

// appendString appends s as an sf-string (RFC 9651, 4.1.6). s must be
// printable ASCII (validString). For printable ASCII, JSON strings quote
// alike: a '"' and a '\\' are escaped with a backslash, nothing else.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '"' || c == '\\' {
			b = append(b, '\\')
		}
		b = append(b, s[i])
	}
	return append(b, '"')
}

// validString reports whether s can be an sf-string: printable ASCII only.
func validString(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// checkString returns an error if s, a policy's name or a unit (what names
// it), cannot be a Structured Field string: printable ASCII only. The
// error has no package prefix: the caller wraps it in ErrConfig.
func checkString(what, s string) error {
	if !validString(s) {
		return fmt.Errorf("%s %q: only printable ASCII can be a structured-field string", what, s)
	}
	return nil
}

// maxQuotas bounds the fields a PolicyFields keeps, one set per quota its
// keys have been seen under (the tiers of its limiter). Past it, the
// fields of a quota not kept are built per request.
const maxQuotas = 16

// A PolicyFields formats one policy's items of the RateLimit and
// RateLimit-Policy fields (see "Headers"), for a door of another protocol:
// grpclimit sends them as response metadata. The middleware keeps one per
// policy. The items of each quota the policy's keys are seen under (the
// tiers of its limiter, a rule SetRule changed) are built once and kept,
// up to 16 quotas (the items of any other are built per call), so that
// the common items allocate nothing.
//
// A PolicyFields is safe for concurrent use, and takes no lock for a quota
// it keeps. Make one with NewPolicyFields; it must not be copied.
type PolicyFields struct {
	name, unit string
	f          atomic.Pointer[fields] // the fields last used: the fast path

	// kept holds every quota's fields, for keys on several tiers: slots
	// [0, n) are set and never change, so a reader scans them without a
	// lock; mu serialises the writers.
	kept [maxQuotas]atomic.Pointer[fields]
	n    atomic.Int32
	mu   sync.Mutex
}

// NewPolicyFields returns the fields of the policy name; unit, if not
// empty, is the qu parameter of its RateLimit-Policy item (as
// Config.QuotaUnit). Both must be printable ASCII (a Structured Field
// string): ErrConfig otherwise.
func NewPolicyFields(name, unit string) (*PolicyFields, error) {
	if err := checkString("policy name", name); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if err := checkString("unit", unit); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return newPolicyFields(name, unit), nil
}

// newPolicyFields is NewPolicyFields for a name and a unit already
// checked.
func newPolicyFields(name, unit string) *PolicyFields {
	return &PolicyFields{name: name, unit: unit}
}

// RateLimit returns the policy's item of the RateLimit field for o, the
// outcome of a request for n (atomiclimit.Stack.Take fills it):
// `"name";r=R` under the quota o.Quota, with `;t=T` when R = 0; or "" when
// o describes no state (Outcome.Remaining) or its quota is Unlimited. The
// items with 1 ≤ R ≤ 128 and with R one below the quota (a full state after
// a request of 1) are built once and kept, and those with R = 0 are kept
// by T in a small cache (a flood of denials builds one per second of
// wait); any other allocates.
func (f *PolicyFields) RateLimit(o *atomiclimit.Outcome, n int) string {
	fs := f.of(o.Quota)
	if !fs.limited {
		return ""
	}
	r, ok := o.Remaining(n)
	if !ok {
		return ""
	}
	return fs.values(r, o.Decision.TokenAfter)[0]
}

// Policy returns the policy's item of the RateLimit-Policy field for the
// quota q (an Outcome's): `"name";q=Q;w=W` (Advertise), with `;qu="unit"`
// when it has a unit; or "" for an Unlimited quota, which has none. It is
// built once per quota and kept.
func (f *PolicyFields) Policy(q atomiclimit.Quota) string { return f.of(q).policy }

// of returns the fields of quota q, built once per quota and kept: keys on
// several tiers alternate, and each quota's fields are built once, not
// rebuilt whenever the quota differs from the last request's.
func (f *PolicyFields) of(q atomiclimit.Quota) *fields {
	if fs := f.f.Load(); fs != nil && fs.describes(q) {
		return fs
	}
	fs := f.keptFor(q)
	if fs == nil {
		fs = f.keep(newFields(q, f.name, f.unit))
	}
	f.f.Store(fs)
	return fs
}

// describes reports whether f are the fields of q: the fields depend on a
// quota's Limit and Window only, two integer comparisons (the whole Quota
// would compare its two strings as well, on every request).
func (f *fields) describes(q atomiclimit.Quota) bool {
	return f.quota.Limit == q.Limit && f.quota.Window == q.Window
}

// keptFor returns the fields kept for q, or nil. Lock-free: first load n,
// then the slots below it, which were set before n was raised.
func (f *PolicyFields) keptFor(q atomiclimit.Quota) *fields {
	for i := range f.n.Load() {
		if fs := f.kept[i].Load(); fs.describes(q) {
			return fs
		}
	}
	return nil
}

// keep keeps fs if there is room and no other writer kept its quota first,
// and returns the fields to use.
func (f *PolicyFields) keep(fs *fields) *fields {
	f.mu.Lock()
	defer f.mu.Unlock()
	if g := f.keptFor(fs.quota); g != nil {
		return g
	}
	if n := f.n.Load(); n < maxQuotas {
		f.kept[n].Store(fs) // first the slot, then n: readers below n see it set
		f.n.Store(n + 1)
	}
	return fs
}
