#!/usr/bin/env bash
# bench/peers.sh: larder against its peers on cached hits, side by side in one run.
#
# What it measures
#   nginx proxy_cache, Varnish (malloc storage) and larder (release build, --capacity 256M) run on loopback in
#   front of one origin (a separate nginx serving static /10k and /100k pages with Cache-Control: max-age=3600).
#   Each proxy is warmed until it answers both pages from cache (checked with its cache-status header: nginx
#   X-Cache-Status, Varnish X-Cache set in vcl_deliver from obj.hits, larder x-cache; the run stops if a warm-up
#   request is not a HIT), then wrk measures cached hits: req/s and p99 latency for each server and page.
#   Measurements are interleaved (round after round, each round visiting every server) and the median of the
#   rounds is reported, so that the noise of a shared machine falls on every server alike. The origin's access
#   log is counted around every measurement: a measurement that reached the origin is flagged, since it was not
#   all hits. Last, larder holds 5,000 concurrent keep-alive connections (wrk -c5000) on a cached page, and every
#   error wrk reports (connect, read, write, timeout, non-2xx) is counted.
#
# Why ratios
#   This machine has 2 cores shared with wrk and with other tenants: absolute req/s move from run to run and
#   from machine to machine. Ratios between servers measured in the same run under the same load generator are
#   what carries over, so the report is larder's req/s divided by each peer's, and larder's p99 against each
#   peer's. The issue's targets: larder >= 1.2x nginx proxy_cache and >= 1.5x Varnish in req/s on cached hits,
#   with p99 no worse than nginx's.
#
# What it needs
#   Debian 12 (or alike) as root when nginx, varnish, wrk or curl are missing: it installs them with apt-get and
#   stops any service the packages started. It never touches system-wide services otherwise: every server runs
#   in the foreground with its own config, pid file and temporary directory under /tmp, on loopback ports it
#   picks, and everything is stopped on exit, Ctrl-C or error. larder is built (cargo build --release -p
#   larder-cli) when target/release/larder is missing, lacks `serve`, or is older than the sources.
#
# Time: the default run takes about 4.5 minutes (6 rounds x 6 measurements x 5 s, a 60 s hold), --quick about one
# minute, --hold-all adds two more holds.
#
# Usage: bench/peers.sh [--quick] [--duration SECS] [--rounds N] [--connections N] [--threads N]
#                       [--hold-connections N] [--hold-duration SECS] [--no-hold] [--hold-all] [--pages LIST]
#                       [--no-pin] [--raw FILE] [--build] [--json] [--keep-tmp] [-h|--help]
set -euo pipefail

BENCH_NAME=peers
# shellcheck source=bench/lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

