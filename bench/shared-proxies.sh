#!/usr/bin/env bash
# bench/shared-proxies.sh: three larder proxies sharing one memcached pool against three with private memory.
#
# What it measures
#   How many requests reach the origin, and the proxies' hit ratio, when one request trace is spread round-robin
#   over three `larder serve` proxies that either
#     shared   share a pool of three memcached servers (`--store memcached://m1,m2,m3`, the same URL for all, so
#              every proxy sends a key to the same server, spec/STORES.md §4.2), or
#     private  each cache in their own memory (no --store; --capacity 256M, far more than the trace needs, so
#              nothing is evicted and the difference is sharing alone);
#   and, with --with-l1, shared+l1: the shared pool with --l1 64M in front.
#   The trace is generated (bench/stores/trace.py: 30,000 requests over 5,000 URLs, Zipf-like with alpha 0.9,
#   seed 42, the same file every run; written in the "lirs" format `larder bench hit-ratio` reads), or given with
#   --trace FILE --format lirs|arc. Request i goes to proxy i mod 3, with the same Host header on every proxy so
#   that all compute the same key (GET:http://shop.example/p/<n>). --concurrency workers (default 6) replay it in
#   trace order over kept-alive connections. The origin is bench/stores/origin.py: any path answers 200 with an
#   8 KiB body and Cache-Control: max-age=3600, and it counts what it answers. The script prints, per setup, the
#   origin's requests, the share of responses whose x-cache was HIT, and what an unbounded cache would reach
#   (one cache for all requests, or one per proxy), from the trace alone.
#
# Why
#   The point of a shared store: a page one proxy fetched is a hit on the others, so the origin sees each URL about
#   once however many proxies there are, where private caches fetch it once per proxy. Every proxy and memcached
#   starts empty for each setup.
#
# What it needs
#   Debian 12 (or alike) as root when memcached or python3 are missing (installed with apt-get; any service the
#   package started is stopped). Otherwise no system service is touched: memcached, the origin and the proxies run
#   in the foreground on free loopback ports with their own temporary directory under /tmp, and are stopped on exit,
#   Ctrl-C or error. larder is built (cargo build --release -p larder-cli) when target/release/larder is missing,
#   lacks `serve --store`, or is older than the sources.
#
# Time: about a minute (two replays of 30,000 requests, ~10-20 s each); --quick (10,000 requests over 2,000 URLs)
# about 20 seconds.
#
# Usage: bench/shared-proxies.sh [--quick] [--requests N] [--urls N] [--alpha A] [--seed N]
#                                [--trace FILE --format lirs|arc] [--concurrency N] [--body-size BYTES]
#                                [--with-l1] [--build] [--json] [--keep-tmp] [-h|--help]
set -euo pipefail

BENCH_NAME=shared-proxies
# shellcheck source=bench/lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

usage() {
    cat <<'EOF'
Usage: bench/shared-proxies.sh [options]

Replays one request trace round-robin over three larder proxies that share a pool of three memcached servers,
then over three proxies with private memory, in front of a counting origin; prints origin requests and hit
ratio for both.

Options:
  --quick             smoke run: 10,000 requests over 2,000 URLs (about 20 s)
  --requests N        requests in the generated trace, or the first N of --trace (default 30000; --quick 10000)
  --urls N            distinct URLs the generated trace draws from (default 5000; --quick 2000)
  --alpha A           Zipf exponent of the generated trace (default 0.9)
  --seed N            seed of the generated trace (default 42)
  --trace FILE        replay this trace instead (keys become /p/<key>); .gz, .xz, .zst are decompressed
  --format F          --trace's format: lirs (one key per line) or arc (default lirs)
  --concurrency N     replaying workers (default 6)
  --body-size BYTES   size of the origin's pages (default 8192)
  --with-l1           also measure the shared pool with --l1 64M on each proxy
  --build             run cargo build --release -p larder-cli first
  --json              print one JSON object per setup instead of the table
  --keep-tmp          keep the temporary directory (trace, logs) after the run
  -h, --help          this text

Progress goes to stderr; the table (or JSON rows) to stdout. LARDER_BIN=PATH uses that binary instead of
target/release/larder (and builds nothing).
EOF
}

# ---------------------------------------------------------------------------------------------------------------
# Options

QUICK=0
REQUESTS=""
URLS=""
ALPHA=0.9
SEED=42
TRACE=""
FORMAT=lirs
CONCURRENCY=6
BODY_SIZE=8192
WITH_L1=0
BUILD=0
JSON=0
KEEP_TMP=0
PROXIES=3
MEMCACHED_SERVERS=3
HOST_HEADER=shop.example

