package window

import (
	"fmt"
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/atomiclimit/atomiclimit/gcra"
)

// maxRollingSlices bounds K, the slices of a rolling window: a decision
// reads up to K words.
const maxRollingSlices = 1024

// RollingParams are a validated rolling window at a granularity: at most Q
// events in every run of K consecutive slices of length P (the window
// W = K·P), and optionally at most C in any one slice. "10 000 per rolling
// 24 hours, recalculated every hour, at most 1 000 per hour" is Q = 10 000,
// W = 24h, P = 1h, C = 1 000. Slices are aligned to start: slice s is
// [start + s·P, start + (s+1)·P), and times before start count as start.
// RollingParams are immutable and safe to share between any number of states.
//
// # State
//
// The state is K+1 atomic words that the caller allocates (Words) and
// prepares with Init; the functions on it take no lock and allocate
// nothing, and a denial writes nothing. Every word packs a slice index and
// a count the way a fixed window's state does:
//
//	 63                        b  b-1               0
//	+----------------------------+-------------------+
//	|  slice index (64−b bits)   |   count (b bits)  |
//	+----------------------------+-------------------+
//
// with b = bits.Len(Q). words[0] is the head: the latest slice anything was
// admitted in (or the floor's) and its count so far. words[1..K] is a ring:
// slot 1 + s mod K holds (s, final count of s) once the head has moved past
// slice s. A slot whose index is not the slice asked for counts 0 (nothing
// was admitted in that slice, or the slot holds an older one). The all-ones
// head is the retired state (Retired); NewRollingParams rejects a geometry
// whose slice index could reach the all-ones index within gcra.MaxNow (+K,
// for floors), so only retirement stores it.
//
// # Protocol
//
// An admission of n at now:
//
//  1. Load the head H = (h, c). The request is counted in slice
//     s = max(slice(now), h): a stale now is counted in the head's slice,
//     which is stricter, and the head never moves back.
//  2. Decide on the counts of the slices (s−K, s]: c for h, 0 for the
//     slices in (h, s), the ring slots below h. Admit iff n ≤ C − count(s)
//     and sum + n ≤ Q. A denial (and a peek) returns here: it writes nothing.
//     The slots are read after the first load of a head at h, and reused
//     for every later load of a head at h in the same call: after reading
//     them, the call loads the head again (step 1), so that its
//     CompareAndSwap in 4 follows a load made after the ring's K loads.
//  3. If s > h, advance: first finalise h, writing (h, c) into slot
//     1 + h mod K with a CompareAndSwap-max loop (the packed word orders by
//     index, then count); then CompareAndSwap the head H → (s, 0); then,
//     whether or not that succeeded, start again at 1.
//  4. CompareAndSwap the head (s, c) → (s, c+n). Success is the
//     linearization point of the admission; on failure start again at 1.
//
// # Why at most Q in every K consecutive slices
//
// The head only increases (3 raises the index, 4 the count; Refund lowers the
// count of the head's own slice only, never its index). Every admission is
// linearised by a CompareAndSwap on a head whose index is the slice s it is
// counted in, so all admissions of slice s are linearised while the head's
// index is s, before any of a later slice.
//
// The slots are exact. The advancer whose CompareAndSwap moves the head past
// h read the head (h, c_h) and max-wrote (h, c_h) before that
// CompareAndSwap, and c_h is h's final count: no admission of h is
// linearised after the head leaves h. A slower finaliser of h read an
// earlier head of h, whose count (without refunds) was at most c_h, so its
// value loses the max. A finaliser of a slice h' ≤ h−K writes a smaller
// index into the slot only if the slot holds an even older slice, which no
// check of a slice ≥ h reads as h'. So once the head has passed h, slot
// 1 + h mod K holds (h, c_h) until the head reaches h + K, and every slice
// in (h−K, h) that the head skipped had no admission and reads 0.
//
// Take any K consecutive slices R = [r, r+K−1] and X, the last admission
// counted in R in linearization order, in slice s ∈ R. Every admission of R
// is linearised no later than X, so in a slice ≤ s: in [r, s] ⊂ (s−K, s].
// X's CompareAndSwap is step 4, so X loaded the head (s, c) itself (step 3
// restarts): c is exactly what s had admitted before X (the head held
// (s, c) again at the CompareAndSwap, and its index never left s), and X
// read the slots of (s−K, s) after a load of a head at s (that load, or an
// earlier one of the same call: the head's index never decreases, so it
// was s from then on), when the head had passed each of those slices: each
// read its final count, or 0 for a slice with no admission. So X saw every earlier admission of R, and admitted only if
// the total with its own n stayed ≤ Q. Every slice's count is also ≤ C,
// because c is exact at the CompareAndSwap. This holds under any
// interleaving of any number of goroutines and any stale nows.
//
// Refunds keep the bound (a count only falls by what was admitted into it)
// and can only make it stricter: a slow finaliser that read a count later
// refunded may leave a slot counting more than its slice kept, never less.
type RollingParams struct {
	quota  uint64 // Q ≥ 1
	cap    uint64 // per-slice cap; Q when there is none
	capSet bool   // a per-slice cap was given
	slices uint64 // K, 1 ≤ K ≤ maxRollingSlices
	slice  int64  // P in ns
	start  int64  // start of slice 0, ns on the owner's time base
	shift  uint   // b: count bits
	mask   uint64 // 2^b − 1
}

