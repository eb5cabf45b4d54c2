package gcra_test

import (
	"fmt"
	"time"

	"github.com/atomiclimit/atomiclimit/gcra"
)

func ExampleParams_Decide() {
	p, _ := gcra.NewParams(gcra.Per(2, time.Second), 2) // T = 500ms, burst 2
	var tat int64                                       // 0: a full bucket
	for _, at := range []time.Duration{0, 0, 0, 250 * time.Millisecond, 500 * time.Millisecond} {
		var d gcra.Decision
		tat, d = p.Decide(tat, int64(at), 1)
		fmt.Printf("t=%v allowed=%v remaining=%d retry=%v\n", at, d.Allowed, d.Remaining, d.RetryAfter)
	}
	// Output:
	// t=0s allowed=true remaining=1 retry=0s
	// t=0s allowed=true remaining=0 retry=0s
	// t=0s allowed=false remaining=0 retry=500ms
	// t=250ms allowed=false remaining=0 retry=250ms
	// t=500ms allowed=true remaining=0 retry=0s
}
