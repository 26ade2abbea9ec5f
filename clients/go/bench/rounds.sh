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
# The structured values (BenchmarkStructured, issue 34: query results as maps and as structs of 1 and 64 KiB, a
# nested document, a page; larder's Cache against gomemcache, go-redis and otter with encoding/json) run with the
# network cells by default; BENCH=Structured runs them alone.
#
# --raw FILE appends every round of every network cell to FILE in bench/report.py's raw format (bench "go": ops/s,
# client and server CPU ns per op; a target of 1.0x each cell's incumbent in ops/s):
#
#   ROUNDS=8 BENCHTIME=0.3s bash bench/rounds.sh --raw /tmp/raw.jsonl
#
# Needs memcached and redis-server on PATH for the network cells (the benchmarks start them on loopback).
set -euo pipefail
RAW=""
while [ $# -gt 0 ]; do
    case "$1" in
        --raw) RAW="$(realpath -m "$2")"; shift 2 ;;
        *) echo "rounds.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROUNDS="${ROUNDS:-6}"
BENCHTIME="${BENCHTIME:-0.5s}"
MEMORY="${MEMORY:-0}"
if [ "$MEMORY" = 1 ]; then BENCH="${BENCH:-MemoryHit}"; else BENCH="${BENCH:-Memcached|Redis|Structured}"; fi
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
go test -c -o "$out/bench.test" ./bench/
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); load average: $(cut -d' ' -f1-3 /proc/loadavg); rounds: $ROUNDS x $BENCHTIME"
for r in $(seq 1 "$ROUNDS"); do
    (cd bench && LARDER_BENCH_INCUMBENT_FIRST=$((1 - r % 2)) "$out/bench.test" -test.run XXX -test.bench "$BENCH" -test.benchtime "$BENCHTIME" \
        -test.benchmem -test.count 1) >"$out/round$r.txt"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
# One parser for both reports: each result line's cell (the benchmark's name split at '/', without the GOMAXPROCS
# suffix) and its metrics by unit; then the memory-store rows (MEMORY=1) or the network cells' ratios.
python3 - "$MEMORY" "$RAW" "ROUNDS=$ROUNDS BENCHTIME=$BENCHTIME BENCH='$BENCH' bash clients/go/bench/rounds.sh" "$out"/round*.txt <<'EOF'
import json, re, sys, statistics, time
result = re.compile(r'^Benchmark(\w+)/(\S+?)(?:-\d+)?\s+\d+\s+(.*)$')
rounds = []
raw_path, command = sys.argv[2], sys.argv[3]
for path in sorted(sys.argv[4:], key=lambda p: int(re.search(r'round(\d+)', p).group(1))):
    cells = {}
    for l in open(path):
        m = result.match(l)
        if m:
            metrics = {unit: float(v) for v, unit in re.findall(r'([\d.]+) (\S+)', m.group(3))}
            cells[(m.group(1),) + tuple(m.group(2).split('/'))] = metrics
    rounds.append(cells)
med = statistics.median
if sys.argv[1] == '1':  # cells (MemoryHit, who, g)
    print(f"{'who':14} {'g':4} {'ns/op':>8} {'x otter':>8}")
    for g in sorted({k[2] for c in rounds for k in c if len(k) == 3}, key=lambda g: int(g[1:])):
        otter = ('MemoryHit', 'otter', g)
        for who in ('larder-memory', 'larder-fetch', 'otter', 'ristretto'):
            k = ('MemoryHit', who, g)
            ns = [c[k]['ns/op'] for c in rounds if k in c]
            xs = [c[k]['ns/op'] / c[otter]['ns/op'] for c in rounds if k in c and c.get(otter, {}).get('ns/op')]
            if ns:
                print(f"{who:14} {g:4} {med(ns):8.1f} {med(xs) if xs else float('nan'):8.2f}")
    sys.exit(0)