// NewRollingParams validates a limit of q events per rolling window of
// length window, recalculated every slice (window must be a multiple of
// slice, with 1 ≤ window/slice ≤ 1024), and at most perSlice events in any
// one slice (0: no per-slice cap; else 1 ≤ perSlice ≤ q). Slices start at
// start (ns on the caller's time base, as for NewFixedParams).
//
// Errors wrap ErrInvalidLimit (q < 1, perSlice outside [0, q]),
// ErrInvalidPeriod (a slice or window ≤ 0 or longer than gcra.MaxSpan, a
// window that is not 1 to 1024 slices, start outside [−slice, MaxNow]) or
// ErrOverflow (q needs so many count bits that the slice index would wrap).
func NewRollingParams(q int, window, slice time.Duration, perSlice int, start int64) (RollingParams, error) {
	if q < 1 {
		return RollingParams{}, fmt.Errorf("%w: %d (must be at least 1)", ErrInvalidLimit, q)
	}
	if perSlice < 0 || perSlice > q {
		return RollingParams{}, fmt.Errorf("%w: %d per slice (must be 0 or in [1, %d])", ErrInvalidLimit, perSlice, q)
	}
	if window <= 0 || window > gcra.MaxSpan || slice <= 0 || slice > window {
		return RollingParams{}, fmt.Errorf("%w: window %v of slices %v (must have 0 < slice ≤ window ≤ %v)", ErrInvalidPeriod, window, slice, gcra.MaxSpan)
	}
	if window%slice != 0 || window/slice > maxRollingSlices {
		return RollingParams{}, fmt.Errorf("%w: window %v is not 1 to %d slices of %v", ErrInvalidPeriod, window, maxRollingSlices, slice)
	}
	if start < -int64(slice) || start > int64(gcra.MaxNow) {
		return RollingParams{}, fmt.Errorf("%w: start %d outside [-slice, MaxNow]", ErrInvalidPeriod, start)
	}
	k := uint64(window / slice)
	shift := uint(bits.Len64(uint64(q)))
	// The largest index a head or a floor can hold: now ≤ MaxNow and
	// start ≥ −slice, plus K for a floor (Idle). It must stay below the
	// all-ones index, which only the retired state has.
	maxIndex := uint64(gcra.MaxNow)/uint64(slice) + 1 + k
	if (maxIndex+1)>>(64-shift) != 0 {
		return RollingParams{}, fmt.Errorf("%w: %d per %v leaves %d bits for the slice index, which needs %d",
			ErrOverflow, q, window, 64-shift, bits.Len64(maxIndex))
	}
	p := RollingParams{quota: uint64(q), cap: uint64(q), slices: k, slice: int64(slice), start: start, shift: shift, mask: 1<<shift - 1}
	if perSlice > 0 {
		p.cap, p.capSet = uint64(perSlice), true
	}
	return p, nil
}

