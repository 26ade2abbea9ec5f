#!/usr/bin/env bash
# bench/all.sh (`make bench`): every side-by-side comparison of larder against its peers, one after another, with
# a progress line per step, then one report: the tables in docs/benchmarks.md's form and a chart per comparison.
#
# Why one command: the comparisons (the front against nginx and Varnish, the front on memcached against nginx
# memcached_pass, the store clients against memaslap and redis-benchmark, per-hit instruction counts, the embedded
# store against quick_cache and moka, the Python and Ruby clients against their frameworks' own backends, the
# TypeScript, Go and Elixir clients against their ecosystems' clients and designs) were
# separate scripts with separate reports. Each script still runs alone; here they run in a row, each writes its raw
# rounds (bench/report.py's input) beside its printed table, and bench/report.py draws every table and chart from
# those, so that statistics live in one place.
#
# Output: bench/results/<date>T<time>/ (not in git): one .txt per step (what it printed), raw.jsonl (every
# round of every comparison), report.md (the tables, for docs/benchmarks.md) and charts/*.svg. --charts DIR also
# copies the charts there (docs/bench/ is where docs/benchmarks.md links them).
#
# Time: about 90 minutes in full (the drills 25, the soak 30); --quick runs each step's smoke mode (about 12
# minutes). Steps whose tools are
# missing are installed from Debian's packages by the scripts themselves (run as root), or skipped with the reason.
#
# Usage: bench/all.sh [--quick] [--only STEP,...] [--skip STEP,...] [--charts DIR] [--list] [-h|--help]
set -euo pipefail

BENCH_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
REPO_ROOT=$(cd -- "$BENCH_DIR/.." && pwd -P)

