package keyed

// An atomicWord is atomic.Int64 or atomic.Uint64.
type atomicWord[T int64 | uint64] interface {
	Load() T
	CompareAndSwap(old, new T) bool
}

// Raise makes *w at least v: the floor a limiter's new cells start from only
// grows. Callers raise the floor before they retire a cell, so that a cell
// created after the retired one's removal reads a floor that covers it.
func Raise[T int64 | uint64, W atomicWord[T]](w W, v T) {
	for {
		f := w.Load()
		if f >= v || w.CompareAndSwap(f, v) {
			return
		}
	}
}