// Limit returns Q, the most events admitted in any rolling window.
func (p *RollingParams) Limit() int { return int(p.quota) }

// Window returns W = K·P.
func (p *RollingParams) Window() time.Duration { return time.Duration(p.slice * int64(p.slices)) }

// Slice returns P, the granularity.
func (p *RollingParams) Slice() time.Duration { return time.Duration(p.slice) }

// PerSlice returns C, the most events admitted in one slice, or 0 if there
// is no per-slice cap.
func (p *RollingParams) PerSlice() int {
	if !p.capSet {
		return 0
	}
	return int(p.cap)
}

// Words returns K+1, the length of the state.
func (p *RollingParams) Words() int { return int(p.slices) + 1 }

// valid reports whether words is a state for p (a zero RollingParams has
// none).
func (p *RollingParams) valid(rw rollWords) bool {
	return p.slices > 0 && rw.head != nil && uint64(len(rw.ring)) == p.slices
}

// index returns the slice that contains now (times before start count as
// start).
func (p *RollingParams) index(now int64) uint64 {
	return uint64(max(now-p.start, 0)) / uint64(p.slice)
}

// at returns the time from now until slice u starts.
func (p *RollingParams) at(u uint64, now int64) time.Duration {
	return time.Duration(p.start + int64(u)*p.slice - now)
}

// initOn prepares words as a fresh state that counts nothing and starts no
// earlier than floor: the head is floor's slice with a zero count (0 for a
// state from slice 0; a keyed limiter passes the floor of Idle), the ring
// is empty. It must run before words are shared. A words of the wrong
// length is left alone.
func (p *RollingParams) initOn(rw rollWords, floor uint64) {
	if !p.valid(rw) {
		return
	}
	for i := range rw.ring {
		rw.ring[i].Store(0)
	}
	rw.head.Store(floor &^ p.mask)
}

// A rollView is what a decision at slice s sees after loading the head
// (h, c), h ≤ s: cs is the count of s (c if s == h, else 0, plus n for the
// state after an admission), h counts c, the slices in (h, s) count 0 and
// the slices below h are read from the ring.
type rollView struct{ h, c, s, cs uint64 }

// count returns the count of slice j ≤ v.s in the view.
func (p *RollingParams) count(rw rollWords, v *rollView, j uint64) uint64 {
	switch {
	case j == v.s:
		return v.cs
	case j > v.h:
		return 0 // skipped by the head: nothing admitted
	case j == v.h:
		return v.c
	}
	w := rw.ring[j%p.slices].Load()
	if w>>p.shift != j {
		return 0 // nothing admitted in j, or the slot holds an older slice
	}
	return w & p.mask
}

// sum returns the total count of the slices (s−K, s] and last, 1 + the
// latest of them with a nonzero count (0 if none).
func (p *RollingParams) sum(rw rollWords, v *rollView) (sum, last uint64) {
	return p.withHead(v, p.ringSum(rw, v.h, v.s))
}

// A ringPart is the ring's share of a view's sum: the total count of the
// slices of (s−K, s) below the head's slice h, read from the ring, and 1 +
// the latest of them with a nonzero count (0 if none). It depends on h and
// s alone: once the head has passed a slice, its slot holds the slice's
// final count until the head is K slices further (see the proof above).
type ringPart struct{ h, s, sum, last uint64 }

