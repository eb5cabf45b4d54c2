package main

import (
	"fmt"
	"math"
	"strings"
)

// isDoor says whether scenario sc is one of the doors' (HTTP, one
// request at a time or from every core, or gRPC).
func isDoor(sc string) bool {
	return isHTTP(sc) || strings.HasPrefix(sc, "GRPC/")
}

// isHTTP says whether scenario sc is one of the HTTP door's.
func isHTTP(sc string) bool {
	return strings.HasPrefix(sc, "HTTP/") || strings.HasPrefix(sc, "HTTPParallel/")
}

// implNames returns the implementations of scenario sc in their tables'
// order: the HTTP or gRPC doors, or the limiters.
func implNames(sc string) []string {
	switch {
	case isHTTP(sc):
		return httpDoorNames()
	case strings.HasPrefix(sc, "GRPC/"):
		return grpcDoorNames()
	}
	names := make([]string, len(peers))
	for i, p := range peers {
		names[i] = p.name
	}
	return names
}

// fmtInterval is a 95% interval, or the number of runs where there are too
// few for one.
func fmtInterval(s stat, unit string) string {
	if math.IsInf(s.lo, 0) || math.IsInf(s.hi, 0) {
		return fmt.Sprintf("too few runs (%d)", s.n)
	}
	return fmt.Sprintf("%s – %s", fmtUnit(s.lo, unit), fmtUnit(s.hi, unit))
}

// writeDoors writes the section on the doors: a table per scenario with
// each implementation's time and allocations and what it costs over the
// floor, the same chain with no limiter; then the door with doorIPs
// clients at one core against its goal.
func writeDoors(w func(string, ...any), o options, res results, info runInfo, charts []chart) {
	var scs []string
	for _, sc := range res.scenarios() {
		if isDoor(sc) {
			scs = append(scs, sc)
		}
	}
	if len(scs) == 0 {
		return
	}
	cpus, _ := o.cpus()
	w("## Behind the doors: net/http middleware and gRPC interceptors\n\n")
	w("The limit behind the door a server puts it in, through the whole chain, in process, for atomiclimit's `httplimit` and `grpclimit`, each peer's own middleware, and a floor, the same chain with no limiter in it: one request (one call) at a time at GOMAXPROCS (`HTTP`, `GRPC`), and the HTTP door from every core at each core count of -cpu=%s (`HTTPParallel`). ", intList(cpus))
	w("These run in %s, as the single-key scenarios do, one process per command a round (`-test.bench='%s'`, then `-test.bench='%s' -test.cpu=%s`, `-test.benchtime=%s`), each making every implementation of every scenario in turn, so that a slow spell of the machine falls on one round of all of them rather than on every run of one. The figures are the medians over the rounds (raw output: `raw/doors.txt`). ", plural(float64(o.count), "round"), doorPattern, doorScaledPattern, intList(cpus), o.shortBenchtime())
	w("**The doors run at GOGC=100** with no GOMEMLIMIT, the runtime's defaults, set for their processes whatever the environment of the run says: with many clients, much of what a request costs is the collector's, and a caller's `GOGC=off` would hide it. ")
	w("_Over the floor_ is the implementation's median less the floor's: what the middleware adds to a request, in time and in allocations; the last column divides atomiclimit's by each one's.\n\n")
	writeDoorGoal(w, res, info)
	for _, sc := range scs {
		w("### %s\n\n%s (`%s`)\n\n", scenarioTitle(sc), doorNote(sc), sc)
		w("| implementation | ns/op (median) | 95%% interval | allowed/op | B/op | allocs/op | over the floor: ns | over the floor: allocs | atomiclimit ÷ this | atomiclimit ÷ this, over the floor |\n|---|---:|---|---:|---:|---:|---:|---:|---:|---:|\n")
		floor, hasFloor := res[sc][floorName]
		our := res[sc][ours]
		over := func(m map[string]stat, unit string) (float64, bool) {
			a, ok := m[unit]
			f, ok2 := floor[unit]
			return a.center - f.center, ok && ok2 && hasFloor
		}
		ourOver, ourOK := over(our, "ns/op")
		for _, name := range implNames(sc) {
			m, ok := res[sc][name]
			if !ok {
				continue
			}
			s := m["ns/op"]
			overNs, overAllocs, ratio, ratioOver := "—", "—", "—", "—"
			if name != floorName {
				if d, ok := over(m, "ns/op"); ok {
					overNs = fmtUnit(d, "ns/op")
					if name != ours && ourOK && d > 0 {
						ratioOver = fmtRatio(ourOver / d)
					}
				}
				if d, ok := over(m, "allocs/op"); ok {
					overAllocs = fmt.Sprintf("%+.0f", d)
				}
			}
			if name != ours && s.center > 0 {
				ratio = fmtRatio(our["ns/op"].center / s.center)
			}
			w("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", name, fmtUnit(s.center, "ns/op"), fmtInterval(s, "ns/op"),
				opt(m, "allowed/op", "%.3f"), opt(m, "B/op", "%.0f"), opt(m, "allocs/op", "%.0f"), overNs, overAllocs, ratio, ratioOver)
		}
		w("\n")
		writeCharts(w, chartsOf(charts, sc))
	}
}

