// Command bench compares atomiclimit with the Go rate limiters people use,
// side by side on identical scenarios, and writes a report (BENCHMARKS.md,
// charts/ and raw/) that compares atomiclimit with the last committed run.
//
//	go -C bench run .           # the full comparison, about 5 minutes on 2 cores; report in bench/out/
//	go -C bench run . -quick    # one short pass (CI), under a minute
//	go -C bench run . -update   # a full run that rewrites the committed report in bench/
//
// The report goes to bench/out/ (ignored by git) unless -out says otherwise,
// so that a run leaves the tree clean; only -update writes the tracked
// bench/BENCHMARKS.md, bench/charts/ and bench/raw/.
//
// It runs this package's benchmarks with go test (statistics by benchstat's
// own packages, and benchstat's table in the report), then, in process, the
// latency percentiles of single decisions under contention and the accuracy
// of each algorithm under a virtual clock.
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
	fs.StringVar(&o.cpu, "cpu", "", "go test -cpu list for the benchmarks, e.g. 1,2,4,8,16 (a scaling chart per hot-key scenario); default: GOMAXPROCS only")
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

// cpus returns the core counts the benchmarks run at: the -cpu list, or
// GOMAXPROCS.
func (o *options) cpus() ([]int, error) {
	if o.cpu == "" {
		return []int{runtime.GOMAXPROCS(0)}, nil
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
	total := countBenchmarks() * len(cpus)
	fmt.Fprintf(os.Stderr, "[1/5] benchmarks: %d × %d runs of %s, %d keys\n", total, o.count, o.benchtime, o.keys)
	if err := goTest(o, rawPath, benchPattern, o.benchtime, o.count, total); err != nil {
		return nil, err
	}
	memCount := max(1, min(o.count, 3))
	fmt.Fprintf(os.Stderr, "[2/5] heap per key: %d implementations × %d runs\n", countMemory(), memCount)
	if err := goTest(o, memPath, "Memory", "1x", memCount, countMemory()); err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "[3/5] the doors (net/http middleware, gRPC interceptors): %d benchmarks of %s in %d rounds, one process a round\n", countDoors(), o.doorBenchtime(), o.count)
	if err := doorRounds(o, doorsPath); err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "[4/5] latency of single decisions on one hot key, %d scenarios: %d timed calls per implementation\n", len(hotScenarios), o.latCalls)
	lat, err := measureLatency(o.latCalls)
	if err != nil {
		return nil, err
	}
	if err := writeLatencyRaw(filepath.Join(o.out, "raw", "latency.txt"), lat); err != nil {
		return nil, err
	}
	fmt.Fprintln(os.Stderr, "[5/5] accuracy under a virtual clock, then the report")
	acc := measureAccuracy()
	res, info, err := readResults(rawPath, memPath, doorsPath)
	if err != nil {
		return nil, err
	}
	stat, err := benchstatTable(rawPath, doorsPath)
	if err != nil {
		stat = "benchstat failed: " + err.Error()
	}
	charts, err := drawCharts(o.out, res, cpus, lat, acc)
	if err != nil {
		return nil, err
	}
	return writeReport(o, res, info, base, lat, acc, stat, charts)
}

// goTest runs the benchmarks matching pattern in this package and writes
// their output to path, printing each result line as a progress step.
func goTest(o options, path, pattern, benchtime string, count, perCount int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	args := []string{"test", "-run=^$", "-bench=" + pattern, "-benchtime=" + benchtime, fmt.Sprintf("-count=%d", count), "-timeout=60m"}
	if o.cpu != "" && pattern == benchPattern {
		args = append(args, "-cpu="+o.cpu)
	}
	cmd := exec.Command("go", append(args, ".")...)
	cmd.Env = append(os.Environ(), fmt.Sprintf("ATOMICLIMIT_BENCH_KEYS=%d", o.keys))
	p := progress{all: perCount * count}
	if err := p.run(cmd, f); err != nil {
		return fmt.Errorf("go test -bench=%s: %w", pattern, err)
	}
	return nil
}

// A progress counts the result lines of benchmark processes against all.
type progress struct{ done, all int }

// run runs cmd, copies its output to f and prints each result line as a
// progress step.
func (p *progress) run(cmd *exec.Cmd, f *os.File) error {
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

// doorPattern selects the doors' benchmarks.
const doorPattern = "^Benchmark(HTTP|GRPC)$"

// doorRounds runs the doors' benchmarks in o.count rounds, one process of
// the compiled test binary a round, every implementation of every scenario
// once in each: a slow spell of a shared machine then falls on one round
// of all of them, not on every run of one. The output goes to path.
func doorRounds(o options, path string) error {
	dir, err := os.MkdirTemp("", "atomiclimit-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "bench.test")
	build := exec.Command("go", "test", "-c", "-o", bin, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("go test -c: %w", err)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	p := progress{all: countDoors() * o.count}
	for range o.count {
		cmd := exec.Command(bin, "-test.run=^$", "-test.bench="+doorPattern, "-test.benchtime="+o.doorBenchtime(), "-test.count=1", "-test.timeout=30m")
		if err := p.run(cmd, f); err != nil {
			return fmt.Errorf("%s -test.bench=%s: %w", bin, doorPattern, err)
		}
	}
	return nil
}

// doorBenchtime is the doors' -benchtime: half the limiters', since a
// request through a middleware takes a microsecond or more and a round's
// process makes each chain and its keys once, so that the six rounds fit
// the full run's time.
func (o options) doorBenchtime() string {
	d, err := time.ParseDuration(o.benchtime)
	if err != nil {
		return o.benchtime // an iteration count (…x): as given
	}
	return (d / 2).String()
}

// countDoors returns the number of the doors' sub-benchmarks in one round.
func countDoors() int {
	return len(httpScenarios)*len(httpDoors) + len(grpcScenarios)*len(grpcDoors)
}

// benchPattern selects the benchmarks of the main pass.
const benchPattern = "Serial|HotKey|Contended|Deny|Keys|Insert"

// countBenchmarks returns the number of sub-benchmarks one count runs.
func countBenchmarks() int {
	n := 0
	for _, p := range peers {
		if p.single != nil {
			n++ // Serial
		}
		for _, h := range hotScenarios {
			if h.runs(p) {
				n++
			}
		}
		if p.keyed != nil {
			n += 3 // Keys uniform, Keys zipf, Insert
		}
	}
	return n
}

func countMemory() int {
	n := 0
	for _, p := range peers {
		if p.keyed != nil && p.name != floorName {
			n++
		}
	}
	return n
}
