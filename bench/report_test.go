package main

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeTestReport writes the report of the raw go test output raw, run at
// -cpu=cpu, with the latency scenarios lat, and returns it.
func writeTestReport(t *testing.T, raw, cpu string, lat []latScenario, charts []chart) string {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "bench.txt")
	if err := os.WriteFile(path, []byte(raw), 0o644); err != nil {
		t.Fatal(err)
	}
	res, info, err := readResults(path)
	if err != nil {
		t.Fatal(err)
	}
	o := options{out: dir, cpu: cpu, count: 6, benchtime: "200ms", keys: 1000, latCalls: 1000}
	base := baseline{err: errors.New("no committed run in this test")}
	if _, err := writeReport(o, res, info, base, lat, nil, "", charts, nil); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "BENCHMARKS.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(md)
}

// benchLines is n runs of one go test result line.
func benchLines(name, values string, n int) string {
	return strings.Repeat("Benchmark"+name+" \t1000000\t"+values+"\n", n)
}

// TestHotSectionAtSeveralCoreCounts: with -cpu=1,2 every scenario is named
// with /cpu=N, and the hot-key section (tables, allowed/s, latency
// percentiles, the pacer note, the charts) is still written, once per core
// count, with the latency percentiles at the harness's own count.
func TestHotSectionAtSeveralCoreCounts(t *testing.T) {
	var raw strings.Builder
	raw.WriteString("cpu: Test CPU @ 3.0GHz\n")
	for _, suffix := range []string{"", "-2"} { // go test names no suffix at -cpu=1
		raw.WriteString(benchLines("HotKey/impl=atomiclimit"+suffix, "60 ns/op\t1.000 allowed/op\t16666667 allowed/s\t0 B/op\t0 allocs/op", 6))
		raw.WriteString(benchLines("HotKey/impl=x-time-rate"+suffix, "120 ns/op\t1.000 allowed/op\t8333333 allowed/s\t0 B/op\t0 allocs/op", 6))
		raw.WriteString(benchLines("Contended/rate=1e6/burst=1000/impl=atomiclimit"+suffix, "30 ns/op\t0.030 allowed/op\t1000000 allowed/s\t0 B/op\t0 allocs/op", 6))
		raw.WriteString(benchLines("Contended/rate=1e6/burst=1000/impl=uber-default"+suffix, "1100 ns/op\t1.000 allowed/op\t909091 allowed/s\t0 B/op\t0 allocs/op", 6))
		raw.WriteString(benchLines("Serial/impl=atomiclimit"+suffix, "40 ns/op\t1.000 allowed/op\t0 B/op\t0 allocs/op", 6))
	}
	lat := []latScenario{{hotScenario: hotScenarios[0], procs: 2, rows: []latResult{
		{impl: "clock only", p50: 21 * time.Nanosecond, p99: 40 * time.Nanosecond, p999: 90 * time.Nanosecond},
		{impl: "atomiclimit", p50: 77 * time.Nanosecond, p99: 310 * time.Nanosecond, p999: 1500 * time.Nanosecond},
	}}}
	charts := []chart{
		{"charts/hotkey-cpu-2.png", "HotKey at 2", "HotKey/cpu=2"},
		{"charts/latency-hotkey.png", "latency HotKey", "latency HotKey"},
	}
	md := writeTestReport(t, raw.String(), "1,2", lat, charts)
	for _, want := range []string{
		"## One key from every core",
		"### -cpu=1\n",
		"### -cpu=2\n",
		"#### HotKey: every call admitted",
		"#### Contended/rate=1e6/burst=1000: mostly denials",
		"16.67 M",                    // allowed/s
		"77 ns | 310 ns | 1.50 µs",   // the percentiles, at -cpu=2
		"p50 21 ns",                  // clock only
		"the pacers kept this share", // the pacer note
		"uber-default 91%",
		"(charts/hotkey-cpu-2.png)",
		"(charts/latency-hotkey.png)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if n := strings.Count(md, "#### HotKey: every call admitted"); n != 2 {
		t.Errorf("%d HotKey tables, want one per core count (2)", n)
	}
	// The percentiles belong to -cpu=2 only.
	cpu1 := md[strings.Index(md, "### -cpu=1\n"):strings.Index(md, "### -cpu=2\n")]
	if strings.Contains(cpu1, "p50") || strings.Contains(cpu1, "latency-hotkey") {
		t.Errorf("the -cpu=1 tables carry the latency measured at GOMAXPROCS=2:\n%s", cpu1)
	}
	// One name for the machine: go test's cpu: line.
	if !strings.Contains(md, "- Machine: Test CPU @ 3.0GHz, ") {
		t.Errorf("the machine line does not name go test's CPU:\n%s", md[:strings.Index(md, "## The implementations")])
	}
	// The other scenarios keep one table per core count.
	for _, want := range []string{"## Serial/cpu=1\n", "## Serial/cpu=2\n"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

// TestHotSectionLatencyElsewhere: where the benchmarks did not run at the
// latency harness's GOMAXPROCS, its percentiles get tables of their own
// rather than none.
func TestHotSectionLatencyElsewhere(t *testing.T) {
	raw := "cpu: Test CPU\n" + benchLines("HotKey/impl=atomiclimit", "60 ns/op\t1.000 allowed/op\t0 B/op\t0 allocs/op", 6)
	lat := []latScenario{{hotScenario: hotScenarios[0], procs: 4, rows: []latResult{
		{impl: "atomiclimit", p50: 77 * time.Nanosecond, p99: 310 * time.Nanosecond, p999: 1500 * time.Nanosecond},
	}}}
	md := writeTestReport(t, raw, "1", lat, nil)
	for _, want := range []string{"### -cpu=1\n", "### -cpu=4\n", "did not run at this core count", "77 ns | 310 ns | 1.50 µs", "60.0 ns"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

func TestSplitProcs(t *testing.T) {
	for _, tc := range []struct {
		in    string
		base  string
		procs int
	}{
		{"HotKey", "HotKey", 0},
		{"HotKey/cpu=16", "HotKey", 16},
		{"Contended/rate=1e6/burst=1000/cpu=2", "Contended/rate=1e6/burst=1000", 2},
		{"Keys/dist=zipf/keys=1000", "Keys/dist=zipf/keys=1000", 0},
	} {
		base, procs := splitProcs(tc.in)
		if base != tc.base || procs != tc.procs {
			t.Errorf("splitProcs(%q) = %q, %d; want %q, %d", tc.in, base, procs, tc.base, tc.procs)
		}
		if _, ok := hotScenarioOf(tc.in); ok != (tc.base != "Keys/dist=zipf/keys=1000") {
			t.Errorf("hotScenarioOf(%q) = %v", tc.in, ok)
		}
	}
	r := results{"HotKey/cpu=16": nil, "HotKey/cpu=2": nil, "Serial/cpu=2": nil, "Serial/cpu=16": nil}
	if got, want := strings.Join(r.scenarios(), " "), "Serial/cpu=2 Serial/cpu=16 HotKey/cpu=2 HotKey/cpu=16"; got != want {
		t.Errorf("scenarios() = %s, want %s", got, want)
	}
}

// TestStanding: the summary calls atomiclimit ahead of the best peer only
// where their 95% intervals are disjoint.
func TestStanding(t *testing.T) {
	ns := func(center, lo, hi float64) stat { return stat{center: center, lo: lo, hi: hi, n: 6} }
	one := func(center float64) stat { return stat{center: center, lo: math.Inf(-1), hi: math.Inf(1), n: 1} }
	for _, tc := range []struct {
		name      string
		our, best stat
		want      string
		wantSt    int
	}{
		// The review's case: HotKey 64.3 ns [63.7, 67.0] beside
		// uber-default 65.6 ns [65.1, 68.2].
		{"lower median, overlapping", ns(64.3, 63.7, 67.0), ns(65.6, 65.1, 68.2), "level (intervals overlap)", levelBest},
		{"higher median, overlapping", ns(66, 63.7, 67.0), ns(65.6, 65.1, 68.2), "level (intervals overlap)", levelBest},
		{"ahead, disjoint", ns(40, 39, 41), ns(60, 58, 62), "yes", aheadOfBest},
		{"behind, disjoint", ns(60, 58, 62), ns(40, 39, 41), "**no**", behindBest},
		{"one run, lower", one(40), one(60), "yes (medians only", aheadOfBest},
		{"one run, higher", one(60), one(40), "**no** (medians only", behindBest},
	} {
		got, st := standing(tc.our, tc.best)
		if !strings.HasPrefix(got, tc.want) || st != tc.wantSt {
			t.Errorf("%s: standing = %q, %d; want %q, %d", tc.name, got, st, tc.want, tc.wantSt)
		}
	}
}

// TestTitlesInWords: every scenario's chart title is words, not the
// benchmark's name.
func TestTitlesInWords(t *testing.T) {
	scs := []string{"Serial", "Keys/dist=uniform/keys=1000000", "Keys/dist=zipf/keys=1000000", "Insert", "Memory/keys=1000000", "HotKey/cpu=4"}
	for _, h := range hotScenarios {
		scs = append(scs, h.bench)
	}
	for _, sc := range httpScenarios {
		scs = append(scs, "HTTP/"+sc.name)
	}
	for _, sc := range grpcScenarios {
		scs = append(scs, "GRPC/"+sc.name)
	}
	for _, sc := range scs {
		got := scenarioTitle(sc)
		name := got == sc
		for _, id := range []string{"dist=", "keys=", "ips=", "result=", "rate=", "burst=", "cpu=", "HTTP/", "GRPC/", "HotKey", "Contended", "Deny"} {
			name = name || strings.Contains(got, id)
		}
		if name {
			t.Errorf("scenarioTitle(%q) = %q: not in words", sc, got)
		}
	}
	if got, want := scenarioTitle("Keys/dist=zipf/keys=1000000"), "1,000,000 keys"; !strings.HasPrefix(got, want) {
		t.Errorf("scenarioTitle = %q, want it to start %q", got, want)
	}
}

// TestDoorsSection: the doors' scenarios get a section of their own, with
// every implementation's overhead over the floor in time and allocations.
func TestDoorsSection(t *testing.T) {
	raw := "cpu: Test CPU\n" +
		benchLines("HTTP/ips=1/result=admitted/impl=atomiclimit", "700 ns/op\t1.000 allowed/op\t400 B/op\t5 allocs/op", 6) +
		benchLines("HTTP/ips=1/result=admitted/impl=chi-httprate", "1000 ns/op\t1.000 allowed/op\t600 B/op\t13 allocs/op", 6) +
		benchLines("HTTP/ips=1/result=admitted/impl=floor", "200 ns/op\t1.000 allowed/op\t48 B/op\t1 allocs/op", 6) +
		benchLines("GRPC/result=denied/impl=atomiclimit", "900 ns/op\t0 allowed/op\t2000 B/op\t29 allocs/op", 6) +
		benchLines("GRPC/result=denied/impl=floor", "10 ns/op\t1.000 allowed/op\t0 B/op\t0 allocs/op", 6)
	md := writeTestReport(t, raw, "", nil, nil)
	for _, want := range []string{
		"## Behind the doors",
		"### HTTP middleware, one client IP: every request admitted",
		"| atomiclimit | 700.0 ns |",
		"| 500.0 ns | +4 | — | — |",          // ours over the floor
		"| 800.0 ns | +12 | 0.70× | 0.62× |", // chi: 700/1000, 500/800
		"| floor | 200.0 ns |",
		"### gRPC unary interceptor, one peer IP: every call denied (ResourceExhausted)",
		"| 890.0 ns | +29 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	// The doors' scenarios are not also written as limiter tables.
	if strings.Contains(md, "## HTTP/") || strings.Contains(md, "## GRPC/") {
		t.Errorf("a door scenario has a limiter table")
	}
}

// TestHeldTable: the heap and GC pass's raw output becomes one table, the
// keys alone first, then the limiters and the plain map, labelled as not a
// limiter, with each store's bytes and objects per key, its forced
// collection beside the keys alone's in the same run, and their ratio.
func TestHeldTable(t *testing.T) {
	line := func(impl string, bytes, objects, gc, keysGC float64) string {
		return benchLines("Memory/keys=1000000/impl="+impl+"-2", fmt.Sprintf("1000 ns/op\t%g B/key\t%g objects/key\t%g gc-ms\t%g keys-gc-ms\t%g gc/keys", bytes, objects, gc, keysGC, gc/keysGC), 3)
	}
	raw := "cpu: Test CPU\n" +
		line("keys-alone", 0, 0, 10.5, 10.6) +
		line("atomiclimit", 55, 1.03, 100, 10) +
		line("go-limiter", 99, 1, 80, 10) +
		line("xsync-MapOf", 54.9, 1.53, 83.4, 10.4)
	md := writeTestReport(t, raw, "", nil, nil)
	for _, want := range []string{
		"## Heap and the garbage collector: 1,000,000 keys held",
		"GOGC=100, at -cpu=2",
		"| keys alone | 0.0 B | 0.00 | 10.5 ms | 10.6 ms | 0.99× | — |",
		"| atomiclimit | 55.0 B | 1.03 | 100.0 ms | 10.0 ms | 10.00× | — |",
		"| go-limiter | 99.0 B | 1.00 | 80.0 ms | 10.0 ms | 8.00× | 0.56× |",
		"| xsync MapOf[string, *atomic.Uint64] (not a limiter) | 54.9 B | 1.53 | 83.4 ms | 10.4 ms | 8.02× | 1.00× |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if i, j := strings.Index(md, "| keys alone |"), strings.Index(md, "| atomiclimit | 55.0 B"); i < 0 || j < i {
		t.Errorf("the keys alone are not the first row")
	}
	// The plain map is not a peer: no summary row names it the best.
	if strings.Contains(md[:strings.Index(md, "## Heap")], "xsync MapOf") {
		t.Errorf("the summary ranks the plain map among the limiters")
	}
}

// TestScalingAndDoorGoal: a run at -cpu=1,2 gets the scaling section (one
// table per scaling scenario, a column per core count) while the scenarios
// run at GOMAXPROCS alone keep their tables under that count, and the door
// with 100,000 clients is set against its goal at -cpu=1 from the figures
// over the bare handler.
func TestScalingAndDoorGoal(t *testing.T) {
	var raw strings.Builder
	raw.WriteString("cpu: Test CPU\n")
	for _, c := range []struct {
		suffix        string
		hot, deny, uf float64
		door          map[string]float64
	}{
		{"", 30, 20, 400, map[string]float64{"atomiclimit": 500, "chi-httprate": 1500, "go-limiter": 1200, "xrate-map-mutex": 250, "floor": 100}},
		{"-2", 60, 10, 220, map[string]float64{"atomiclimit": 300, "chi-httprate": 900, "go-limiter": 800, "xrate-map-mutex": 150, "floor": 60}},
	} {
		raw.WriteString(benchLines("HotKey/impl=atomiclimit"+c.suffix, fmt.Sprintf("%g ns/op\t1.000 allowed/op\t0 B/op\t0 allocs/op", c.hot), 6))
		raw.WriteString(benchLines("HotKey/impl=x-time-rate"+c.suffix, fmt.Sprintf("%g ns/op\t1.000 allowed/op\t0 B/op\t0 allocs/op", 4*c.hot), 6))
		raw.WriteString(benchLines("Deny/impl=atomiclimit"+c.suffix, fmt.Sprintf("%g ns/op\t0 allowed/op\t0 B/op\t0 allocs/op", c.deny), 6))
		raw.WriteString(benchLines("Keys/dist=uniform/keys=1000000/impl=atomiclimit"+c.suffix, fmt.Sprintf("%g ns/op\t1.000 allowed/op\t0 B/op\t0 allocs/op", c.uf), 6))
		for impl, ns := range c.door {
			raw.WriteString(benchLines("HTTPParallel/ips=100000/result=admitted/impl="+impl+c.suffix, fmt.Sprintf("%g ns/op\t1.000 allowed/op\t48 B/op\t1 allocs/op", ns), 6))
		}
	}
	// Run at GOMAXPROCS alone: no /cpu=N in their names.
	raw.WriteString(benchLines("Contended/rate=1e6/burst=1000/impl=atomiclimit-2", "25 ns/op\t0.030 allowed/op\t1000000 allowed/s\t0 B/op\t0 allocs/op", 6))
	raw.WriteString(benchLines("Keys/dist=zipf/keys=1000000/impl=atomiclimit-2", "150 ns/op\t1.000 allowed/op\t0 B/op\t0 allocs/op", 6))
	charts := []chart{{"charts/scaling.png", "the scaling figure", "scaling"}}
	md := writeTestReport(t, raw.String(), "1,2", nil, charts)
	for _, want := range []string{
		"## Scaling with cores",
		"(charts/scaling.png)",
		"### One key, every call admitted\n\n| implementation | -cpu=1 | -cpu=2 | -cpu=2 ÷ -cpu=1 |",
		"| atomiclimit | 30.0 ns | 60.0 ns | 2.00× |",
		"| x/time/rate | 120.0 ns | 240.0 ns | 2.00× |",
		"### One key, every call denied",
		"| atomiclimit | 20.0 ns | 10.0 ns | 0.50× |",
		"### 1,000,000 keys drawn uniformly",
		"| atomiclimit | 400.0 ns | 220.0 ns | 0.55× |",
		"### HTTP middleware, 100,000 client IPs, from every core",
		"| chi/httprate | 1.50 µs | 900.0 ns | 0.60× |",
		// Contended ran at 2 only, and keeps its table there.
		"#### Contended/rate=1e6/burst=1000: mostly denials",
		"## Keys/dist=zipf/keys=1000000\n",
		// The door's goal, at -cpu=1: ours 400 ns over the floor, the
		// nearest header-writing peer go-limiter 1100 (2.75×); the
		// baseline without headers is not among them.
		"### The door with 100,000 clients at one core",
		"| atomiclimit | 500.0 ns | 400.0 ns | — |",
		"| chi/httprate | 1.50 µs | 1.40 µs | 3.50× |",
		"| go-limiter | 1.20 µs | 1.10 µs | 2.75× |",
		"atomiclimit 400.0 ns over the bare handler (at most 500 ns: met); the nearest header-writing peer, go-limiter, 2.75× atomiclimit's (at least 3×: **not met**)",
		"**The doors run at GOGC=100**",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	goal := md[strings.Index(md, "### The door with 100,000 clients"):]
	goal = goal[:strings.Index(goal, "In this run")]
	if strings.Contains(goal, "x/time/rate map") {
		t.Errorf("the goal's table has the baseline that writes no headers:\n%s", goal)
	}
	cpu2 := md[strings.Index(md, "### -cpu=2\n"):]
	if !strings.Contains(cpu2, "#### Contended/rate=1e6/burst=1000") {
		t.Errorf("Contended, run at GOMAXPROCS=2 alone, is not in the -cpu=2 tables")
	}
	cpu1 := md[strings.Index(md, "### -cpu=1\n"):strings.Index(md, "### -cpu=2\n")]
	if strings.Contains(cpu1, "Contended") {
		t.Errorf("Contended appears at -cpu=1, where it did not run")
	}
}

// TestScalingFigure draws the scaling figure from a run at two core
// counts, and none from a run at one.
func TestScalingFigure(t *testing.T) {
	path := filepath.Join(t.TempDir(), "raw.txt")
	raw := "cpu: Test CPU\n" + benchLines("HotKey/impl=atomiclimit", "30 ns/op", 2) + benchLines("HotKey/impl=atomiclimit-2", "60 ns/op", 2) +
		benchLines("Deny/impl=x-time-rate", "300 ns/op", 2) + benchLines("Deny/impl=x-time-rate-2", "3 ns/op", 2) +
		benchLines("HTTPParallel/ips=100000/result=admitted/impl=floor", "100 ns/op", 2) + benchLines("HTTPParallel/ips=100000/result=admitted/impl=floor-2", "60 ns/op", 2)
	if err := os.WriteFile(path, []byte(raw), 0o644); err != nil {
		t.Fatal(err)
	}
	res, info, err := readResults(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(scalingPanels(info)); got != 3 {
		t.Errorf("%d panels, want 3 (HotKey, Deny, HTTPParallel)", got)
	}
	png := filepath.Join(t.TempDir(), "scaling.png")
	if ok, err := scalingFigure(png, res, info, []int{1, 2}); !ok || err != nil {
		t.Fatalf("scalingFigure = %v, %v", ok, err)
	}
	if fi, err := os.Stat(png); err != nil || fi.Size() == 0 {
		t.Errorf("no figure: %v", err)
	}
	if ok, err := scalingFigure(png, res, info, []int{2}); ok || err != nil {
		t.Errorf("one core count: scalingFigure = %v, %v; want no figure", ok, err)
	}
}

// TestAlignProcs: a scenario the committed run measured at GOMAXPROCS=2
// alone (no /cpu=N) is compared with this run's figure at -cpu=2, not
// reported as missing.
func TestAlignProcs(t *testing.T) {
	read := func(raw string) (results, runInfo) {
		path := filepath.Join(t.TempDir(), "raw.txt")
		if err := os.WriteFile(path, []byte(raw), 0o644); err != nil {
			t.Fatal(err)
		}
		res, info, err := readResults(path)
		if err != nil {
			t.Fatal(err)
		}
		return res, info
	}
	base, baseInfo := read("cpu: Test CPU\n" + benchLines("Deny/impl=atomiclimit-2", "10 ns/op", 6) + benchLines("Serial/impl=atomiclimit-2", "40 ns/op", 6))
	now, nowInfo := read("cpu: Test CPU\n" + benchLines("Deny/impl=atomiclimit", "20 ns/op", 6) + benchLines("Deny/impl=atomiclimit-2", "10 ns/op", 6) + benchLines("Serial/impl=atomiclimit-2", "40 ns/op", 6))
	changes, missing := compareRuns(alignProcs(base, baseInfo, now, nowInfo), now)
	var compared []string
	for _, c := range changes {
		compared = append(compared, c.scenario)
	}
	if got, want := strings.Join(compared, " "), "Serial Deny/cpu=2"; got != want {
		t.Errorf("compared %s, want %s", got, want)
	}
	if got, want := strings.Join(missing, " "), "Deny/cpu=1"; got != want {
		t.Errorf("missing %s, want %s", got, want)
	}
}
