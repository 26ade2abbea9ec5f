"""Installs each client as its README says, in a fresh folder outside the repository, and runs its first program.

A client that installs only from inside its own checkout, or only on the machine of the person who wrote its README,
is the first thing a new user meets, so `make test` (`make test-install`) tries each README's "## Install" section as
a new user would. That section of clients/<language>/README.md holds, in this order:

1. a ```sh block: the install lines, run in a new empty folder with `LARDER` naming the larder checkout;
2. a block in the client's language whose first line is a comment naming the file, as `# example.py`: the first
   program, written under that name into the folder the install lines ended in (`cd hello` included);
3. a ```sh block: the lines that run it;
4. a ```text block: what it prints, which must appear, line for line, in what those lines printed.

The four run as one bash script (`set -eo pipefail`) in a temporary folder outside the repository, with no LARDER_*
variable, VIRTUAL_ENV, PYTHON*, GOFLAGS or MIX_ENV inherited; downloads go where the other test scripts put them
(npm's cache, Go's module and build caches, MIX_HOME, under `${LARDER_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/larder}`;
pip's own cache). `sudo apt-get install PACKAGES` lines are run through a stand-in `sudo`: the packages already
installed are not installed again, the others are installed with `apt-get install -y` (as root, or through the real
sudo). After the program, a few lines of this script's own (each Client's `check`, not from the README) look at what
the README promises beyond it: the extras, the native codecs (Ruby's ffi and Fiddle libraries, Elixir's codec port, TypeScript's
koffi stores). Each client has a total time limit; its processes run in their own process group, killed at the end.

    python3 docs/install_test.py                  # every client; from anywhere
    python3 docs/install_test.py --only ts,go      # some (python, ruby, typescript, go, elixir; py, rb, ts, ex)
    python3 docs/install_test.py --verbose         # and everything the lines printed

It prints one line per client and exits with status 1 if any failed (0 when all ran).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Separates the install lines' output from the program's.
MARKER = "==== install_test: the first program ===="
#: Variables a new user's shell would not have.
DROPPED_PREFIXES = ("LARDER_", "VIRTUAL_ENV", "PYTHON", "GOFLAGS", "MIX_ENV", "npm_", "NODE_OPTIONS", "BUNDLE_", "GEM_")


@dataclass(frozen=True)
class Client:
    name: str
    #: The fence tag of its first program.
    language: str
    #: Shell lines run after the program, in the same shell; what they print must hold `check_expect`.
    check: str
    check_expect: str
    #: The whole client's time limit, seconds (a first Go build compiles modernc's SQLite: minutes).
    timeout_s: int


CLIENTS = [
    Client(
        "python",
        "python",
        # The extra the second install line names.
        """python -c 'import psycopg; print("extras:", psycopg.__name__)'""",
        "extras: psycopg",
        600,
    ),
    Client(
        "ruby",
        "ruby",
        # LZ4 through the ffi gem; zstd, Snappy and Brotli through Fiddle (lib/larder/native.rb, native_lz4.rb).
        """
cat > larder_check.rb <<'EOF'
require "larder"
v = "larder " * 1000
ok = %w[lz4 zstd snappy brotli gzip].all? { |c| Larder.decode(Larder.encode(v, compressor: c)).value == v }
puts "codecs: #{ok} #{Larder::NativeLZ4.calls.name}"
EOF
bundle3.1 exec ruby larder_check.rb
""",
        "codecs: true Larder::NativeLZ4::ThroughFFI",
        300,
    ),
    Client(
        "typescript",
        "js",
        # file:// and sqlite:// go through koffi, an optional dependency (the README's "Files and SQLite").
        """
