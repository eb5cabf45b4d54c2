// Package ratefields formats the items of the RateLimit and
// RateLimit-Policy fields of draft-ietf-httpapi-ratelimit-headers as
// Structured Fields (RFC 9651), one Item per policy and quota, for every
// door: httplimit writes them as HTTP headers, grpclimit as response
// metadata. It knows nothing of either protocol, nor of a stack of
// policies (package door joins a stack's items into a List). The semantics
// (the q/w mapping, r, t, rounding) are documented in httplimit's package
// doc, "Headers".
package ratefields

import (
	"encoding/base64"
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

// Fields is what a policy's fields need from a quota, built once per quota
// and rebuilt when the quota the limiter reports changes (SetRule, a key on
// another tier). It never changes once built.
type Fields struct {
	Quota   atomiclimit.Quota
	Limited bool   // false for Unlimited: no quota to describe, no fields
	Q       int    // the advertised quota (see Advertise)
	Limit   string // Q in decimal
	Policy  string // the RateLimit-Policy item without pk
	// PolicyValue and LimitValue are Policy and Limit as field values
	// (see Values): shared, never written.
	PolicyValue, LimitValue []string
	item                    string // `"name";r=`: the start of the RateLimit item
	table                   []string
	full                    []string                                // the item of r = Limit−1 beyond the table: a full bucket after one request
	denied                  [deniedSlots]atomic.Pointer[deniedItem] // Values' cache for r = 0
}

// NewFields returns the fields of the policy name (printable ASCII: see
// ValidString) under quota; unit, if not empty, is its qu parameter.
func NewFields(quota atomiclimit.Quota, name, unit string) *Fields {
	f := &Fields{Quota: quota, Limited: quota.Limit != math.MaxInt}
	if !f.Limited {
		return f
	}
	q, w := Advertise(quota)
	f.Q = q
	f.Limit = strconv.Itoa(q)
	item := AppendString(nil, name)
	pol := append(append([]byte(nil), item...), ";q="...)
	pol = strconv.AppendInt(pol, int64(q), 10)
	if q > 0 {
		pol = append(pol, ";w="...)
		pol = strconv.AppendInt(pol, w, 10)
	}
	if unit != "" {
		pol = append(pol, ";qu="...)
		pol = AppendString(pol, unit)
	}
	f.Policy = string(pol)
	f.PolicyValue, f.LimitValue = One(f.Policy), One(f.Limit)
	f.item = string(item) + ";r="
	f.table = make([]string, min(quota.Limit, tableMax)+1)
	for r := 1; r < len(f.table); r++ {
		f.table[r] = f.item + strconv.Itoa(r)
	}
	if r := quota.Limit - 1; r >= len(f.table) {
		f.full = One(f.item + strconv.Itoa(sfInt(uint64(r))))
	}
	return f
}

// Advertise returns the q and w (whole seconds, at least 1) of a quota's
// RateLimit-Policy item. The window is rounded up to whole seconds, and the
// quota scaled to the rounded window, so that q/w is the limit's own rate
// (rounded down), never a slower one: GCRA at 1000/s with burst 1 has a
// window of 1ms and is advertised q=1000;w=1, not q=1;w=1. The quota is
// never below the limit's own (a full burst is admitted at once). A window
// that is already whole seconds is advertised as it is.
func Advertise(quota atomiclimit.Quota) (q int, w int64) {
	q, w = sfInt(uint64(max(quota.Limit, 0))), max(CeilSeconds(quota.Window), 1)
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

// CeilSeconds converts d to whole seconds, rounding up: a client that waits
// what it was told is admitted. d must not be gcra.Never.
func CeilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}

// RetryAfter returns the Retry-After of a denial in seconds, or -1 when the
// request can never be admitted (cost above the burst, DenyAll). It is
// ⌈RetryAfter⌉, and never less than the RateLimit field's t = ⌈TokenAfter⌉
// (RetryAfter ≥ TokenAfter holds for every denial; max makes it explicit).
func RetryAfter(d gcra.Decision) int64 {
	if d.RetryAfter == gcra.Never {
		return -1
	}
	s := CeilSeconds(d.RetryAfter)
	if d.TokenAfter != gcra.Never {
		s = max(s, CeilSeconds(d.TokenAfter))
	}
	return max(s, 1) // a denial always waits: at least one second
}

// Item returns the RateLimit item `"name";r=R` built in advance, for
// 1 ≤ r ≤ 128 (a quota's most common values), and false for any other r.
func (f *Fields) Item(r int) (string, bool) {
	if r >= 1 && r < len(f.table) {
		return f.table[r], true
	}
	return "", false
}

// AppendItem appends the RateLimit item `"name";r=R[;t=T][;pk=:…:]`. t,
// the draft's time until more quota is available, is sent when r = 0: it is
// ⌈tokenAfter⌉, the time until one unit is (none when tokenAfter is 0 or
// gcra.Never). With r ≥ 1 there is quota now, and t is left out (it is
// optional). pk, if not nil, is the partition key.
func (f *Fields) AppendItem(b []byte, r int, tokenAfter time.Duration, pk []byte) []byte {
	b = append(b, f.item...)
	b = strconv.AppendInt(b, int64(sfInt(uint64(max(r, 0)))), 10)
	if r == 0 && tokenAfter > 0 && tokenAfter != gcra.Never {
		b = append(b, ";t="...)
		b = strconv.AppendInt(b, CeilSeconds(tokenAfter), 10)
	}
	if pk != nil {
		b = AppendPK(b, pk)
	}
	return b
}

// AppendPK appends the pk parameter, an sf-binary (RFC 9651, 3.3.5).
func AppendPK(b, pk []byte) []byte {
	b = append(b, ";pk=:"...)
	b = base64.StdEncoding.AppendEncode(b, pk)
	return append(b, ':')
}

// AppendString appends s as an sf-string (RFC 9651, 4.1.6). s must be
// printable ASCII (ValidString). For printable ASCII, JSON strings quote
// alike: a '"' and a '\\' are escaped with a backslash, nothing else.
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '"' || c == '\\' {
			b = append(b, '\\')
		}
		b = append(b, s[i])
	}
	return append(b, '"')
}

