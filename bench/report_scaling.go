package main

import (
	"fmt"
	"runtime"
	"strings"
)

// cpuSource says where the run's core counts came from.
func cpuSource(o options) string {
	switch {
	case o.cpu != "":
		return "as -cpu asked"
	case o.quick:
		return "-quick: 1 and GOMAXPROCS only"
	}
	return fmt.Sprintf("the default: 1, 2, 4, … up to the %d logical CPUs, and their number itself", runtime.NumCPU())
}

// writeScaling writes the section on scaling with cores: the figure, then
// one table per scaling scenario with every implementation's ns/op at each
// core count the run measured.
func writeScaling(w func(string, ...any), res results, info runInfo, cpus []int, charts []chart) {
	panels := scalingPanels(info)
	if len(panels) == 0 {
		return
	}
	w("## Scaling with cores\n\n")
	w("Four scenarios at each core count of -cpu=%s: one key with every call admitted (`HotKey`) and every call denied (`Deny`), the keys drawn uniformly (`Keys/dist=uniform`) and the HTTP door serving %s clients from every core (`HTTPParallel`). ", intList(cpus), withCommas(fmt.Sprint(doorIPs)))
	w("Each is `b.RunParallel` with one goroutine per core (`go test -cpu`), so ns/op is wall time divided by all the calls: work that spreads over the cores halves it when the cores double, and a hot key's admissions cannot (each writes the same cache line), while its denials, which write nothing, can. ")
	if len(cpus) < 2 {
		w("This run measured one core count, so it draws no figure; the tables have one column.")
	}
	w("\n\n")
	writeCharts(w, chartsOf(charts, "scaling"))
	for _, p := range panels {
		w("### %s\n\n", p.title)
		w("| implementation |")
		for _, n := range cpus {
			w(" -cpu=%d |", n)
		}
		w(" -cpu=%d ÷ -cpu=%d |\n|---|%s---:|\n", cpus[len(cpus)-1], cpus[0], strings.Repeat("---:|", len(cpus)))
		for _, name := range p.names {
			var cells []string
			var first, last float64
			seen := false
			for i, n := range cpus {
				s, ok := res.at(info, p.sc, n)[name]["ns/op"]
				if !ok {
					cells = append(cells, "—")
					continue
				}
				seen = true
				cells = append(cells, fmtUnit(s.center, "ns/op"))
				if i == 0 {
					first = s.center
				}
				if i == len(cpus)-1 {
					last = s.center
				}
			}
			if !seen {
				continue
			}
			ratio := "—"
			if first > 0 && last > 0 && len(cpus) > 1 {
				ratio = fmtRatio(last / first)
			}
			w("| %s | %s | %s |\n", name, strings.Join(cells, " | "), ratio)
		}
		w("\n")
	}
	w("Medians; the intervals are in each scenario's own table below (the doors' in their section).\n\n")
}
