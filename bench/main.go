// Command bench compares atomiclimit with the Go rate limiters people use,
// side by side on identical scenarios, and writes a report (BENCHMARKS.md,
// charts/ and raw/) that compares atomiclimit with the last committed run.
//
//	go -C bench run .           # the full comparison, about 10 minutes on 2 cores; report in bench/out/
//	go -C bench run . -quick    # one short pass (CI), under a minute
//	go -C bench run . -update   # a full run that rewrites the committed report in bench/
//
// The report goes to bench/out/ (ignored by git) unless -out says otherwise,
// so that a run leaves the tree clean; only -update writes the tracked
// bench/BENCHMARKS.md, bench/charts/ and bench/raw/.
//
// It runs this package's benchmarks from one test binary (go test -c;
// statistics by benchstat's own packages, and benchstat's table in the
// report): the single-key scenarios and the doors (net/http middleware,
// gRPC interceptors) in rounds, one process per command a round with
// every implementation once in each; the keyed scenarios in two
// processes; the heap and GC pass in one of its own; then, in process,
// the latency percentiles of single decisions under contention and the
// accuracy of each algorithm under a virtual clock. The scaling scenarios
// (one key admitted and denied, the keys drawn uniformly, the HTTP door
// from every core) run at every core count of -cpu, by default 1, 2, 4, …
// up to the logical CPUs and their number; the others at GOMAXPROCS. The
// doors and the heap and GC pass run at GOGC=100 with no GOMEMLIMIT,
// whatever the environment says.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

type options struct {
	quick     bool
	update    bool
	count     int
	benchtime string
	keys      int
	out       string
	baseline  string
	latCalls  int
	cpu       string
	testBin   string
}

// defaultOut is where a run writes its report unless told otherwise:
// bench/out/, which .gitignore lists.
const defaultOut = "out"

func main() {
	var o options
	o.register(flag.CommandLine)
	flag.Parse()
	if err := o.check(flag.CommandLine); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	if o.quick {
		o.count, o.benchtime, o.keys, o.latCalls = 1, "30ms", 100_000, 40_000
	}
	start := time.Now()
	flagged, err := run(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	report, err := filepath.Abs(filepath.Join(o.out, "BENCHMARKS.md"))
	if err != nil {
		report = filepath.Join(o.out, "BENCHMARKS.md")
	}
	if len(flagged) > 0 {
		fmt.Fprintf(os.Stderr, "against the committed run, flagged as regressions: %s\n", strings.Join(flagged, ", "))
	}
	fmt.Fprintf(os.Stderr, "done in %v; report: %s\n", time.Since(start).Round(time.Second), report)
}

// register defines the command's flags on fs, with o's fields behind them.
func (o *options) register(fs *flag.FlagSet) {
	fs.BoolVar(&o.quick, "quick", false, "one short pass: 100k keys, one count, short benchtime (CI)")
	fs.BoolVar(&o.update, "update", false, "rewrite the committed report: write BENCHMARKS.md, charts/ and raw/ into bench/ itself (a full run at the default -count, -benchtime, -keys and -latency-calls; commit the result)")
	fs.IntVar(&o.count, "count", 6, "runs of each benchmark (medians are reported; benchstat needs 6 for a 95% interval)")
	fs.StringVar(&o.benchtime, "benchtime", "200ms", "go test -benchtime for each run")
	fs.IntVar(&o.keys, "keys", 1_000_000, "keys in the keyed scenarios")
	fs.StringVar(&o.out, "out", defaultOut, "directory for BENCHMARKS.md, charts/ and raw/ (bench/out/ is ignored by git)")
	fs.StringVar(&o.baseline, "baseline", ".", "directory of the committed run to compare with (its raw/bench.txt and raw/memory.txt)")
	fs.IntVar(&o.latCalls, "latency-calls", 400_000, "timed calls per implementation in the latency harness")
	fs.StringVar(&o.testBin, "test-binary", "", "this package's test binary, built beforehand (go test -c), for a machine without Go; default: built by the run")
	fs.StringVar(&o.cpu, "cpu", "", "core counts of the scaling scenarios (HotKey, Deny, 1M uniform keys, HTTPParallel), a go test -cpu list such as 1,2,4,8,16; default: 1, 2, 4, … up to the logical CPUs and their number itself (-quick: 1 and GOMAXPROCS); the other scenarios run at GOMAXPROCS")
}

// check validates the flags parsed by fs: -update writes the tracked
// files, which a later run compares with, so it takes a full run at the
// default run counts and sizes, and no other destination.
func (o *options) check(fs *flag.FlagSet) error {
	if !fileExists("bench_test.go") {
		return errNotBenchDir
	}
	outSet := false
	var changed []string
	fs.Visit(func(f *flag.Flag) {
		outSet = outSet || f.Name == "out"
		switch f.Name {
		case "count", "keys", "benchtime", "latency-calls":
			if f.Value.String() != f.DefValue {
				changed = append(changed, fmt.Sprintf("-%s=%s", f.Name, f.Value))
			}
		}
	})
	if _, err := o.cpus(); err != nil {
		return err
	}
	if o.update {
		if outSet {
			return errors.New("-update writes into bench/ itself: drop -out")
		}
		if o.quick {
			return errors.New("-update takes a full run: the committed report is not a -quick one")
		}
		if len(changed) > 0 {
			return fmt.Errorf("-update takes a full run at the defaults (the committed run is what later runs compare with, and its intervals need the default count): drop %s", strings.Join(changed, " "))
		}
		o.out = "."
	}
	return nil
}

// cpus returns the core counts the scaling scenarios run at: the -cpu
// list; by default the powers of two below the logical CPUs and their
// number itself (defaultCPUs); with -quick only the two ends, 1 and
// GOMAXPROCS, the least that still draws the scaling chart.
func (o *options) cpus() ([]int, error) {
	if o.cpu == "" {
		if o.quick {
			return quickCPUs(runtime.GOMAXPROCS(0)), nil
		}
		return defaultCPUs(runtime.NumCPU()), nil
	}
	var ns []int
	for _, f := range strings.Split(o.cpu, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-cpu=%s: %q is not a core count", o.cpu, f)
		}
		if !slices.Contains(ns, n) {
			ns = append(ns, n)
		}
	}
	slices.Sort(ns)
	return ns, nil
}

