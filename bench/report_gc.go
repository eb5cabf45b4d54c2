package main

import (
	"fmt"
	"os"
	"strings"
)

// writeHeld writes the section on what holding keys costs, from the heap
// and GC pass (BenchmarkMemory, scenario sc): one row per store, the keys
// alone first, with the heap bytes and objects each key adds and the time
// of a forced collection against the keys alone.
func writeHeld(w func(string, ...any), o options, res results, info runInfo, sc string, charts []chart) {
	keys := keysOf(sc)
	w("## Heap and the garbage collector: %s keys held\n\n", keys)
	w("What a store costs the process that holds it, beside the keys themselves. One process (`-test.bench='%s' -test.benchtime=1x`, GOGC=100, at -cpu=%s) builds %s string keys (`user-0000000` …) and holds them in a slice throughout, as every row does; for each store in turn, %s: ", memoryPattern, intList(info.procsOf[sc]), keys, plural(float64(o.memoryCmd().count), "run"))
	w("two collections, then the median time of five forced full collections (`runtime.GC()`) with the keys alone; the store filled with one call per key (every limiter admits it and keeps the key's state for an hour, so no sweeper or expiry drops a key while it is measured), two collections, then five more forced collections with the store holding the keys. ")
	w("_Bytes_ and _objects per key_ are the growth of `runtime.MemStats.HeapAlloc` and `HeapObjects` between the two readings over the keys: what the store adds, the keys' own bytes excluded (they were built before the first reading; a store that copies a key pays for the copy). ")
	w("_GC ÷ keys alone_ is the collection with the store over the collection with the keys alone, both in the same run: the collector's work for the store against its work for the keys. Each figure is the median of the runs; the row `%s` has no store, so its ratio is the method's own noise. `%s` is not a limiter: the plainest lock-free store of one word per key.\n\n", keysAloneName, xsyncStoreName)
	w("| store | bytes per key | heap objects per key | forced GC, store and keys | forced GC, keys alone (same run) | GC ÷ keys alone | atomiclimit ÷ this, bytes |\n|---|---:|---:|---:|---:|---:|---:|\n")
	our := res[sc][ours]["B/key"]
	for _, st := range heldStores() {
		m, ok := res[sc][st.name]
		if !ok {
			continue
		}
		name := st.name
		if !st.limiter && st.name != keysAloneName {
			name += " (not a limiter)"
		}
		ratio := "—"
		if b := m["B/key"]; st.name != ours && b.center > 0 && our.center > 0 {
			ratio = fmtRatio(our.center / b.center)
		}
		w("| %s | %s | %s | %s | %s | %s | %s |\n", name, opt(m, "B/key", "%.1f B"), opt(m, "objects/key", "%.2f"),
			opt(m, "gc-ms", "%.1f ms"), opt(m, "keys-gc-ms", "%.1f ms"), opt(m, "gc/keys", "%.2f×"), ratio)
	}
	w("\n%s\n\n", scenarioNote(sc))
	writeCharts(w, chartsOf(charts, sc))
}

// gcEnv says what this process's environment sets for the collector, as
// the passes that inherit it find it.
func gcEnv() string {
	var parts []string
	for _, v := range []string{"GOGC", "GOMEMLIMIT"} {
		if s, ok := os.LookupEnv(v); ok {
			parts = append(parts, fmt.Sprintf("%s=%s", v, s))
		} else {
			parts = append(parts, v+" unset")
		}
	}
	return strings.Join(parts, ", ")
}
