package atomicbucket_test

import (
	"fmt"
	"time"

	"github.com/atomiclimit/atomiclimit/atomicbucket"
	"github.com/atomiclimit/atomiclimit/gcra"
)

// A bucket per connection: the parameters are shared, each bucket is one
// word. Times are nanoseconds on the caller's own time base.
func ExampleBucket_AllowN() {
	p, err := gcra.NewParams(gcra.Every(100*time.Millisecond), 2)
	if err != nil {
		panic(err)
	}
	conns := make([]atomicbucket.Bucket, 3)
	now := int64(0)
	fmt.Println(conns[0].AllowN(&p, now, 1), conns[0].AllowN(&p, now, 1), conns[0].AllowN(&p, now, 1))
	fmt.Println(conns[1].AllowN(&p, now, 2))
	now += int64(100 * time.Millisecond)
	fmt.Println(conns[0].AllowN(&p, now, 1), conns[0].PeekN(&p, now, 1).RetryAfter)
	// Output:
	// true true false
	// true
	// true 100ms
}