// defaultCPUs returns 1, 2, 4, … up to n, and n itself where it is not a
// power of two: 1,2,4,6 for 6.
func defaultCPUs(n int) []int {
	var ns []int
	for c := 1; c < n; c *= 2 {
		ns = append(ns, c)
	}
	return append(ns, max(n, 1))
}

// quickCPUs returns 1 and procs, or 1 alone where procs is 1.
func quickCPUs(procs int) []int {
	if procs <= 1 {
		return []int{1}
	}
	return []int{1, procs}
}

func run(o options) ([]string, error) {
	// First, before anything is written: with -update, the files to
	// compare with are the ones this run replaces.
	base := loadBaseline(o.baseline)
	for _, dir := range []string{o.out, filepath.Join(o.out, "charts"), filepath.Join(o.out, "raw")} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
	}
	// Charts of scenarios a run no longer has would stay beside the new
	// ones (and, with -update, in the tree): start from an empty set.
	old, err := filepath.Glob(filepath.Join(o.out, "charts", "*.png"))
	if err != nil {
		return nil, err
	}
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			return nil, err
		}
	}
	rawPath := filepath.Join(o.out, "raw", "bench.txt")
	memPath := filepath.Join(o.out, "raw", "memory.txt")
	doorsPath := filepath.Join(o.out, "raw", "doors.txt")
	cpus, _ := o.cpus()
	start := time.Now()
	step := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%s (at %v)\n", fmt.Sprintf(format, args...), time.Since(start).Round(time.Second))
	}
	bin := o.testBin
	if bin == "" {
		b, err := buildTestBinary()
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(filepath.Dir(b))
		bin = b
	} else if bin, err = filepath.Abs(bin); err != nil {
		return nil, err
	}
	raw, err := os.Create(rawPath)
	if err != nil {
		return nil, err
	}
	defer raw.Close()
	var log commandLog
	hot := []benchCmd{
		{pattern: hotPattern, benchtime: o.benchtime, count: 1},
		{pattern: hotScaledPattern, benchtime: o.benchtime, count: 1, cpus: cpus},
	}
	hotFixed, hotScaled := countHot()
	step("[1/6] one key: %d benchmarks of %s in %s, one round two processes (HotKey and Deny at -cpu=%s)", hotFixed+hotScaled*len(cpus), o.benchtime, plural(float64(o.count), "round"), intList(cpus))
	if err := rounds(o, bin, raw, &log, o.count, hotFixed+hotScaled*len(cpus), hot); err != nil {
		return nil, err
	}
	keyedFixed, keyedScaled := countKeyed()
	keyed := []benchCmd{
		{pattern: keyedPattern, benchtime: o.keyedBenchtime(), count: o.count},
		{pattern: keyedScaledPattern, benchtime: o.keyedBenchtime(), count: o.count, cpus: cpus},
	}
	step("[2/6] keyed: %d benchmarks × %d runs of %s, %d keys, in two processes (uniform keys at -cpu=%s)", keyedFixed+keyedScaled*len(cpus), o.count, o.keyedBenchtime(), o.keys, intList(cpus))
	p := progress{all: (keyedFixed + keyedScaled*len(cpus)) * o.count, log: &log}
	for _, c := range keyed {
		if err := p.run(c.cmd(o, bin), c.String(o.keys), raw); err != nil {
			return nil, fmt.Errorf("-test.bench=%s: %w", c.pattern, err)
		}
	}
	gc := o.memoryCmd()
	step("[3/6] heap and the collector, %d keys held: %d stores × %d runs", o.keys, countMemory(), gc.count)
	mem, err := os.Create(memPath)
	if err != nil {
		return nil, err
	}
	defer mem.Close()
	p = progress{all: countMemory() * gc.count, log: &log}
	if err := p.run(gc.cmd(o, bin), gc.String(o.keys), mem); err != nil {
		return nil, fmt.Errorf("-test.bench=%s: %w", gc.pattern, err)
	}
	doorsFixed, doorsScaled := countDoors()
	step("[4/6] the doors (net/http middleware, gRPC interceptors) at GOGC=100: %d benchmarks of %s in %s, one round two processes (HTTPParallel at -cpu=%s)", doorsFixed+doorsScaled*len(cpus), o.shortBenchtime(), plural(float64(o.count), "round"), intList(cpus))
	doors, err := os.Create(doorsPath)
	if err != nil {
		return nil, err
	}
	defer doors.Close()
	doorCmds := []benchCmd{
		{pattern: doorPattern, benchtime: o.shortBenchtime(), count: 1, gcDefaults: true},
		{pattern: doorScaledPattern, benchtime: o.shortBenchtime(), count: 1, cpus: cpus, gcDefaults: true},
	}
	if err := rounds(o, bin, doors, &log, o.count, doorsFixed+doorsScaled*len(cpus), doorCmds); err != nil {
		return nil, err
	}
	step("[5/6] latency of single decisions on one hot key, %d scenarios: %d timed calls per implementation", len(hotScenarios), o.latCalls)
	lat, err := measureLatency(o.latCalls)
	if err != nil {
		return nil, err
	}
	if err := writeLatencyRaw(filepath.Join(o.out, "raw", "latency.txt"), lat); err != nil {
		return nil, err
	}
	step("[6/6] accuracy under a virtual clock, then the report")
	acc := measureAccuracy()
	res, info, err := readResults(rawPath, memPath, doorsPath)
	if err != nil {
		return nil, err
	}
	stat, err := benchstatTable(rawPath, doorsPath)
	if err != nil {
		stat = "benchstat failed: " + err.Error()
	}
	charts, err := drawCharts(o.out, res, info, cpus, lat, acc)
	if err != nil {
		return nil, err
	}
	return writeReport(o, res, info, base, lat, acc, stat, charts, log.lines())
}

