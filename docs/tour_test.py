"""Runs the README's quick tour exactly as written, in a fresh shell, and checks what it prints. (The clients'
install sections are docs/install_test.py's.)

A tour that only worked on the machine it was written on is the first thing a newcomer meets, so `make test` runs
it: the ```sh block under "## A quick tour of the CLI" in README.md, as one bash script (`set -e`, `pipefail`)
from the repository root, with no LARDER_* variable inherited. The few lines that cannot run here are skipped, each
with its reason printed (SKIP below). The tour's background processes run in their own process group, which is
killed at the end whatever happens.

    python3 docs/tour_test.py            # from anywhere; exit status 0 when the tour works

`make test` runs it with CARGO_PROFILE_RELEASE_* set (the Makefile's TOUR_PROFILE: no LTO, opt-level 1), the same
settings its second lane built the release binary with, so the tour's `cargo build --release` finds it built.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Lines of the tour not run here, and why.
SKIP = {
    "bench/peers.sh": "installs nginx, Varnish and wrk and measures for minutes: a benchmark, not a check",
    "make bench QUICK=1": "runs every benchmark for minutes: a benchmark, not a check",
}
#: What the tour must print, each with what it shows.
EXPECT = [
    ("via larder (s)", "larder demo printed its table"),
    ("cache-status: larder; hit", "the second request was a hit"),
    ('{"purged":1}', "PURGE from 127.0.0.1 removed the page"),
    ('larder_requests_total{cache="hit"}', "the admin API answered with the token"),
    ("kind:        value", "larder inspect decoded the entry"),
    ("www:GET:https://shop.example/p/42?a=1&b=2", "larder key normalised the URL"),
    ("zipf 0.99 over 100000 keys", "larder bench hit-ratio ran the synthetic trace"),
]
#: The whole tour's time limit (the release build is most of it).
TIMEOUT_S = 1200


def tour_block(readme: str) -> str:
    section = readme.split("## A quick tour of the CLI", 1)[1]
    match = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    if not match:
        raise SystemExit("README.md: no ```sh block under '## A quick tour of the CLI'")
    return match.group(1)


def runnable(block: str) -> str:
    lines = []
    for line in block.splitlines():
        command = line.split("#", 1)[0].strip()
        if command in SKIP:
            print(f"tour: skipping `{command}`: {SKIP[command]}")
            continue
        lines.append(line)
    return "\n".join(lines) + "\n"


def main() -> int:
    script = runnable(tour_block((ROOT / "README.md").read_text()))
    env = {k: v for k, v in os.environ.items() if not k.startswith("LARDER_")}
    created = [ROOT / "ada.entry"]
    with tempfile.NamedTemporaryFile("w", suffix=".sh", delete=False) as f:
        f.write("set -eo pipefail\n" + script)
        path = f.name
    process = subprocess.Popen(
        ["bash", path], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        output, _ = process.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        output = b""
        print(f"tour: still running after {TIMEOUT_S} s")
    finally:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()
        os.unlink(path)
        for leftover in created:
            leftover.unlink(missing_ok=True)
    text = output.decode(errors="replace")
    failures = [why for expected, why in EXPECT if expected not in text]
    if process.returncode != 0:
        failures.insert(0, f"the tour's shell exited with status {process.returncode}")
    if failures:
        print(text)
        for why in failures:
            print(f"tour: FAILED: {why}")
        return 1
    print(f"tour: the README's quick tour ran as written ({len(EXPECT)} checks)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