// The goal for the HTTP door with doorIPs clients at one core, GOGC=100:
// at most doorGoalOver over the bare handler, and at least doorGoalPeers
// times less over it than every peer that writes rate-limit headers.
const (
	doorGoalOver  = 500.0 // ns
	doorGoalPeers = 3.0
)

// writeDoorGoal writes what the HTTP door with doorIPs clients costs over
// the bare handler at -cpu=1, ours and every header-writing peer, against
// the goal.
func writeDoorGoal(w func(string, ...any), res results, info runInfo) {
	sc := "HTTPParallel/" + httpParallel.name
	w("### The door with %s clients at one core\n\n", withCommas(fmt.Sprint(doorIPs)))
	m := res.at(info, sc, 1)
	floor, ok := m[floorName]["ns/op"]
	our, ok2 := m[ours]["ns/op"]
	if !ok || !ok2 {
		w("Not measured in this run: it needs `HTTPParallel` at -cpu=1.\n\n")
		return
	}
	ourOver := our.center - floor.center
	w("`%s` at -cpu=1, GOGC=100: what each header-writing middleware adds to a request over the bare handler (%s), from the medians. The goal: atomiclimit at most %.0f ns over the bare handler, and at least %.0f× less over it than every peer that writes rate-limit headers.\n\n", withProcs(sc, 1), fmtUnit(floor.center, "ns/op"), doorGoalOver, doorGoalPeers)
	w("| implementation | ns/op (median) | over the bare handler | this ÷ atomiclimit, over the bare handler |\n|---|---:|---:|---:|\n")
	least := math.Inf(1)
	leastName := ""
	for _, d := range httpDoors {
		s, ok := m[d.name]["ns/op"]
		if !ok || !d.headers {
			continue
		}
		over := s.center - floor.center
		ratio := "—"
		if d.name != ours {
			ratio = fmtRatio(over / ourOver)
			if over/ourOver < least {
				least, leastName = over/ourOver, d.name
			}
		}
		w("| %s | %s | %s | %s |\n", d.name, fmtUnit(s.center, "ns/op"), fmtUnit(over, "ns/op"), ratio)
	}
	met := func(ok bool) string {
		if ok {
			return "met"
		}
		return "**not met**"
	}
	w("\nIn this run: atomiclimit %s over the bare handler (at most %.0f ns: %s)", fmtUnit(ourOver, "ns/op"), doorGoalOver, met(ourOver <= doorGoalOver))
	if leastName != "" {
		w("; the nearest header-writing peer, %s, %s atomiclimit's (at least %.0f×: %s)", leastName, fmtRatio(least), doorGoalPeers, met(least >= doorGoalPeers))
	}
	w(". Medians over the rounds; the intervals are in the scenario's table below.\n\n")
}

