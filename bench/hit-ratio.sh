#!/usr/bin/env bash
# bench/hit-ratio.sh: larder's eviction beside LRU, ARC, S3-FIFO and SIEVE on every trace at hand, one table.
#
# Why a script: the public traces are not in this repository and `make bench` downloads only from package
# registries, so what can be replayed depends on what the user has fetched. This replays the synthetic Zipf trace
# always, and each public trace found in $LARDER_TRACES or $XDG_CACHE_HOME/larder/traces (the cache directory the
# harness's own test reads) at the capacities of docs/benchmarks.md's table, appending every row to --raw FILE
# (bench "hit-ratio": misses per policy and capacity, larder's target <= each reference) for bench/report.py.
# Where each trace comes from is in docs/benchmarks.md ("Eviction hit ratio"); file names as published:
#   arc-OLTP.lis.zst, arc-P3.lis.zst (moka-rs/cache-trace), lirs-sprite.trace.gz, lirs-multi1.trace.gz,
#   cache2k-web07.trace.xz (Caffeine's simulator), cloudPhysicsIO.oracleGeneral.bin (libCacheSim's data/).
#
# Usage: bench/hit-ratio.sh [--quick] [--raw FILE]   (LARDER_BIN as the other scripts)
set -euo pipefail

BENCH_NAME=hit-ratio
# shellcheck source=bench/lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

QUICK=0 RAW_OUT=""
while (($#)); do
    case $1 in
        --quick) QUICK=1; shift ;;
        --raw) [[ -n ${2:-} ]] || die "--raw needs a file"; RAW_OUT=$2; shift 2 ;;
        -h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown option '$1' (--quick, --raw FILE)" ;;
    esac
done
BUILD=0
larder_ready() { "$LARDER" bench hit-ratio --help 2>/dev/null | grep -q -- '--policies'; }
ensure_larder "'bench hit-ratio --policies'"

RAW_ARGS=()
[[ -z $RAW_OUT ]] || RAW_ARGS=(--raw "$RAW_OUT")
replay() { # ARGS...: one replay, its table on stdout
    echo "\$ larder bench hit-ratio $*"
    "$LARDER" bench hit-ratio "$@" "${RAW_ARGS[@]}"
    echo
}

if ((QUICK)); then
    replay --zipf 0.99 --capacity 1000
    exit 0
fi
replay --zipf 0.99 --capacity 1000,10000
# name | format | capacities
TRACES=(
    "arc-OLTP.lis.zst|arc|1000,2000,5000,10000,15000"
    "arc-P3.lis.zst|arc|1000,5000,10000,50000,100000,200000,400000"
    "lirs-sprite.trace.gz|lirs|100,200,500,1000,2000,5000"
    "lirs-multi1.trace.gz|lirs|100,200,500,1000,2000"
    "cache2k-web07.trace.xz|cache2k|100,500,1000,2000,5000,10000"
    "cloudPhysicsIO.oracleGeneral.bin|oracle-general|128M,256M,384M,512M,640M,768M,896M,1G"
)
DIRS=()
[[ -n ${LARDER_TRACES:-} ]] && DIRS+=("$LARDER_TRACES")
DIRS+=("${XDG_CACHE_HOME:-$HOME/.cache}/larder/traces")
missing=()
for trace in "${TRACES[@]}"; do
    IFS='|' read -r name format capacities <<<"$trace"
    found=""
    for dir in "${DIRS[@]}"; do
        [[ -f $dir/$name ]] && { found=$dir/$name; break; }
    done
    if [[ -n $found ]]; then
        replay --trace "$found" --format "$format" --capacity "$capacities"
    else
        missing+=("$name")
    fi
done
((${#missing[@]} == 0)) || log "not found in ${DIRS[*]} (so not replayed): ${missing[*]}"
