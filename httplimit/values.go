package httplimit

import (
	"strconv"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/atomiclimit/atomiclimit/gcra"
)

// Field values as the middleware hands them to the response's header map:
// a []string of one element. The values of this file are shared by every
// response that carries them, so that a request allocates none: each is a
// slice of length and capacity 1 (an append to it copies), and no one may
// write to its element. The middleware assigns them to the response's
// http.Header; a handler that replaces a value (Set, Add, Del, an
// assignment to the map) never writes into them.

// one returns v as a field value of its own: []string{v}.
func one(v string) []string { return []string{v} }

// maxInt is the largest integer intValue keeps: an hour of seconds, the
// Retry-After of a limit of one request an hour.
const maxInt = 3600

// ints holds the values of 0 to maxInt, each built on first use.
var ints [maxInt + 1]atomic.Pointer[[1]string]

// intValue returns the field value of v in decimal, built once for 0 ≤ v ≤
// 3600 and kept (a Retry-After, a remaining count, a reset): no allocation
// after the first use of v. Any other v allocates.
func intValue(v int64) []string {
	if v < 0 || v > maxInt {
		return one(strconv.FormatInt(v, 10))
	}
	if p := ints[v].Load(); p != nil {
		return p[:]
	}
	p := &[1]string{strconv.FormatInt(v, 10)}
	ints[v].Store(p) // a racing store keeps an equal value
	return p[:]
}

// values returns the policy's RateLimit item `"name";r=R[;t=T]` as a field
// value without pk, for an outcome with r remaining and tokenAfter to the
// next unit (appendItem): built in advance for 1 ≤ r ≤ 128 and for r =
// quota − 1 (a full state after a request of 1: the common state of a
// client that is not busy), and kept for r = 0 (a denial's) by t, in a
// small cache, so that a flood of denials builds it once per second of
// wait. Any other r allocates its value, once.
func (f *fields) values(r int, tokenAfter time.Duration) []string {
	if r >= 1 && r < len(f.table) {
		return f.table[r : r+1 : r+1]
	}
	if f.full != nil && r == f.quota.Limit-1 {
		return f.full
	}
	if r != 0 {
		return stringValue(f.appendItem(make([]byte, 0, len(f.item)+20), r, tokenAfter, nil))
	}
	t := int64(0)
	if tokenAfter > 0 && tokenAfter != gcra.Never {
		t = ceilSeconds(tokenAfter)
	}
	slot := &f.denied[uint64(t)%deniedSlots]
	if d := slot.Load(); d != nil && d.t == t {
		return d.v[:]
	}
	d := &deniedItem{t: t, v: [1]string{string(f.appendItem(nil, 0, tokenAfter, nil))}}
	slot.Store(d)
	return d.v[:]
}

// deniedSlots is the size of a fields' cache of denial items.
const deniedSlots = 16

// A deniedItem is a RateLimit item with r = 0 and its t.
type deniedItem struct {
	t int64
	v [1]string
}

// A valueBuf is a field value and the bytes of its string in one
// allocation (stringValue).
type valueBuf struct {
	v [1]string
	b [48]byte
}

// stringValue returns b as a field value in one allocation: the value's
// string shares the allocation of its slice when b is short (the common
// RateLimit item); b is copied and may be reused.
func stringValue(b []byte) []string {
	if len(b) == 0 || len(b) > len(valueBuf{}.b) {
		return one(string(b))
	}
	p := new(valueBuf)
	n := copy(p.b[:], b)
	// p.b is written only here, before the string is made: the string
	// never changes.
	p.v[0] = unsafe.String(&p.b[0], n)
	return p.v[:]
}
