package shardmap

// SweepShard visits every entry of shard i and removes those for which
// remove returns true, if the map still holds the value remove was given
// (see CompareAndDelete). It returns how many entries it visited and removed.
// remove may change the state the value points to (a keyed limiter retires
// the cell there first); it must not insert into the map.
func (m *Map[K, V]) SweepShard(i int, remove func(key K, value V) bool) (visited, removed int) {
	m.RangeShard(i, func(k K, v V) bool {
		visited++
		if remove(k, v) && m.CompareAndDelete(k, v) {
			removed++
		}
		return true
	})
	return visited, removed
}

// SweepNext sweeps the shard after the one the previous SweepNext swept, so
// that repeated calls visit every shard in turn, one shard per call: the unit
// of incremental sweeping. It returns the shard it swept.
func (m *Map[K, V]) SweepNext(remove func(key K, value V) bool) (shard, visited, removed int) {
	shard = m.NextShard()
	visited, removed = m.SweepShard(shard, remove)
	return shard, visited, removed
}

// NextShard advances the sweep cursor and returns the shard it passed: the
// shard SweepNext would sweep, for callers that sweep it their own way.
func (m *Map[K, V]) NextShard() int {
	return int((m.cursor.Add(1) - 1) % uint64(m.Shards()))
}

// Sweep sweeps every shard once and returns how many entries it removed.
func (m *Map[K, V]) Sweep(remove func(key K, value V) bool) (removed int) {
	for i := range m.Shards() {
		_, r := m.SweepShard(i, remove)
		removed += r
	}
	return removed
}
