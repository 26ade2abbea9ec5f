#!/usr/bin/env bash
# The Elixir client's part of `make test`, run from the repository root:
#   CACHE_DIR=… LARDER_BIN=target/debug/larder LARDER_HOSTILE=target/debug/larder-hostile clients/elixir/test.sh
# Installs the Debian packages it needs when missing (Elixir, the Erlang applications, a C compiler with the zstd and
# Brotli headers for the codec port, memcached, redis-server),
# then checks formatting, compiles with warnings as errors and runs the ExUnit suite (which starts its own
# memcached and redis-server on free loopback ports). No Hex: the project has no dependencies to fetch.
set -euo pipefail

root="$(pwd)"
here="$root/clients/elixir"
# gcc, libzstd-dev and libbrotli-dev build priv/bin/larder_codec (zstd and Brotli through a port, c_src/).
# util-linux gives flock(1) for the file store; ruby and its libraries run the Ruby side of the cross-language tests
# (the Python side uses the repository's .venv, which make test builds). erlang-p1-sqlite3 is the driver of sqlite://.
packages=(elixir erlang-crypto erlang-inets erlang-public-key erlang-ssl erlang-p1-sqlite3 gcc libc6-dev libzstd-dev
  libbrotli-dev memcached redis-server util-linux ruby ruby-msgpack ruby-sqlite3 liblz4-1 libzstd1 libsnappy1v5 libbrotli1)

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "installing: ${missing[*]}"
  SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

cache="${CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/larder}"
export MIX_HOME="$cache/mix" HEX_HOME="$cache/hex" HEX_OFFLINE=1
export LARDER_BIN="${LARDER_BIN:-$root/target/debug/larder}"
export LARDER_HOSTILE="${LARDER_HOSTILE:-$root/target/debug/larder-hostile}"
case "$LARDER_BIN" in /*) ;; *) LARDER_BIN="$root/$LARDER_BIN" ;; esac
case "$LARDER_HOSTILE" in /*) ;; *) LARDER_HOSTILE="$root/$LARDER_HOSTILE" ;; esac
mkdir -p "$MIX_HOME" "$HEX_HOME"

cd "$here"
mix format --check-formatted
MIX_ENV=dev mix compile --warnings-as-errors --force
MIX_ENV=test mix compile --warnings-as-errors --force
mix test
