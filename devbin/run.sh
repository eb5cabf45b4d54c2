#!/bin/bash
# Device run for issue 31 item 2: old (ad65114 = main + BenchmarkHotKey) against new, interleaved.
set -u
O=${OUT:-/tmp/out}; R=/tmp/res; mkdir -p "$O" "$R"
(nproc; lscpu | sed -n 1,16p; cat /proc/loadavg) > "$R/cpu.txt" 2>&1
cd devbin
t0=$(date +%s)
pack() { echo "$1 $(( $(date +%s) - t0 ))s" >> "$R/progress.txt"; tar -C "$R" -czf "$O/results.tgz" . ; }
for i in 1 2 3; do for v in old new; do
  ./$v.test -test.run='^$' -test.bench='^BenchmarkHotKey$/impl=keyed' -test.benchtime=100ms -test.cpu=1,2,4,8,16 >> "$R/hot-keyed-$v.txt" 2>&1
done; pack "hot keyed round $i"; done
for i in 1 2; do for v in old new; do
  ./$v-instr.test -test.run='^$' -test.bench='^BenchmarkRetries$' -test.benchtime=100ms -test.cpu=2,16 >> "$R/retries-$v.txt" 2>&1
done; done; pack retries
./old.test -test.run='^$' -test.bench='^BenchmarkParallel$/path=allow/clock=monotonic' -test.benchtime=100ms -test.cpu=1,16 > "$R/floor.txt" 2>&1; pack floor
for i in 1 2 3 4 5; do
  ./b53cfb49.test -test.run='^$' -test.bench='^BenchmarkKeyedAlgo$/path=(serial|hot)/algo=bands' -test.benchtime=1000000x -test.cpu=2 -test.short >> "$R/bands-53cfb49.txt" 2>&1
  for v in old new; do
    ./$v.test -test.run='^$' -test.bench='^BenchmarkKeyedAlgo$/path=(serial|hot)/algo=bands' -test.benchtime=1000000x -test.cpu=2 -test.short >> "$R/bands-$v.txt" 2>&1
  done
done; pack bands
for i in 1 2; do for v in old new; do
  ./$v.test -test.run='^$' -test.bench='^BenchmarkHotKey$/impl=limiter' -test.benchtime=100ms -test.cpu=1,2,16 >> "$R/hot-limiter-$v.txt" 2>&1
done; pack "hot limiter round $i"; done
