package window

import (
	"fmt"
	"math"
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/atomiclimit/atomiclimit/gcra"
)

// MaxLogLimit is the largest N a sliding log accepts: its ring takes 8·N
// bytes (128 MiB at this limit).
const MaxLogLimit = 1 << 24

// LogParams are a validated exact sliding-log limit: at most N events in
// any rolling window (t − W, t], for every t. They are immutable and safe to
// share.
//
// The log remembers, for each of the last N admissions, the instant it
// leaves the rolling window: its expiry u = e + W, e being the admission's
// effective time, the latest now of all admissions up to and including it
// (so the expiries of successive admissions never decrease, even when
// concurrent callers bring stale nows). Admission k is admitted at now iff
// admission k−N has expired:
//
//	admit ⇔ u[k−N] ≤ now;   u[k] = max(now + W, u[k−1])
//
// Why at most N in any window, for the nows the callers passed: suppose N+1
// admitted calls had nows in (t − W, t]. Let k be the last of them in
// admission order. Of the other N, all earlier than k, at least one has
// order j ≤ k−N (only N−1 orders lie between k−N and k). Its now is at most
// e[k−N], the running maximum up to k−N, so now_j ≤ u[k−N] − W ≤ now_k − W
// ≤ t − W: outside the window, a contradiction. The argument needs only that
// admissions are ordered and that each compares against the expiry of the
// admission N before it in that order; the LogRing provides both without
// locks.
type LogParams struct {
	limit  int
	period int64
}

// NewLogParams validates a limit of n events per rolling window of length
// period. Errors wrap ErrInvalidLimit, ErrInvalidPeriod or ErrOverflow
// (n > MaxLogLimit).
func NewLogParams(n int, period time.Duration) (LogParams, error) {
	if _, err := validate(1, period, 0, 1); err != nil {
		return LogParams{}, err
	}
	if n < 1 {
		return LogParams{}, fmt.Errorf("%w: %d (must be at least 1)", ErrInvalidLimit, n)
	}
	if n > MaxLogLimit {
		return LogParams{}, fmt.Errorf("%w: sliding log of %d slots (at most %d)", ErrOverflow, n, MaxLogLimit)
	}
	return LogParams{limit: n, period: int64(period)}, nil
}

// Limit returns N.
func (p *LogParams) Limit() int { return p.limit }

// Period returns W.
func (p *LogParams) Period() time.Duration { return time.Duration(p.period) }

// Admit decides one event at now, given the expiry of the admission N before
// it (oldest) and of the latest one (latest). It returns the expiry to
// record and whether the event is admitted. Expiries are at most
// MaxNow + MaxSpan = 2^62: they fit 63 bits.
func (p *LogParams) Admit(oldest, latest, now int64) (u int64, ok bool) {
	if oldest > now {
		return 0, false
	}
	return max(now+p.period, latest), true
}

// Decide is Admit with the decision, except Remaining, which needs the
// whole ring (LogRing fills it in). RetryAfter (denied) is oldest − now: when
// the N-th latest admission leaves the window. ResetAfter is the time until
// the latest admission leaves it.
func (p *LogParams) Decide(oldest, latest, now int64) (u int64, d gcra.Decision) {
	u, ok := p.Admit(oldest, latest, now)
	d.Allowed = ok
	if !ok {
		d.RetryAfter = time.Duration(oldest - now)
		u = latest
	}
	d.ResetAfter = time.Duration(max(u-now, 0))
	return u, d
}

// lapBit marks, in a slot, the parity of the lap of the admission stored in
// it: admission k belongs to lap ⌊k/N⌋ + 1, so the zero slots are lap 0 (the
// admissions −N … −1, expired at time 0).
const lapBit = 1 << 63

// retiredSlot, stored in the slot the next admission would write, retires a
// ring (a keyed limiter removed it): admit meets it and denies, and since no
// admission can write that slot, head never moves again.
const retiredSlot = ^uint64(0)

