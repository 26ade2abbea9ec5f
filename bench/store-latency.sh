#!/usr/bin/env bash
# bench/store-latency.sh: what one caller waits on each of larder's stores, for the README's table of stores.
#
# Starts one of every store on loopback, as the tests start them (crates/stores/examples/serve_stores.rs, on
# larder-testkit: memcached, redis-server, a three-master Redis Cluster, PostgreSQL run as its own user in a
# temporary data directory; a SQLite file and a file store in a temporary directory; the memory store), then runs
# `larder bench stores --concurrency 1` against all of them: get, get_many (100 keys) and set of 1 KiB values, one
# operation at a time, so ops/s is 1 / mean latency and p50/p99 are a single caller's latencies. Every server runs
# on this machine (loopback): a remote server adds the network's round trip to each figure.
#
# Needs: the servers of `make services` (run it first, as root or with sudo). Takes about a minute.
#
# Usage: bench/store-latency.sh [--seconds S] [--sizes 1K] [--json]
set -euo pipefail

SECONDS_PER=2
SIZES=1K
JSON=()
while [[ $# -gt 0 ]]; do
    case $1 in
        --seconds) SECONDS_PER=$2; shift 2 ;;
        --sizes) SIZES=$2; shift 2 ;;
        --json) JSON=(--json); shift ;;
        -h | --help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "store-latency.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done

cd "$(dirname "$0")/.."
cargo build --release -q -p larder-cli
cargo build --release -q -p larder-stores --example serve_stores

# The servers live as long as the coprocess's standard input stays open.
coproc STORES { exec target/release/examples/serve_stores; }
URLS=()
while IFS= read -r -u "${STORES[0]}" url; do
    URLS+=(--store "$url")
    [[ ${#URLS[@]} -eq 14 ]] && break
done
[[ ${#URLS[@]} -eq 14 ]] || { echo "store-latency.sh: the servers did not start (see above)" >&2; exit 1; }

echo "# $(date -u +%Y-%m-%d) larder $(target/release/larder --version | awk '{print $2}'), one caller, all servers on loopback" >&2
target/release/larder bench stores "${URLS[@]}" --concurrency 1 --seconds "$SECONDS_PER" --sizes "$SIZES" \
    --keys 1000 "${JSON[@]}"

exec {STORES[1]}>&-
wait "$STORES_PID" 2>/dev/null || true