// doorNote says what a door scenario measures.
func doorNote(sc string) string {
	const http = "`ServeHTTP` on a prebuilt GET request into an `httptest.ResponseRecorder` reset before each request (its header map and body buffer kept, so that the allocations counted are the chain's); every middleware keys on `RemoteAddr` and writes the headers it writes by default; the handler behind it writes a 200. The recorder's `WriteHeader` copies the header map, in every chain alike: each header a middleware writes costs there too, as it would in a server's response."
	const grpc = "The interceptor called as a gRPC server calls it, on a context that carries a peer address (TCP, one IP) and a server transport stream that merges headers as the HTTP/2 transport's does (reset before each call), as grpclimit's own benchmarks do; the floor is the handler called with no interceptor."
	switch {
	case strings.HasPrefix(sc, "HTTP/") && strings.HasSuffix(sc, "result=denied"):
		return http + " One client address, one request per hour, the one token spent before timing: every request is denied with the middleware's own 429 (atomiclimit's: `Retry-After` and a problem+json body). The floor serves its 200: over the floor is what a denial costs against serving the request."
	case strings.HasPrefix(sc, "HTTP/ips=1/"):
		return http + " One client address; a billion requests per second with a burst of 2^30: every request admitted."
	case strings.HasPrefix(sc, "HTTPParallel/"):
		_, procs := splitProcs(sc)
		cores := "one goroutine per core"
		if procs > 0 {
			cores = fmt.Sprintf("%s (-cpu=%d)", plural(float64(procs), "goroutine"), procs)
		}
		return http + fmt.Sprintf(" From every core: `b.RunParallel`, %s, each with its own recorder, serving the requests of %d client addresses (198.18.0.0/15) in turn from its own starting point, each key made before timing; every request admitted. ns/op is wall time divided by all the requests.", cores, doorIPs)
	case strings.HasPrefix(sc, "HTTP/"):
		return http + fmt.Sprintf(" One request at a time, from %d client addresses (198.18.0.0/15, the range set aside for benchmarks) in turn, each key made before timing; every request admitted.", doorIPs)
	case strings.HasSuffix(sc, "result=denied"):
		return grpc + " One peer, one call per hour, spent before timing: every call is denied with the interceptor's `ResourceExhausted` status (atomiclimit's carries `RetryInfo` and `QuotaFailure` details and sends the `ratelimit` and `ratelimit-policy` metadata; go-grpc-middleware's is a formatted message). The floor returns the handler's answer."
	}
	return grpc + " One peer; every call admitted."
}

// scenarioTitle says in words what scenario sc is, for the charts' titles.
func scenarioTitle(sc string) string {
	base, procs := splitProcs(sc)
	t := base
	if h, ok := hotScenarioOf(sc); ok {
		t = hotTitle(h)
	} else {
		switch {
		case base == "Serial":
			t = "One key, one goroutine: every call admitted"
		case strings.HasPrefix(base, "Keys/dist=uniform"):
			t = fmt.Sprintf("%s keys, each call a key drawn uniformly (mostly cache misses)", keysOf(base))
		case strings.HasPrefix(base, "Keys/dist=zipf"):
			t = fmt.Sprintf("%s keys, each call a key drawn by Zipf (s = 1.1): a hot set in cache", keysOf(base))
		case base == "Insert":
			t = "One goroutine, every call a key the limiter has not seen"
		case strings.HasPrefix(base, "Memory"):
			t = fmt.Sprintf("Heap bytes per key, %s keys", keysOf(base))
		case base == "HTTP/ips=1/result=admitted":
			t = "HTTP middleware, one client IP: every request admitted"
		case base == "HTTP/ips=1/result=denied":
			t = "HTTP middleware, one client IP: every request denied (429)"
		case strings.HasPrefix(base, "HTTP/ips="):
			t = fmt.Sprintf("HTTP middleware, %s client IPs in turn: every request admitted", keysOf(base))
		case strings.HasPrefix(base, "HTTPParallel/ips="):
			t = fmt.Sprintf("HTTP middleware from every core, %s client IPs: every request admitted", keysOf(base))
		case base == "GRPC/result=admitted":
			t = "gRPC unary interceptor, one peer IP: every call admitted"
		case base == "GRPC/result=denied":
			t = "gRPC unary interceptor, one peer IP: every call denied (ResourceExhausted)"
		}
	}
	if procs > 0 {
		t += ", " + plural(float64(procs), "core")
	}
	return t
}

// hotTitle says in words what a hot-key scenario is.
func hotTitle(h hotScenario) string {
	switch {
	case h.drain:
		return "One key from every core: every call denied"
	case h.s == admitAll:
		return "One key from every core: every call admitted"
	}
	return fmt.Sprintf("One key from every core at %s/s: %s", fmtPower(h.s.perSecond()), h.what)
}

// fmtPower writes a power of ten as 10^n, anything else as a number.
func fmtPower(v float64) string {
	if e := math.Log10(v); e == math.Trunc(e) && e > 3 {
		return fmt.Sprintf("10^%.0f", e)
	}
	return fmt.Sprintf("%g", v)
}

// keysOf is the count in a name's keys=N or ips=N, written with commas.
func keysOf(name string) string {
	for _, f := range strings.Split(name, "/") {
		if k, v, ok := strings.Cut(f, "="); ok && (k == "keys" || k == "ips") {
			return withCommas(v)
		}
	}
	return "many"
}

func withCommas(digits string) string {
	var b strings.Builder
	for i, c := range digits {
		if i > 0 && (len(digits)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
