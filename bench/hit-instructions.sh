#!/usr/bin/env bash
# bench/hit-instructions.sh: instructions larder executes per cached hit, counted by valgrind's callgrind.
#
# Why: req/s on this shared 2-core machine move ±20% between runs, so a change of a few percent to the hit path
# cannot be seen in bench/peers.sh alone. Instruction counts are repeatable (the same binary and requests give the
# same total whatever else runs), so this script is how a change to the request path is checked for cost, and
# bench/peers.sh how it is checked against nginx.
#
# What: an origin (Python's http.server) serves a 10 KB page with Cache-Control: max-age=3600; larder
# (`serve --workers 1`) runs under callgrind in front of it; one keep-alive client sends 200 warm-up requests, the
# counters are zeroed, then it sends N requests (all cache hits, checked) and the counters are dumped. The figure is
# the serving thread's instructions divided by N: request parsing, lookup, response, HTTP and system-call wrappers.
# LARDER_BASELINE_BIN=PATH measures a second binary the same way, for a ratio. With --store memcached, larder
# serves from a memcached it starts on loopback (no L1): the count is then larder's side of a remote hit (the
# multi-get, its reply, decoding the entry), memcached's own work not included; --l1 SIZE puts larder's L1 in front
# of it (`serve --l1 SIZE`), so the count is an L1 hit's. --page-kb K serves a K KB page instead of 10 KB.
#
# Usage: bench/hit-instructions.sh [--store memcached [--l1 SIZE]] [--page-kb K] [N]   (default 5000; needs valgrind
#        and python3; LARDER_BIN as bench/peers.sh)
set -euo pipefail

USAGE="usage: bench/hit-instructions.sh [--store memcached [--l1 SIZE]] [--page-kb K] [REQUESTS]"
STORE="" L1="" PAGE_KB=10
while (($#)); do
    case $1 in
        --store) [[ ${2:-} == memcached ]] || { echo "hit-instructions.sh: --store takes 'memcached'" >&2; exit 2; }
            STORE=memcached; shift 2 ;;
        --l1) [[ ${2:-} =~ ^[1-9][0-9]*[KMG]?$ ]] || { echo "hit-instructions.sh: --l1 takes a size (64M)" >&2; exit 2; }
            L1=$2; shift 2 ;;
        --page-kb) [[ ${2:-} =~ ^[1-9][0-9]{0,4}$ ]] || { echo "hit-instructions.sh: --page-kb takes 1-99999" >&2; exit 2; }
            PAGE_KB=$2; shift 2 ;;
        -h|--help) echo "$USAGE"; exit 0 ;;
        *) break ;;
    esac
done
[[ -z $L1 || $STORE == memcached ]] || { echo "hit-instructions.sh: --l1 needs --store memcached" >&2; exit 2; }
N=${1:-5000}
[[ $N =~ ^[1-9][0-9]*$ ]] || { echo "$USAGE" >&2; exit 2; }
BENCH_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
REPO_ROOT=$(cd -- "$BENCH_DIR/.." && pwd -P)
LARDER=${LARDER_BIN:-$REPO_ROOT/target/release/larder}
command -v valgrind >/dev/null || { echo "hit-instructions.sh: valgrind is needed (apt-get install valgrind)" >&2; exit 1; }
[[ -x $LARDER ]] || (cd "$REPO_ROOT" && cargo build --release -p larder-cli >&2)

TMP=$(mktemp -d /tmp/larder-hit-instructions.XXXXXX)
declare -a PIDS=()
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf -- "$TMP"
}
trap cleanup EXIT

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

cat >"$TMP/origin.py" <<'EOF'
import http.server, os, sys
class Page(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        body = b"x" * (1024 * int(os.environ["PAGE_KB"]))
        self.send_response(200)
        self.send_header("Cache-Control", "max-age=3600")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Page).serve_forever()
EOF
cat >"$TMP/client.py" <<'EOF'
import http.client, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
for _ in range(n):
    connection.request("GET", "/10k", headers={"User-Agent": "hit-instructions", "Accept": "*/*"})
    response = connection.getresponse()
    response.read()
    if response.status != 200:
        sys.exit(f"status {response.status}")
if response.getheader("x-cache") != "HIT":
    sys.exit(f"the last request was not a cache hit: {response.getheader('x-cache')}")
EOF

ORIGIN_PORT=$(free_port)
PAGE_KB=$PAGE_KB python3 "$TMP/origin.py" "$ORIGIN_PORT" &
PIDS+=("$!")

STORE_ARGS=()
if [[ $STORE == memcached ]]; then
    command -v memcached >/dev/null || { echo "hit-instructions.sh: memcached is needed (apt-get install memcached)" >&2; exit 1; }
    MEMCACHED_PORT=$(free_port)
    memcached -l 127.0.0.1 -p "$MEMCACHED_PORT" -U 0 -m 256 -u "$(id -un)" &
    PIDS+=("$!")
    STORE_ARGS=(--store "memcached://127.0.0.1:$MEMCACHED_PORT" ${L1:+--l1 "$L1"})
fi

measure() { # NAME BINARY: prints instructions per request
    local name=$1 binary=$2 port pid i total
    port=$(free_port)
    valgrind --tool=callgrind --callgrind-out-file="$TMP/$name.out" "$binary" serve \
        --upstream "http://127.0.0.1:$ORIGIN_PORT" --listen "127.0.0.1:$port" --no-admin --workers 1 \
        ${STORE_ARGS[@]+"${STORE_ARGS[@]}"} >"$TMP/$name.log" 2>&1 &
    pid=$!
    PIDS+=("$pid")
    for ((i = 0; i < 300; i++)); do
        (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
        sleep 0.2
    done
    python3 "$TMP/client.py" "$port" 200
    callgrind_control -z "$pid" >/dev/null 2>&1
    python3 "$TMP/client.py" "$port" "$N"
    callgrind_control -d "$pid" >/dev/null 2>&1
    kill -INT "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    total=$(callgrind_annotate "$TMP/$name.out.1" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }')
    echo $((total / N))
}

larder_ir=$(measure larder "$LARDER")
where="from memory"
if [[ -n $L1 ]]; then where="from an L1 of $L1 over $STORE"; elif [[ -n $STORE ]]; then where="from $STORE, no L1"; fi
echo "larder:   $larder_ir instructions per cached $PAGE_KB KB hit $where ($N keep-alive requests, $LARDER)"
if [[ -n ${LARDER_BASELINE_BIN:-} ]]; then
    baseline_ir=$(measure baseline "$LARDER_BASELINE_BIN")
    echo "baseline: $baseline_ir instructions per cached $PAGE_KB KB hit ($LARDER_BASELINE_BIN)"
    awk -v a="$larder_ir" -v b="$baseline_ir" 'BEGIN { printf "ratio:    %.3f (larder / baseline; below 1: fewer instructions)\n", a / b }'
fi