# cells (store, op, who, size, g): a row per (store, op, size, g) with larder's side and the incumbent's
incumbents = ('gomemcache', 'go-redis', 'otter')
def side(k, who):
    return (k[0], k[1], who, k[2], k[3])
def ratio(k, unit):
    rs = [c[side(k, w)].get(unit, 0) / c[side(k, 'larder')][unit] for c in rounds for w in incumbents
          if side(k, w) in c and c.get(side(k, 'larder'), {}).get(unit, 0) > 0]
    return med(rs) if rs else float('nan')
keys = sorted({(k[0], k[1], k[3], k[4]) for c in rounds for k in c if len(k) == 5})
print(f"{'store':10} {'op':12} {'size':6} {'g':4} {'ratio':>6} {'cpu':>5} {'server':>6} {'faults':>6} {'larder ns':>10} {'incumb ns':>10} {'l allocs':>8} {'i allocs':>8}")
for k in keys:
    lard = [c[side(k, 'larder')] for c in rounds if side(k, 'larder') in c]
    inc = [c[side(k, w)] for c in rounds for w in incumbents if side(k, w) in c]
    if not inc:
        print(f"{k[0]:10} {k[1]:12} {k[2]:6} {k[3]:4} {'':>6} {'':>5} {'':>6} {'':>6} {med(x['ns/op'] for x in lard):10.0f}")
        continue
    print(f"{k[0]:10} {k[1]:12} {k[2]:6} {k[3]:4} {ratio(k, 'ns/op'):6.2f} {ratio(k, 'cpu-ns/op'):5.2f} "
          f"{ratio(k, 'server-cpu-ns/op'):6.2f} {ratio(k, 'faults/op'):6.2f} "
          f"{med(x['ns/op'] for x in lard):10.0f} {med(x['ns/op'] for x in inc):10.0f} "
          f"{med(x.get('allocs/op', 0) for x in lard):8.0f} {med(x.get('allocs/op', 0) for x in inc):8.0f}")
if raw_path:
    # bench/report.py's raw rows: one per side, cell and round; a cell's case names its store, op, value and g.
    def case(k):
        return f"{k[1].replace('-', ' ')} {k[2]}" if k[0] == 'Structured' else f"{k[0].lower()} {k[1]} {k[2]} {k[3]}"
    rows, targets, pairs = [], [], []
    for r, c in enumerate(rounds, 1):
        for k, m in c.items():
            if len(k) != 5 or not m.get('ns/op'):
                continue
            rows.append({"bench": "go", "case": case((k[0], k[1], k[3], k[4])), "subject": k[2], "round": r,
                         "ops": 1e9 / m['ns/op'], "cpu_ns": m.get('cpu-ns/op', -1),
                         "server_cpu_ns": m.get('server-cpu-ns/op', -1)})
    for k in keys:
        for w in incumbents:
            if any(side(k, w) in c for c in rounds):
                targets.append({"case": case(k), "vs": w, "metric": "ops", "ratio": 1.0})
                if {"subject": "larder", "vs": w} not in pairs:
                    pairs.append({"subject": "larder", "vs": w})
    meta = {"meta": True, "bench": "go",
            "title": "Go client: larder's stores and Cache against gomemcache, go-redis and otter (bytes and structured values)",
            "command": command, "date": time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime()),
            "setup": "one process, larder and the incumbent side by side per cell (order alternating by round); "
                     "structured values JSON-encoded for the incumbents; CPU ns/op from getrusage (client) and /proc (servers)",
            "subject": "larder", "metrics": [{"name": "ops", "label": "ops/s", "better": "higher"},
                                             {"name": "cpu_ns", "label": "client CPU ns/op", "better": "lower"},
                                             {"name": "server_cpu_ns", "label": "server CPU ns/op", "better": "lower"}],
            "pairs": pairs, "targets": targets}
    with open(raw_path, 'a') as f:
        for line in [meta] + rows:
            f.write(json.dumps(line) + "\n")
EOF
