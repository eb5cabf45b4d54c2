package main

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/perf/benchfmt"
	"golang.org/x/perf/benchmath"
)

// A stat is the summary of one unit of one (scenario, implementation) pair
// over the runs: benchstat's center (the median) and its 95% interval.
type stat struct {
	center, lo, hi float64
	min, max       float64 // the extreme samples
	n              int
}

// results maps scenario → implementation → unit → stat. Units as go test
// prints them: ns/op, B/op, allocs/op, allowed/op, B/key.
type results map[string]map[string]map[string]stat

var procSuffix = regexp.MustCompile(`-\d+$`)

// cpuSuffix is the /cpu=N that readResults appends to a scenario measured at
// several core counts.
var cpuSuffix = regexp.MustCompile(`/cpu=(\d+)$`)

// splitProcs returns a scenario's name without its /cpu=N suffix, and N (0
// where the name has none: the run had one core count).
func splitProcs(sc string) (string, int) {
	m := cpuSuffix.FindStringSubmatch(sc)
	if m == nil {
		return sc, 0
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		return sc, 0
	}
	return strings.TrimSuffix(sc, m[0]), n
}

// withProcs is splitProcs' inverse: sc at n cores, or sc itself for n = 0.
func withProcs(sc string, n int) string {
	if n == 0 {
		return sc
	}
	return fmt.Sprintf("%s/cpu=%d", sc, n)
}

// A runInfo is what raw go test output says about the run besides the
// figures: the CPU (go test's "cpu:" line) and the GOMAXPROCS values (the
// names' -N suffixes).
type runInfo struct {
	cpu   string
	procs []int
}

func (i runInfo) procList() string {
	var s []string
	for _, p := range i.procs {
		s = append(s, strconv.Itoa(p))
	}
	return strings.Join(s, ",")
}

// readResults parses go test output files with benchstat's reader and
// summarises each sample with benchstat's statistics.
//
// A scenario measured at several core counts (go test -cpu=1,2,…) is split
// into one scenario per count, named with /cpu=N appended.
func readResults(paths ...string) (results, runInfo, error) {
	// scenario → GOMAXPROCS → impl → unit → values
	samples := map[string]map[int]map[string]map[string][]float64{}
	var info runInfo
	for _, path := range paths {
		f, err := os.Open(path)
		if err != nil {
			return nil, info, err
		}
		r := benchfmt.NewReader(f, path)
		for r.Scan() {
			res, ok := r.Result().(*benchfmt.Result)
			if !ok {
				continue
			}
			if cpu := strings.TrimSpace(res.GetConfig("cpu")); cpu != "" && info.cpu == "" {
				info.cpu = cpu
			}
			full := strings.TrimPrefix(res.Name.String(), "Benchmark")
			procs := 1 // go test names no suffix at GOMAXPROCS=1
			if m := procSuffix.FindString(full); m != "" {
				if n, err := strconv.Atoi(m[1:]); err == nil {
					procs = n
				}
			}
			if !slices.Contains(info.procs, procs) {
				info.procs = append(info.procs, procs)
			}
			name := procSuffix.ReplaceAllString(full, "")
			scenario, impl, found := strings.Cut(name, "/impl=")
			if !found {
				continue
			}
			impl = peerName(impl)
			if samples[scenario] == nil {
				samples[scenario] = map[int]map[string]map[string][]float64{}
			}
			if samples[scenario][procs] == nil {
				samples[scenario][procs] = map[string]map[string][]float64{}
			}
			if samples[scenario][procs][impl] == nil {
				samples[scenario][procs][impl] = map[string][]float64{}
			}
			for _, v := range res.Values {
				unit, value := v.Unit, v.Value
				if v.OrigUnit != "" {
					unit, value = v.OrigUnit, v.OrigValue
				}
				samples[scenario][procs][impl][unit] = append(samples[scenario][procs][impl][unit], value)
			}
		}
		f.Close()
		if err := r.Err(); err != nil {
			return nil, info, err
		}
	}
	slices.Sort(info.procs)
	out := results{}
	for sc, byProcs := range samples {
		for procs, impls := range byProcs {
			key := sc
			if len(byProcs) > 1 {
				key = withProcs(sc, procs)
			}
			out[key] = map[string]map[string]stat{}
			for impl, units := range impls {
				out[key][impl] = map[string]stat{}
				for unit, vals := range units {
					s := benchmath.AssumeNothing.Summary(benchmath.NewSample(vals, &benchmath.DefaultThresholds), 0.95)
					out[key][impl][unit] = stat{center: s.Center, lo: s.Lo, hi: s.Hi, min: slices.Min(vals), max: slices.Max(vals), n: len(vals)}
				}
			}
		}
	}
	return out, info, nil
}

// scenarios returns the scenario names in a stable, readable order: a
// scenario's core counts together and in numeric order (cpu=2 before
// cpu=16).
func (r results) scenarios() []string {
	order := func(s string) int {
		for i, p := range []string{"Serial", "HotKey", "Contended/rate=1e8", "Contended/rate=1e6", "Deny", "Keys/dist=uniform", "Keys/dist=zipf", "Insert", "Memory",
			"HTTP/ips=1/result=admitted", "HTTP/ips=1/result=denied", "HTTP/", "GRPC/result=admitted", "GRPC/"} {
			if strings.HasPrefix(s, p) {
				return i
			}
		}
		return 99
	}
	var names []string
	for s := range r {
		names = append(names, s)
	}
	sort.Slice(names, func(i, j int) bool {
		if order(names[i]) != order(names[j]) {
			return order(names[i]) < order(names[j])
		}
		a, pa := splitProcs(names[i])
		b, pb := splitProcs(names[j])
		if a != b {
			return a < b
		}
		return pa < pb
	})
	return names
}

// benchstatTable runs benchstat itself on each raw file, one column per
// implementation, for the report's appendix.
func benchstatTable(rawPaths ...string) (string, error) {
	var b strings.Builder
	for i, path := range rawPaths {
		cmd := exec.Command("go", "tool", "benchstat", "-col", "/impl", path)
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("benchstat %s: %w", path, err)
		}
		if i > 0 {
			b.WriteString("\n")
		}
		b.Write(out)
	}
	return b.String(), nil
}