// ringSum reads the ring's part of the view (h, s), h ≤ s: one load per
// slot, from slice h−1 down, and no division but the first slot's.
func (p *RollingParams) ringSum(rw rollWords, h, s uint64) ringPart {
	r := ringPart{h: h, s: s}
	if h == 0 || s-h+1 >= p.slices {
		return r // no slice below h inside the window
	}
	lo := uint64(0) // the window's first slice, s−K+1
	if s+1 > p.slices {
		lo = s + 1 - p.slices
	}
	i := (h - 1) % p.slices
	for j := h - 1; ; j-- {
		if w := rw.ring[i].Load(); w>>p.shift == j && w&p.mask > 0 {
			// A slot holding another slice counts 0 (see count).
			if r.last == 0 {
				r.last = j + 1
			}
			r.sum += w & p.mask
		}
		if j == lo {
			return r
		}
		if i == 0 {
			i = p.slices
		}
		i--
	}
}

// withHead completes the ring's part r of the view v (r.h == v.h, r.s ==
// v.s) with the head's slice and v's own: the view's sum and last.
func (p *RollingParams) withHead(v *rollView, r ringPart) (sum, last uint64) {
	sum, last = r.sum, r.last
	switch {
	case v.cs > 0:
		last = v.s + 1
	case v.s > v.h && v.c > 0 && v.s-v.h < p.slices:
		last = v.h + 1
	}
	if v.s == v.h {
		return sum + v.cs, last
	}
	if v.s-v.h < p.slices {
		sum += v.c // h is inside the window (s−K, s]
	}
	return sum + v.cs, last
}

// fit returns the first slice u > s in which a request of need (≤ min(Q, C))
// fits if nothing else is admitted: the slices after s count 0 and each
// slice j leaves the window at the start of j + K, so u is the earliest with
// Σ_{j ∈ (u−K, s]} count(j) + need ≤ Q. u = s + K always fits.
func (p *RollingParams) fit(rw rollWords, v *rollView, need uint64) uint64 {
	u := v.s + p.slices
	var suffix uint64 // counts of the slices [s−i, s]
	for i := uint64(0); i+1 < p.slices; i++ {
		if i <= v.s {
			suffix += p.count(rw, v, v.s-i)
		}
		if suffix+need > p.quota {
			break // the suffix only grows: no earlier u fits
		}
		u = v.s + p.slices - 1 - i // the window of u starts at s − i
	}
	return u
}

// decideOn decides a request for n events at now (ns on the time base of
// start) and, unless peek, counts them if admitted. It takes no lock and
// allocates nothing, reads up to K+1 words and, for an admission, makes one
// CompareAndSwap on the head (three writes when the request opens a new
// slice). A denial and a peek write nothing.
//
// n = 0 is an admitted peek. n < 0 or n > min(Q, C) is denied with
// RetryAfter gcra.Never; so is every request on a retired state or on
// words that are not a state for p (nil, the wrong length). Otherwise, for
// the state after the call (after the hypothetical admission, for a peek):
// Remaining is min(Q − the window's count, C − the slice's count);
// RetryAfter (denied) is the exact time until the same request fits if
// nothing else is admitted: slices leave the window at their boundaries;
// ResetAfter is the time until every counted slice has left the window;
// TokenAfter is the RetryAfter of one event, 0 while Remaining ≥ 1.
func (p *RollingParams) decideOn(rw rollWords, now int64, n int, peek bool) gcra.Decision {
	_, d := p.decide(rw, now, n, peek)
	return d
}

// decideHeadOn is Decide (never a peek) that also returns the head it stored
// for an admission, for Refund; 0 when it stored nothing.
func (p *RollingParams) decideHeadOn(rw rollWords, now int64, n int) (stored uint64, d gcra.Decision) {
	return p.decide(rw, now, n, false)
}

