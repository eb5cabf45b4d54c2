package latency

import (
	"testing"
	"time"
)

// TestWindow: a worker asks only indexes its window holds, each once a lap,
// and stops when the run is over. The window (10 live, sliding 4 a second)
// starts 1 s in, so it holds [4, 14) for the 100 ms the walk lasts.
func TestWindow(t *testing.T) {
	const live, perSecond, workers, w = 10, 4, 2, 1
	start := time.Now().Add(-time.Second)
	var asked []int
	Window(start, time.Second+100*time.Millisecond, live, perSecond, w, workers, func(j int) {
		asked = append(asked, j)
	})
	if time.Since(start) < time.Second+100*time.Millisecond {
		t.Fatal("Window returned before the run was over")
	}
	if len(asked) < 2*live/workers {
		t.Fatalf("only %d asks in 100 ms", len(asked))
	}
	for i, j := range asked {
		if j < 4 || j >= 14 || j%workers != w {
			t.Fatalf("ask %d: index %d, outside the window [4, 14) or not worker %d's", i, j, w)
		}
		if i >= live/workers && asked[i-live/workers] != j {
			t.Fatalf("ask %d: index %d, but a lap earlier %d: not one ask per index per lap", i, j, asked[i-live/workers])
		}
	}
}
