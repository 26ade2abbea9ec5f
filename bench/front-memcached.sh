#!/usr/bin/env bash
# bench/front-memcached.sh: larder's front on a remote memcached against nginx memcached_pass, side by side.
#
# What it measures
#   Cached hits through four servers on loopback, all reading one page (10 KB and 100 KB) that one memcached
#   holds or that the server holds itself:
#     nginx       nginx memcached_pass: every request is a memcached get of "page:$uri", whose value the script
#                 `set`s to the page's raw bytes (upstream keepalive 32, so nginx reuses its memcached connections;
#                 --nginx-keepalive 0 for a new connection per request);
#     larder-l2   `larder serve --store memcached://…` with no L1: every hit is read from memcached (the response
#                 entry of spec/FORMAT.md under the proxy's key GET:http://<host>/<path>, spec/STORES.md §2),
#                 written by larder itself on the first request of the warm-up;
#     larder-l1   the same with --l1 64M: hits come from memory, re-read from memcached each --l1-ttl (1 s);
#     larder-mem  `larder serve` on its memory store only (no --store), the front the L1 figure is held against;
#     larder-l2-1key  larder-l2 with `?prefix_purge=false` (spec/STORES.md §4.4): one key per read, as nginx asks,
#                 and no purge by prefix: the like-for-like job, reported beside the default;
#     larder-redis  `larder serve --store redis://…` with no L1, on a redis-server started here: the front on Redis
#                 beside the front on memcached (nginx has no Redis module in Debian to compare with).
#   An origin (nginx, static pages with Cache-Control: max-age=3600) is behind the larder servers. Each server is
#   warmed until it answers both pages (larder: until its x-cache header says HIT, twice in a row; nginx: 200 with
#   the page's size); then wrk measures req/s and p99. Measurements are interleaved (round after round, each round
#   visiting every server in a rotated order) and the median of the rounds is reported.
#   Every measured response must be a hit: the origin's access log is counted around each measurement (0 new lines,
#   or the row is flagged), wrk's non-2xx count must be 0 (nginx answers a memcached miss with 404), and
#   memcached's get_hits/get_misses are read around each measurement: nginx must make one hit and no miss per
#   request, larder-l2 at least one hit per request (its reads also fetch the purge-record prefix list, §4.4,
#   which is a miss while no prefix was ever purged), larder-l1 and larder-mem nearly none.
#   Beside req/s and p99, each measurement reports the CPU spent per request by the server (with nginx's workers),
#   by its store (memcached, or redis-server for larder-redis), and by the rest of the machine (wrk and the kernel's interrupt work), from /proc: with both cores
#   busy, req/s is bounded by cores / (their sum), so the columns say what bounded a figure and how far the
#   server's own share can move it.
#
# Why ratios
#   2 shared cores (wrk, memcached and the servers on the same machine): absolute req/s move between runs; ratios
#   within a run carry over. The targets (issue 18): larder remote-L2 (no L1) >= 2x nginx memcached_pass in req/s,
#   and larder with an L1 within 10% of the memory-only front (ratio >= 0.9).
#
# What it needs
#   Debian 12 (or alike) as root when memcached, nginx, wrk or curl are missing: they are installed with apt-get
#   and any service the packages started is stopped. Otherwise no system service is touched: every server runs in
#   the foreground with its own config, pid file and temporary directory under /tmp, on free loopback ports, and
#   everything is stopped on exit, Ctrl-C or error. larder is built (cargo build --release -p larder-cli) when
#   target/release/larder is missing, lacks `serve --store`, or is older than the sources.
#
# Time: the default run takes about 4 minutes (3 rounds x 6 servers x 2 pages x 5 s, plus warm-up); --quick
# about 40 seconds.
#
# Usage: bench/front-memcached.sh [--quick] [--duration SECS] [--rounds N] [--connections N] [--threads N]
#                                 [--pages 10k,100k] [--l1 SIZE] [--nginx-keepalive N] [--raw FILE] [--build] [--json]
#                                 [--keep-tmp] [-h|--help]
set -euo pipefail