// A LogRing is the ring of an exact sliding log: N slots of one word each plus a
// head word and the slots' header, 8·N + 32 bytes. It is lock-free: no call waits for another, and
// a call is delayed only by admissions that succeed meanwhile. A denial
// writes nothing. It must not be copied after first use.
//
// Slot k mod N holds admission k's expiry u (bits 62..0) and the parity of
// its lap (bit 63); head counts the admissions, lagging the admissions
// written by at most one. It holds the count k as ⌊k/N⌋ and k mod N side by
// side (see logHead), so that the slot of admission k and the parity of its
// lap are a mask and a shift, not a division, between the load of head and
// the CompareAndSwap of the slot. Admission k, at now:
//
//  1. load head (= k), the predecessor slot (k−1) mod N and slot k mod N,
//     then head again; retry if it moved. While head == k, the admissions
//     written are 0…k−1 or 0…k, so the predecessor slot holds u[k−1] and slot
//     k mod N holds u[k−N] (lap parity of k−N) or u[k] (parity of k).
//  2. If the slot holds admission k, help: CompareAndSwap head k → k+1 and
//     retry. (The writer may have been preempted before advancing it.)
//  3. Decide with LogParams.Admit(u[k−N], u[k−1], now); deny without writing.
//  4. CompareAndSwap the slot from the value loaded to (parity of k, u[k]).
//     Success is the linearization point of admission k; then advance head
//     (a failed CompareAndSwap means someone helped).
//
// Why the slot CompareAndSwap cannot succeed on a stale view (ABA): each
// write to a slot raises its expiry by at least W ≥ 1 (u[k] ≥ now + W ≥
// u[k−N] + W, the admission test), so a slot never holds the same word
// twice. If the CompareAndSwap in 4 succeeds, the slot still holds u[k−N]:
// admission k is not written, and head having been k, exactly 0…k−1 are.
// The admission is therefore number k, decided against u[k−N] and u[k−1] as
// the proof in LogParams requires. One parity bit is enough to tell u[k−N]
// from u[k] in step 1, because head pins the slot to one of those two.
//
// The zero LogRing has no slots: it denies every request (RetryAfter
// gcra.Never, as DenyAll) and never writes; use NewLogRing for a usable one.
//
// A LogRing is a view: its words belong to a limiter's state (the head is
// the state's first word, the slots the rest), and copies of a LogRing see
// the same words.
type LogRing struct {
	head  *atomic.Uint64  // nil only in the zero LogRing
	slots []atomic.Uint64 // N slots; the zero slot is expired at time 0
}

// A logHead is the head's word: the count k of admissions as the turn
// ⌊k/N⌋ in its high bits and the slot k mod N in its low b bits, b the
// width of N−1 (0 for N = 1, where the head is k itself). The packed word
// orders as k does and moves forward at every admission: it never holds
// the same value twice (it would wrap only after 2^63 admissions), so a
// head loaded twice with one value has not moved in between, as the
// protocol needs. The zero head is k = 0.
type logHead uint64

// headBits returns b for a ring of n ≥ 1 slots.
func headBits(n uint64) uint { return uint(bits.Len64(n - 1)) }

// slot returns k mod N.
func (h logHead) slot(b uint) uint64 { return uint64(h) & (1<<b - 1) }

// lap returns the parity of the lap of admission k, ⌊k/N⌋ + 1, in bit 63.
func (h logHead) lap(b uint) uint64 { return (uint64(h)>>b + 1) << 63 }

// next returns the head of k + 1.
func (h logHead) next(b uint, n uint64) logHead {
	if h.slot(b)+1 < n {
		return h + 1
	}
	return logHead((uint64(h)>>b + 1) << b) // the next turn, slot 0
}

// back returns (k − 1) mod N, the slot of the admission before k.
func (h logHead) back(b uint, n uint64) uint64 {
	if i := h.slot(b); i > 0 {
		return i - 1
	}
	return n - 1
}

// NewLogRing returns a ring for p on words of its own.
func NewLogRing(p *LogParams) *LogRing {
	return &LogRing{head: new(atomic.Uint64), slots: make([]atomic.Uint64, p.limit)}
}

// initAt makes the ring a fresh one on which every slot expires at floor:
// no event is admitted before floor (the keyed limiter's floor: see
// internal/core's Keyed). Expiries still never decrease along the ring, and
// every write still raises a slot by at least W, so the protocol and its
// proof hold. It must run before the ring is shared.
func (l *LogRing) initAt(floor int64) {
	l.head.Store(0)
	for i := range l.slots {
		l.slots[i].Store(uint64(max(floor, 0))) // lap 0: parity bit clear
	}
}

