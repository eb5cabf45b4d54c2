package main

import (
	"flag"
	"io"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestUpdateTakesTheDefaults: -update rewrites the run later runs compare
// with, so it refuses a short or small run; a run to bench/out/ may be
// anything.
func TestUpdateTakesTheDefaults(t *testing.T) {
	for _, tc := range []struct {
		args    string
		wantErr string // "" for none
	}{
		{"-update", ""},
		{"-update -count=6 -benchtime=200ms", ""}, // the defaults, spelled out
		{"-update -cpu=1,2", ""},
		{"-update -count=1", "drop -count=1"},
		{"-update -keys=1000", "drop -keys=1000"},
		{"-update -benchtime=10ms", "drop -benchtime=10ms"},
		{"-update -latency-calls=1000", "drop -latency-calls=1000"},
		{"-update -count=3 -keys=10", "drop -count=3 -keys=10"},
		{"-update -quick", "not a -quick one"},
		{"-update -out=/tmp/x", "drop -out"},
		{"-count=1 -keys=1000 -benchtime=10ms -latency-calls=1000", ""},
	} {
		fs := flag.NewFlagSet("bench", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var o options
		o.register(fs)
		if err := fs.Parse(strings.Fields(tc.args)); err != nil {
			t.Fatalf("%s: %v", tc.args, err)
		}
		err := o.check(fs)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: %v, want no error", tc.args, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: error %v, want one with %q", tc.args, err, tc.wantErr)
		}
	}
}

// TestDefaultCPUs: the scaling scenarios' core counts are the powers of
// two below the logical CPUs and their number; -quick takes the two ends;
// -cpu overrides both.
func TestDefaultCPUs(t *testing.T) {
	for n, want := range map[int]string{1: "1", 2: "1,2", 3: "1,2,3", 4: "1,2,4", 6: "1,2,4,6", 12: "1,2,4,8,12", 16: "1,2,4,8,16"} {
		if got := intList(defaultCPUs(n)); got != want {
			t.Errorf("defaultCPUs(%d) = %s, want %s", n, got, want)
		}
	}
	for n, want := range map[int]string{1: "1", 2: "1,2", 16: "1,16"} {
		if got := intList(quickCPUs(n)); got != want {
			t.Errorf("quickCPUs(%d) = %s, want %s", n, got, want)
		}
	}
	for _, tc := range []struct {
		o    options
		want string
	}{
		{options{}, intList(defaultCPUs(runtime.NumCPU()))},
		{options{quick: true}, intList(quickCPUs(runtime.GOMAXPROCS(0)))},
		{options{cpu: "4, 1,2,4"}, "1,2,4"},
		{options{cpu: "8", quick: true}, "8"},
	} {
		got, err := tc.o.cpus()
		if err != nil || intList(got) != tc.want {
			t.Errorf("%+v: cpus() = %v, %v; want %s", tc.o, got, err, tc.want)
		}
	}
	if _, err := (&options{cpu: "1,x"}).cpus(); err == nil {
		t.Errorf("-cpu=1,x: no error")
	}
}

// TestScaledPatterns: the scaling hot-key scenarios are the ones whose
// benchmarks hotScaledPattern names, and the others' hotPattern; the keyed
// patterns split BenchmarkKeys' sub-benchmarks by distribution and keep
// Insert's; the counts of the progress lines follow.
func TestScaledPatterns(t *testing.T) {
	match := func(pattern, name string) bool {
		// As go test matches -bench: level by level, a name with more
		// levels than the pattern matching on the levels it has.
		ps, ns := strings.Split(pattern, "/"), strings.Split(name, "/")
		for i, p := range ps {
			if i >= len(ns) {
				break
			}
			if !regexp.MustCompile(p).MatchString(ns[i]) {
				return false
			}
		}
		return true
	}
	for _, h := range hotScenarios {
		name := "Benchmark" + h.bench
		if got := match(hotScaledPattern, name); got != h.scales() {
			t.Errorf("%s: matched by %s = %v, scales() = %v", name, hotScaledPattern, got, h.scales())
		}
		if got := match(hotPattern, name); got == h.scales() {
			t.Errorf("%s: matched by %s = %v, scales() = %v", name, hotPattern, got, h.scales())
		}
	}
	for name, want := range map[string][2]bool{
		"BenchmarkKeys/dist=uniform/keys=1000/impl=atomiclimit": {false, true},
		"BenchmarkKeys/dist=zipf/keys=1000/impl=atomiclimit":    {true, false},
		"BenchmarkInsert/impl=atomiclimit":                      {true, false},
	} {
		if got := [2]bool{match(keyedPattern, name), match(keyedScaledPattern, name)}; got != want {
			t.Errorf("%s: matched by (%s, %s) = %v, want %v", name, keyedPattern, keyedScaledPattern, got, want)
		}
	}
	if fixed, scaled := countHot(); scaled == 0 || fixed == 0 {
		t.Errorf("countHot() = %d, %d: want benchmarks of both kinds", fixed, scaled)
	}
	if _, scaled := countDoors(); scaled != len(httpDoors) {
		t.Errorf("countDoors() scaled = %d, want one per HTTP door (%d)", scaled, len(httpDoors))
	}
}

// TestBenchCmd: a pass that measures the collector runs at GOGC=100 with
// no GOMEMLIMIT whatever the environment says, and the report shows each
// command as a shell runs it.
func TestBenchCmd(t *testing.T) {
	t.Setenv("GOGC", "off")
	t.Setenv("GOMEMLIMIT", "1GiB")
	o := options{keys: 1000}
	c := benchCmd{pattern: doorScaledPattern, benchtime: "100ms", count: 1, cpus: []int{1, 2}, gcDefaults: true}
	env := c.cmd(o, "bench.test").Env
	var gc []string
	for _, kv := range env {
		if strings.HasPrefix(kv, "GOGC=") || strings.HasPrefix(kv, "GOMEMLIMIT=") || strings.HasPrefix(kv, "ATOMICLIMIT_BENCH_KEYS=") {
			gc = append(gc, kv)
		}
	}
	if got, want := strings.Join(gc, " "), "GOGC=100 ATOMICLIMIT_BENCH_KEYS=1000"; got != want {
		t.Errorf("environment %s, want %s", got, want)
	}
	if got, want := c.String(o.keys), "env -u GOMEMLIMIT GOGC=100 ATOMICLIMIT_BENCH_KEYS=1000 bench.test -test.run='^$' -test.bench='^BenchmarkHTTPParallel$' -test.benchtime=100ms -test.count=1 -test.cpu=1,2 -test.timeout=60m"; got != want {
		t.Errorf("String() =\n%s\nwant\n%s", got, want)
	}
	// Without gcDefaults the environment is the run's own.
	plain := benchCmd{pattern: hotPattern, benchtime: "1x", count: 1}
	if env := plain.cmd(o, "bench.test").Env; !slices.Contains(env, "GOGC=off") {
		t.Errorf("a pass without gcDefaults does not inherit GOGC=off")
	}
	if got := plain.String(o.keys); strings.Contains(got, "GOGC") || strings.Contains(got, "-test.cpu") {
		t.Errorf("String() = %s: names a GC setting or core counts it does not set", got)
	}
	var log commandLog
	for range 3 {
		log.add("a")
		log.add("b")
	}
	log.add("c")
	if got, want := strings.Join(log.lines(), "; "), "a    # ×3; b    # ×3; c"; got != want {
		t.Errorf("lines() = %s, want %s", got, want)
	}
}