while (($#)); do
    case "$1" in
        --quick) QUICK=1 ;;
        --requests | --urls | --alpha | --seed | --trace | --format | --concurrency | --body-size)
            (($# >= 2)) || die "$1 needs a value"
            case "$1" in
                --requests) positive_int "$1" "$2" && REQUESTS=$2 ;;
                --urls) positive_int "$1" "$2" && URLS=$2 ;;
                --alpha)
                    [[ $2 =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "--alpha needs a number, not '$2'"
                    ALPHA=$2
                    ;;
                --seed)
                    [[ $2 =~ ^[0-9]+$ ]] || die "--seed needs a whole number, not '$2'"
                    SEED=$2
                    ;;
                --trace)
                    [[ -r $2 ]] || die "--trace: cannot read '$2'"
                    TRACE=$(cd -- "$(dirname -- "$2")" && pwd -P)/$(basename -- "$2")
                    ;;
                --format)
                    [[ $2 == lirs || $2 == arc ]] || die "--format: lirs or arc, not '$2'"
                    FORMAT=$2
                    ;;
                --concurrency) positive_int "$1" "$2" && CONCURRENCY=$2 ;;
                --body-size) positive_int "$1" "$2" && BODY_SIZE=$2 ;;
            esac
            shift
            ;;
        --requests=* | --urls=* | --alpha=* | --seed=* | --trace=* | --format=* | --concurrency=* | --body-size=*)
            set -- "${1%%=*}" "${1#*=}" "${@:2}"
            continue
            ;;
        --with-l1) WITH_L1=1 ;;
        --build) BUILD=1 ;;
        --json) JSON=1 ;;
        --keep-tmp) KEEP_TMP=1 ;;
        -h | --help)
            usage
            exit 0
            ;;
        *)
            usage >&2
            die "unknown option '$1'"
            ;;
    esac
    shift
done

if ((QUICK)); then
    : "${REQUESTS:=10000}" "${URLS:=2000}"
else
    : "${REQUESTS:=30000}" "${URLS:=5000}"
fi
((BODY_SIZE <= 512 * 1024)) || die "--body-size: at most 512K (memcached's items hold 1 MiB)"

SETUPS=(shared private)
((WITH_L1)) && SETUPS+=(shared+l1)

HELPERS=$BENCH_DIR/stores

# ---------------------------------------------------------------------------------------------------------------
# Tools

larder_ready() { "$LARDER" serve --help 2>/dev/null | grep -q -- '--store'; }

tools=(memcached:memcached python3:python3)
[[ $TRACE != *.zst ]] || tools+=(zstd:zstd)
install_packages "${tools[@]}"
ensure_larder "'serve --store'"

# ---------------------------------------------------------------------------------------------------------------
# Processes: everything started here is stopped on exit.

begin_processes


LAST_PID=""
# ---------------------------------------------------------------------------------------------------------------
# The trace

if [[ -z $TRACE ]]; then
    TRACE_FILE=$TMP/trace.lirs
    python3 "$HELPERS/trace.py" generate --out "$TRACE_FILE" --requests "$REQUESTS" --urls "$URLS" \
        --alpha "$ALPHA" --seed "$SEED"
    TRACE_TEXT="generated: $REQUESTS requests over $URLS URLs, Zipf alpha $ALPHA, seed $SEED"
    LIMIT=0
else
    TRACE_FILE=$TRACE
    TRACE_TEXT="$TRACE ($FORMAT), first $REQUESTS requests"
    LIMIT=$REQUESTS
fi
IDEAL=$(python3 "$HELPERS/trace.py" describe --trace "$TRACE_FILE" --format "$FORMAT" --limit "$LIMIT" \
    --proxies "$PROXIES")