// buildTestBinary compiles this package's tests once (go test -c) into a
// temporary directory, for every pass of the run, and returns its path.
func buildTestBinary() (string, error) {
	dir, err := os.MkdirTemp("", "atomiclimit-bench-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "bench.test")
	build := exec.Command("go", "test", "-c", "-o", bin, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("go test -c: %w", err)
	}
	return bin, nil
}

// A benchCmd is one process of the test binary: the benchmarks matching
// pattern, count times each, at the core counts cpus (none: at GOMAXPROCS
// as the process finds it).
type benchCmd struct {
	pattern, benchtime string
	count              int
	cpus               []int
	// gcDefaults: the process runs with GOGC=100 and no GOMEMLIMIT, the
	// runtime's defaults, whatever the environment of the run says, since
	// its figures include what the collector costs.
	gcDefaults bool
}

func (c benchCmd) args() []string {
	args := []string{"-test.run=^$", "-test.bench=" + c.pattern, "-test.benchtime=" + c.benchtime, fmt.Sprintf("-test.count=%d", c.count)}
	if len(c.cpus) > 0 {
		args = append(args, "-test.cpu="+intList(c.cpus))
	}
	return append(args, "-test.timeout=60m")
}

// cmd returns the process that runs c with the test binary bin.
func (c benchCmd) cmd(o options, bin string) *exec.Cmd {
	cmd := exec.Command(bin, c.args()...)
	env := os.Environ()
	if c.gcDefaults {
		env = slices.DeleteFunc(env, func(kv string) bool {
			return strings.HasPrefix(kv, "GOGC=") || strings.HasPrefix(kv, "GOMEMLIMIT=")
		})
		env = append(env, "GOGC=100")
	}
	cmd.Env = append(env, fmt.Sprintf("ATOMICLIMIT_BENCH_KEYS=%d", o.keys))
	return cmd
}

// String is c as a shell command, for the report: what cmd runs, with
// keys keys, the environment it sets included.
func (c benchCmd) String(keys int) string {
	var b strings.Builder
	if c.gcDefaults {
		b.WriteString("env -u GOMEMLIMIT GOGC=100 ")
	}
	fmt.Fprintf(&b, "ATOMICLIMIT_BENCH_KEYS=%d bench.test", keys)
	for _, a := range c.args() {
		b.WriteString(" " + shellArg(a))
	}
	return b.String()
}

// shellArg quotes the value of a -flag=value argument where a shell would
// read it otherwise.
func shellArg(a string) string {
	k, v, ok := strings.Cut(a, "=")
	if !ok || !strings.ContainsAny(v, "^$|()[]*?{}\\ '\"&;<>") {
		return a
	}
	return k + "='" + strings.ReplaceAll(v, "'", `'\''`) + "'"
}

// A commandLog is the commands a run ran, in the order first run, each
// with the number of times it ran.
type commandLog struct {
	order []string
	times map[string]int
}

func (l *commandLog) add(cmd string) {
	if l.times == nil {
		l.times = map[string]int{}
	}
	if l.times[cmd] == 0 {
		l.order = append(l.order, cmd)
	}
	l.times[cmd]++
}

// lines returns the commands, each with how many times it ran where it ran
// more than once.
func (l *commandLog) lines() []string {
	var out []string
	for _, c := range l.order {
		if n := l.times[c]; n > 1 {
			c = fmt.Sprintf("%s    # ×%d", c, n)
		}
		out = append(out, c)
	}
	return out
}

// rounds runs the processes cmds in count rounds, each of them once a
// round, in order, every process running each of its benchmarks once
// (perRound benchmarks in all), and writes their output to f. A slow spell
// of a shared machine then falls on one round of all of them, not on every
// run of one.
func rounds(o options, bin string, f *os.File, log *commandLog, count, perRound int, cmds []benchCmd) error {
	p := progress{all: perRound * count, log: log}
	for range count {
		for _, c := range cmds {
			if err := p.run(c.cmd(o, bin), c.String(o.keys), f); err != nil {
				return fmt.Errorf("-test.bench=%s: %w", c.pattern, err)
			}
		}
	}
	return nil
}

// A progress counts the result lines of benchmark processes against all,
// and logs the commands it runs.
type progress struct {
	done, all int
	log       *commandLog
}

// run runs cmd, logged as line, copies its output to f and prints each
// result line as a progress step.
func (p *progress) run(cmd *exec.Cmd, line string, f *os.File) error {
	p.log.add(line)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		fmt.Fprintln(f, line)
		if strings.HasPrefix(line, "Benchmark") && strings.Contains(line, "\t") {
			p.done++
			fields := strings.Fields(line)
			fmt.Fprintf(os.Stderr, "  %3d/%d  %-60s %s %s\n", p.done, p.all, fields[0], fields[2], fields[3])
		}
	}
	return cmd.Wait()
}

