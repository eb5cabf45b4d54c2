package atomicbucket_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/atomiclimit/atomiclimit/atomicbucket"
	"github.com/atomiclimit/atomiclimit/gcra"
)

// The Bucket's own cost, at a fixed time (no clock read): an admission is
// one load and one CompareAndSwap, a denial one load. The floor is that
// work written out on a plain word, in the same loop.
//
//	go test ./atomicbucket -run='^$' -bench=. -count=10 > new.txt
//	benchstat -col /impl new.txt
func BenchmarkBucket(b *testing.B) {
	allow, _ := gcra.NewParams(gcra.Every(time.Nanosecond), 1<<30) // admits every call
	deny, _ := gcra.NewParams(gcra.Every(time.Hour), 1)            // denies once drained
	for _, path := range []string{"allow", "deny"} {
		p := &allow
		if path == "deny" {
			p = &deny
		}
		for _, impl := range []string{"bucket", "floor"} {
			b.Run(fmt.Sprintf("path=%s/mode=serial/impl=%s", path, impl), func(b *testing.B) {
				var bk atomicbucket.PaddedBucket
				var w atomic.Uint64
				bk.AllowN(p, 1, 1)
				b.ReportAllocs()
				for i := range b.N {
					if impl == "bucket" {
						bk.AllowN(p, int64(i), 1)
					} else {
						floor(&w, int64(i), path)
					}
				}
			})
			b.Run(fmt.Sprintf("path=%s/mode=parallel/impl=%s", path, impl), func(b *testing.B) {
				var bk atomicbucket.PaddedBucket
				var w atomic.Uint64
				bk.AllowN(p, 1, 1)
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					i := int64(0)
					for pb.Next() {
						i++
						if impl == "bucket" {
							bk.AllowN(p, i, 1)
						} else {
							floor(&w, i, path)
						}
					}
				})
			})
		}
	}
}

// floor is the least work of a decision: a load, and for an admission one
// CompareAndSwap attempt.
func floor(w *atomic.Uint64, now int64, path string) {
	old := w.Load()
	if path == "allow" {
		w.CompareAndSwap(old, max(old, uint64(now))+1)
	}
}
