package gcra

// maxTAT bounds every TAT a decision stores: MaxNow + MaxSpan + MaxWait.
const maxTAT = maxNow + maxSpan + maxWait

// Since says what a give-back knows of the decisions made on its state
// between the admission it gives back and the give-back itself. The caller
// learns it from two counters it keeps beside the state (atomicbucket keeps
// them per stripe of buckets), each read before the admission and again at
// the give-back.
type Since uint8

const (
	// Alone: no give-back since shifted other admissions (Refund's shifts):
	// every change of the state since the admission was an admission, or
	// the give-back of the admission then last.
	Alone Since = iota
	// NoneQueued: some give-back since shifted other admissions, but no
	// reservation since was queued (every admission since was due at the
	// time it was decided).
	NoneQueued
	// Anything: give-backs shifted other admissions, and reservations may
	// have been queued behind this one.
	Anything
)

// Refund computes the give-back of an admission of n tokens that must be
// undone (another policy denied the request, or a reservation is
// cancelled): the admission stored the state stored, deciding at time at,
// so its tokens were due at due = max(stored − B·T, at) (at itself for an
// admission that did not wait). tat is the state as loaded now, and now a
// clock reading taken after that load, at least every time the loaded
// state was decided at; since says what happened in between. It returns the
// state to store, whether the give-back shifts the slots of admissions
// stored after it (the caller then counts the shift, so that their own
// give-backs are not Alone), and whether there is anything to store:
//
//	g = min(n·T, tat − now, bound)
//	bound = min(stored − now, B·T − (tat − stored))   Alone
//	bound = due + n·T − max(due, now)                  NoneQueued
//	bound = due + n·T + T − tat                        Anything
//	back  = tat − g                                    if g > 0
//
// # The schedule it keeps
//
// Every admission k not given back (live) is due at d_k, and the live
// admissions form the schedule. Two properties hold of every schedule and
// stored state R, whatever the interleaving:
//
//   - the schedule conforms: no window [a, b] holds more than B + (b − a)/T
//     tokens due (no instant more than B);
//   - R ≥ max_k (d_k + G(d_k)), where G(x) is the n·T of the live
//     admissions due at or after x (the TAT the schedule would leave).
//
// The second implies the first stays true: a new admission decided from R
// at any now is due at d ≥ R + n·T − B·T, so any window containing d holds
// at most G(a) + n·T ≤ R − a + n·T ≤ B·T + (b − a) of work; and it stores
// R' = max(R, now) + n·T, which keeps the second.
//
// A give-back removes its admission from the schedule: each term with d_k ≤
// due drops by n·T, so g ≤ n·T keeps them all below R − g; the terms of
// admissions due after it stay, and bound keeps them below R − g:
//
//   - Alone: no give-back since moved the state below an admission stored
//     after this one, so every admission due after this one was stored
//     after it, on a state at least stored: with R_k its stored state,
//     d_k + G(d_k) ≤ R_k − B·T + n_k·T + (tat − R_k) ≤ tat − B·T + (tat −
//     stored), and g ≤ B·T − (tat − stored) keeps it below tat − g. An
//     admission due at or before now adds at most (tat − stored) after its
//     own time: g ≤ stored − now. This is x/time/rate's rule (tokens come
//     back only if no later reservation depends on them), with the
//     dependants measured by tat − stored.
//   - Otherwise, for every k due after due: G(d_k) ≤ G(due) − n·T ≤ tat −
//     due − n·T, so d_k + G(d_k) ≤ tat − g once g ≤ due + n·T − d_k. With no
//     reservation queued since, every admission due after due is due by
//     now (d_k ≤ max(due, now)); otherwise d_k + T ≤ tat is all that is
//     known.
//
// The caller must make each give-back's load, clock read and store one
// step with respect to other give-backs of the same state (a lock shared by
// give-backs only; admissions stay lock-free): otherwise a give-back could
// act on a state that went down (another give-back) and back up to the
// same value (an admission stamped after its clock read), with a stale now.
// The package tests check both properties on every state of every
// interleaving of up to three requests, each step apart.
//
// # What it gives back
//
// When nothing else happened since the admission (tat = stored, Alone), it
// gives back everything still ahead of now: the state is as if the
// admission had never been made. When later admissions depend on it, it
// gives back only what none of them depends on: cancelling a reservation
// behind which others queued gives back nothing, and the later reservations
// keep the times they were promised. A request that never admitted
// anything, n out of range, Unlimited, the zero Params, and a state that
// cannot hold the admission (tat < due + n·T: one that replaced it) give
// back nothing.
func (p *Params) Refund(tat, now, stored, at int64, n int, since Since) (back int64, shifts, ok bool) {
	if p.interval == 0 || n < 1 || int64(n) > p.burst || tat > maxTAT {
		// interval 0: Unlimited or the zero Params; tat > maxTAT: a state no
		// decision stores (a keyed map's retired bucket).
		return tat, false, false
	}
	cost := int64(n) * p.interval
	due := max(stored-p.span, at)
	if tat < due+cost {
		// Not a state that holds the admission (the second property keeps
		// every live admission's due + n·T at most the state): one that
		// replaced it, such as a state started again after its clock
		// jumped back.
		return tat, false, false
	}
	g := min(cost, tat-now)
	switch since {
	case Alone:
		g = min(g, stored-now, p.span-(tat-stored))
	case NoneQueued:
		g = min(g, due+cost-max(due, now))
	default:
		g = min(g, due+cost+p.interval-tat)
	}
	if g <= 0 {
		return tat, false, false
	}
	// Alone and last (tat = stored): it moves no other admission. Any other
	// give-back may have, and makes later give-backs not Alone.
	return tat - g, since != Alone || tat != stored, true
}
