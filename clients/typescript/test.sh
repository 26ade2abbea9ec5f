#!/usr/bin/env bash
# make test's entry for the TypeScript client. Run from the repository root with
#   CACHE_DIR      where downloads are cached (npm's cache goes to $CACHE_DIR/npm)
#   LARDER_BIN     target/debug/larder (the reference CLI the format commands are checked against)
#   LARDER_HOSTILE target/debug/larder-hostile (hostile memcached/Redis servers for the store tests)
#   LARDER_FAULTS  target/debug/larder-faults (the fault proxy outage.json puts before memcached and Redis)
# It installs the locked dependencies from the npm registry (npm ci), typechecks, lints, builds and runs the tests.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
: "${CACHE_DIR:?CACHE_DIR is the downloads cache directory}"
export npm_config_cache="$CACHE_DIR/npm"
export npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false
export LARDER_BIN="${LARDER_BIN:-$PWD/target/debug/larder}"
export LARDER_HOSTILE="${LARDER_HOSTILE:-$PWD/target/debug/larder-hostile}"
export LARDER_FAULTS="${LARDER_FAULTS:-$PWD/target/debug/larder-faults}"

# The sqlite:// store calls the system SQLite (libsqlite3-0) through koffi (setup/debian-packages.txt).
"$here/../../setup/debian-packages.sh" typescript
python3 "$here/../../setup/versions.py" typescript

cd "$here"
npm ci --no-progress --loglevel=error
npx biome check src test bench
npm run --silent build
# Type-checks everything (src, tests, bench) as it compiles the tests: one tsc run, not a --noEmit one first.
rm -rf build
npx tsc -p tsconfig.json
node --test --test-concurrency=3 build/test/*.test.js
# Keyv's own suite for storage adapters (@keyv/test-suite runs under vitest) on memory, memcached and Redis.
npx vitest run
