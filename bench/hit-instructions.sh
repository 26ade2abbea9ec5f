#!/usr/bin/env bash
# bench/hit-instructions.sh: instructions (and system calls) a server executes per cached hit, counted by valgrind's
# callgrind (and strace), for larder and, with --against nginx, for nginx doing the same job.
#
# Why: req/s on this shared 2-core machine move ±20% between runs and depend on where the load generator runs, so
# neither a change of a few percent to the hit path nor larder's standing against nginx can be read off
# bench/peers.sh alone. Instruction counts are repeatable (the same binary and requests give the same total
# whatever else runs, wherever the client sits), so this script is how a change to the request path is checked for
# cost, and how larder is held against nginx by a figure that does not depend on the machine's load.
#
# What: an origin (Python's http.server) serves a page (10 KB; --page-kb K) with Cache-Control: max-age=3600;
# the server runs under callgrind with one worker; one keep-alive client sends 200 warm-up requests, the counters
# are zeroed, then it sends N requests (all cache hits, checked) and the counters are dumped. The figure is the
# server's user-space instructions divided by N: request parsing, lookup, response, HTTP and system-call wrappers
# (not the kernel's work inside the calls, which --syscalls counts by call).
#   larder      `larder serve --workers 1`, from memory; with --store memcached or --store redis, from that store
#               started on loopback, no L1 (larder's side of a remote hit: the read, its reply, decoding the entry;
#               the store's own work not included); --l1 SIZE puts larder's L1 in front of it.
#   nginx       (--against nginx) nginx with one process (master_process off, one worker): proxy_cache in front of
#               the same origin (bench/peers/nginx-proxy.conf.in) for the memory case, memcached_pass
#               (bench/stores/nginx-memcached.conf.in) reading the raw page from the same memcached for
#               --store memcached. nginx has no Redis module in Debian: --against nginx with --store redis is refused.
# --syscalls also runs each server under `strace -f -c` (no valgrind) for the same N hits and prints the system
# calls per hit by name: where most of a 100 KB hit's time goes (the kernel's copy), instructions cannot see.
# LARDER_BASELINE_BIN=PATH measures a second larder binary the same way, for a ratio.
#
# Usage: bench/hit-instructions.sh [--store memcached|redis [--l1 SIZE]] [--page-kb K] [--against nginx]
#                                  [--syscalls] [N]
#        (default N 5000; needs valgrind and python3, and nginx with --against nginx, strace with --syscalls:
#        installed from Debian's packages when run as root; LARDER_BIN as bench/peers.sh)
set -euo pipefail

BENCH_NAME=hit-instructions
# shellcheck source=bench/lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

USAGE="usage: bench/hit-instructions.sh [--store memcached|redis [--l1 SIZE]] [--page-kb K] [--against nginx] [--syscalls] [REQUESTS]"
STORE="" L1="" PAGE_KB=10 AGAINST="" SYSCALLS=0
while (($#)); do
    case $1 in
        --store) [[ ${2:-} == memcached || ${2:-} == redis ]] || die "--store takes 'memcached' or 'redis'"
            STORE=$2; shift 2 ;;
        --l1) [[ ${2:-} =~ ^[1-9][0-9]*[KMG]?$ ]] || die "--l1 takes a size (64M)"
            L1=$2; shift 2 ;;
        --page-kb) [[ ${2:-} =~ ^[1-9][0-9]{0,4}$ ]] || die "--page-kb takes 1-99999"
            PAGE_KB=$2; shift 2 ;;
        --against) [[ ${2:-} == nginx ]] || die "--against takes 'nginx'"
            AGAINST=nginx; shift 2 ;;
        --syscalls) SYSCALLS=1; shift ;;
        -h|--help) echo "$USAGE"; exit 0 ;;
        -*) die "unknown option '$1' ($USAGE)" ;;
        *) break ;;
    esac
done
[[ -z $L1 || -n $STORE ]] || die "--l1 needs --store"
[[ $AGAINST != nginx || $STORE != redis ]] || die "nginx has no Redis module in Debian's packages: --against nginx takes the memory or memcached case"
[[ $AGAINST != nginx || -z $L1 ]] || die "--against nginx compares remote hits: leave out --l1"
N=${1:-5000}
[[ $N =~ ^[1-9][0-9]*$ ]] || die "$USAGE"
BUILD=0 KEEP_TMP=0

