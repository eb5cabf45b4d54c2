package window

import "time"

// RetireKey retires key's cell as a sweep does at now, without removing it
// from the map: the state a caller meets between the sweep's two steps.
func (k *Keyed[K]) RetireKey(key K, now time.Time) bool {
	c, ok := k.m.Load(key)
	return ok && k.st.RetireIdle(c, k.src.At(now))
}

// RetireKey is Keyed.RetireKey for a KeyedLog.
func (k *KeyedLog[K]) RetireKey(key K, now time.Time) bool {
	r, ok := k.m.Load(key)
	return ok && k.st.RetireIdle(r, k.src.At(now))
}
