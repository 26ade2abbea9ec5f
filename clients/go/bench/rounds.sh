#!/usr/bin/env bash
# Interleaved rounds of the network benchmarks, for a shared, noisy machine: the test binary is built once, then
# run ROUNDS times over the whole set (each round: every cell's larder and incumbent runs side by side); each
# round's ratio incumbent-time / larder-time is taken per cell, and the table prints the median of those ratios
# (above 1: larder is faster), the medians of the same ratios of CPU time per op (cpu: the benchmark process's,
# server: the servers', bench/cpu_linux.go; above 1: larder causes less) and of the benchmark process's minor
# page faults per op (faults: memory the Go runtime returned to the system and touched again), and the median
# ns/op and allocs/op of each side. Every other round runs each cell's incumbent first
# (LARDER_BENCH_INCUMBENT_FIRST=1), so neither side always has the first, slower place; use an even ROUNDS.
# LARDER_BENCH_LIVE_HEAP_MIB=64 runs every cell over a live heap of that size, as in a service (liveHeap in
# bench_test.go says why it matters for the 64 KiB multi-gets).
#
#   ROUNDS=6 BENCHTIME=0.5s BENCH='Memcached|Redis' bash bench/rounds.sh      (from clients/go)
#
# MEMORY=1 runs the memory-store hit instead (BenchmarkMemoryHit: larder's memory store, a Cache.Fetch hit over
# a memory store, otter and ristretto; 1 and 50 goroutines) and prints each one's median ns/op and the median of
# the round ratios to otter's get (issue 21's target: the memory store's hit within 3x of otter's get):
#
#   MEMORY=1 ROUNDS=6 BENCHTIME=1s bash bench/rounds.sh
#
# Needs memcached and redis-server on PATH for the network cells (the benchmarks start them on loopback).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROUNDS="${ROUNDS:-6}"
BENCHTIME="${BENCHTIME:-0.5s}"
MEMORY="${MEMORY:-0}"
if [ "$MEMORY" = 1 ]; then BENCH="${BENCH:-MemoryHit}"; else BENCH="${BENCH:-Memcached|Redis}"; fi
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
go test -c -o "$out/bench.test" ./bench/
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); load average: $(cut -d' ' -f1-3 /proc/loadavg); rounds: $ROUNDS x $BENCHTIME"
for r in $(seq 1 "$ROUNDS"); do
    (cd bench && LARDER_BENCH_INCUMBENT_FIRST=$((1 - r % 2)) "$out/bench.test" -test.run XXX -test.bench "$BENCH" -test.benchtime "$BENCHTIME" \
        -test.benchmem -test.count 1) >"$out/round$r.txt"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
if [ "$MEMORY" = 1 ]; then
    python3 - "$out"/round*.txt <<'EOF'
import re, sys, statistics
line = re.compile(r'^BenchmarkMemoryHit/([\w-]+)/(g\d+)(?:-\d+)?\s+\d+\s+([\d.]+) ns/op')
rounds = []
for path in sys.argv[1:]:
    cells = {}
    for l in open(path):
        m = line.match(l)
        if m:
            cells[(m.group(1), m.group(2))] = float(m.group(3))
    rounds.append(cells)
print(f"{'who':14} {'g':4} {'ns/op':>8} {'x otter':>8}")
for g in sorted({k[1] for c in rounds for k in c}, key=lambda g: int(g[1:])):
    for who in ('larder-memory', 'larder-fetch', 'otter', 'ristretto'):
        ns = [c[(who, g)] for c in rounds if (who, g) in c]
        xs = [c[(who, g)] / c[('otter', g)] for c in rounds if (who, g) in c and c.get(('otter', g))]
        if ns:
            print(f"{who:14} {g:4} {statistics.median(ns):8.1f} {statistics.median(xs) if xs else float('nan'):8.2f}")
EOF
    exit 0
fi
python3 - "$out"/round*.txt <<'EOF'
import re, sys, statistics
line = re.compile(r'^Benchmark(\w+)/(\w[\w-]*)/([\w-]+)/(\w+)/(g\d+)(?:-\d+)?\s+\d+\s+([\d.]+) ns/op.*?(\d+) allocs/op')
def metric(name, l):
    m = re.search(r'([\d.]+) ' + name + r'\s', l)
    return float(m.group(1)) if m else 0.0
rounds = []
for path in sys.argv[1:]:
    cells = {}
    for l in open(path):
        m = line.match(l)
        if m:
            store, op, who, size, g, ns, allocs = m.groups()
            cells[(store, op, size, g, who)] = (float(ns), int(allocs), metric('cpu-ns/op', l), metric('server-cpu-ns/op', l),
                                                metric('faults/op', l))
    rounds.append(cells)
keys = sorted({k[:4] for c in rounds for k in c})
def ratio(k, i):
    rs = [c[k + (w,)][i] / c[k + ('larder',)][i] for c in rounds for w in ('gomemcache', 'go-redis')
          if k + (w,) in c and k + ('larder',) in c and c[k + ('larder',)][i] > 0]
    return statistics.median(rs) if rs else float('nan')
print(f"{'store':10} {'op':12} {'size':6} {'g':4} {'ratio':>6} {'cpu':>5} {'server':>6} {'faults':>6} {'larder ns':>10} {'incumb ns':>10} {'l allocs':>8} {'i allocs':>8}")
for k in keys:
    lard = [c[k + ('larder',)] for c in rounds if k + ('larder',) in c]
    inc = [(who, c[k + (who,)]) for c in rounds for who in ('gomemcache', 'go-redis') if k + (who,) in c]
    if not inc:
        ln = statistics.median(x[0] for x in lard)
        print(f"{k[0]:10} {k[1]:12} {k[2]:6} {k[3]:4} {'':>6} {'':>5} {'':>6} {'':>6} {ln:10.0f}")
        continue
    print(f"{k[0]:10} {k[1]:12} {k[2]:6} {k[3]:4} {ratio(k, 0):6.2f} {ratio(k, 2):5.2f} {ratio(k, 3):6.2f} {ratio(k, 4):6.2f} "
          f"{statistics.median(x[0] for x in lard):10.0f} {statistics.median(x[1][0] for x in inc):10.0f} "
          f"{statistics.median(x[1] for x in lard):8.0f} {statistics.median(x[1][1] for x in inc):8.0f}")
EOF
