package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestJudge holds the rules that flag a change against the committed run.
func TestJudge(t *testing.T) {
	inf := math.Inf(1)
	ns := func(center, lo, hi float64) stat { return stat{center: center, lo: lo, hi: hi, min: lo, max: hi, n: 6} }
	few := func(center float64) stat {
		return stat{center: center, lo: -inf, hi: inf, min: center, max: center, n: 1}
	}
	for _, tc := range []struct {
		name      string
		c         change
		wantFlag  bool
		wantWords string
	}{
		{"slower, disjoint", change{unit: "ns/op", was: ns(40, 39, 41), now: ns(50, 48, 52)}, true, "REGRESSION"},
		{"slower, disjoint, peers a little", change{unit: "ns/op", was: ns(40, 39, 41), now: ns(50, 48, 52), peers: 1.05}, true, "REGRESSION"},
		{"slower, disjoint, peers as much and clearly", change{unit: "ns/op", was: ns(40, 39, 41), now: ns(50, 48, 52), peers: 1.3, peersN: 6, peersSlower: 5}, false, "slower, within 1.10× of the peers' drift (peers 1.30×, 5 of 6 clearly slower)"},
		{"faster, disjoint, peers as much and clearly", change{unit: "ns/op", was: ns(40, 39, 41), now: ns(30, 29, 31), peers: 0.7, peersN: 6, peersFaster: 4}, false, "faster, within 1.10× of the peers' drift (peers 0.70×, 4 of 6 clearly faster)"},
		// The peers barely moved: ours did, and their median ratio, within
		// 1.10× of ours, excuses nothing.
		{"just past 1.10×, disjoint, peers steady", change{unit: "ns/op", was: ns(40, 39.5, 40.5), now: ns(44.2, 43.8, 44.6), peers: 1.01, peersN: 6}, true, "REGRESSION"},
		{"just past 1.10×, disjoint, peers up 1.04×", change{unit: "ns/op", was: ns(40, 39.5, 40.5), now: ns(44.2, 43.8, 44.6), peers: 1.04, peersN: 6, peersSlower: 6}, true, "REGRESSION"},
		// The peers' median moved, but most peers within their intervals.
		{"slower, disjoint, peers' shift unclear", change{unit: "ns/op", was: ns(40, 39, 41), now: ns(50, 48, 52), peers: 1.3, peersN: 6, peersSlower: 3}, true, "REGRESSION"},
		{"slower, disjoint, peers clearly but less", change{unit: "ns/op", was: ns(40, 39, 41), now: ns(60, 58, 62), peers: 1.3, peersN: 6, peersSlower: 6}, true, "REGRESSION"},
		{"slower, disjoint, peers clearly faster", change{unit: "ns/op", was: ns(40, 39, 41), now: ns(50, 48, 52), peers: 0.8, peersN: 6, peersFaster: 6}, true, "REGRESSION"},
		{"slower, overlapping", change{unit: "ns/op", was: ns(40, 30, 50), now: ns(50, 45, 55)}, false, "noise"},
		{"slower, one run", change{unit: "ns/op", was: ns(40, 39, 41), now: few(60)}, false, "too few runs"},
		{"within 10%", change{unit: "ns/op", was: ns(40, 39, 41), now: ns(43, 42.5, 43.5)}, false, "~"},
		{"faster, disjoint", change{unit: "ns/op", was: ns(40, 39, 41), now: ns(30, 29, 31)}, false, "faster"},
		{"one more alloc", change{unit: "ns/op", was: ns(40, 39, 41), now: ns(40, 39, 41), allocsWas: 0, allocsNow: 1}, true, "allocs/op 0 → 1"},
		{"memory up", change{unit: "B/key", was: stat{center: 74, min: 74, max: 74.1}, now: stat{center: 80, min: 80, max: 80}}, true, "REGRESSION"},
		{"memory within 2%", change{unit: "B/key", was: stat{center: 74, min: 74, max: 74.1}, now: stat{center: 75, min: 75, max: 75}}, false, "~"},
	} {
		c := tc.c
		if c.allocsNow == 0 && c.allocsWas == 0 {
			c.allocsWas, c.allocsNow = math.NaN(), math.NaN()
		}
		if c.peers == 0 {
			c.peers = math.NaN()
		}
		c.ratio = c.now.center / c.was.center
		verdict, flagged := judge(c)
		if flagged != tc.wantFlag || !strings.Contains(verdict, tc.wantWords) {
			t.Errorf("%s: judge = %q, %v; want %v and %q", tc.name, verdict, flagged, tc.wantFlag, tc.wantWords)
		}
	}
}