read -r TRACE_REQUESTS TRACE_DISTINCT IDEAL_SHARED IDEAL_PRIVATE IDEAL_PRIVATE_ORIGIN < <(python3 -c '
import json, sys
d = json.loads(sys.argv[1])
print(d["requests"], d["distinct"], d["ideal_shared_hit_ratio"], d["ideal_private_hit_ratio"], d["ideal_private_origin_requests"])
' "$IDEAL")
log "trace: $TRACE_TEXT; $TRACE_REQUESTS requests, $TRACE_DISTINCT distinct URLs"

# ---------------------------------------------------------------------------------------------------------------
# The origin and memcached (started once; emptied before each setup)

pick_port ORIGIN_PORT
log "origin (bench/stores/origin.py, $BODY_SIZE-byte pages) on 127.0.0.1:$ORIGIN_PORT"
start origin "$TMP/origin.log" python3 "$HELPERS/origin.py" --port "$ORIGIN_PORT" --body-size "$BODY_SIZE"
wait_listening origin "$ORIGIN_PORT" "$TMP/origin.log"

origin_get() { # PATH: prints the origin's answer to one of its own paths
    python3 -c 'import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())' \
        "http://127.0.0.1:$ORIGIN_PORT$1"
}
origin_count() { # prints the origin's request count
    origin_get /__count | python3 -c 'import json, sys; print(json.load(sys.stdin)["requests"])'
}

ROOT_USER=()
((EUID == 0)) && ROOT_USER=(-u root)
declare -a MC_PORTS=()
for ((m = 1; m <= MEMCACHED_SERVERS; m++)); do
    pick_port mc_port
    log "memcached $m (-m 128) on 127.0.0.1:$mc_port"
    start "memcached-$m" "$TMP/memcached-$m.log" memcached "${ROOT_USER[@]}" -l 127.0.0.1 -p "$mc_port" -U 0 \
        -m 128 -t 1 -c 4096
    wait_listening "memcached-$m" "$mc_port" "$TMP/memcached-$m.log"
    MC_PORTS+=("$mc_port")
done
STORE_URL="memcached://$(
    IFS=,
    printf '%s' "${MC_PORTS[*]/#/127.0.0.1:}"
)"

memcached_flush_all() {
    local port answer
    for port in "${MC_PORTS[@]}"; do
        exec 3<>"/dev/tcp/127.0.0.1/$port"
        printf 'flush_all\r\n' >&3
        IFS= read -r -t 10 answer <&3 || answer=""
        exec 3>&- 3<&-
        [[ ${answer%$'\r'} == OK ]] || die "memcached on $port answered '${answer%$'\r'}' to flush_all"
    done
}

memcached_items() { # prints the items currently held by the pool, per server: "N1 N2 N3"
    local port line items out=""
    for port in "${MC_PORTS[@]}"; do
        items=0
        exec 3<>"/dev/tcp/127.0.0.1/$port"
        printf 'stats\r\n' >&3
        while IFS= read -r -t 10 line <&3; do
            line=${line%$'\r'}
            [[ $line == "STAT curr_items "* ]] && items=${line##* }
            [[ $line == END ]] && break
        done
        exec 3>&- 3<&-
        out+="${out:+ }$items"
    done
    echo "$out"
}

# ---------------------------------------------------------------------------------------------------------------
# The setups

RESULTS=$TMP/results.jsonl
: >"$RESULTS"

for setup in "${SETUPS[@]}"; do
    declare -a store_args=()
    case $setup in
        shared) store_args=(--store "$STORE_URL") ;;
        shared+l1) store_args=(--store "$STORE_URL" --l1 64M) ;;
        private) store_args=(--capacity 256M) ;;
    esac
    memcached_flush_all
    origin_get /__reset >/dev/null
    declare -a proxy_pids=() proxy_ports=()
    for ((p = 1; p <= PROXIES; p++)); do
        pick_port proxy_port
        start "$setup-proxy-$p" "$TMP/$setup-proxy-$p.log" env RUST_LOG=warn "$LARDER" serve \
            --upstream "http://127.0.0.1:$ORIGIN_PORT" --listen "127.0.0.1:$proxy_port" --no-admin --workers 1 \
            "${store_args[@]}"
        wait_listening "$setup proxy $p" "$proxy_port" "$TMP/$setup-proxy-$p.log"
        proxy_pids+=("$LAST_PID")
        proxy_ports+=("$proxy_port")
    done
    log "$setup: $PROXIES proxies (${store_args[*]}) on ports ${proxy_ports[*]}; replaying with $CONCURRENCY workers"
    replay=$(python3 "$HELPERS/trace.py" replay --trace "$TRACE_FILE" --format "$FORMAT" --limit "$LIMIT" \
        --ports "$(
            IFS=,
            echo "${proxy_ports[*]}"
        )" --host "$HOST_HEADER" --concurrency "$CONCURRENCY") || die "the replay failed ($setup)"
    origin=$(origin_count)
    items=$(memcached_items)
    for pid in "${proxy_pids[@]}"; do
        kill -0 "$pid" 2>/dev/null || die "a $setup proxy (pid $pid) died during the replay (logs in $TMP)"
    done
    for pid in "${proxy_pids[@]}"; do stop_pid "$pid"; done
    python3 -c '