usage() {
    cat <<'EOF'
Usage: bench/peers.sh [options]

Benchmarks cached hits through nginx proxy_cache, Varnish and larder in front of one origin (10 KB and 100 KB
pages), prints req/s and p99 per server and larder's ratios to each peer, then holds 5,000 keep-alive
connections against larder and counts wrk's errors.

Options:
  --quick               smoke run: 1 round of 5 s per measurement, a 10 s hold (about a minute)
  --duration SECS       seconds per wrk measurement (default 5; --quick 5)
  --rounds N            interleaved rounds; the median is reported (default 6; --quick 1)
  --connections N       wrk connections for the hit measurements (default 64)
  --threads N           wrk threads (default 2)
  --hold-connections N  connections for larder's keep-alive hold (default 5000)
  --hold-duration SECS  seconds to hold them (default 60; --quick 10)
  --no-hold             skip the keep-alive hold
  --hold-all            hold the connections against nginx and Varnish too, for reference (adds 2 holds)
  --pages LIST          cached pages to measure, of 10k, 100k, 1m (default 10k,100k,1m)
  --no-pin              let wrk and the servers share every core (default: wrk on the last core, the servers on
                        the others, when there are at least 2)
  --raw FILE            also append the raw measurements (JSON lines, bench/report.py's input) to FILE
  --build               run cargo build --release -p larder-cli first (otherwise only when the binary is missing)
  --json                print one JSON object per row instead of the table
  --keep-tmp            keep the temporary directory (configs, logs, cache) after the run
  -h, --help            this text

Progress goes to stderr; the table (or the JSON rows) to stdout; the statistics are bench/report.py's. LARDER_BIN=PATH benchmarks that larder binary
instead of the workspace's target/release/larder (and builds nothing). LARDER_BASELINE_BIN=PATH adds another larder
binary (an earlier build, say) as the server "baseline", measured in the same rounds, so a change to larder is
judged by its ratio to nginx and to its own earlier self in one run.
EOF
}

# ---------------------------------------------------------------------------------------------------------------
# Options

QUICK=0
DURATION=""
ROUNDS=""
CONNECTIONS=64
THREADS=2
HOLD_CONNECTIONS=5000
HOLD_DURATION=""
HOLD=1
HOLD_ALL=0
BUILD=0
JSON=0
KEEP_TMP=0
PAGE_LIST=10k,100k,1m
PIN=1
RAW_OUT=""

while (($#)); do
    case "$1" in
        --quick) QUICK=1 ;;
        --duration | --rounds | --connections | --threads | --hold-connections | --hold-duration)
            (($# >= 2)) || die "$1 needs a value"
            positive_int "$1" "$2"
            case "$1" in
                --duration) DURATION=$2 ;;
                --rounds) ROUNDS=$2 ;;
                --connections) CONNECTIONS=$2 ;;
                --threads) THREADS=$2 ;;
                --hold-connections) HOLD_CONNECTIONS=$2 ;;
                --hold-duration) HOLD_DURATION=$2 ;;
            esac
            shift
            ;;
        --duration=* | --rounds=* | --connections=* | --threads=* | --hold-connections=* | --hold-duration=*)
            set -- "${1%%=*}" "${1#*=}" "${@:2}"
            continue
            ;;
        --pages | --raw)
            (($# >= 2)) || die "$1 needs a value"
            case "$1" in
                --pages) PAGE_LIST=$2 ;;
                --raw) RAW_OUT=$2 ;;
            esac
            shift
            ;;
        --pages=* | --raw=*)
            set -- "${1%%=*}" "${1#*=}" "${@:2}"
            continue
            ;;
        --no-pin) PIN=0 ;;
        --no-hold) HOLD=0 ;;
        --hold-all) HOLD_ALL=1 ;;
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
    : "${DURATION:=5}" "${ROUNDS:=1}" "${HOLD_DURATION:=10}"
else
    # Many short rounds rather than a few long ones: on a shared machine the noise comes in bursts of seconds,
    # and a median over more interleaved samples shrugs more of them off.
    : "${DURATION:=5}" "${ROUNDS:=6}" "${HOLD_DURATION:=60}"
fi
((CONNECTIONS >= THREADS)) || die "--connections ($CONNECTIONS) must be at least --threads ($THREADS)"
((HOLD_CONNECTIONS >= THREADS)) || die "--hold-connections must be at least --threads"

# Warm-up wrk run per server and page before the measured rounds (not reported).
WARM_SECS=2
((QUICK)) && WARM_SECS=1

declare -A PAGE_BYTES=([10k]=10240 [100k]=102400 [1m]=1048576)
IFS=, read -r -a PAGES <<<"$PAGE_LIST"
for page in "${PAGES[@]}"; do
    [[ -n ${PAGE_BYTES[$page]:-} ]] || die "--pages: unknown page '$page' (10k, 100k or 1m)"