tools=(valgrind:valgrind)
[[ $STORE == memcached ]] && tools+=(memcached:memcached)
[[ $STORE == redis ]] && tools+=(redis-server:redis-server)
[[ $AGAINST == nginx ]] && tools+=(nginx:nginx)
((SYSCALLS)) && tools+=(strace:strace)
install_packages "${tools[@]}"
larder_ready() { "$LARDER" serve --help >/dev/null 2>&1; }
ensure_larder "serve"
begin_processes

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
# The client: N keep-alive requests; every answer must be 200 with the page's size, and the last one a hit by the
# server's own header (larder's x-cache, nginx proxy_cache's x-cache-status; memcached_pass has no miss but a 404).
cat >"$TMP/client.py" <<'EOF'
import http.client, sys
port, n, size, header = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
for _ in range(n):
    connection.request("GET", "/page", headers={"User-Agent": "hit-instructions", "Accept": "*/*"})
    response = connection.getresponse()
    body = response.read()
    if response.status != 200 or len(body) != size:
        sys.exit(f"status {response.status}, {len(body)} bytes (want 200, {size})")
if header != "-" and response.getheader(header) != "HIT":
    sys.exit(f"the last request was not a cache hit: {header}: {response.getheader(header)}")
EOF
PAGE_BYTES=$((1024 * PAGE_KB))

pick_port ORIGIN_PORT
start origin "$TMP/origin.log" env PAGE_KB="$PAGE_KB" python3 "$TMP/origin.py" "$ORIGIN_PORT"
wait_listening origin "$ORIGIN_PORT" "$TMP/origin.log"

STORE_ARGS=()
if [[ $STORE == memcached ]]; then
    pick_port MEMCACHED_PORT
    start memcached "$TMP/memcached.log" memcached -l 127.0.0.1 -p "$MEMCACHED_PORT" -U 0 -m 256 -u "$(id -un)"
    wait_listening memcached "$MEMCACHED_PORT" "$TMP/memcached.log"
    STORE_ARGS=(--store "memcached://127.0.0.1:$MEMCACHED_PORT" ${L1:+--l1 "$L1"})
    # nginx memcached_pass reads the raw page under page:$uri, as in bench/front-memcached.sh.
    python3 - "$MEMCACHED_PORT" "$PAGE_BYTES" <<'EOF'
import socket, sys
port, size = int(sys.argv[1]), int(sys.argv[2])
with socket.create_connection(("127.0.0.1", port)) as s:
    s.sendall(b"set page:/page 0 0 %d\r\n" % size + b"x" * size + b"\r\n")
    if not s.recv(100).startswith(b"STORED"):
        sys.exit("memcached did not store the page")
EOF
elif [[ $STORE == redis ]]; then
    pick_port REDIS_PORT
    start redis "$TMP/redis.log" redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no \
        --dir "$TMP"
    wait_listening redis "$REDIS_PORT" "$TMP/redis.log"
    STORE_ARGS=(--store "redis://127.0.0.1:$REDIS_PORT" ${L1:+--l1 "$L1"})
fi

nginx_config() { # OUT PORT: one nginx process, the same job as larder's
    local template=$BENCH_DIR/peers/nginx-proxy.conf.in user_line=""
    [[ $STORE == memcached ]] && template=$BENCH_DIR/stores/nginx-memcached.conf.in
    ((EUID == 0)) && user_line="user root root;"
    mkdir -p "$TMP/nginx-tmp" "$TMP/nginx-cache"
    sed -e "s|@DIR@|$TMP|g" -e "s|@ORIGIN_PORT@|$ORIGIN_PORT|g" -e "s|@PORT@|$2|g" \
        -e "s|@MEMCACHED_PORT@|${MEMCACHED_PORT:-0}|g" -e "s|@KEEPALIVE_LINE@|keepalive 32;|g" \
        -e "s|@USER_LINE@|$user_line|g" -e "s|@NOFILE@|$(ulimit -Sn)|g" \
        -e "s|^worker_processes .*|worker_processes 1;\nmaster_process off;|" "$template" >"$1"
}

server_command() { # NAME PORT: the command line that serves NAME on PORT
    case $1 in
        nginx)
            nginx_config "$TMP/nginx.conf" "$2"
            echo nginx -p "$TMP" -e "$TMP/nginx.error.log" -c "$TMP/nginx.conf" ;;
        baseline) echo "$LARDER_BASELINE_BIN" serve --upstream "http://127.0.0.1:$ORIGIN_PORT" --listen "127.0.0.1:$2" \
            --no-admin --workers 1 "${STORE_ARGS[@]}" ;;
        *) echo "$LARDER" serve --upstream "http://127.0.0.1:$ORIGIN_PORT" --listen "127.0.0.1:$2" --no-admin \
            --workers 1 "${STORE_ARGS[@]}" ;;
    esac
}