// ValidString reports whether s can be an sf-string: printable ASCII only.
func ValidString(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// MaxQuotas bounds the fields a Cache keeps, one set per quota its keys
// have been seen under (the tiers of its limiter). Past it, the fields of a
// quota not kept are built per request.
const MaxQuotas = 16

// A Cache holds one policy's Fields for every quota its keys are seen under.
// Init it before first use; it must not be copied after. It is safe for
// concurrent use; For takes no lock on a quota already kept.
type Cache struct {
	name, unit string
	f          atomic.Pointer[Fields] // the fields last used: the fast path

	// kept holds every quota's fields, for keys on several tiers: slots
	// [0, n) are set and never change, so a reader scans them without a
	// lock; mu serialises the writers.
	kept [MaxQuotas]atomic.Pointer[Fields]
	n    atomic.Int32
	mu   sync.Mutex
}

// Init makes c the cache of the policy name, with unit as its qu parameter
// (empty: none). It must be called before c is shared.
func (c *Cache) Init(name, unit string) { c.name, c.unit = name, unit }

// For returns the fields of quota q, built once per quota and kept: keys on
// several tiers alternate, and each quota's fields are built once, not
// rebuilt whenever the quota differs from the last request's.
func (c *Cache) For(q atomiclimit.Quota) *Fields {
	if f := c.f.Load(); f != nil && f.describes(q) {
		return f
	}
	f := c.keptFor(q)
	if f == nil {
		f = c.keep(NewFields(q, c.name, c.unit))
	}
	c.f.Store(f)
	return f
}

// describes reports whether f are the fields of q: the fields depend on a
// quota's Limit and Window only, two integer comparisons (the whole Quota
// would compare its two strings as well, on every request).
func (f *Fields) describes(q atomiclimit.Quota) bool {
	return f.Quota.Limit == q.Limit && f.Quota.Window == q.Window
}

// keptFor returns the fields kept for q, or nil. Lock-free: first load n,
// then the slots below it, which were set before n was raised.
func (c *Cache) keptFor(q atomiclimit.Quota) *Fields {
	for i := range c.n.Load() {
		if f := c.kept[i].Load(); f.describes(q) {
			return f
		}
	}
	return nil
}

// keep keeps f if there is room and no other writer kept its quota first,
// and returns the fields to use.
func (c *Cache) keep(f *Fields) *Fields {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g := c.keptFor(f.Quota); g != nil {
		return g
	}
	if n := c.n.Load(); n < MaxQuotas {
		c.kept[n].Store(f) // first the slot, then n: readers below n see it set
		c.n.Store(n + 1)
	}
	return f
}
