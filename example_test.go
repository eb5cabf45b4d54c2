package atomiclimit_test

import (
	"fmt"
	"time"

	"github.com/atomiclimit/atomiclimit"
)

// Ten requests per second per user, in bursts of up to three. The times are
// explicit, so the output does not depend on the machine's speed.
func Example() {
	lim, err := atomiclimit.NewKeyed[string](atomiclimit.PerSecond(10), 3,
		atomiclimit.WithMaxKeys(100_000, atomiclimit.RejectNew))
	if err != nil {
		panic(err)
	}
	defer lim.Close()

	t0 := time.Now()
	for i := range 4 {
		fmt.Println("alice", i, lim.AllowN("alice", t0, 1))
	}
	fmt.Println("bob", lim.AllowN("bob", t0, 1))
	d := decideN(lim, "alice", t0, 1)
	fmt.Println("alice retry after", d.RetryAfter)
	fmt.Println("alice 100ms later", lim.AllowN("alice", t0.Add(100*time.Millisecond), 1))
	// Output:
	// alice 0 true
	// alice 1 true
	// alice 2 true
	// alice 3 false
	// bob true
	// alice retry after 100ms
	// alice 100ms later true
}