# name | what it compares | full command | quick command (relative to the repository root)
STEPS=(
    "peers|cached hits: larder, nginx proxy_cache, Varnish (10 KB, 100 KB, 1 MB)|bench/peers.sh --raw @RAW@|bench/peers.sh --quick --no-hold --raw @RAW@"
    "front-memcached|the front on memcached, no L1, against nginx memcached_pass|bench/front-memcached.sh --raw @RAW@|bench/front-memcached.sh --quick --raw @RAW@"
    "stores|store clients against memaslap and redis-benchmark|bench/stores.sh --raw @RAW@|bench/stores.sh --quick --raw @RAW@"
    "store-latency|one caller's latency on every store|bench/store-latency.sh|bench/store-latency.sh --seconds 1"
    "hit-instructions|instructions and system calls per cached hit, larder beside nginx, from memory (10 KB, 100 KB), memcached and Redis|bench/hit-instructions.sh --against nginx --syscalls 3000 && bench/hit-instructions.sh --page-kb 100 --against nginx --syscalls 3000 && bench/hit-instructions.sh --store memcached --against nginx --syscalls 3000 && bench/hit-instructions.sh --store redis --syscalls 3000|bench/hit-instructions.sh --against nginx 500 && bench/hit-instructions.sh --store memcached --against nginx 500"
    "memory|the embedded store against quick_cache and moka: bytes per entry, throughput|target/release/larder bench memory|target/release/larder bench memory --entries 100000 --time-ms 300"
    "hit-ratio|eviction: larder beside LRU, ARC, S3-FIFO and SIEVE on a Zipf trace and every public trace in the cache directory|bench/hit-ratio.sh --raw @RAW@|bench/hit-ratio.sh --quick --raw @RAW@"
    "shared-proxies|three proxies sharing memcached against three with private memory|bench/shared-proxies.sh --with-l1|bench/shared-proxies.sh --quick"
    "python|larder's Django backend against Django's own backends and django-redis (strings and structured values: query results, a document, a page)|@PY@ && .venv/bin/python clients/python/bench/django_backends.py --raw @RAW@|@PY@ && .venv/bin/python clients/python/bench/django_backends.py --rounds 1 --seconds 0.05 --raw @RAW@"
    "ruby|LarderStore against Dalli's MemCacheStore, RedisCacheStore and MemoryStore: text, a rendered page, query results (1 KiB, 64 KiB) and a nested document|ruby clients/ruby/bench/stores.rb --raw @RAW@|ROUNDS=1 SECONDS=0.2 ruby clients/ruby/bench/stores.rb --raw @RAW@"
    "typescript|the TypeScript stores and KeyvLarder (strings and structured values: query results, a document, a page) against memjs, ioredis, node-redis, @keyv/memcache, @keyv/redis and lru-cache|@TS@ && node clients/typescript/build/bench/clients.js --seconds 1 --rounds 5 --raw @RAW@|@TS@ && node clients/typescript/build/bench/clients.js --seconds 0.2 --rounds 1 --raw @RAW@"
    "drills|fault drills: the front and every client's fetch while the store is frozen, killed, slowed, restarted empty, or loses one of three servers|.venv/bin/python bench/drills.py --charts docs/bench|.venv/bin/python bench/drills.py --quick"
    "soak|the front with an L1 over memcached under mixed load for 30 minutes: memory, descriptors, latency|.venv/bin/python bench/soak.py --seconds 1800|.venv/bin/python bench/soak.py --seconds 60"
    "go|the Go stores (strings and structured values, as maps and as structs) against otter, gomemcache and go-redis with encoding/json|@GO@ ROUNDS=8 BENCHTIME=0.3s bash clients/go/bench/rounds.sh --raw @RAW@|@GO@ ROUNDS=2 BENCHTIME=0.05s bash clients/go/bench/rounds.sh --raw @RAW@"
    "elixir|Larder.Cache against source document 004's design (1M inserts) and structured values against ETS of term_to_binary and term_to_binary/jiffy over larder's memcached and Redis clients|@EX@ mix run bench/structured.exs --raw @RAW@|@EX@ mix run bench/structured.exs --quick --raw @RAW@"
)
# What the TypeScript and Go steps need first: their dependencies from npm's lockfile and Go's module proxy, cached
# where make test caches them, and the TypeScript build.
CACHE_DIR=${LARDER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/larder}
TS_SETUP="(cd clients/typescript && npm_config_cache='$CACHE_DIR/npm' npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false npm ci --no-progress --loglevel=error >&2 && npx tsc -p tsconfig.json >&2)"
GO_ENV="GOMODCACHE='$CACHE_DIR/go/mod' GOCACHE='$CACHE_DIR/go/build' GOFLAGS=-mod=readonly GOTOOLCHAIN=local"
# The Python step's peers (pymemcache, redis, django-redis) beside the test environment, from PyPI into pip's cache.
PY_SETUP=".venv/bin/pip install -q --disable-pip-version-check -r clients/python/bench/requirements.txt >&2"
# The Elixir step runs in the client's folder with Mix's home where make test keeps it (no Hex), and schedulers that
# do not spin while idle (their busy-waiting would count as the benchmark's CPU).
EX_ENV="cd clients/elixir && MIX_HOME='$CACHE_DIR/mix' HEX_OFFLINE=1 ELIXIR_ERL_OPTIONS='+sbwt none +sbwtdcpu none +sbwtdio none'"

usage() {
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//'
}

QUICK=0 ONLY="" SKIP="" CHARTS="" LIST=0
while (($#)); do
    case "$1" in
        --quick) QUICK=1 ;;
        --only | --skip | --charts)
            (($# >= 2)) || { echo "bench/all.sh: $1 needs a value" >&2; exit 2; }
            case "$1" in --only) ONLY=$2 ;; --skip) SKIP=$2 ;; --charts) CHARTS=$2 ;; esac
            shift
            ;;
        --list) LIST=1 ;;
        -h | --help) usage; exit 0 ;;
        *) usage >&2; echo "bench/all.sh: unknown option '$1'" >&2; exit 2 ;;
    esac
    shift