// The patterns of the passes. The scaling scenarios run at every core
// count of the -cpu list: one key admitted (HotKey) and denied (Deny), a
// million keys drawn uniformly, and the HTTP door with 100,000 clients from
// every core (HTTPParallel); the others at GOMAXPROCS. The single-key
// scenarios and the doors run in rounds; the keyed scenarios in two
// processes, each implementation's runs back to back, since a round would
// build their million-key fixtures anew; the heap and GC pass in a process
// of its own, so that no other fixture is in the heap it measures.
const (
	hotPattern         = "^Benchmark(Serial|Contended)$"
	hotScaledPattern   = "^Benchmark(HotKey|Deny)$"
	keyedPattern       = "^Benchmark(Keys|Insert)$/^(dist=zipf|impl=)" // Insert's sub-benchmarks are impl=…
	keyedScaledPattern = "^BenchmarkKeys$/^dist=uniform$"
	memoryPattern      = "^BenchmarkMemory$"
	doorPattern        = "^Benchmark(HTTP|GRPC)$"
	doorScaledPattern  = "^BenchmarkHTTPParallel$"
)

// memoryCmd is the heap and GC pass: every store once per run, at most 3
// runs (heap bytes vary by under 0.1% between runs), at the runtime's GC
// defaults.
func (o options) memoryCmd() benchCmd {
	return benchCmd{pattern: memoryPattern, benchtime: "1x", count: max(1, min(o.count, 3)), gcDefaults: true}
}

