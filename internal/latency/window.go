package latency

import "time"

// Window is the churn scenario's walk, shared by the tail benchmarks: a
// window of live key indexes that slides by perSecond indexes a second from
// start, walked in laps by workers goroutines. Worker w asks each index
// congruent to w (mod workers) that the window holds once a lap; an index
// that left the window is skipped for the one a lap further on, new at the
// window's top. It calls ask with each index until run has passed since
// start. The window never passes live + perSecond·run.
func Window(start time.Time, run time.Duration, live, perSecond, w, workers int, ask func(j int)) {
	for j := w; ; j += workers {
		since := time.Since(start)
		if since >= run {
			return
		}
		base := int(int64(since) * int64(perSecond) / int64(time.Second))
		for j < base {
			j += live
		}
		for j >= base+live {
			j -= live
		}
		ask(j)
	}
}