cat > larder_check.mjs <<'EOF'
import { Cache } from "larder-cache";
const v = "larder ".repeat(1000);
let ok = true;
for (const url of [`file://${process.cwd()}/files`, `sqlite://${process.cwd()}/cache.db`]) {
  const cache = new Cache(url);
  await cache.set("k", v);
  ok &&= (await cache.get("k")) === v;
  await cache.close();
}
console.log("koffi stores:", ok);
EOF
node larder_check.mjs
""",
        "koffi stores: true",
        600,
    ),
    # Pure Go: nothing native to look at.
    Client("go", "go", "", "", 900),
    Client(
        "elixir",
        "elixir",
        # zstd and Brotli through priv/bin/larder_codec, the port mix.exs builds (the README's "through a port").
        """
cat > larder_check.exs <<'EOF'
v = String.duplicate("larder ", 1000)
ok = Enum.all?([:zstd, :brotli], fn c -> match?({:ok, %{value: ^v}}, Larder.Entry.decode(Larder.Entry.encode(v, compressor: c))) end)
IO.puts("codec port: #{ok}")
EOF
mix run larder_check.exs
""",
        "codec port: true",
        600,
    ),
]
ALIASES = {"py": "python", "rb": "ruby", "ts": "typescript", "ex": "elixir"}

#: The stand-in `sudo` for the install lines' `sudo apt-get install …`.
SUDO = r"""#!/usr/bin/env bash
if [ "$1" = apt-get ] && [ "$2" = install ]; then
  shift 2
  missing=()
  for package in "$@"; do
    case "$package" in -*) continue ;; esac
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
  done
  [ "${#missing[@]}" -eq 0 ] && { echo "sudo apt-get install: all installed already"; exit 0; }
  as_root=()
  [ "$(id -u)" = 0 ] || as_root=(/usr/bin/sudo)
  "${as_root[@]}" apt-get update -q -o DPkg::Lock::Timeout=600 &&
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o DPkg::Lock::Timeout=600 \
      --no-install-recommends "${missing[@]}" &&
    exit 0
  echo "sudo apt-get install: could not install ${missing[*]}" >&2
  exit 1
