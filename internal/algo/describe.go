package algo

import (
	"fmt"
	"time"

	"github.com/atomiclimit/atomiclimit/gcra"
)

// DescribeGCRA describes a token bucket, e.g. "20/s, burst 5".
func DescribeGCRA(l gcra.Limit, burst int) string {
	switch l {
	case gcra.Unlimited, gcra.DenyAll:
		return l.String()
	}
	return fmt.Sprintf("%v, burst %d", l, burst)
}

// DescribeWindow describes n per window of length period, e.g.
// "100/h fixed window".
func DescribeWindow(n int, period time.Duration, kind string) string {
	return fmt.Sprintf("%d/%s %s", n, Period(period), kind)
}

// DescribeRolling describes a rolling window, e.g. "10000/d rolling by 1h,
// at most 1000 per slice".
func DescribeRolling(q int, window, slice time.Duration, perSlice int) string {
	s := DescribeWindow(q, window, "rolling by "+Period(slice))
	if perSlice > 0 {
		s += fmt.Sprintf(", at most %d per slice", perSlice)
	}
	return s
}

// Period writes a period as a rate's unit: "s", "min", "h" or "d" for one
// of them, else the shortest duration ("2s", "15m", "1h30m").
func Period(d time.Duration) string { return gcra.Per(1, d).String()[2:] }