// TestCompareWithCommitted reads a committed run from raw go test output
// and flags the scenario whose figure grew beyond the noise.
func TestCompareWithCommitted(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "raw"), 0o755); err != nil {
		t.Fatal(err)
	}
	lines := func(name string, vals ...string) string {
		var b strings.Builder
		for _, v := range vals {
			b.WriteString("Benchmark" + name + "-2 \t1000000\t" + v + " ns/op\t0 allocs/op\n")
		}
		return b.String()
	}
	committed := "cpu: Test CPU\n" + lines("Serial/impl=atomiclimit", "40", "40.5", "39.5", "40", "40.2", "39.8") +
		lines("HotKey/impl=atomiclimit", "70", "71", "69", "70", "70.5", "69.5") +
		lines("HotKey/impl=x/time/rate", "150", "150", "150", "150", "150", "150")
	if err := os.WriteFile(filepath.Join(dir, "raw", "bench.txt"), []byte(committed), 0o644); err != nil {
		t.Fatal(err)
	}
	base := loadBaseline(dir)
	if base.err != nil {
		t.Fatal(base.err)
	}
	now := filepath.Join(t.TempDir(), "now.txt")
	current := "cpu: Test CPU\n" + lines("Serial/impl=atomiclimit", "40", "40.5", "39.5", "40", "40.2", "39.8") +
		lines("HotKey/impl=atomiclimit", "90", "91", "89", "90", "90.5", "89.5") +
		lines("HotKey/impl=x-time-rate", "165", "165", "165", "165", "165", "165") +
		lines("Contended/rate=1e6/impl=atomiclimit", "20", "20", "20", "20", "20", "20")
	if err := os.WriteFile(now, []byte(current), 0o644); err != nil {
		t.Fatal(err)
	}
	res, info, err := readResults(now)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	flagged := writeComparison(func(f string, a ...any) { fmt.Fprintf(&b, f, a...) }, base, res, info)
	if len(flagged) != 1 || flagged[0] != "HotKey" {
		t.Errorf("flagged %v, want [HotKey]\n%s", flagged, b.String())
	}
	for _, want := range []string{"| HotKey | 70.0 ns", "1.29×", "1.10×", "Not in the committed run", "Contended/rate=1e6"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
}

// TestPeersMedianLeavesOut: the peers' median ratio, which says how much
// the machine moved, leaves out the floor (our code) everywhere and the
// pacers where they pace (10^6/s: their time is the pace they sleep to, a
// ratio near 1 on any machine), at any core count.
func TestPeersMedianLeavesOut(t *testing.T) {
	run := func(center float64) map[string]stat {
		return map[string]stat{"ns/op": {center: center, lo: center * 0.99, hi: center * 1.01, min: center * 0.99, max: center * 1.01, n: 6}}
	}
	scenario := func(ourNow float64) (base, now map[string]map[string]stat) {
		base = map[string]map[string]stat{ours: run(40), "x/time/rate": run(100), "juju/ratelimit": run(100),
			"uber/ratelimit": run(1000), "uber-default": run(1000), "floor": run(10)}
		now = map[string]map[string]stat{ours: run(ourNow), "x/time/rate": run(130), "juju/ratelimit": run(130),
			"uber/ratelimit": run(1000), "uber-default": run(1000), "floor": run(10)}
		return base, now
	}
	base, now := results{}, results{}
	for _, sc := range []string{"Contended/rate=1e6/burst=1000", "Contended/rate=1e6/burst=1000/cpu=2", "HotKey"} {
		base[sc], now[sc] = scenario(52)
	}
	changes, _ := compareRuns(base, now)
	got := map[string]change{}
	for _, c := range changes {
		got[c.scenario] = c
	}
	for _, sc := range []string{"Contended/rate=1e6/burst=1000", "Contended/rate=1e6/burst=1000/cpu=2"} {
		c := got[sc]
		if c.peers != 1.3 || c.peersN != 2 || c.peersSlower != 2 || c.regression {
			t.Errorf("%s: peers %v (%d of %d clearly slower), flagged %v; want 1.30× from x/time/rate and juju alone (2 of 2), not flagged: %s",
				sc, c.peers, c.peersSlower, c.peersN, c.regression, c.verdict)
		}
	}
	// At a billion per second the pacers decide as fast as they can: they
	// count (the floor still does not), and their steady time outvotes the
	// others.
	if c := got["HotKey"]; c.peersN != 4 || c.peers != 1.15 || !c.regression {
		t.Errorf("HotKey: peers %v over %d, flagged %v; want 1.15× over 4 peers, flagged: %s", c.peers, c.peersN, c.regression, c.verdict)
	}
}
