#!/usr/bin/env bash
# Puts ActiveSupport's own test suite (activesupport/test, at the version of the installed ruby-activesupport) in
# the user's cache directory, from Debian's source package of rails: the orig tarball of the same upstream version
# as the binary package. Nothing is written outside $1 (no change to the system's apt sources: apt runs on a private
# list of deb-src entries made from the system's own deb entries). Prints the path of activesupport/test.
#
#   fetch_rails_tests.sh CACHE_DIR
#
# The security suite's .dsc and debian.tar.xz of a revision can be missing from the mirror while the orig tarball
# is there (seen for 6.1.7.10+dfsg-1~deb12u3), so only the orig tarball is required.
set -euo pipefail

cache=${1:?usage: fetch_rails_tests.sh CACHE_DIR}
full_version=$(dpkg-query -W -f='${Version}' ruby-activesupport 2>/dev/null) || {
    echo "fetch_rails_tests: ruby-activesupport is not installed (make ruby-packages)" >&2
    exit 1
}
upstream=${full_version#*:}
upstream=${upstream%%+*}
upstream=${upstream%%-*}
dir="$cache/rails-$upstream"
tests="$dir/rails-$upstream/activesupport/test"
mkdir -p "$cache"
# One fetch at a time: two runs of make test on one machine share this cache.
exec 9>"$dir.lock"
flock 9
if [ -f "$tests/cache/behaviors.rb" ]; then
    echo "$tests"
    exit 0
fi

work="$cache/apt"
mkdir -p "$work/lists/partial" "$work/parts" "$dir"
# deb-src entries for the suites the system installs from (deb822 .sources files and one-line .list files).
: > "$work/parts/larder-src.sources"
for file in /etc/apt/sources.list.d/*.sources; do
    # Each stanza (paragraph) of Debian's own archives that installs binary packages, as a deb-src stanza.
    [ -f "$file" ] && awk -v RS= -v ORS='\n\n' '/Types:[^\n]*deb/ && /URIs:[^\n]*debian/' "$file" \
        | sed 's/^Types:.*$/Types: deb-src/' >> "$work/parts/larder-src.sources"
done
: > "$work/parts/larder-src.list"
for file in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$file" ] && grep -E '^deb ' "$file" | grep -E 'debian' | sed 's/^deb /deb-src /' >> "$work/parts/larder-src.list" || true
done
apt=(apt-get -q -o "Dir::Etc::SourceList=/dev/null" -o "Dir::Etc::SourceParts=$work/parts"
     -o "Dir::State::Lists=$work/lists" -o "APT::Sandbox::User=$(id -un)")
echo "fetch_rails_tests: downloading Debian's rails $full_version source (orig tarball) into $dir" >&2
# Another entry's index may be missing (a third-party archive without sources): what matters is rails's.
"${apt[@]}" update >&2 || true
(cd "$dir" && "${apt[@]}" source --download-only "rails=$full_version" >&2) || true
orig=$(ls "$dir"/rails_"$upstream"*.orig.tar.* 2>/dev/null | head -1)
if [ -z "$orig" ]; then
    echo "fetch_rails_tests: Debian's mirror gave no orig tarball of rails $full_version" >&2
    exit 1
fi
tar -xf "$orig" -C "$dir" "rails-$upstream/activesupport/test"
[ -f "$tests/cache/behaviors.rb" ] || { echo "fetch_rails_tests: $orig holds no activesupport/test/cache" >&2; exit 1; }
echo "$tests"