// Allow reports whether one event is admitted at now under p (the p the
// ring was made for) and records it if so.
func (l *LogRing) Allow(p *LogParams, now int64) bool {
	ok, _, _ := l.admit(p, now, false)
	return ok
}

// admit runs the protocol above. With peek it stops after deciding. It
// returns the decision, the expiry stored (or that of the latest admission)
// and the oldest expiry it compared against.
func (l *LogRing) admit(p *LogParams, now int64, peek bool) (ok bool, u, oldest int64) {
	n := uint64(len(l.slots))
	if n == 0 {
		return false, 0, math.MaxInt64 // the zero ring: deny, write nothing
	}
	b := headBits(n)
	for {
		k := logHead(l.head.Load())
		i, lap := k.slot(b), k.lap(b)
		// First the predecessor, then the slot, then head again: both loads
		// fall inside a stretch where head == k.
		latest := l.slots[k.back(b, n)].Load()
		cur := l.slots[i].Load()
		if logHead(l.head.Load()) != k {
			continue
		}
		if cur == retiredSlot {
			return false, int64(latest &^ lapBit), int64(gcra.MaxNow) // retired: deny, write nothing
		}
		if cur&lapBit == lap {
			l.head.CompareAndSwap(uint64(k), uint64(k.next(b, n))) // admission k is written: help
			continue
		}
		oldest = int64(cur &^ lapBit)
		u, ok = p.Admit(oldest, int64(latest&^lapBit), now)
		if !ok || peek {
			return ok, max(u, int64(latest&^lapBit)), oldest
		}
		// The slot's CompareAndSwap is admission k's linearization point
		// (see LogRing); then head moves on.
		if l.slots[i].CompareAndSwap(cur, lap|uint64(u)) {
			l.head.CompareAndSwap(uint64(k), uint64(k.next(b, n))) // fails only if someone helped
			return true, u, oldest
		}
	}
}

// Admits reports whether Allow would admit at now, writing nothing.
func (l *LogRing) Admits(p *LogParams, now int64) bool {
	ok, _, _ := l.admit(p, now, true)
	return ok
}

// State describes the ring at now without a request: Remaining (see
// Decide), ResetAfter (until the latest admission leaves the window) and
// TokenAfter (until the oldest one does, when Remaining is 0).
func (l *LogRing) State(p *LogParams, now int64) gcra.Decision {
	n := uint64(len(l.slots))
	if n == 0 {
		return zeroRingState
	}
	b := headBits(n)
	k := logHead(l.head.Load())
	latest := int64(l.slots[k.back(b, n)].Load() &^ lapBit)
	d := gcra.Decision{Remaining: l.expired(now), ResetAfter: time.Duration(max(latest-now, 0))}
	if d.Remaining == 0 {
		d.TokenAfter = time.Duration(max(int64(l.slots[k.slot(b)].Load()&^lapBit)-now, 0))
	}
	return d
}

// Decide is Allow with the whole decision. Remaining counts the slots of the
// ring that have expired at now after the call; it reads the ring without a
// snapshot, so it is exact only when no other call runs concurrently.
func (l *LogRing) Decide(p *LogParams, now int64) gcra.Decision {
	return l.decide(p, now, false)
}

// Peek returns the decision Allow would make, without recording anything.
func (l *LogRing) Peek(p *LogParams, now int64) gcra.Decision {
	return l.decide(p, now, true)
}

// decideN is decide for a request of n events: n == 1 is decided; n == 0 is
// a peek, admitted with the state as it is; any other n is denied with
// RetryAfter gcra.Never and the state as it is. Only n == 1 records.
func (l *LogRing) decideN(p *LogParams, now int64, n int, peek bool) gcra.Decision {
	if n != 1 {
		d := l.State(p, now)
		if d.Allowed = n == 0; !d.Allowed {
			d.RetryAfter = gcra.Never
		}
		return d
	}
	return l.decide(p, now, peek)
}

