#!/usr/bin/env bash
# The Go client's tests, as `make test` runs them (from the repository root):
#   CACHE_DIR=~/.cache/larder LARDER_BIN=target/debug/larder LARDER_HOSTILE=target/debug/larder-hostile \
#     LARDER_FAULTS=target/debug/larder-faults bash clients/go/test.sh
# Everything Go downloads (modules from the Go module proxy, staticcheck) and builds lands under
# $CACHE_DIR/go; nothing outside it. The tests start their own memcached, redis-server (and a Cluster),
# PostgreSQL, larder-hostile and larder-faults on free loopback ports. It also builds
# clients/go/bin/larder-conformance, the Go runner of spec/conformance.py.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
: "${CACHE_DIR:?set CACHE_DIR to the cache directory for downloads (make test passes it)}"
mkdir -p "$CACHE_DIR/go/mod" "$CACHE_DIR/go/build"
export GOMODCACHE="$CACHE_DIR/go/mod" GOCACHE="$CACHE_DIR/go/build"
export GOFLAGS="-mod=readonly" GOTOOLCHAIN=local
absolute() { case "$1" in /*) echo "$1" ;; *) echo "$ROOT/$1" ;; esac; }
export LARDER_BIN="$(absolute "${LARDER_BIN:-target/debug/larder}")"
export LARDER_HOSTILE="$(absolute "${LARDER_HOSTILE:-target/debug/larder-hostile}")"
export LARDER_FAULTS="$(absolute "${LARDER_FAULTS:-target/debug/larder-faults}")"
STATICCHECK_VERSION=v0.8.2

cd "$ROOT/clients/go"
python3 "$ROOT/setup/versions.py" go
unformatted="$(gofmt -l .)"
if [ -n "$unformatted" ]; then
    echo "gofmt would change: $unformatted" >&2
    exit 1
fi
go vet ./...
go run "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION" ./...
go build -o bin/larder-conformance ./cmd/larder-conformance
go build -o bin/larder-go ./cmd/larder-go
go test -race -count=1 -timeout 170s ./...
# A short coverage-guided run of the entry decoder's fuzz target on top of its seeds (every vector entry).
go test -run XXX -fuzz FuzzDecode -fuzztime 8s ./format/