done

names=()
for step in "${STEPS[@]}"; do names+=("${step%%|*}"); done
for list in "$ONLY" "$SKIP"; do
    IFS=, read -r -a asked <<<"$list"
    for name in "${asked[@]}"; do
        [[ " ${names[*]} " == *" $name "* ]] || { echo "bench/all.sh: no step '$name' (steps: ${names[*]})" >&2; exit 2; }
    done
done
if ((LIST)); then
    for step in "${STEPS[@]}"; do IFS='|' read -r name what _ <<<"$step"; printf '%-17s %s\n' "$name" "$what"; done
    exit 0
fi

cd "$REPO_ROOT"
OUT=bench/results/$(date -u +%Y-%m-%dT%H%M%S)
mkdir -p "$OUT"
RAW=$PWD/$OUT/raw.jsonl
: >"$RAW"

echo "building larder (release)" >&2
cargo build --release -p larder-cli >&2

selected=()
for step in "${STEPS[@]}"; do
    name=${step%%|*}
    [[ -z $ONLY || ",$ONLY," == *",$name,"* ]] || continue
    [[ -n $SKIP && ",$SKIP," == *",$name,"* ]] && continue
    selected+=("$step")
done

started=$SECONDS
failed=()
i=0
for step in "${selected[@]}"; do
    i=$((i + 1))
    IFS='|' read -r name what full quick <<<"$step"
    command=$full
    ((QUICK)) && command=$quick
    command=${command//@RAW@/"$RAW"}
    command=${command//@TS@/"$TS_SETUP"}
    command=${command//@GO@/"$GO_ENV"}
    command=${command//@EX@/"$EX_ENV"}
    command=${command//@PY@/"$PY_SETUP"}
    printf '[%d/%d %s] %s: %s\n' "$i" "${#selected[@]}" "$(date -u +%H:%M:%S)" "$name" "$what" >&2
    step_started=$SECONDS
    if bash -c "$command" >"$OUT/$name.txt" 2>"$OUT/$name.log"; then
        printf '    done in %d s -> %s/%s.txt\n' "$((SECONDS - step_started))" "$OUT" "$name" >&2
    else
        failed+=("$name")
        printf '    FAILED after %d s (%s/%s.log):\n' "$((SECONDS - step_started))" "$OUT" "$name" >&2
        tail -n 5 "$OUT/$name.log" | sed 's/^/      /' >&2
    fi
done

{
    echo "# larder benchmarks, $(date -u +%F) ($(nproc) cores; \`make bench$( ((QUICK)) && echo " QUICK=1")\`)"
    echo
    if [[ -s $RAW ]]; then python3 bench/report.py markdown "$RAW"; fi
    for step in "${selected[@]}"; do
        IFS='|' read -r name what full quick <<<"$step"
        grep -q "\"bench\": *\"$name\"" "$RAW" 2>/dev/null && continue
        [[ -s $OUT/$name.txt ]] || continue
        echo "### $what"
        echo
        echo "\`$( ((QUICK)) && echo "$quick" || echo "$full")\`" | sed "s|@RAW@|FILE|g"
        echo
        echo '```'
        cat "$OUT/$name.txt"
        echo '```'
        echo
    done
} >"$OUT/report.md"
if [[ -s $RAW ]]; then
    python3 bench/report.py svg "$RAW" --out "$OUT/charts" >/dev/null
    if [[ -n $CHARTS ]]; then
        mkdir -p "$CHARTS"
        cp "$OUT"/charts/*.svg "$CHARTS"/
    fi
fi

echo >&2
echo "bench/all.sh: ${#selected[@]} step(s) in $(((SECONDS - started) / 60)) min; report: $OUT/report.md; charts: $OUT/charts/" >&2
if ((${#failed[@]})); then
    echo "bench/all.sh: failed: ${failed[*]} (their logs are in $OUT)" >&2
    exit 1
fi