fi
[ "$(id -u)" = 0 ] && exec "$@"
exec /usr/bin/sudo "$@"
"""


@dataclass(frozen=True)
class Section:
    install: str
    program_name: str
    program: str
    run: str
    expect: str


class NoSection(Exception):
    """A README whose "## Install" section lacks what this script reads."""


def section(client: Client) -> Section:
    """The four blocks of the README's "## Install" section, or NoSection naming what is missing."""
    readme = f"clients/{client.name}/README.md"
    text = (ROOT / readme).read_text()
    if "\n## Install\n" not in text:
        raise NoSection(f"{readme}: no '## Install' section")
    body = text.split("\n## Install\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"^```(\w*)\n(.*?)^```", body, re.DOTALL | re.MULTILINE)
    tags = [tag for tag, _ in blocks]
    wanted = ["sh", client.language, "sh", "text"]
    if tags[:4] != wanted:
        raise NoSection(f"{readme}: '## Install' has blocks {tags}, not {wanted} first")
    program = blocks[1][1]
    first = program.splitlines()[0] if program else ""
    named = re.fullmatch(r"(?:#|//)\s*([\w./-]+)\s*", first)
    if not named:
        raise NoSection(f"{readme}: the first program's first line, {first!r}, is not a comment naming its file")
    return Section(blocks[0][1], named.group(1), program, blocks[2][1], blocks[3][1])


def cache_dir() -> Path:
    if os.environ.get("LARDER_CACHE_DIR"):
        return Path(os.environ["LARDER_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "larder"


def environment(shims: Path) -> dict[str, str]:
    """A new user's environment: the machine's, less what a checkout's scripts set, with the shared caches."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(DROPPED_PREFIXES)}
    cache = cache_dir()
    env.update(
        LARDER=str(ROOT),
        PATH=f"{shims}:{env.get('PATH', '')}",
        npm_config_cache=str(cache / "npm"),
        npm_config_update_notifier="false",
        npm_config_fund="false",
        npm_config_audit="false",
        GOMODCACHE=str(cache / "go" / "mod"),
        GOCACHE=str(cache / "go" / "build"),
        GOTOOLCHAIN="local",
        MIX_HOME=str(cache / "mix"),
        HEX_HOME=str(cache / "hex"),
    )
    return env


def script(client: Client, s: Section) -> str:
    end = "LARDER_INSTALL_TEST_EOF"
    check = f"echo '==== install_test: checks of this script ===='\n{client.check}\n" if client.check else ""
    return (
        f"set -eo pipefail\n{s.install}\n"
        f"cat > {s.program_name} <<'{end}'\n{s.program}{end}\n"
        f"echo '{MARKER}'\n{s.run}\n{check}"
    )


def missing_lines(expected: str, output: str) -> list[str]:
    """The expected lines not found, in order and one after the other, in the output."""
    want = [line.rstrip() for line in expected.strip("\n").splitlines()]
    have = [line.rstrip() for line in output.splitlines()]
    for start in range(len(have) - len(want) + 1):
        if have[start : start + len(want)] == want:
            return []
    return want


def kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run(client: Client, shims: Path, verbose: bool) -> tuple[bool, str]:
    """Runs one client's section in a fresh folder; (passed, what to say)."""
    try:
        s = section(client)
    except NoSection as e:
        return False, str(e)
    folder = Path(tempfile.mkdtemp(prefix=f"larder-install-{client.name}-"))
    if folder.resolve().is_relative_to(ROOT):
        raise SystemExit(f"the temporary folder {folder} is inside the repository: set TMPDIR elsewhere")
    started = time.monotonic()
    process = subprocess.Popen(
        ["bash", "-c", script(client, s)],
        cwd=folder,
        env=environment(shims),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    timed_out = False
    try:
        raw, _ = process.communicate(timeout=client.timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        kill_group(process.pid)
        raw, _ = process.communicate()
    finally:
        kill_group(process.pid)
    elapsed = time.monotonic() - started
    output = raw.decode(errors="replace")
    if verbose:
        print(output, flush=True)
    shutil.rmtree(folder, ignore_errors=True)
    tail = "\n".join("    " + line for line in output.rstrip().splitlines()[-25:])
    if timed_out:
        return False, f"still running after {client.timeout_s} s; its output ended with:\n{tail}"
    if process.returncode != 0:
        return False, f"exited with status {process.returncode} after {elapsed:.0f} s:\n{tail}"
    if MARKER not in output:
        return False, f"the first program did not run:\n{tail}"
    printed = output.split(MARKER, 1)[1]
    missing = missing_lines(s.expect, printed.split("==== install_test: checks", 1)[0])
    if missing:
        return False, f"the first program did not print {missing} (its README's ```text block):\n{tail}"
    if client.check_expect and client.check_expect not in printed:
        return False, f"this script's check did not print {client.check_expect!r}:\n{tail}"
    return True, f"installed as its README says and ran its first program in {elapsed:.0f} s"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--only", help="clients to try, comma-separated (python,ruby,typescript,go,elixir)")
    parser.add_argument("--verbose", action="store_true", help="print everything each client's lines printed")
    args = parser.parse_args()
    names = [c.name for c in CLIENTS]
    chosen = names
    if args.only:
        chosen = [ALIASES.get(n.strip(), n.strip()) for n in args.only.split(",") if n.strip()]
        unknown = [n for n in chosen if n not in names]
        if unknown:
            parser.error(f"unknown client {', '.join(unknown)}: choose among {', '.join(names)}")
    failed = []
    with tempfile.TemporaryDirectory(prefix="larder-install-shims-") as shims:
        sudo = Path(shims) / "sudo"
        sudo.write_text(SUDO)
        sudo.chmod(sudo.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        for client in CLIENTS:
            if client.name not in chosen:
                continue
            ok, said = run(client, Path(shims), args.verbose)
            print(f"install: {client.name:<10} {'ran' if ok else 'FAILED'}: {said}", flush=True)
            if not ok:
                failed.append(client.name)
    if failed:
        print(f"install: FAILED: {', '.join(failed)} (README's '## Install' section as written)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
