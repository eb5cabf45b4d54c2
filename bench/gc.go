package main

import (
	"fmt"
	"sync/atomic"

	"github.com/puzpuzpuz/xsync/v3"
)

// The heap and GC pass (BenchmarkMemory): what holding keys costs a
// process, in heap and in the work of its garbage collector, for every
// keyed limiter, beside the keys alone and beside the plainest lock-free
// store of one word per key, which is not a limiter.

// keysAloneName and xsyncStoreName are the stores of the pass that are not
// limiters.
const (
	keysAloneName  = "keys alone"
	xsyncStoreName = "xsync MapOf[string, *atomic.Uint64]"
)

// heldSetting is the limit the stores of the heap and GC pass are given:
// one per hour, so that each key's first call leaves state that stays for
// an hour, and no sweeper or expiry drops a key while the pass measures.
var heldSetting = denyAfterOne

// A heldStore is one store of the heap and GC pass.
type heldStore struct {
	name, id string
	note     string
	limiter  bool // a keyed limiter (a peer), not a baseline
	// fill returns a new store holding every one of keys, and what
	// releases it; nil for the keys alone.
	fill func(keys []string) (held any, release func(), err error)
}

// heldStores returns the stores of the heap and GC pass: the keys alone
// first, every keyed peer but the floor (whose cells are made in advance:
// see its note), and an xsync MapOf.
func heldStores() []heldStore {
	st := []heldStore{{
		name: keysAloneName,
		id:   "keys-alone",
		note: "no store: the keys held in a slice, as in every other row; the baseline of the GC ratio",
		fill: func([]string) (any, func(), error) { return nil, func() {}, nil },
	}}
	for _, p := range peers {
		if p.keyed == nil || p.name == floorName {
			continue
		}
		st = append(st, heldStore{name: p.name, id: p.id(), limiter: true, fill: func(keys []string) (any, func(), error) {
			k := p.keyed(heldSetting)
			for _, key := range keys {
				if !k.allow(key) {
					k.close()
					return nil, nil, fmt.Errorf("%s denied the first call of key %q: it would hold no state for it", p.name, key)
				}
			}
			return k, k.close, nil
		}})
	}
	return append(st, heldStore{
		name: xsyncStoreName,
		id:   "xsync-MapOf",
		note: "not a limiter: `xsync.NewMapOf[string, *atomic.Uint64]()`, `Store(key, new(atomic.Uint64))`, the plainest lock-free store of one word per key",
		fill: func(keys []string) (any, func(), error) {
			m := xsync.NewMapOf[string, *atomic.Uint64]()
			for _, key := range keys {
				m.Store(key, new(atomic.Uint64))
			}
			return m, func() {}, nil
		},
	})
}
