#!/usr/bin/env bash
# setup/debian-packages.sh GROUP...: the Debian packages of GROUPs (setup/debian-packages.txt), at the version a fresh
# install would get today.
#
# A test that passes on a machine with last month's packages and fails on a new one is a test nobody can trust, so
# this does not only install what is missing: it also upgrades every package of the groups, and every installed
# package they depend on, whose version is older than apt's candidate (security updates included). A machine set up
# last month and one set up today (whose image may hold older copies of some of them, PostgreSQL's among them) then
# run the same versions. The package lists are refreshed (`apt-get update`) when this script's last refresh is older
# than LARDER_APT_MAX_AGE seconds (default 3600); a check whose answer cannot have changed since (no refresh, dpkg's
# status untouched) is skipped. apt runs through sudo unless root, one run at a time, its output in
# $CACHE_DIR/debian-packages/apt.log. Used by the Makefile and clients/*/test.sh.
#
#   setup/debian-packages.sh services ruby     # install and bring up to date
#   setup/debian-packages.sh --list ruby       # print the packages of the groups, nothing else
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
list="$here/debian-packages.txt"

list_only=false
if [ "${1:-}" = "--list" ]; then
  list_only=true
  shift
fi
[ $# -gt 0 ] || { echo "usage: $0 [--list] GROUP... (groups: $(awk '!/^#/ && NF {print $1}' "$list" | sort -u | xargs))" >&2; exit 2; }

packages=()
for group in "$@"; do
  found=$(awk -v g="$group" '!/^#/ && $1 == g {print $2}' "$list")
  [ -n "$found" ] || { echo "$0: no group '$group' in $list" >&2; exit 2; }
  # shellcheck disable=SC2206
  packages+=($found)
done
if $list_only; then
  printf '%s\n' "${packages[@]}"
  exit 0
fi

command -v apt-get >/dev/null 2>&1 || { echo "$0: needs apt-get (Debian 12 or alike) to install: ${packages[*]}" >&2; exit 1; }
SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
export DEBIAN_FRONTEND=noninteractive
state="${CACHE_DIR:-${LARDER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/larder}}/debian-packages"
mkdir -p "$state"
# One run at a time (two `make test` at once, or a suite beside another), and apt waits for any other dpkg user.
exec 9>"$state/lock"
flock 9
apt=(apt-get -q -o DPkg::Lock::Timeout=600)
updated="$state/updated"
checked="$state/checked-$(IFS=-; printf %s "$*" | tr -c "a-z0-9-" _)"

# Fresh lists: what a new machine would see. Offline with everything installed, the old lists do (said, not hidden).
max_age="${LARDER_APT_MAX_AGE:-3600}"
if [ ! -e "$updated" ] || [ $(($(date +%s) - $(stat -c %Y "$updated"))) -gt "$max_age" ]; then
  if $SUDO "${apt[@]}" update >"$state/update.log" 2>&1; then
    touch "$updated"
  else
    echo "debian packages: apt-get update failed (tail of $state/update.log below); checking against the lists there are" >&2
    tail -5 "$state/update.log" >&2
  fi
fi

if [ -e "$checked" ] && [ "$checked" -nt /var/lib/dpkg/status ] && { [ ! -e "$updated" ] || [ "$checked" -nt "$updated" ]; }; then
  exit 0
fi

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
# apt's own output goes to a log, shown when it fails.
log="$state/apt.log"
run_apt() {
  if ! $SUDO "${apt[@]}" "$@" >"$log" 2>&1; then
    echo "debian packages: apt-get $* failed; the end of $log:" >&2
    tail -20 "$log" >&2
    exit 1
  fi
}
if [ "${#missing[@]}" -gt 0 ]; then
  echo "debian packages: installing ${missing[*]}"
  run_apt install -y --no-install-recommends "${missing[@]}"
fi

# The groups' packages and everything they depend on (not what they recommend), as apt resolves it now.
closure=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces \
  --no-enhances "${packages[@]}" 2>/dev/null | awk '/^[^ <]/ {print $1}' | sort -u)
# Installed version and candidate of each, "package installed candidate", for those installed.
outdated=()
while read -r package installed candidate; do
  if [ "$candidate" != "(none)" ] && dpkg --compare-versions "$installed" lt "$candidate"; then
    outdated+=("$package $installed -> $candidate")
  fi
done < <(
  # shellcheck disable=SC2086
  apt-cache policy $closure 2>/dev/null | awk '
    /^[^ ]/ { package = $1; sub(/:$/, "", package) }
    $1 == "Installed:" { installed = $2 }
    $1 == "Candidate:" && installed != "(none)" { print package, installed, $2 }'
)
if [ "${#outdated[@]}" -gt 0 ]; then
  echo "debian packages: upgrading to what a fresh install gets: $(printf '%s, ' "${outdated[@]}" | sed 's/, $//')"
  run_apt install -y --no-install-recommends --only-upgrade "${outdated[@]%% *}"
fi
touch "$checked"
