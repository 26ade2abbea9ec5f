#!/bin/sh
# The 003 table, rebuilt: the example Rails 6.1 app (examples/page_app, on WEBrick) writes its pages into memcached
# through Larder::Rack::PageCache, and `larder serve --store memcached://…` answers them without reaching Ruby.
# Prints the time to complete 100, 1,000 and 10,000 requests straight to Rails and through larder, and the speedup.
#
#   clients/ruby/bench/rails-page-cache.sh            (from the repository root or anywhere)
#
# Needs: ruby, ruby-railties, ruby-actionpack, ruby-webrick, memcached, curl, Go (for httpcount.go, the load
# generator), and target/release/larder
# (built here if missing: cargo build --release -p larder-cli). Knobs: CONNECTIONS (8), PAGE (/opt/1),
# COUNTS ("100 1000 10000").
set -eu
here=$(cd "$(dirname "$0")" && pwd)
ruby_dir=$(dirname "$here")
repo=$(cd "$ruby_dir/../.." && pwd)
larder=${LARDER_BIN:-$repo/target/release/larder}
connections=${CONNECTIONS:-8}
page=${PAGE:-/opt/1}
counts=${COUNTS:-"100 1000 10000"}

for tool in memcached go ruby curl; do
  command -v "$tool" >/dev/null || { echo "$tool is missing: run \`make services\` (Debian: memcached ruby curl; Go 1.2x)" >&2; exit 1; }
done
[ -x "$larder" ] || (cd "$repo" && cargo build --release -p larder-cli)

free_port() { ruby -rsocket -e 's = TCPServer.new("127.0.0.1", 0); puts s.addr[1]; s.close'; }
wait_port() {
  i=0
  until ruby -rsocket -e "TCPSocket.new('127.0.0.1', $1).close" 2>/dev/null; do
    i=$((i + 1)); [ $i -lt 600 ] || { echo "nothing listens on $1" >&2; exit 1; }; sleep 0.1
  done
}
pids=""
cleanup() { for pid in $pids; do kill "$pid" 2>/dev/null || true; done; rm -f "${loadgen:-}"; }
trap cleanup EXIT INT TERM

mc_port=$(free_port); rails_port=$(free_port); front_port=$(free_port)
memcached -l 127.0.0.1 -p "$mc_port" -m 64 -t 1 -U 0 -u root & pids="$pids $!"
wait_port "$mc_port"
LARDER_STORE="memcached://127.0.0.1:$mc_port" RAILS_ENV=production \
  ruby "$ruby_dir/examples/page_app/app.rb" "$rails_port" 2>/dev/null & pids="$pids $!"
wait_port "$rails_port"
"$larder" serve --upstream "http://127.0.0.1:$rails_port" --listen "127.0.0.1:$front_port" --no-admin \
  --store "memcached://127.0.0.1:$mc_port" >/dev/null 2>&1 & pids="$pids $!"
wait_port "$front_port"

# Warm both: Rails renders once, and once for the front's key (the page cache writes it). Rails 6.1 varies on
# Accept, so the warm-up sends what the load generator sends: no Accept field.
curl -fsS -H "Accept:" -o /dev/null "http://127.0.0.1:$rails_port$page"
curl -fsS -H "Accept:" -o /dev/null "http://127.0.0.1:$front_port$page"

# The load generator (Go, standard library only): the time to complete N requests.
loadgen="${TMPDIR:-/tmp}/larder-httpcount-$$"
(cd "$here" && go build -o "$loadgen" httpcount.go)
seconds() { "$loadgen" -n "$2" -c "$connections" "$1"; }

app_requests() { curl -fsS "http://127.0.0.1:$rails_port/stats" | sed 's/.*"requests":\([0-9]*\).*/\1/'; }
echo "page $page, $connections keep-alive connections; $(nproc) cores shared by the app, larder, memcached and the client"
printf '| requests | straight to Rails (WEBrick) | through larder (memcached) | speedup | of those, reached Ruby |\n'
printf '|---|---|---|---|---|\n'
for n in $counts; do
  set -- $(seconds "http://127.0.0.1:$rails_port$page" "$n"); rails_s=$1
  # The page lives 60 s (the app's opt-in): render it again for the front if it expired during the Rails run.
  curl -fsS -H "Accept:" -o /dev/null "http://127.0.0.1:$front_port$page"
  before=$(app_requests)
  set -- $(seconds "http://127.0.0.1:$front_port$page" "$n"); front_s=$1
  reached=$(($(app_requests) - before))
  speedup=$(awk "BEGIN { printf \"%.0f\", $rails_s / $front_s }")
  printf '| %s | %s s | %s s | %s× | %s |\n' "$n" "$rails_s" "$front_s" "$speedup" "$reached"
done