done
((${#PAGES[@]})) || die "--pages needs at least one page"
[[ " ${PAGES[*]} " == *" 10k "* ]] || HOLD=0
SERVERS=(nginx varnish larder)
BASELINE=${LARDER_BASELINE_BIN:-}
[[ -z $BASELINE ]] || SERVERS+=(baseline)
HOLD_SERVERS=(larder)
((HOLD_ALL)) && HOLD_SERVERS=(larder nginx varnish)
# Pinning: on a machine of a few cores, wrk and the servers fight for the same cores and a figure means something
# else in every run. wrk gets the last core to itself, the servers (one at a time under load) the others.
SERVER_CPUS="" LOAD_CPUS=""
if ((PIN)) && command -v taskset >/dev/null 2>&1 && (($(nproc) >= 2)); then
    last=$(($(nproc) - 1))
    SERVER_CPUS="0-$((last - 1))"
    ((last == 1)) && SERVER_CPUS=0
    LOAD_CPUS=$last
fi
SERVER_WORKERS=$(($(nproc) - (${#LOAD_CPUS} > 0 ? 1 : 0)))
on_servers() { if [[ -n $SERVER_CPUS ]]; then taskset -c "$SERVER_CPUS" "$@"; else "$@"; fi; }
on_load() { if [[ -n $LOAD_CPUS ]]; then taskset -c "$LOAD_CPUS" "$@"; else "$@"; fi; }

TEMPLATES=$BENCH_DIR/peers

# ---------------------------------------------------------------------------------------------------------------
# Tools: nginx, varnish, wrk and curl from Debian's packages when missing.

install_packages nginx:nginx varnishd:varnish wrk:wrk curl:curl
larder_ready() { "$LARDER" serve --help >/dev/null 2>&1; }
ensure_larder "'serve'"

# wrk needs a descriptor per connection, larder one per connection and one per upstream connection.
NOFILE_WANTED=$((HOLD_CONNECTIONS * 2 + 4096))
((NOFILE_WANTED >= 65536)) || NOFILE_WANTED=65536
if (($(ulimit -Hn) < NOFILE_WANTED)); then
    ulimit -Hn "$NOFILE_WANTED" 2>/dev/null || true
fi
ulimit -Sn "$NOFILE_WANTED" 2>/dev/null || ulimit -Sn "$(ulimit -Hn)"
if ((HOLD)) && (($(ulimit -Sn) < HOLD_CONNECTIONS + 1024)); then
    die "open files limit $(ulimit -Sn) is too low for $HOLD_CONNECTIONS connections (run as root or raise it)"
fi

# ---------------------------------------------------------------------------------------------------------------
# Processes: everything started here is stopped on exit.

begin_processes


pick_port ORIGIN_PORT
pick_port NGINX_PORT
pick_port VARNISH_PORT
pick_port LARDER_PORT
pick_port BASELINE_PORT
declare -A PORT=([nginx]=$NGINX_PORT [varnish]=$VARNISH_PORT [larder]=$LARDER_PORT [baseline]=$BASELINE_PORT)
declare -A STATUS_HEADER=([nginx]=x-cache-status [varnish]=x-cache [larder]=x-cache [baseline]=x-cache)

render() { # TEMPLATE OUT [PORT]
    local user_line=""
    ((EUID == 0)) && user_line="user root root;"
    sed -e "s|@DIR@|$TMP|g" -e "s|@ORIGIN_PORT@|$ORIGIN_PORT|g" -e "s|@PORT@|${3:-}|g" \
        -e "s|@USER_LINE@|$user_line|g" -e "s|@NOFILE@|$(ulimit -Sn)|g" -e "s|@WORKERS@|$SERVER_WORKERS|g" \
        "$TEMPLATES/$1" >"$2"
}

mkdir -p "$TMP/www" "$TMP/origin-tmp" "$TMP/nginx-tmp" "$TMP/nginx-cache" "$TMP/varnish"
for page in "${PAGES[@]}"; do
    head -c "${PAGE_BYTES[$page]}" /dev/zero | tr '\0' 'x' >"$TMP/www/$page"
done

log "origin: nginx serving ${PAGES[*]/#//} on 127.0.0.1:$ORIGIN_PORT"
render nginx-origin.conf.in "$TMP/origin.conf"
start origin "$TMP/origin.log" nginx -p "$TMP" -e "$TMP/origin.error.log" -c "$TMP/origin.conf"
wait_listening origin "$ORIGIN_PORT" "$TMP/origin.log"

log "nginx proxy_cache on 127.0.0.1:$NGINX_PORT"
render nginx-proxy.conf.in "$TMP/nginx.conf" "$NGINX_PORT"
start nginx "$TMP/nginx.log" on_servers nginx -p "$TMP" -e "$TMP/nginx.error.log" -c "$TMP/nginx.conf"
wait_listening nginx "$NGINX_PORT" "$TMP/nginx.log"

# Two thread pools (one per core) of at least 100 threads, so that wrk's connections never wait for a thread to be
# made; the ceiling of 1000 per pool (more when --hold-all asks Varnish to hold more connections, since it needs a
# thread per busy connection) is never reached by the hit measurements. -j none: run as the invoking user, inside
# our own work directory.
VARNISH_THREADS_MAX=1000
if ((HOLD && HOLD_ALL && HOLD_CONNECTIONS / 2 + 200 > VARNISH_THREADS_MAX)); then
    VARNISH_THREADS_MAX=$((HOLD_CONNECTIONS / 2 + 200))
fi
log "varnish (malloc 256m) on 127.0.0.1:$VARNISH_PORT"
render varnish.vcl.in "$TMP/varnish.vcl"
start varnish "$TMP/varnish.log" on_servers varnishd -F -j none -n "$TMP/varnish" -a "127.0.0.1:$VARNISH_PORT" \
    -T 127.0.0.1:0 -f "$TMP/varnish.vcl" -s malloc,256m -P "$TMP/varnish.pid" \
    -p thread_pools="$SERVER_WORKERS" -p thread_pool_min=100 -p thread_pool_max="$VARNISH_THREADS_MAX"
wait_listening varnish "$VARNISH_PORT" "$TMP/varnish.log"

log "larder (--capacity 256M) on 127.0.0.1:$LARDER_PORT"
start larder "$TMP/larder.log" on_servers env RUST_LOG=warn "$LARDER" serve --upstream "http://127.0.0.1:$ORIGIN_PORT" \
    --listen "127.0.0.1:$LARDER_PORT" --no-admin --capacity 256M
wait_listening larder "$LARDER_PORT" "$TMP/larder.log"

if [[ -n $BASELINE ]]; then
    "$BASELINE" serve --help >/dev/null 2>&1 || die "LARDER_BASELINE_BIN=$BASELINE has no 'serve' command"
    log "baseline larder ($BASELINE, --capacity 256M) on 127.0.0.1:$BASELINE_PORT"
    start baseline "$TMP/baseline.log" on_servers env RUST_LOG=warn "$BASELINE" serve \
        --upstream "http://127.0.0.1:$ORIGIN_PORT" --listen "127.0.0.1:$BASELINE_PORT" --no-admin --capacity 256M
    wait_listening baseline "$BASELINE_PORT" "$TMP/baseline.log"
fi

# ---------------------------------------------------------------------------------------------------------------
# Warm-up: the first request may be a MISS, the next ones must be HITs of the full page.

cache_status() { # SERVER PAGE: prints "HTTP-CODE BYTES CACHE-STATUS"
    local server=$1 page=$2 headers code size status
    headers=$TMP/headers.$server.$page
    if ! read -r code size < <(curl -sS -o /dev/null -D "$headers" -w '%{http_code} %{size_download}\n' \
        --max-time 10 "http://127.0.0.1:${PORT[$server]}/$page"); then
        die "$server: no answer for /$page"
    fi
    status=$(tr -d '\r' <"$headers" | awk -v h="${STATUS_HEADER[$server]}" \
        'BEGIN { FS = ":[ \t]*" } tolower($1) == h { s = $2 } END { print (s == "" ? "-" : s) }')
    echo "$code $size $status"
}

origin_requests() {
    if [[ -f $TMP/origin.access.log ]]; then wc -l <"$TMP/origin.access.log" | tr -d ' '; else echo 0; fi
}

for server in "${SERVERS[@]}"; do
    for page in "${PAGES[@]}"; do
        read -r code size status < <(cache_status "$server" "$page")
        [[ $code == 200 && $size == "${PAGE_BYTES[$page]}" ]] ||
            die "$server: /$page answered $code with $size bytes on the first request"
        for i in 1 2; do
            read -r code size status < <(cache_status "$server" "$page")
            if [[ $code != 200 || $size != "${PAGE_BYTES[$page]}" || ${status^^} != HIT ]]; then
                echo "--- response headers from $server for /$page:" >&2
                cat "$TMP/headers.$server.$page" >&2
                die "$server: warm-up request $((i + 1)) for /$page was not a cache hit" \
                    "(status $code, $size bytes, ${STATUS_HEADER[$server]}: $status)"
            fi
        done
    done
    log "$server: ${PAGES[*]/#//} are cache HITs"
done

# ---------------------------------------------------------------------------------------------------------------
# wrk and its output

run_wrk() { # OUT-FILE CONNECTIONS SECS URL: runs wrk and prints parse_wrk's line
    local out=$1 connections=$2 secs=$3 url=$4 parsed
    on_load wrk -t "$THREADS" -c "$connections" -d "${secs}s" --latency "$url" >"$out" 2>&1 || true
    if ! parsed=$(parse_wrk "$out"); then
        cat "$out" >&2
        die "wrk printed no Requests/sec for $url (output above)"
    fi
    echo "$parsed"
}

log "warming each server with wrk (${WARM_SECS} s per server and page)"
for server in "${SERVERS[@]}"; do
    for page in "${PAGES[@]}"; do
        run_wrk "$TMP/wrk.warm.$server.$page" "$CONNECTIONS" "$WARM_SECS" \
            "http://127.0.0.1:${PORT[$server]}/$page" >/dev/null
    done
done

# Results: one line per measurement in $TMP/results: SERVER PAGE ROUND RPS P99 REQUESTS C R W T N2 ORIGIN SERVER_US
# OTHER_US (CPU per request of the server, with its worker processes, and of the rest of the machine: wrk and the
# kernel's interrupt work for loopback traffic; bench/lib.sh)
: >"$TMP/results"
total=$((ROUNDS * ${#PAGES[@]} * ${#SERVERS[@]}))
n=0
origin_before_all=$(origin_requests)
for ((round = 1; round <= ROUNDS; round++)); do
    for page in "${PAGES[@]}"; do
        # Rotate the order each round so that no server always runs first or last.
        for ((k = 0; k < ${#SERVERS[@]}; k++)); do
            server=${SERVERS[$(((k + round - 1) % ${#SERVERS[@]}))]}
            n=$((n + 1))
            before=$(origin_requests)
            cpu_before=$(cpu_mark "${SERVER_PID[$server]}")
            parsed=$(run_wrk "$TMP/wrk.$server.$page.$round" "$CONNECTIONS" "$DURATION" \
                "http://127.0.0.1:${PORT[$server]}/$page")
            cpu_after=$(cpu_mark "${SERVER_PID[$server]}")
            reached=$(($(origin_requests) - before))
            read -r rps p99 req c r w t n2 _ <<<"$parsed"
            read -r server_us other_us < <(cpu_per_request "$cpu_before" "$cpu_after" "$req")
            log "[$n/$total] round $round $server /$page: $rps req/s, p99 $p99 ms; CPU per request: server" \
                "$server_us µs, wrk and the rest $other_us µs"
            if ((reached > 0)); then
                log "WARNING: $server /$page reached the origin $reached times during measurement: not all hits"
            fi
            echo "$server $page $round $rps $p99 $req $c $r $w $t $n2 $reached $server_us $other_us" >>"$TMP/results"
        done
    done
done

# Still hits afterwards (nothing was evicted or expired).
for server in "${SERVERS[@]}"; do
    for page in "${PAGES[@]}"; do
        read -r code size status < <(cache_status "$server" "$page")
        [[ $code == 200 && ${status^^} == HIT ]] ||
            log "WARNING: $server /$page after the measurements: $code, ${STATUS_HEADER[$server]}: $status"
    done
done
origin_during=$(($(origin_requests) - origin_before_all))

# ---------------------------------------------------------------------------------------------------------------
# The keep-alive hold against larder.

declare -A HOLD_RESULT=()
if ((HOLD)); then
    for server in "${HOLD_SERVERS[@]}"; do
        log "holding $HOLD_CONNECTIONS keep-alive connections to $server for ${HOLD_DURATION} s (/10k)"
        HOLD_RESULT[$server]=$(run_wrk "$TMP/wrk.hold.$server" "$HOLD_CONNECTIONS" "$HOLD_DURATION" \
            "http://127.0.0.1:${PORT[$server]}/10k")
        if ! kill -0 "${SERVER_PID[$server]}" 2>/dev/null; then
            tail -n 30 "$TMP/$server.log" >&2 || true
            die "$server died during the keep-alive hold (log above)"
        fi
        read -r code size status < <(cache_status "$server" 10k)
        [[ $code == 200 && ${status^^} == HIT ]] ||
            log "WARNING: $server answered $code (${STATUS_HEADER[$server]}: $status) after the hold"
    done
fi

# ---------------------------------------------------------------------------------------------------------------
# Report: bench/report.py turns the raw rounds into medians, spreads, ratios and the targets' verdicts.

RAW=$TMP/raw.jsonl
{
    pin_note="wrk and the servers share every core"
    [[ -n $LOAD_CPUS ]] && pin_note="wrk pinned to core $LOAD_CPUS, the servers to $SERVER_CPUS"
    python3 - "$ROUNDS" "$DURATION" "$CONNECTIONS" "$THREADS" "$(nproc)" "$pin_note" "${PAGES[*]}" <<'PY'
import json, sys
import datetime
rounds, duration, connections, threads, cores, pin, pages = sys.argv[1:]
# The targets (issues 5 and 18): req/s >= 1.3x nginx and 1.5x Varnish, 100 KB pages >= 1.2x nginx, and on 10 KB
# pages a p99 no longer than nginx's in every round.
targets = [{"case": "10k", "vs": "nginx", "metric": "rps", "ratio": 1.3},
           {"case": "10k", "vs": "varnish", "metric": "rps", "ratio": 1.5}, {"case": "100k", "vs": "varnish", "metric": "rps", "ratio": 1.5},
           {"case": "10k", "vs": "nginx", "metric": "p99_ms", "ratio": 1.0, "every_round": True},
           {"case": "100k", "vs": "nginx", "metric": "rps", "ratio": 1.2}]
print(json.dumps({"meta": True, "bench": "peers", "title": "Cached hits: larder, nginx proxy_cache, Varnish",
                  "command": "bench/peers.sh", "subject": "larder", "date": datetime.date.today().isoformat(),
                  "setup": f"wrk -t{threads} -c{connections} --latency, {duration} s per measurement, {rounds} interleaved rounds; {cores} cores, {pin}",
                  "metrics": [{"name": "rps", "label": "req/s", "better": "higher"},
                              {"name": "p99_ms", "label": "p99 ms", "better": "lower"},
                              {"name": "server_cpu_us", "label": "server CPU µs/req", "better": "lower"},
                              {"name": "other_cpu_us", "label": "wrk+rest CPU µs/req", "better": "lower"}],
                  "targets": targets}))
PY
    while read -r server page round rps p99 req c r w t n2 reached server_us other_us; do
        printf '{"bench":"peers","case":"%s","subject":"%s","round":%d,"rps":%s,"p99_ms":%s,"requests":%d,' \
            "$page" "$server" "$round" "$rps" "$p99" "$req"
        printf '"server_cpu_us":%s,"other_cpu_us":%s,' "$server_us" "$other_us"
        printf '"errors":%d,"origin_requests":%d}\n' "$((c + r + w + t + n2))" "$reached"
    done <"$TMP/results"
} >"$RAW"
[[ -z $RAW_OUT ]] || cat "$RAW" >>"$RAW_OUT"

if ((JSON)); then
    python3 "$BENCH_DIR/report.py" json "$RAW"
    for server in "${HOLD_SERVERS[@]}"; do
        [[ -n ${HOLD_RESULT[$server]:-} ]] || continue
        read -r rps p99 req c r w t n2 p50 max <<<"${HOLD_RESULT[$server]}"
        errors=$((c + r + w + t + n2))
        printf '{"server":"%s","page":"10k","test":"hold","connections":%d,"threads":%d,"duration_s":%d,' \
            "$server" "$HOLD_CONNECTIONS" "$THREADS" "$HOLD_DURATION"
        printf '"requests_per_s":%s,"p50_ms":%s,"p99_ms":%s,"max_ms":%s,"requests":%d,"errors":%d,' \
            "$rps" "$p50" "$p99" "$max" "$req" "$errors"
        printf '"errors_connect":%d,"errors_read":%d,"errors_write":%d,"errors_timeout":%d,"errors_non2xx":%d,' \
            "$c" "$r" "$w" "$t" "$n2"
        printf '"zero_errors":%s}\n' "$( ((errors == 0)) && echo true || echo false)"
    done
else
    echo
    echo "nginx $(nginx -v 2>&1 | sed 's|.*/||'), varnish $(varnishd -V 2>&1 | sed -n 's/.*varnish-\([0-9.]*\).*/\1/p;q')," \
        "larder $("$LARDER" --version 2>/dev/null | awk '{print $NF}') ($LARDER)"
    [[ -z $BASELINE ]] || echo "baseline: $BASELINE"
    python3 "$BENCH_DIR/report.py" table "$RAW"
    echo "Origin requests during the measurements: $origin_during (0 means every measured request was a cache hit)."
    if ((${#HOLD_RESULT[@]})); then
        echo
        echo "Keep-alive hold: wrk -t$THREADS -c$HOLD_CONNECTIONS -d${HOLD_DURATION}s --latency on /10k" \
            "(wrk's timeout = a response slower than 2 s)"
        hfmt='%-8s %11s %9s %9s %9s %8s %8s %8s %8s %8s  %s\n'
        # shellcheck disable=SC2059
        printf "$hfmt" server "req/s" "p50 ms" "p99 ms" "max ms" connect read write timeout non-2xx result
        for server in "${HOLD_SERVERS[@]}"; do
            [[ -n ${HOLD_RESULT[$server]:-} ]] || continue
            read -r rps p99 req c r w t n2 p50 max <<<"${HOLD_RESULT[$server]}"
            errors=$((c + r + w + t + n2))
            # shellcheck disable=SC2059
            printf "$hfmt" "$server" "$rps" "$p50" "$p99" "$max" "$c" "$r" "$w" "$t" "$n2" \
                "$( ((errors == 0)) && echo "zero errors" || echo "$errors errors")"
        done
    fi
fi

FAILED=0
