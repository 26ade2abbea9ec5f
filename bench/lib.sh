# bench/lib.sh: what the benchmark scripts share (sourced, not run): messages and option checks, installing missing
# tools from Debian's packages, building larder when its binary is missing or stale, starting servers on free
# loopback ports and stopping every one of them on exit, and reading wrk's report.
#
# A script sets BENCH_NAME (its name in messages) and sources this file right after `set -euo pipefail`; it then
# defines larder_ready (whether $LARDER has what the script needs) before calling ensure_larder, and calls
# begin_processes before starting anything. BUILD and KEEP_TMP (0 or 1) are the script's --build and --keep-tmp.

BENCH_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
REPO_ROOT=$(cd -- "$BENCH_DIR/.." && pwd -P)
LARDER=${LARDER_BIN:-$REPO_ROOT/target/release/larder}
export PATH="$PATH:/usr/sbin:/sbin"

die() {
    echo "$BENCH_NAME.sh: $*" >&2
    exit 1
}

log() {
    printf '[%s %s] %s\n' "$BENCH_NAME" "$(date +%H:%M:%S)" "$*" >&2
}

positive_int() { # NAME VALUE
    [[ "$2" =~ ^[1-9][0-9]*$ ]] || die "$1 needs a positive whole number, not '$2'"
}

calc() { awk "BEGIN { printf \"%s\", $1 }"; }

# ---------------------------------------------------------------------------------------------------------------
# Tools