func (p *RollingParams) decide(rw rollWords, now int64, n int, peek bool) (uint64, gcra.Decision) {
	if !p.valid(rw) {
		return 0, gcra.Decision{RetryAfter: gcra.Never}
	}
	// First the time's part, the one division (see WordRule in
	// internal/algo); the ring's part of the sum is read once per head
	// slice (ringPart), so that between the load of the head and its
	// CompareAndSwap there is only the head's own arithmetic.
	at := p.index(now)
	ring := ringPart{h: Retired}
	for {
		head := rw.head.Load()
		if head == Retired {
			return 0, gcra.Decision{RetryAfter: gcra.Never} // retired: deny, write nothing
		}
		v := rollView{h: head >> p.shift, c: head & p.mask}
		v.s = max(at, v.h)
		if v.s == v.h {
			v.cs = v.c
		}
		if ring.h != v.h {
			// First this load of a head at h, then the slots: each slice
			// below h then holds its final count (see the proof above),
			// which every later load of a head at h may use. Then load the
			// head again, so that the loop's CompareAndSwap follows a load
			// made after the K loads of the ring, not before them.
			ring = p.ringSum(rw, v.h, v.s)
			continue
		}
		sum, last := p.withHead(&v, ring)
		if n < 0 || uint64(n) > p.cap {
			d := p.report(rw, &v, sum, last, now)
			d.RetryAfter = gcra.Never
			return 0, d
		}
		need := uint64(n)
		// n = 0 is a peek, admitted whatever the counts (a tier may have
		// lowered Q or C below what a live state already counts).
		if n > 0 && (v.cs+need > p.cap || sum+need > p.quota) {
			d := p.report(rw, &v, sum, last, now)
			d.RetryAfter = p.at(p.fit(rw, &v, need), now)
			return 0, d // a denial writes nothing
		}
		if n == 0 || peek {
			return 0, p.admitted(rw, v, sum, last, now, need)
		}
		if v.s > v.h {
			// Advance: first finalise h into its slot (max: a slower
			// finaliser's smaller count loses), then move the head, then
			// decide again on the head at s, whoever moved it.
			slot := &rw.ring[v.h%p.slices]
			for {
				old := slot.Load()
				if old >= head || slot.CompareAndSwap(old, head) {
					break
				}
			}
			rw.head.CompareAndSwap(head, v.s<<p.shift)
			continue
		}
		if rw.head.CompareAndSwap(head, head+need) {
			return head + need, p.admitted(rw, v, sum, last, now, need)
		}
		// Lost a race: decide again on the winner's head. Its index only
		// grows, so a now that went stale meanwhile cannot rewind it.
	}
}

// admitted reports the state after admitting need at v's slice.
func (p *RollingParams) admitted(rw rollWords, v rollView, sum, last uint64, now int64, need uint64) gcra.Decision {
	if need > 0 {
		v.cs += need
		sum += need
		last = v.s + 1
	}
	d := p.report(rw, &v, sum, last, now)
	d.Allowed = true
	return d
}

// report describes the view v (whose counts total sum, the latest nonzero
// slice being last − 1) at now, RetryAfter aside.
func (p *RollingParams) report(rw rollWords, v *rollView, sum, last uint64, now int64) gcra.Decision {
	// Refund races can leave a slot over-counted: saturate.
	left := min(p.quota-min(sum, p.quota), p.cap-min(v.cs, p.cap))
	d := gcra.Decision{Remaining: int(left)}
	if last > 0 {
		d.ResetAfter = max(p.at(last-1+p.slices, now), 0)
	}
	if left == 0 {
		d.TokenAfter = p.at(p.fit(rw, v, 1), now)
	}
	return d
}

// refundOn takes back n events of an admission that stored the head stored
// (DecideHead), if the head still counts the slice that admission was
// stored in and holds at least n; it reports whether it did. It cannot
// create quota: the head's count is the sum of its slice's admissions, so
// removing the n of one of them leaves exactly the others; once the head
// has moved on, the slice's count is final and there is nothing to give
// back.
func (p *RollingParams) refundOn(rw rollWords, stored uint64, n int) bool {
	if !p.valid(rw) || n < 1 || uint64(n) > p.cap {
		return false
	}
	for {
		head := rw.head.Load()
		if head == Retired || head>>p.shift != stored>>p.shift || head&p.mask < uint64(n) {
			return false
		}
		if rw.head.CompareAndSwap(head, head-uint64(n)) {
			return true
		}
	}
}

