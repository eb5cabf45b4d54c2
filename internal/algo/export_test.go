package algo

// TakeAll runs the taking phase of an admission without the check phase:
// the state a request meets when another goroutine drained a band between
// its check and its take.
func (s *Set) TakeAll(st State, now int64, n int) bool {
	var pl plan // unchecked: every band takes by its loop
	return s.takeAll(st, now, n, &pl)
}
