package gcra

// maxTAT bounds every TAT a decision stores: MaxNow + MaxSpan + MaxWait.
const maxTAT = maxNow + maxSpan + maxWait

// Refund computes the give-back of an admission of n tokens that must be
// undone (another policy denied the request, or a reservation is
// cancelled): the admission stored the state stored, deciding at time at.
// tat is the state as loaded now, and now a clock reading taken after that
// load, so that it is at least every time the loaded state was decided at.
// alone reports that no give-back which moved other admissions
// (shifts, below) was made on this state since the admission. It returns
// the state to store, whether the admission shifts the slots of admissions
// stored after it (the caller then counts the shift, so that their own
// give-backs are not alone), and whether there is anything to store:
//
//	g    = min(n·T, stored − now, tat − now)   alone
//	g    = min(at + n·T − now, tat − now)   otherwise
//	back = tat − g                                if g > 0
//
// # Why it never creates quota
//
// Call I the ideal state: the state the bucket would hold had it been
// decided with exactly the admissions not given back, at their own times.
// The stored state R is never below it (R ≥ I): admissions apply the same
// monotone map to both, and each give-back keeps it, as follows. Let e be
// the given-back admission's TAT in the ideal history, and I' the ideal
// without it. For every t at least every time the history was decided at,
//
//	max(I, t) − max(I', t) ≥ min(n·T, e − t)⁺.
//
// (Each later admission x ↦ max(x, now_k) + n_k·T with now_k ≤ t keeps the
// difference of max(·, t) from shrinking; it starts at min(n·T, e − t)⁺.)
// So g ≤ min(n·T, e − t) gives R − g ≥ I' where I' > t, and g ≤ tat − t
// keeps R − g ≥ t ≥ I' where I' ≤ t. Two bounds on e hold:
//
//   - e ≥ at + n·T in every history: the admission's own time plus
//     its tokens. This is the bound when other give-backs intervened.
//   - e = stored when alone: no give-back since moved the admission's
//     slot (a give-back of the last admission, tat = stored, moves
//     no other), and the ideal history differs from the stored one only
//     by give-backs that were exact.
//
// The caller must make each give-back's load, clock read and store one
// step with respect to other give-backs of the same state (a lock shared
// by give-backs only; admissions stay lock-free): otherwise a give-back
// could act on a state that went down (another give-back) and back up to
// the same value (an admission stamped after its clock read), with a stale
// now. The package tests check all of this against the ideal state on every
// interleaving of up to three requests, each step apart.
//
// # What it gives back
//
// When nothing else happened since the admission (tat = stored, alone),
// it gives back everything still ahead of now: the state is as if the
// admission had never been made. Otherwise it gives back at least the part
// of the admission's slot that is certainly its own: stricter than the
// ideal by at most now − at, the time between the admission and the
// give-back (a few microseconds in a door), and not at all if the bucket
// was full when it admitted. A request that never admitted anything, n out
// of range, Unlimited and the zero Params give back nothing.
func (p *Params) Refund(tat, now, stored, at int64, n int, alone bool) (back int64, shifts, ok bool) {
	if p.interval == 0 || n < 1 || int64(n) > p.burst || tat > maxTAT {
		// interval 0: Unlimited or the zero Params; tat > maxTAT: a state no
		// decision stores (a keyed map's retired bucket).
		return tat, false, false
	}
	cost := int64(n) * p.interval
	var g int64
	if alone {
		g = min(cost, stored-now, tat-now)
	} else {
		g = min(at+cost-now, tat-now)
	}
	if g <= 0 {
		return tat, false, false
	}
	return tat - g, tat != stored, true
}