// idleOn tells a keyed limiter when the state stops mattering. It is idle
// once every slice with a nonzero count has left the window: from is the
// start of the first slice in which that holds (the head's own slice when
// nothing is counted), floor that slice as a head with a zero count (a
// replacement state must start no earlier: Init), and idle whether now is
// in it or later. mark is the head as loaded, for RetireFrom. An idle state
// decides every request at or after now exactly as a fresh state from
// floor does; a stale request is counted in floor's slice, after every
// slice the old state counted, so no run of K slices holds counts of both.
// A retired state is never idle.
func (p *RollingParams) idleOn(rw rollWords, now int64) (mark uint64, from int64, floor uint64, idle bool) {
	if !p.valid(rw) {
		return Retired, 0, 0, false
	}
	mark = rw.head.Load()
	if mark == Retired {
		return mark, 0, 0, false
	}
	v := rollView{h: mark >> p.shift, c: mark & p.mask}
	v.s, v.cs = v.h, v.c
	_, last := p.sum(rw, &v)
	i := v.h
	if last > 0 {
		i = last - 1 + p.slices
	}
	return mark, p.start + int64(i)*p.slice, i << p.shift, p.index(now) >= i
}

// retireFromOn retires the state if its head still equals mark (from Idle),
// and reports whether it did: a CompareAndSwap of the head from mark to
// Retired. Every admission is linearised by a CompareAndSwap on the head,
// so one that Idle did not see either came first, and this one fails, or
// meets Retired and is denied without writing. (A head can return to mark
// only through an admission and its refund within mark's slice, which leave
// the counts as they were.)
func (p *RollingParams) retireFromOn(rw rollWords, mark uint64) bool {
	return p.valid(rw) && mark != Retired && rw.head.CompareAndSwap(mark, Retired)
}

// isRetiredOn reports whether the state has been retired.
func (p *RollingParams) isRetiredOn(rw rollWords) bool {
	return p.valid(rw) && rw.head.Load() == Retired
}

// rollWords is a view of a rolling state: its head and its ring of K slots.
type rollWords struct {
	head *atomic.Uint64
	ring []atomic.Uint64
}

// view splits words (K+1 of them, the head first) into a rollWords.
func (p *RollingParams) view(words []atomic.Uint64) rollWords {
	if len(words) == 0 {
		return rollWords{}
	}
	return rollWords{head: &words[0], ring: words[1:]}
}

// Init is initOn on words, K+1 of them with the head first.
func (p *RollingParams) Init(words []atomic.Uint64, floor uint64) {
	p.initOn(p.view(words), floor)
}

// Decide is decideOn on words, K+1 of them with the head first.
func (p *RollingParams) Decide(words []atomic.Uint64, now int64, n int, peek bool) gcra.Decision {
	return p.decideOn(p.view(words), now, n, peek)
}

// DecideHead is decideHeadOn on words, K+1 of them with the head first.
func (p *RollingParams) DecideHead(words []atomic.Uint64, now int64, n int) (stored uint64, d gcra.Decision) {
	return p.decideHeadOn(p.view(words), now, n)
}

// Refund is refundOn on words, K+1 of them with the head first.
func (p *RollingParams) Refund(words []atomic.Uint64, stored uint64, n int) bool {
	return p.refundOn(p.view(words), stored, n)
}

// Idle is idleOn on words, K+1 of them with the head first.
func (p *RollingParams) Idle(words []atomic.Uint64, now int64) (mark uint64, from int64, floor uint64, idle bool) {
	return p.idleOn(p.view(words), now)
}

// RetireFrom is retireFromOn on words, K+1 of them with the head first.
func (p *RollingParams) RetireFrom(words []atomic.Uint64, mark uint64) bool {
	return p.retireFromOn(p.view(words), mark)
}

// IsRetired is isRetiredOn on words, K+1 of them with the head first.
func (p *RollingParams) IsRetired(words []atomic.Uint64) bool {
	return p.isRetiredOn(p.view(words))
}
