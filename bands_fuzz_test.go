package atomiclimit_test

import (
	"math/rand/v2"
	"testing"
)

// FuzzBands draws the bands from seed (GCRA, fixed and log bands, the log
// last) and the requests from ops (pairs of bytes: a signed time step and a
// size from 0 to 3), and checks every decision against the reference models
// and RetryAfter by its definition.
func FuzzBands(f *testing.F) {
	f.Add(uint64(1), []byte{0, 1, 0, 1, 0, 1, 10, 2, 200, 1, 127, 3, 1, 0})
	f.Add(uint64(42), []byte{5, 1, 5, 1, 5, 1, 5, 1, 5, 1, 5, 1})
	f.Fuzz(func(t *testing.T, seed uint64, ops []byte) {
		rules, ref := randomBands(rand.New(rand.NewPCG(seed, seed>>32)), 0)
		var nows []int64
		var ns []int
		now := int64(0)
		for i := 0; i+1 < len(ops); i += 2 {
			now = max(now+int64(int8(ops[i])), 0)
			nows = append(nows, now)
			ns = append(ns, int(ops[i+1])%4)
		}
		checkAgainstRef(t, rules, ref, nows, ns)
	})
}