import json, sys
r = json.loads(sys.argv[1])
r.update(setup=sys.argv[2], origin_requests=int(sys.argv[3]), memcached_items=[int(x) for x in sys.argv[4].split()])
print(json.dumps(r))
' "$replay" "$setup" "$origin" "$items" >>"$RESULTS"
    log "$setup: origin answered $origin requests; x-cache $(python3 -c 'import json, sys; print(json.loads(sys.argv[1])["statuses"])' "$replay")"
done

# ---------------------------------------------------------------------------------------------------------------
# Report

python3 - "$RESULTS" "$JSON" "$IDEAL" "$TRACE_TEXT" "$STORE_URL" "$CONCURRENCY" "$BODY_SIZE" \
    "$("$LARDER" --version 2>/dev/null | awk '{print $NF}')" "$(memcached -V 2>/dev/null)" <<'EOF'
import json
import sys

results_path, as_json, ideal, trace_text, store_url, concurrency, body_size, larder_version, memcached_version = sys.argv[1:]
ideal = json.loads(ideal)
rows = [json.loads(line) for line in open(results_path) if line.strip()]
by_setup = {r["setup"]: r for r in rows}
labels = {
    "shared": "shared memcached pool (3 servers)",
    "shared+l1": "shared pool + --l1 64M",
    "private": "private memory (--capacity 256M)",
}
out = []
for r in rows:
    hits = r["statuses"].get("HIT", 0)
    n = r["requests"]
    ideal_key = "private" if r["setup"] == "private" else "shared"
    out.append({
        "setup": r["setup"],
        "proxies": len(r["per_proxy"]),
        "requests": n,
        "origin_requests": r["origin_requests"],
        "hit_ratio": hits / n if n else None,
        "origin_hit_ratio": 1 - r["origin_requests"] / n if n else None,
        "ideal_hit_ratio": ideal[f"ideal_{ideal_key}_hit_ratio"],
        "ideal_origin_requests": ideal[f"ideal_{ideal_key}_origin_requests"],
        "statuses": r["statuses"],
        "per_proxy_statuses": r["per_proxy"],
        "errors": r["errors"],
        "first_error": r["first_error"],
        "replay_seconds": r["seconds"],
        "memcached_items": r["memcached_items"],
    })
if as_json == "1":
    for row in out:
        print(json.dumps(row))
    sys.exit(0)

print()
print(f"Trace: {trace_text}; {ideal['requests']:,} requests, {ideal['distinct']:,} distinct URLs, dealt round-robin")
print(f"to 3 proxies (same Host header), {concurrency} replaying workers; origin pages of {body_size} bytes.")
print(f"larder {larder_version} serve --workers 1 per proxy; {memcached_version}; store URL {store_url}")
print()
fmt = "{:<36} {:>9} {:>8} {:>10} {:>9} {:>9} {:>12} {:>8} {:>7}"
print(fmt.format("setup", "requests", "origin", "hit ratio", "origin-", "ideal", "ideal", "replay", "errors"))
print(fmt.format("", "", "requests", "(x-cache)", "derived", "hit ratio", "origin req.", "seconds", ""))
for row in out:
    print(fmt.format(
        labels.get(row["setup"], row["setup"]),
        f"{row['requests']:,}",
        f"{row['origin_requests']:,}",
        f"{100 * row['hit_ratio']:.2f}%",
        f"{100 * row['origin_hit_ratio']:.2f}%",
        f"{100 * row['ideal_hit_ratio']:.2f}%",
        f"{row['ideal_origin_requests']:,}",
        f"{row['replay_seconds']:.1f}",
        row["errors"],
    ))
print()
if "shared" in by_setup and "private" in by_setup:
    s, p = by_setup["shared"]["origin_requests"], by_setup["private"]["origin_requests"]
    if s:
        print(f"The shared pool sent {p / s:.2f}x fewer requests to the origin than private memory ({s:,} against {p:,}).")
print("hit ratio (x-cache) = responses whose x-cache was HIT / requests; origin-derived = 1 - origin requests /")
print("requests; ideal = an unbounded cache that sees every request (shared) or one per proxy (private), from the")
print("trace alone: the floor of origin requests is one per distinct URL (per proxy, for private caches).")
for row in out:
    others = {k: v for k, v in row["statuses"].items() if k != "HIT"}
    extra = f"; first error: {row['first_error']}" if row["first_error"] else ""
    print(f"  {row['setup']}: x-cache other than HIT: {others or 'none'}; memcached items per server: "
          f"{row['memcached_items']}{extra}")
EOF

FAILED=0
