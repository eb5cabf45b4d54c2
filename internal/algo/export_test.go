package algo

// TakeAll runs the taking phase of an admission without the check phase:
// the state a request meets when another goroutine drained a band between
// its check and its take.
func (s *Set) TakeAll(st State, now int64, n int) bool {
	var pl plan // unchecked: every band takes by its loop
	return s.takeAll(st, now, n, &pl)
}

// An Adm is one admission of a Set stepped band by band, as Admit runs
// it: Check is its check phase; each Take is one iteration of takeAll's
// loop (on a denial, the give-backs of the bands before, last first). A
// test interleaves admissions so, step by step, with no scheduler.
type Adm struct {
	s     *Set
	st    State
	now   int64
	n     int
	pl    plan
	taken [MaxBands]Taken
	next  int
}

// Check runs the check phase of an admission of n at now.
func (s *Set) Check(st State, now int64, n int) (*Adm, bool) {
	a := &Adm{s: s, st: st, now: now, n: n}
	return a, s.check(st, now, n, &a.pl)
}

// Take takes from the next band, and on a denial gives back the bands
// before it, last first.
func (a *Adm) Take() bool {
	s, i := a.s, a.next
	t, ok := s.take(a.st, i, a.now, a.n, &a.pl)
	if !ok {
		for j := i - 1; j >= 0; j-- {
			s.algs[j].Refund(s.Sub(a.st, j), a.taken[j], s.clk, a.n)
		}
		return false
	}
	a.taken[i] = t
	a.next++
	return true
}