BENCH_NAME=front-memcached
# shellcheck source=bench/lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

usage() {
    cat <<'EOF'
Usage: bench/front-memcached.sh [options]

Benchmarks cached hits through larder serve --store memcached://… (no L1), the same with ?prefix_purge=false
(one key per read), larder on redis:// (no L1), nginx memcached_pass on the same memcached, larder with --l1 64M
and larder on memory only; prints req/s, p99 and CPU per request per server and the ratios larder-l2 / nginx
(target >= 2) and larder-l1 / larder-mem (target >= 0.9).

Options:
  --quick               smoke run: 1 round of 3 s per measurement (about 40 s)
  --duration SECS       seconds per wrk measurement (default 5; --quick 3)
  --rounds N            interleaved rounds; the median is reported (default 3; --quick 1)
  --connections N       wrk connections (default 64)
  --threads N           wrk threads (default 2)
  --pages LIST          pages to measure, of 10k and 100k (default 10k,100k)
  --l1 SIZE             larder-l1's --l1 (default 64M)
  --nginx-keepalive N   nginx's kept connections to memcached per worker (default 32; 0 = a connection per request)
  --build               run cargo build --release -p larder-cli first
  --json                print one JSON object per row instead of the table
  --raw FILE            also append the raw measurements (JSON lines, bench/report.py's input) to FILE
  --keep-tmp            keep the temporary directory (configs, logs) after the run
  -h, --help            this text

Progress goes to stderr; the table (or JSON rows) to stdout. LARDER_BIN=PATH benchmarks that binary instead of
target/release/larder (and builds nothing).
EOF
}

# ---------------------------------------------------------------------------------------------------------------
# Options

QUICK=0
DURATION=""
ROUNDS=""
CONNECTIONS=64
THREADS=2
PAGES_TEXT="10k,100k"
L1_SIZE=64M
NGINX_KEEPALIVE=32
BUILD=0
JSON=0
RAW_OUT=""
KEEP_TMP=0

while (($#)); do
    case "$1" in
        --quick) QUICK=1 ;;
        --duration | --rounds | --connections | --threads | --pages | --l1 | --nginx-keepalive)
            (($# >= 2)) || die "$1 needs a value"
            case "$1" in
                --duration) positive_int "$1" "$2" && DURATION=$2 ;;
                --rounds) positive_int "$1" "$2" && ROUNDS=$2 ;;
                --connections) positive_int "$1" "$2" && CONNECTIONS=$2 ;;
                --threads) positive_int "$1" "$2" && THREADS=$2 ;;
                --pages) PAGES_TEXT=$2 ;;
                --l1)
                    [[ ${2^^} =~ ^[1-9][0-9]*[KMG]?$ ]] || die "--l1 needs a size such as 64M, not '$2'"
                    L1_SIZE=$2
                    ;;
                --nginx-keepalive)
                    [[ $2 =~ ^[0-9]+$ ]] || die "--nginx-keepalive needs a whole number, not '$2'"
                    NGINX_KEEPALIVE=$2
                    ;;
            esac
            shift
            ;;
        --duration=* | --rounds=* | --connections=* | --threads=* | --pages=* | --l1=* | --nginx-keepalive=*)
            set -- "${1%%=*}" "${1#*=}" "${@:2}"
            continue
            ;;
        --build) BUILD=1 ;;
        --json) JSON=1 ;;
        --raw)
            (($# >= 2)) || die "$1 needs a value"
            RAW_OUT=$2
            shift
            ;;
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
    : "${DURATION:=3}" "${ROUNDS:=1}"
else
    : "${DURATION:=5}" "${ROUNDS:=3}"
fi
((CONNECTIONS >= THREADS)) || die "--connections ($CONNECTIONS) must be at least --threads ($THREADS)"

declare -A PAGE_BYTES=([10k]=10240 [100k]=102400)
declare -a PAGES=()
IFS=, read -r -a page_list <<<"$PAGES_TEXT"
for page in "${page_list[@]}"; do
    [[ -n ${PAGE_BYTES[$page]:-} ]] || die "--pages: unknown page '$page' (10k, 100k)"
    PAGES+=("$page")
done
((${#PAGES[@]})) || die "--pages: nothing to measure"

SERVERS=(nginx larder-l2 larder-l2-1key larder-redis larder-l1 larder-mem)
WARM_SECS=2
((QUICK)) && WARM_SECS=1

TEMPLATES=$BENCH_DIR/stores

# ---------------------------------------------------------------------------------------------------------------
# Tools: memcached, nginx, wrk and curl from Debian's packages when missing.

larder_ready() { "$LARDER" serve --help 2>/dev/null | grep -q -- '--l1'; }

install_packages memcached:memcached redis-server:redis-server nginx:nginx wrk:wrk curl:curl
ensure_larder "'serve --store/--l1'"

NOFILE_WANTED=65536
if (($(ulimit -Hn) < NOFILE_WANTED)); then
    ulimit -Hn "$NOFILE_WANTED" 2>/dev/null || true
fi
ulimit -Sn "$NOFILE_WANTED" 2>/dev/null || ulimit -Sn "$(ulimit -Hn)"

# ---------------------------------------------------------------------------------------------------------------
# Processes: everything started here is stopped on exit.

begin_processes


pick_port ORIGIN_PORT
pick_port MEMCACHED_PORT
pick_port REDIS_PORT
declare -A PORT=()
for server in "${SERVERS[@]}"; do
    pick_port port_var
    PORT[$server]=$port_var
done

render() { # TEMPLATE OUT [PORT]
    local user_line="" keepalive_line="# no keepalive: a new memcached connection per request"
    ((EUID == 0)) && user_line="user root root;"
    ((NGINX_KEEPALIVE > 0)) && keepalive_line="keepalive $NGINX_KEEPALIVE;"
    sed -e "s|@DIR@|$TMP|g" -e "s|@ORIGIN_PORT@|$ORIGIN_PORT|g" -e "s|@PORT@|${3:-}|g" \
        -e "s|@MEMCACHED_PORT@|$MEMCACHED_PORT|g" -e "s|@KEEPALIVE_LINE@|$keepalive_line|g" \
        -e "s|@USER_LINE@|$user_line|g" -e "s|@NOFILE@|$(ulimit -Sn)|g" "$TEMPLATES/$1" >"$2"
}

mkdir -p "$TMP/www" "$TMP/origin-tmp" "$TMP/nginx-tmp"
for page in "${PAGES[@]}"; do
    # An HTML-looking page of exactly the page's size.
    {
        printf '<!doctype html><title>%s</title><p>' "$page"
        head -c "${PAGE_BYTES[$page]}" /dev/zero | tr '\0' 'x'
    } | head -c "${PAGE_BYTES[$page]}" >"$TMP/www/$page"
done

ROOT_USER=()
((EUID == 0)) && ROOT_USER=(-u root)
log "memcached (-m 256) on 127.0.0.1:$MEMCACHED_PORT"
start memcached "$TMP/memcached.log" memcached "${ROOT_USER[@]}" -l 127.0.0.1 -p "$MEMCACHED_PORT" -U 0 -m 256 \
    -c 4096 -t 2
wait_listening memcached "$MEMCACHED_PORT" "$TMP/memcached.log"
log "redis-server (no persistence) on 127.0.0.1:$REDIS_PORT"
start redis "$TMP/redis.log" redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --save "" --appendonly no \
    --dir "$TMP"
wait_listening redis "$REDIS_PORT" "$TMP/redis.log"

log "origin: nginx serving /${PAGES[*]} on 127.0.0.1:$ORIGIN_PORT"
render nginx-origin.conf.in "$TMP/origin.conf"
start origin "$TMP/origin.log" nginx -p "$TMP" -e "$TMP/origin.error.log" -c "$TMP/origin.conf"
wait_listening origin "$ORIGIN_PORT" "$TMP/origin.log"

log "nginx memcached_pass (keepalive $NGINX_KEEPALIVE) on 127.0.0.1:${PORT[nginx]}"
render nginx-memcached.conf.in "$TMP/nginx.conf" "${PORT[nginx]}"
start nginx "$TMP/nginx.log" nginx -p "$TMP" -e "$TMP/nginx.error.log" -c "$TMP/nginx.conf"
wait_listening nginx "${PORT[nginx]}" "$TMP/nginx.log"

STORE_URL="memcached://127.0.0.1:$MEMCACHED_PORT"
start_larder() { # SERVER ARGS...
    local server=$1
    shift
    start "$server" "$TMP/$server.log" env RUST_LOG=warn "$LARDER" serve --upstream "http://127.0.0.1:$ORIGIN_PORT" \
        --listen "127.0.0.1:${PORT[$server]}" --no-admin "$@"
    wait_listening "$server" "${PORT[$server]}" "$TMP/$server.log"
}
log "larder-l2 (--store $STORE_URL, no L1) on 127.0.0.1:${PORT[larder-l2]}"
start_larder larder-l2 --store "$STORE_URL"
log "larder-l2-1key (--store $STORE_URL?prefix_purge=false, no L1) on 127.0.0.1:${PORT[larder-l2-1key]}"
start_larder larder-l2-1key --store "$STORE_URL?prefix_purge=false"
log "larder-redis (--store redis://127.0.0.1:$REDIS_PORT, no L1) on 127.0.0.1:${PORT[larder-redis]}"
start_larder larder-redis --store "redis://127.0.0.1:$REDIS_PORT"
log "larder-l1 (--store $STORE_URL --l1 $L1_SIZE) on 127.0.0.1:${PORT[larder-l1]}"
start_larder larder-l1 --store "$STORE_URL" --l1 "$L1_SIZE"
log "larder-mem (memory only, --capacity 256M) on 127.0.0.1:${PORT[larder-mem]}"
start_larder larder-mem --capacity 256M

# ---------------------------------------------------------------------------------------------------------------
# memcached: raw pages for nginx, statistics around every measurement.

memcached_set_file() { # KEY FILE: `set` the file's bytes under KEY; fails unless STORED
    local key=$1 file=$2 size answer
    size=$(wc -c <"$file" | tr -d ' ')
    exec 3<>"/dev/tcp/127.0.0.1/$MEMCACHED_PORT"
    {
        printf 'set %s 0 0 %d\r\n' "$key" "$size"
        cat "$file"
        printf '\r\n'
    } >&3
    IFS= read -r -t 10 answer <&3 || answer="(no answer)"
    exec 3>&- 3<&-
    [[ ${answer%$'\r'} == STORED ]] || die "memcached answered '${answer%$'\r'}' to set $key"
}

memcached_stats() { # prints "GET_HITS GET_MISSES"
    local line hits=0 misses=0
    exec 3<>"/dev/tcp/127.0.0.1/$MEMCACHED_PORT"
    printf 'stats\r\n' >&3
    while IFS= read -r -t 10 line <&3; do
        line=${line%$'\r'}
        case $line in
            "STAT get_hits "*) hits=${line##* } ;;
            "STAT get_misses "*) misses=${line##* } ;;
            END) break ;;
        esac
    done
    exec 3>&- 3<&-
    echo "$hits $misses"
}

memcached_item_size() { # KEY: prints the size of the value under KEY, or "-" (meta get, memcached >= 1.6)
    local key=$1 line
    exec 3<>"/dev/tcp/127.0.0.1/$MEMCACHED_PORT"
    printf 'mg %s s\r\n' "$key" >&3
    IFS= read -r -t 10 line <&3 || line=""
    exec 3>&- 3<&-
    line=${line%$'\r'}
    if [[ $line =~ ^HD.*\ s([0-9]+) ]]; then echo "${BASH_REMATCH[1]}"; else echo -; fi
}

for page in "${PAGES[@]}"; do
    memcached_set_file "page:/$page" "$TMP/www/$page"
done
log "memcached holds the raw pages under page:/<page> for nginx"

# ---------------------------------------------------------------------------------------------------------------
# Warm-up: larder's first request may be a MISS, then two HITs in a row; nginx must answer 200 with the page.

request() { # SERVER PAGE: prints "HTTP-CODE BYTES X-CACHE"
    local server=$1 page=$2 headers code size status
    headers=$TMP/headers.$server.$page
    if ! read -r code size < <(curl -sS -o /dev/null -D "$headers" -w '%{http_code} %{size_download}\n' \
        --max-time 10 "http://127.0.0.1:${PORT[$server]}/$page"); then
        die "$server: no answer for /$page"
    fi
    status=$(tr -d '\r' <"$headers" | awk 'BEGIN { FS = ":[ \t]*" } tolower($1) == "x-cache" { s = $2 }
        END { print (s == "" ? "-" : s) }')
    echo "$code $size $status"
}

origin_requests() {
    if [[ -f $TMP/origin.access.log ]]; then wc -l <"$TMP/origin.access.log" | tr -d ' '; else echo 0; fi
}

for server in "${SERVERS[@]}"; do
    for page in "${PAGES[@]}"; do
        if [[ $server == nginx ]]; then
            read -r code size status < <(request "$server" "$page")
            [[ $code == 200 && $size == "${PAGE_BYTES[$page]}" ]] ||
                die "nginx memcached_pass: /$page answered $code with $size bytes (want 200, ${PAGE_BYTES[$page]})"
            continue
        fi
        hits=0
        for ((i = 0; i < 50 && hits < 2; i++)); do
            read -r code size status < <(request "$server" "$page")
            [[ $code == 200 && $size == "${PAGE_BYTES[$page]}" ]] ||
                die "$server: /$page answered $code with $size bytes (want 200, ${PAGE_BYTES[$page]})"
            if [[ ${status^^} == HIT ]]; then hits=$((hits + 1)); else hits=0 && sleep 0.1; fi
        done
        if ((hits < 2)); then
            cat "$TMP/headers.$server.$page" >&2
            die "$server: /$page is not a cache HIT after 50 requests (x-cache: $status; headers above)"
        fi
    done
    if [[ $server == nginx ]]; then
        log "nginx: /${PAGES[*]} answered 200 from memcached"
    else
        log "$server: /${PAGES[*]} answered from cache (x-cache: HIT twice in a row)"
    fi
done
for server in larder-l2 larder-l2-1key larder-l1; do
    for page in "${PAGES[@]}"; do
        key="GET:http://127.0.0.1:${PORT[$server]}/$page"
        stored=$(memcached_item_size "$key")
        if [[ $stored == - ]]; then
            log "note: no memcached item under $key (the proxy's key may be spelled otherwise); hits are checked" \
                "by memcached's get_hits instead"
        else
            log "$server: its response entry for /$page is in memcached under $key ($stored bytes)"
        fi
    done
done

# ---------------------------------------------------------------------------------------------------------------
# wrk and its output (the same parser as bench/peers.sh).

run_wrk() { # OUT-FILE SECS URL: runs wrk and prints parse_wrk's line
    local out=$1 secs=$2 url=$3 parsed
    wrk -t "$THREADS" -c "$CONNECTIONS" -d "${secs}s" --latency "$url" >"$out" 2>&1 || true
    if ! parsed=$(parse_wrk "$out"); then
        cat "$out" >&2
        die "wrk printed no Requests/sec for $url (output above)"
    fi
    echo "$parsed"
}

log "warming each server with wrk (${WARM_SECS} s per server and page)"
for server in "${SERVERS[@]}"; do
    for page in "${PAGES[@]}"; do
        run_wrk "$TMP/wrk.warm.$server.$page" "$WARM_SECS" "http://127.0.0.1:${PORT[$server]}/$page" >/dev/null
    done
done

# One line per measurement: SERVER PAGE ROUND RPS P99 REQUESTS ERRORS NON2XX ORIGIN MC_HITS MC_MISSES SERVER_US
# MEMCACHED_US OTHER_US
: >"$TMP/results"
total=$((ROUNDS * ${#PAGES[@]} * ${#SERVERS[@]}))
n=0
for ((round = 1; round <= ROUNDS; round++)); do
    for page in "${PAGES[@]}"; do
        for ((k = 0; k < ${#SERVERS[@]}; k++)); do
            server=${SERVERS[$(((k + round - 1) % ${#SERVERS[@]}))]}
            n=$((n + 1))
            origin_before=$(origin_requests)
            read -r hits_before misses_before < <(memcached_stats)
            store_pid=${SERVER_PID[memcached]}
            [[ $server == larder-redis ]] && store_pid=${SERVER_PID[redis]}
            cpu_before=$(cpu_mark "${SERVER_PID[$server]}" "$store_pid")
            parsed=$(run_wrk "$TMP/wrk.$server.$page.$round" "$DURATION" "http://127.0.0.1:${PORT[$server]}/$page")
            cpu_after=$(cpu_mark "${SERVER_PID[$server]}" "$store_pid")
            read -r hits_after misses_after < <(memcached_stats)
            reached=$(($(origin_requests) - origin_before))
            read -r rps p99 req c r w t n2 _ <<<"$parsed"
            mc_hits=$((hits_after - hits_before))
            mc_misses=$((misses_after - misses_before))
            # CPU per request: the server, its store (memcached or Redis), and the rest of the machine (wrk, the kernel's interrupt
            # work for loopback traffic, and anything else running).
            read -r server_us memcached_us other_us < <(cpu_per_request "$cpu_before" "$cpu_after" "$req")
            log "[$n/$total] round $round $server /$page: $rps req/s, p99 $p99 ms; memcached $mc_hits hits," \
                "$mc_misses misses for $req requests; CPU per request: server $server_us µs, store" \
                "$memcached_us µs, wrk and the rest $other_us µs"
            ((reached == 0)) || log "WARNING: $server /$page reached the origin $reached times: not all hits"
            ((n2 == 0)) || log "WARNING: $server /$page: $n2 responses were not 2xx (a memcached miss is a 404)"
            echo "$server $page $round $rps $p99 $req $((c + r + w + t)) $n2 $reached $mc_hits $mc_misses" \
                "$server_us $memcached_us $other_us" >>"$TMP/results"
        done
    done
done

# Still hits afterwards.
for server in "${SERVERS[@]}"; do
    [[ $server == nginx ]] && continue
    for page in "${PAGES[@]}"; do
        read -r code size status < <(request "$server" "$page")
        [[ $code == 200 && ${status^^} == HIT ]] ||
            log "WARNING: $server /$page after the measurements: $code, x-cache: $status"
    done
done

# ---------------------------------------------------------------------------------------------------------------
# Report: bench/report.py (medians, spreads, ratios, targets). A measurement that was not all hits is flagged.

all_hits() { # SERVER REQUESTS ERRORS NON2XX ORIGIN MC_HITS MC_MISSES: 0 when every request was a hit by every check
    local server=$1 req=$2 err=$3 n2=$4 origin=$5 mc_hits=$6 mc_misses=$7
    ((origin == 0 && n2 == 0 && err == 0)) || return 1
    case $server in
        nginx) ((mc_misses == 0 && mc_hits >= req)) ;;
        larder-l2 | larder-l2-1key) ((mc_hits >= req)) ;;
        *) return 0 ;;
    esac
}

RAW=$TMP/raw.jsonl
not_all_hits=()
{
    python3 - "$ROUNDS" "$DURATION" "$CONNECTIONS" "$THREADS" "$(nproc)" "$L1_SIZE" "$NGINX_KEEPALIVE" <<'PY'
import datetime, json, sys
rounds, duration, connections, threads, cores, l1, keepalive = sys.argv[1:]
print(json.dumps({
    "meta": True, "bench": "front-memcached", "title": "The front on memcached against nginx memcached_pass",
    "command": "bench/front-memcached.sh", "date": datetime.date.today().isoformat(), "subject": "larder-l2",
    "setup": f"wrk -t{threads} -c{connections} --latency, {duration} s per measurement, {rounds} interleaved rounds; "
             f"{cores} cores shared by wrk, memcached and the servers; nginx upstream keepalive {keepalive}; "
             f"larder-l2: --store memcached://, no L1; larder-l2-1key: the same with ?prefix_purge=false (one key "
             f"per read, as nginx); larder-redis: --store redis://, no L1; larder-l1: larder-l2 with --l1 {l1}; "
             f"larder-mem: memory only",
    "metrics": [{"name": "rps", "label": "req/s", "better": "higher"},
                {"name": "p99_ms", "label": "p99 ms", "better": "lower"},
                {"name": "server_cpu_us", "label": "server CPU µs/req", "better": "lower"},
                {"name": "memcached_cpu_us", "label": "store CPU µs/req", "better": "lower"},
                {"name": "other_cpu_us", "label": "wrk+rest CPU µs/req", "better": "lower"}],
    "pairs": [{"subject": "larder-l2", "vs": "nginx"}, {"subject": "larder-l2-1key", "vs": "nginx"},
              {"subject": "larder-redis", "vs": "nginx"}, {"subject": "larder-l1", "vs": "larder-mem"}],
    "targets": [{"subject": "larder-l2", "vs": "nginx", "metric": "rps", "ratio": 2},
                {"subject": "larder-l1", "vs": "larder-mem", "metric": "rps", "ratio": 0.9}],
    "notes": ["mc_hits and mc_misses in the raw rows are memcached's get_hits and get_misses during the "
              "measurement (larder's reads also fetch the prefix-purge list, a miss while nothing was purged).",
              "CPU per request (/proc's utime + stime over the measurement, divided by its requests): the server "
              "(with nginx's workers), its store (memcached; redis-server for larder-redis), and the rest of the machine's busy time (wrk, the kernel's "
              "interrupt work for loopback traffic, anything else running). With every core busy, req/s is at most "
              "cores / (their sum): a server can only gain by its own share."],
}))
PY
    while read -r server page round rps p99 req err n2 origin mc_hits mc_misses server_us memcached_us other_us; do
        all_hits "$server" "$req" "$err" "$n2" "$origin" "$mc_hits" "$mc_misses" ||
            not_all_hits+=("$server /$page round $round (origin $origin, non-2xx $n2, errors $err, memcached hits $mc_hits, misses $mc_misses for $req requests)")
        printf '{"bench":"front-memcached","case":"%s","subject":"%s","round":%d,"rps":%s,"p99_ms":%s,' \
            "$page" "$server" "$round" "$rps" "$p99"
        printf '"server_cpu_us":%s,"memcached_cpu_us":%s,"other_cpu_us":%s,' "$server_us" "$memcached_us" "$other_us"
        printf '"requests":%d,"errors":%d,"non2xx":%d,"origin_requests":%d,"mc_hits":%d,"mc_misses":%d}\n' \
            "$req" "$err" "$n2" "$origin" "$mc_hits" "$mc_misses"
    done <"$TMP/results"
} >"$RAW"
[[ -z $RAW_OUT ]] || cat "$RAW" >>"$RAW_OUT"

if ((JSON)); then
    python3 "$BENCH_DIR/report.py" json "$RAW"
else
    echo
    echo "nginx $(nginx -v 2>&1 | sed 's|.*/||') (memcached_pass, upstream keepalive $NGINX_KEEPALIVE)," \
        "$(memcached -V 2>/dev/null) (-t 2), larder $("$LARDER" --version 2>/dev/null | awk '{print $NF}') ($LARDER)"
    python3 "$BENCH_DIR/report.py" table "$RAW"
fi
for flagged in "${not_all_hits[@]}"; do
    log "NOT ALL HITS: $flagged"
done

FAILED=0