// shortBenchtime is the doors' -benchtime: half the single-key
// scenarios'. A request through a middleware takes a microsecond or more,
// so that 100 ms still holds 10^5 of them, and six rounds of the doors
// then take under a minute.
func (o options) shortBenchtime() string {
	d, err := time.ParseDuration(o.benchtime)
	if err != nil {
		return o.benchtime // an iteration count (…x): as given
	}
	return (d / 2).String()
}

// keyedBenchtime is the keyed scenarios' -benchtime: a fixed count of
// calls, one per microsecond of -benchtime (200000x for 200ms), the same
// calls on the same keys for every implementation. The testing package
// collects garbage before each timed run, and with a million keys in the
// fixtures and the limiter that takes up to a second on two loaded cores:
// a count takes two runs a result line where a duration takes four or
// five to find its count. (On the 2-core machine of the committed run,
// with other builds running, the keyed pass took 248 s at 200ms, 172-177 s
// at 100ms and 114 s at 200000x.)
func (o options) keyedBenchtime() string {
	d, err := time.ParseDuration(o.benchtime)
	if err != nil {
		return o.benchtime
	}
	return fmt.Sprintf("%dx", max(1, d/time.Microsecond))
}

// countDoors returns the number of the doors' sub-benchmarks in one round
// at GOMAXPROCS (fixed) and at each core count of the list (scaled).
func countDoors() (fixed, scaled int) {
	return len(httpScenarios)*len(httpDoors) + len(grpcScenarios)*len(grpcDoors), len(httpDoors)
}

// countHot returns the number of single-key sub-benchmarks in one round at
// GOMAXPROCS (fixed) and at each core count of the list (scaled).
func countHot() (fixed, scaled int) {
	for _, p := range peers {
		if p.single != nil {
			fixed++ // Serial
		}
		for _, h := range hotScenarios {
			switch {
			case !h.runs(p):
			case h.scales():
				scaled++
			default:
				fixed++
			}
		}
	}
	return fixed, scaled
}

// countKeyed returns the number of keyed sub-benchmarks one count runs at
// GOMAXPROCS (fixed) and at each core count of the list (scaled).
func countKeyed() (fixed, scaled int) {
	for _, p := range peers {
		if p.keyed != nil {
			fixed += 2 // Keys zipf, Insert
			scaled++   // Keys uniform
		}
	}
	return fixed, scaled
}

// countMemory returns the number of stores the heap and GC pass measures.
func countMemory() int { return len(heldStores()) }
