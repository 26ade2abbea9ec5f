#!/usr/bin/env bash
# The Elixir client's part of `make test`, run from the repository root:
#   CACHE_DIR=… LARDER_BIN=target/debug/larder LARDER_HOSTILE=target/debug/larder-hostile \
#     LARDER_FAULTS=target/debug/larder-faults clients/elixir/test.sh
# Installs the Debian packages it needs when missing (Elixir, the Erlang applications, a C compiler with the zstd and
# Brotli headers for the codec port, memcached, redis-server),
# then checks formatting, compiles with warnings as errors and runs the ExUnit suite (which starts its own
# memcached and redis-server on free loopback ports). No Hex: the project has no dependencies to fetch.
set -euo pipefail

root="$(pwd)"
here="$root/clients/elixir"
# Elixir, the Erlang applications, gcc with the zstd and Brotli headers for the codec port (priv/bin/larder_codec),
# erlang-p1-sqlite3 (sqlite://); the servers; Ruby, for the Ruby side of the cross-language tests (the Python side
# uses the repository's .venv, which make test builds). Listed in setup/debian-packages.txt.
"$root/setup/debian-packages.sh" elixir services ruby
python3 "$root/setup/versions.py" elixir

cache="${CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/larder}"
export MIX_HOME="$cache/mix" HEX_HOME="$cache/hex" HEX_OFFLINE=1
export LARDER_BIN="${LARDER_BIN:-$root/target/debug/larder}"
export LARDER_HOSTILE="${LARDER_HOSTILE:-$root/target/debug/larder-hostile}"
export LARDER_FAULTS="${LARDER_FAULTS:-$root/target/debug/larder-faults}"
case "$LARDER_BIN" in /*) ;; *) LARDER_BIN="$root/$LARDER_BIN" ;; esac
case "$LARDER_HOSTILE" in /*) ;; *) LARDER_HOSTILE="$root/$LARDER_HOSTILE" ;; esac
case "$LARDER_FAULTS" in /*) ;; *) LARDER_FAULTS="$root/$LARDER_FAULTS" ;; esac
mkdir -p "$MIX_HOME" "$HEX_HOME"

cd "$here"
mix format --check-formatted
MIX_ENV=dev mix compile --warnings-as-errors --force
MIX_ENV=test mix compile --warnings-as-errors --force
mix test
