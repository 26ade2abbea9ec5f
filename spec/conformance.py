"""The conformance matrix: every language against every vector file of spec/vectors (`make conformance`).

Each language's runner (spec/vectors/README.md, "Conformance runners") judges one file and prints one JSON line;
this script runs every runner on every file, prints the matrix (language x file: pass, fail, or not applicable with
the reason) and the failures, and exits 1 if any cell failed or any runner could not run. The attack files
(hostile_*.json) need a real memcached and redis-server, which it starts on free loopback ports for the run (and
stops), and `larder-hostile`; it passes them to the runners in LARDER_CONFORMANCE_MEMCACHED,
LARDER_CONFORMANCE_REDIS, LARDER_HOSTILE and LARDER_FAULTS (spec/vectors/README.md). Only the standard library; run it from
anywhere:

    python3 spec/conformance.py            # the runners as `make conformance` builds them
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VECTORS = ROOT / "spec" / "vectors"
#: language -> the command that judges one file (the file's path is appended).
RUNNERS = {
    "rust": [str(ROOT / "target" / "debug" / "larder-conformance")],
    "python": [str(ROOT / ".venv" / "bin" / "python"), str(ROOT / "clients" / "python" / "tests" / "conformance.py")],
    "ruby": ["ruby", str(ROOT / "clients" / "ruby" / "test" / "conformance.rb")],
    "typescript": ["node", str(ROOT / "clients" / "typescript" / "build" / "test" / "conformance.js")],
    "go": [str(ROOT / "clients" / "go" / "bin" / "larder-conformance")],
    "elixir": [str(ROOT / "clients" / "elixir" / "bin" / "conformance")],
}
HOSTILE = ROOT / "target" / "debug" / "larder-hostile"
FAULTS = ROOT / "target" / "debug" / "larder-faults"
#: The longest one runner may take for one file.
TIMEOUT_S = 300


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(port: int, what: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode} before listening on {port}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return
        time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on 127.0.0.1:{port} within 10 s")


@contextlib.contextmanager
def servers() -> Iterator[dict[str, str]]:
    """A memcached and a redis-server on free loopback ports, for the attack files; their addresses as variables."""
    started: list[subprocess.Popen[bytes]] = []
    env: dict[str, str] = {
        "LARDER_HOSTILE": os.environ.get("LARDER_HOSTILE", str(HOSTILE)),
        "LARDER_FAULTS": os.environ.get("LARDER_FAULTS", str(FAULTS)),
    }
    try:
        for variable, binary, args in (
            ("LARDER_CONFORMANCE_MEMCACHED", "memcached", ["-l", "127.0.0.1", "-U", "0", "-m", "64", "-t", "2"]),
            ("LARDER_CONFORMANCE_REDIS", "redis-server", ["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]),
        ):
            path = shutil.which(binary) or f"/usr/bin/{binary}"
            port = free_port()
            if binary == "memcached":
                argv = [path, *args, "-p", str(port), *(["-u", "root"] if os.geteuid() == 0 else [])]
            else:
                argv = [path, *args, "--port", str(port), "--protected-mode", "no", "--loglevel", "warning"]
            try:
                process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            except OSError as e:
                print(f"conformance: {binary} could not start ({e}); the attack files will fail", file=sys.stderr)
                continue
            started.append(process)
            wait_for(port, binary, process)
            env[variable] = f"127.0.0.1:{port}"
        yield env
    finally:
        for process in started:
            process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=5)


def judge(language: str, command: list[str], file: Path, env: dict[str, str]) -> dict[str, object]:
    """One cell: the runner's report, or a failure saying why there is none."""
    failure = {"language": language, "file": file.name, "status": "fail", "cases": 0, "failed": []}
    try:
        done = subprocess.run(
            [*command, str(file)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=False,
            env={**os.environ, **env},
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return {**failure, "reason": f"the runner did not run: {e}"}
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    if done.returncode != 0 or len(lines) != 1:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        return {**failure, "reason": f"the runner exited {done.returncode}: {' | '.join(tail)}"}
    try:
        report = json.loads(lines[0])
    except json.JSONDecodeError:
        return {**failure, "reason": f"the runner printed no JSON: {lines[0][:200]}"}
    if report.get("status") not in ("pass", "fail", "not_applicable") or report.get("file") != file.name:
        return {**failure, "reason": f"the runner's report does not follow the contract: {lines[0][:200]}"}
    return report


def main() -> int:
    files = sorted(VECTORS.glob("*.json"))
    with servers() as env:
        reports = {(lang, f.name): judge(lang, cmd, f, env) for lang, cmd in RUNNERS.items() for f in files}
    width = max(len(f.name) for f in files)
    print(f"{'':{width}}  " + "  ".join(f"{lang:>22}" for lang in RUNNERS))
    for f in files:
        cells = []
        for lang in RUNNERS:
            r = reports[(lang, f.name)]
            cell = {"pass": f"pass ({r.get('cases')})", "fail": "FAIL", "not_applicable": "n/a"}[str(r["status"])]
            cells.append(f"{cell:>22}")
        print(f"{f.name:{width}}  " + "  ".join(cells))
    notes = [r for r in reports.values() if r["status"] != "pass"]
    for r in notes:
        what = "not applicable" if r["status"] == "not_applicable" else "FAILED"
        failed = f" (cases: {', '.join(map(str, r.get('failed') or []))})" if r.get("failed") else ""
        print(f"{r['language']} {r['file']}: {what}{failed}: {r.get('reason')}")
    bad = [r for r in reports.values() if r["status"] == "fail"]
    print(f"conformance: {len(reports) - len(bad)} of {len(reports)} cells pass or do not apply")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
