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
// names' -N suffixes), of the whole run and of each scenario.
type runInfo struct {
	cpu   string
	procs []int
	// procsOf: each scenario's core counts, sorted, by its name without
	// /cpu=N.
	procsOf map[string][]int
}

// at returns the figures of scenario sc (named without /cpu=N) at n cores,
// nil where it did not run at n; see nameAt.
func (r results) at(info runInfo, sc string, n int) map[string]map[string]stat {
	name, ok := r.nameAt(info, sc, n)
	if !ok {
		return nil
	}
	return r[name]
}

// nameAt returns the name of scenario sc (named without /cpu=N) at n
// cores: sc/cpu=n, or sc itself where it ran at n cores alone and so
// carries no suffix; false where it did not run at n.
func (r results) nameAt(info runInfo, sc string, n int) (string, bool) {
	if _, ok := r[withProcs(sc, n)]; ok {
		return withProcs(sc, n), true
	}
	if ps := info.procsOf[sc]; len(ps) == 1 && ps[0] == n {
		_, ok := r[sc]
		return sc, ok
	}
	return "", false
}

// procsOfName returns the core count of scenario name sc: its /cpu=N, or
// the one count it ran at where it has no suffix (0 if not known).
func (i runInfo) procsOfName(sc string) (string, int) {
	base, n := splitProcs(sc)
	if n == 0 {
		if ps := i.procsOf[base]; len(ps) == 1 {
			n = ps[0]
		}
	}
	return base, n
}

// alignProcs returns the figures of base named as now names the same
// scenario at the same core count: a scenario that one run measured at
// several core counts (Deny/cpu=2) and the other at one (Deny, at 2) is
// the same measurement. Scenarios now does not have keep their names.
func alignProcs(base results, baseInfo runInfo, now results, nowInfo runInfo) results {
	type key struct {
		sc    string
		procs int
	}
	nowName := map[key]string{}
	for sc := range now {
		b, n := nowInfo.procsOfName(sc)
		nowName[key{b, n}] = sc
	}
	out := results{}
	for sc, m := range base {
		b, n := baseInfo.procsOfName(sc)
		if name, ok := nowName[key{b, n}]; ok && n > 0 {
			out[name] = m
		} else if _, taken := out[sc]; !taken {
			out[sc] = m
		}
	}
	return out
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
	info.procsOf = map[string][]int{}
	out := results{}
	for sc, byProcs := range samples {
		for procs := range byProcs {
			info.procsOf[sc] = append(info.procsOf[sc], procs)
		}
		slices.Sort(info.procsOf[sc])
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
			"HTTP/ips=1/result=admitted", "HTTP/ips=1/result=denied", "HTTP/", "HTTPParallel/", "GRPC/result=admitted", "GRPC/"} {
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
