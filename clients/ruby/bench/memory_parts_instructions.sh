#!/bin/bash
# bench/memory_parts.rb counted in instructions instead of CPU time (issue 18 target 2: on a shared machine the load
# moves CPU µs by more than the differences in question; instruction counts do not move). Each part runs N calls
# once, between two calls of Process.getsid; callgrind dumps its counts before each (--dump-before=getsid), so dump
# k+1 holds part k alone. Printed: user-space instructions per call (per key for read_multi), less the empty loop's.
#
#   clients/ruby/bench/memory_parts_instructions.sh               # 1 KiB values, N=2000
#   SIZE=65536 N=1000 clients/ruby/bench/memory_parts_instructions.sh
set -euo pipefail
export N=${N:-2000}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
CALLGRIND=1 valgrind --tool=callgrind --dump-instr=no --dump-before=getsid --callgrind-out-file="$out/cg.%p" \
  ruby "$(dirname "$0")/memory_parts.rb" >"$out/names" 2>"$out/log" || { tail -20 "$out/log"; exit 1; }
dump=2 # dump 1 is the setup
empty=""
while IFS=$'\t' read -r name per; do
  total=$(awk '/^totals:/ {print $2}' "$out"/cg.*."$dump")
  per_call=$((total / N))
  empty=${empty:-$per_call}
  printf "| %-70s | %9d |\n" "$name" $(((per_call - empty) / per))
  dump=$((dump + 1))
done <"$out/names"