func (l *LogRing) decide(p *LogParams, now int64, peek bool) gcra.Decision {
	if len(l.slots) == 0 {
		d := zeroRingState
		d.RetryAfter = gcra.Never
		return d
	}
	ok, u, oldest := l.admit(p, now, peek)
	d := gcra.Decision{Allowed: ok, ResetAfter: time.Duration(max(u-now, 0))}
	if !ok {
		d.RetryAfter = time.Duration(oldest - now)
	}
	n := uint64(len(l.slots))
	b := headBits(n)
	k := logHead(l.head.Load())
	d.Remaining = l.expired(now)
	next := int64(l.slots[k.slot(b)].Load() &^ lapBit) // the oldest admission: the next to leave
	if ok && peek {
		// A peek describes the ring after its hypothetical admission, as the
		// Decide that follows leaves it (and as every other algorithm
		// reports): admission k would take slot k mod N, one expired slot
		// fewer, and the oldest admission would then be k−N+1, in slot
		// (k+1) mod N, or k itself, expiring at u, when N = 1. ResetAfter
		// already uses u.
		d.Remaining = max(d.Remaining-1, 0)
		if n == 1 {
			next = u
		} else {
			next = int64(l.slots[k.next(b, n).slot(b)].Load() &^ lapBit)
		}
	}
	if d.Remaining == 0 {
		d.TokenAfter = time.Duration(max(next-now, 0))
	}
	return d
}

// zeroRingState describes the zero LogRing, which has no slots: no token,
// now or ever (as DenyAll).
var zeroRingState = gcra.Decision{TokenAfter: gcra.Never}

// expired counts the slots whose admission has left the window at now, by
// binary search over the ring in admission order (expiries never decrease
// along it): the ring's N admissions from head−N to head−1.
func (l *LogRing) expired(now int64) int {
	n := uint64(len(l.slots))
	// The oldest admission's slot, then the count of expired slots among
	// the oldest-first order.
	k := logHead(l.head.Load()).slot(headBits(n))
	lo, hi := uint64(0), n
	for lo < hi {
		mid := (lo + hi) / 2
		i := k + mid // (k + mid) mod N: k, mid < N
		if i >= n {
			i -= n
		}
		if int64(l.slots[i].Load()&^lapBit) <= now {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return int(lo)
}

// idle returns the head k (as logHead packs it), the value of the slot admission k would write
// (u[k−N], or retiredSlot) for retireFrom, the latest expiry u[k−1] (when
// the ring becomes idle, and the floor a replacement must start from), and
// whether the ring is idle at now: not retired, and its latest admission
// has left the window, so every one has. Like admit, it first helps head
// past an admission that is written but not yet counted.
func (l *LogRing) idle(now int64) (k, cur uint64, latest int64, ok bool) {
	n := uint64(len(l.slots))
	if n == 0 {
		return 0, retiredSlot, 0, false // the zero ring holds nothing to retire
	}
	b := headBits(n)
	for {
		h := logHead(l.head.Load())
		k = uint64(h)
		lat := l.slots[h.back(b, n)].Load()
		cur = l.slots[h.slot(b)].Load()
		if l.head.Load() != k {
			continue
		}
		if cur != retiredSlot && cur&lapBit == h.lap(b) {
			l.head.CompareAndSwap(k, uint64(h.next(b, n))) // admission k is written: help
			continue
		}
		latest = int64(lat &^ lapBit)
		return k, cur, latest, cur != retiredSlot && latest <= now
	}
}

// retireFrom retires the ring if the slot the next admission would write
// still holds cur, and reports whether it did. Admission k (head == k) is
// linearized by its CompareAndSwap on that slot: either it came first, and
// this one fails, or it meets retiredSlot and denies. So every admission
// the caller of idle did not see is denied.
func (l *LogRing) retireFrom(k, cur uint64) bool {
	i := logHead(k).slot(headBits(uint64(len(l.slots))))
	return cur != retiredSlot && l.slots[i].CompareAndSwap(cur, retiredSlot)
}

// isRetired reports whether the ring has been retired.
func (l *LogRing) isRetired() bool {
	if len(l.slots) == 0 {
		return false
	}
	i := logHead(l.head.Load()).slot(headBits(uint64(len(l.slots))))
	return l.slots[i].Load() == retiredSlot
}

// Len returns N, the number of slots.
func (l *LogRing) Len() int { return len(l.slots) }