stop_package_service() { # NAME: a service the package may have started; ours run on other ports and paths
    local name=$1
    if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet "$name" 2>/dev/null; then
        log "stopping the $name service the package started"
        systemctl stop "$name" || true
    elif command -v service >/dev/null 2>&1 && service "$name" status >/dev/null 2>&1; then
        log "stopping the $name service the package started"
        service "$name" stop >/dev/null 2>&1 || true
    fi
    if [[ $name == nginx && -s /run/nginx.pid ]]; then
        local pid
        pid=$(cat /run/nginx.pid)
        if [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null; then
            log "stopping the nginx master (pid $pid) the package started"
            kill -QUIT "$pid" 2>/dev/null || true
        fi
    fi
}

install_packages() { # COMMAND:PACKAGE...: installs the package of each missing command, then stops what it started
    local -a missing=()
    local pair package
    for pair in "$@"; do
        command -v "${pair%%:*}" >/dev/null 2>&1 || missing+=("${pair##*:}")
    done
    ((${#missing[@]})) || return 0
    ((EUID == 0)) || die "missing ${missing[*]}; run as root to install them with apt-get, or install them first"
    command -v apt-get >/dev/null 2>&1 || die "missing ${missing[*]} and there is no apt-get to install them"
    log "installing ${missing[*]} with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y -q --no-install-recommends "${missing[@]}" >&2; then
        apt-get update -q >&2
        apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
    fi
    for package in "${missing[@]}"; do
        case $package in
            nginx | memcached | redis-server) stop_package_service "$package" ;;
            varnish)
                stop_package_service varnish
                stop_package_service varnishncsa
                ;;
        esac
    done
}

build_larder() {
    command -v cargo >/dev/null 2>&1 || die "cargo is needed to build larder"
    log "building larder (cargo build --release -p larder-cli)"
    (cd "$REPO_ROOT" && cargo build --release -p larder-cli >&2)
}

larder_stale() { # a source file, manifest or the lock file is newer than the binary
    [[ -n $(find "$REPO_ROOT/crates" "$REPO_ROOT/Cargo.toml" "$REPO_ROOT/Cargo.lock" \
        \( -name '*.rs' -o -name Cargo.toml -o -name Cargo.lock \) -newer "$LARDER" -print -quit 2>/dev/null) ]]
}

ensure_larder() { # WHAT: builds larder unless LARDER_BIN names one; WHAT says what larder_ready checks, for errors
    local what=$1
    if [[ -n ${LARDER_BIN:-} ]]; then
        : # the caller's binary, as it is
    elif ((BUILD)) || [[ ! -x $LARDER ]] || ! larder_ready || larder_stale; then
        if ! build_larder; then
            if [[ -x $LARDER ]] && larder_ready; then
                log "WARNING: cargo build failed; benchmarking the existing (older) $LARDER"
            else
                die "cargo build failed and $LARDER has no $what"
            fi
        fi
    fi
    larder_ready || die "$LARDER has no $what"
}

# ---------------------------------------------------------------------------------------------------------------
# Processes: everything started with `start` is stopped on exit, Ctrl-C or error.

begin_processes() { # makes TMP and sets the traps
    TMP=$(mktemp -d "/tmp/larder-$BENCH_NAME.XXXXXX")
    chmod 755 "$TMP"
    PIDS=()
    declare -gA PID_NAME=() SERVER_PID=() CHOSEN_PORT=()
    LAST_PID=""
    FAILED=1
    trap cleanup EXIT
    trap 'log "interrupted"; FAILED=0; exit 130' INT
    trap 'log "terminated"; FAILED=0; exit 143' TERM
}

process_tree() { # PID: the PID and every process it started, parents first
    local child
    echo "$1"
    for child in $(ps -o pid= --ppid "$1" 2>/dev/null); do process_tree "$child"; done
}

stop_pids() { # PID...: TERM each and every process it started, wait up to 5 s, KILL what is left; forget them
    # A server started through a shell function (on_servers' taskset) is the subshell's child, and nginx's workers
    # its grandchildren: stopping only the subshell left them running. The trees are listed before any signal, as a
    # stopped parent's children are handed to init.
    local pid i p
    local -a alive=()
    local -a tree=()
    for pid in "$@"; do mapfile -t -O "${#tree[@]}" tree < <(process_tree "$pid"); done
    ((${#tree[@]})) || return 0
    kill -TERM "${tree[@]}" 2>/dev/null || true
    for i in $(seq 50); do
        alive=()
        for p in "${tree[@]}"; do kill -0 "$p" 2>/dev/null && alive+=("$p"); done
        ((${#alive[@]})) || break
        sleep 0.1
    done
    if ((${#alive[@]})); then
        for p in "${alive[@]}"; do log "${PID_NAME[$p]:-pid $p} (pid $p) did not stop; killing it"; done
        kill -KILL "${alive[@]}" 2>/dev/null || true
    fi
    for pid in "$@"; do wait "$pid" 2>/dev/null || true; done
    local -a kept=()
    for i in "${PIDS[@]}"; do [[ " $* " == *" $i "* ]] || kept+=("$i"); done
    PIDS=("${kept[@]}")
}

stop_pid() { # PID: stop_pids for one
    stop_pids "$1"
}

cleanup() {
    local status=$?
    trap - EXIT INT TERM
    # Every server at once, so that they stop in parallel.
    ((${#PIDS[@]} == 0)) || stop_pids "${PIDS[@]}"
    if ((KEEP_TMP)) || ((FAILED)); then
        log "logs, configs and raw outputs kept in $TMP"
    else
        rm -rf -- "$TMP"
    fi
    exit "$status"
}

# CPU accounting: where a measurement's CPU time went, so a req/s figure says what bounded it. Ticks are
# /proc's (CLK_TCK, 100 a second here): utime + stime of a process and its descendants (nginx's workers), and the
# whole machine's busy time (everything but idle and iowait, interrupts included).
process_ticks() { # PID...: user + system ticks of each PID and of all its descendants (nginx's workers), summed
    local pid member total=0 fields
    local -a stat
    for pid in "$@"; do
        for member in $(process_tree "$pid"); do
            [[ -r /proc/$member/stat ]] && fields=$(sed 's/^.*) //' "/proc/$member/stat" 2>/dev/null) || continue
            # Fields after the command's closing parenthesis: utime and stime are the 12th and 13th of them.
            read -r -a stat <<<"$fields"
            total=$((total + stat[11] + stat[12]))
        done
    done
    echo "$total"
}

machine_busy_ticks() { # busy ticks of every core since boot
    awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat
}

ticks_per_request_us() { # TICKS REQUESTS: microseconds of CPU per request
    awk -v t="$1" -v n="$2" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.1f", (n > 0 ? t * 1e6 / hz / n : 0) }'
}

cpu_mark() { # PID...: one CPU sample: the machine's busy ticks, then each PID's (with its descendants), on one line
    local pid line
    line=$(machine_busy_ticks)
    for pid in "$@"; do
        line+=" $(process_ticks "$pid")"
    done
    echo "$line"
}

cpu_per_request() { # BEFORE AFTER REQUESTS: two cpu_marks' µs of CPU per request: each PID's, then the rest's
    local -a before after
    local i ticks rest line=""
    read -r -a before <<<"$1"
    read -r -a after <<<"$2"
    rest=$((after[0] - before[0]))
    for ((i = 1; i < ${#before[@]}; i++)); do
        ticks=$((after[i] - before[i]))
        rest=$((rest - ticks))
        line+="$(ticks_per_request_us "$ticks" "$3") "
    done
    echo "$line$(ticks_per_request_us "$rest" "$3")"
}

start() { # NAME LOG COMMAND...: runs COMMAND in the background; LAST_PID and SERVER_PID[NAME] are its pid
    local name=$1 logfile=$2
    shift 2
    "$@" >"$logfile" 2>&1 &
    LAST_PID=$!
    PIDS+=("$LAST_PID")
    PID_NAME[$LAST_PID]=$name
    SERVER_PID[$name]=$LAST_PID
}

wait_listening() { # NAME PORT LOG
    local name=$1 port=$2 logfile=$3 pid=$LAST_PID i
    for ((i = 0; i < 200; i++)); do
        if ! kill -0 "$pid" 2>/dev/null; then
            tail -n 30 "$logfile" >&2 || true
            die "$name exited while starting (log above, $logfile)"
        fi
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            return 0
        fi
        sleep 0.1
    done
    tail -n 30 "$logfile" >&2 || true
    die "$name is not listening on 127.0.0.1:$port after 20 s"
}

free_port() { # prints a loopback port nothing listens on, below the ephemeral range
    local port tries
    for ((tries = 0; tries < 200; tries++)); do
        port=$((20000 + RANDOM % 10000))
        [[ -z ${CHOSEN_PORT[$port]:-} ]] || continue
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            echo "$port"
            return 0
        fi
    done
    die "found no free loopback port"
}
pick_port() { # VAR
    local port
    port=$(free_port)
    CHOSEN_PORT[$port]=1
    printf -v "$1" '%s' "$port"
}

# ---------------------------------------------------------------------------------------------------------------
# wrk

# Parses wrk's output into "RPS P99_MS REQUESTS CONNECT READ WRITE TIMEOUT NON2XX P50_MS MAX_MS" (-1 for a
# latency it did not print); fails when it has no Requests/sec. wrk prints the Socket errors and Non-2xx lines only
# when they are not zero. Its "timeout" counts responses slower than its --timeout (2 s), not dropped ones.
parse_wrk() { # FILE
    awk '
        function ms(text,   value, unit) {
            value = text + 0
            unit = text
            sub(/^[0-9.]+/, "", unit)
            if (unit == "us") return value / 1000
            if (unit == "ms") return value
            if (unit == "s") return value * 1000
            if (unit == "m") return value * 60000
            if (unit == "h") return value * 3600000
            return -1
        }
        /^[ \t]*Latency Distribution/ { in_dist = 1; next }
        in_dist && $1 == "50%" { p50 = ms($2) }
        in_dist && $1 == "99%" { p99 = ms($2); in_dist = 0 }
        $1 == "Latency" && NF >= 4 && !in_dist { max = ms($4) }
        / requests in / { requests = $1 }
        /^[ \t]*Socket errors:/ {
            line = $0
            sub(/.*Socket errors:[ \t]*/, "", line)
            n = split(line, parts, /,[ \t]*/)
            for (i = 1; i <= n; i++) {
                split(parts[i], kv, /[ \t]+/)
                errors[kv[1]] = kv[2] + 0
            }
        }
        /^[ \t]*Non-2xx or 3xx responses:/ { non2xx = $NF + 0 }
        /^Requests\/sec:/ { rps = $2 + 0; have_rps = 1 }
        END {
            if (!have_rps) exit 1
            if (p99 == "") p99 = -1
            if (p50 == "") p50 = -1
            if (max == "") max = -1
            printf "%.2f %.3f %d %d %d %d %d %d %.3f %.3f\n", rps, p99, requests + 0, errors["connect"] + 0,
                errors["read"] + 0, errors["write"] + 0, errors["timeout"] + 0, non2xx + 0, p50, max
        }
    ' "$1"
}