hit_header() { # NAME: the header that says HIT
    case $1 in
        nginx) [[ $STORE == memcached ]] && echo - || echo x-cache-status ;;
        *) echo x-cache ;;
    esac
}

wait_port() { # PORT
    local i
    for ((i = 0; i < 300; i++)); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.2
    done
    die "nothing listens on $1 after 60 s"
}

instructions() { # NAME: sets IR to the user-space instructions per hit
    local name=$1 server_port pid total
    pick_port server_port
    # shellcheck disable=SC2046 # the command line is words
    start "$name" "$TMP/$name.log" valgrind --tool=callgrind --callgrind-out-file="$TMP/$name.out" \
        $(server_command "$name" "$server_port")
    pid=$LAST_PID
    wait_port "$server_port"
    python3 "$TMP/client.py" "$server_port" 200 "$PAGE_BYTES" "$(hit_header "$name")"
    callgrind_control -z "$pid" >/dev/null 2>&1
    python3 "$TMP/client.py" "$server_port" "$N" "$PAGE_BYTES" "$(hit_header "$name")"
    callgrind_control -d "$pid" >/dev/null 2>&1
    stop_pid "$pid"
    total=$(callgrind_annotate "$(ls "$TMP/$name".out*.1 | head -n 1)" 2>/dev/null |
        awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }')
    rm -f "$TMP/$name".out*
    IR=$((total / N))
}

syscalls() { # NAME: sets CALLS to "total name=count ..." system calls per hit (strace -c over the N hits)
    local name=$1 server_port pid
    pick_port server_port
    # shellcheck disable=SC2046
    start "$name-strace" "$TMP/$name-strace.log" $(server_command "$name" "$server_port")
    pid=$LAST_PID
    wait_port "$server_port"
    python3 "$TMP/client.py" "$server_port" 200 "$PAGE_BYTES" "$(hit_header "$name")"
    strace -f -c -q -o "$TMP/$name.strace" -p "$pid" &
    local tracer=$!
    sleep 1
    python3 "$TMP/client.py" "$server_port" "$N" "$PAGE_BYTES" "$(hit_header "$name")"
    kill -INT "$tracer" 2>/dev/null || true
    wait "$tracer" 2>/dev/null || true
    stop_pid "$pid"
    CALLS=$(awk -v n="$N" '$1 ~ /^[0-9.]+$/ && NF >= 5 && $NF != "total" { calls = $4; name = $NF; if (calls / n >= 0.05) { s = s sprintf(" %s=%.2f", name, calls / n) } }
        $NF == "total" { total = $4 }
        END { printf "%.2f%s\n", total / n, s }' "$TMP/$name.strace")
}

where="from memory"
if [[ -n $L1 ]]; then where="from an L1 of $L1 over $STORE"; elif [[ -n $STORE ]]; then where="from $STORE, no L1"; fi
nginx_job="proxy_cache"
[[ $STORE == memcached ]] && nginx_job="memcached_pass"

instructions larder
larder_ir=$IR
echo "larder:   $larder_ir instructions per cached $PAGE_KB KB hit $where ($N keep-alive requests, $LARDER)"
if [[ -n ${LARDER_BASELINE_BIN:-} ]]; then
    instructions baseline
    baseline_ir=$IR
    echo "baseline: $baseline_ir instructions per cached $PAGE_KB KB hit ($LARDER_BASELINE_BIN)"
    awk -v a="$larder_ir" -v b="$baseline_ir" 'BEGIN { printf "ratio:    %.3f (larder / baseline; below 1: fewer instructions)\n", a / b }'
fi
if [[ $AGAINST == nginx ]]; then
    instructions nginx
    nginx_ir=$IR
    echo "nginx:    $nginx_ir instructions per cached $PAGE_KB KB hit ($nginx_job, one process, $(nginx -v 2>&1 | sed 's/.*: //'))"
    awk -v a="$larder_ir" -v b="$nginx_ir" 'BEGIN { printf "ratio:    %.2fx (nginx / larder instructions: above 1, larder does less work per hit)\n", b / a }'
fi
if ((SYSCALLS)); then
    for name in larder ${AGAINST:+nginx}; do
        syscalls "$name"
        printf '%-9s %s system calls per hit:%s\n' "$name:" "${CALLS%% *}" "${CALLS#* }"
    done
fi
FAILED=0
