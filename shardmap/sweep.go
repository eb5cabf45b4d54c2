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

// NextShard advances the sweep cursor and returns the shard it passed: an
// incremental sweep is SweepShard(NextShard(), remove), one shard per step,
// round after round.
func (m *Map[K, V]) NextShard() int {
	return int((m.cursor.Add(1) - 1) % uint64(m.Shards()))
}
