"""Instructions per set and per get of bench/shapes.py's values, larder's Django backend on memory:// against
LocMemCache: a figure the machine's other load does not move (issue 34), counted by valgrind's callgrind as the
difference between a run of N calls and one of 3N, divided by 2N (so that start-up cancels out).

    .venv/bin/python clients/python/bench/shape_instructions.py [--shapes "query 64 KiB,document"] [--calls 10]

Prints one line per shape, operation and backend. Set PYTHONPATH to measure another larder (the code before).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
BACKENDS = {
    "larder memory": {"BACKEND": "larder.django.LarderCache", "LOCATION": "memory://"},
    "LocMemCache": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "bench"},
}


def run_calls(backend: str, shape: str, op: str, calls: int) -> None:
    """The measured program: `calls` calls of `op` on `backend` with `shape`, after one of each to warm up."""
    import django
    from django.conf import settings

    sys.path.insert(0, str(HERE))
    from shapes import shapes

    config = dict(BACKENDS[backend], OPTIONS={"MAX_ENTRIES": 10_000})
    settings.configure(CACHES={"default": config}, SECRET_KEY="bench-" + "s" * 50)
    django.setup()
    from django.core.cache import cache

    value = shapes()[shape]
    cache.set("k", value, 300)
    cache.get("k")
    if op == "set":
        for _ in range(calls):
            cache.set("k", value, 300)
    else:
        for _ in range(calls):
            cache.get("k")


def instructions(backend: str, shape: str, op: str, calls: int) -> int:
    """Instructions of the whole program with `calls` calls of `op`."""
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/cg.out", sys.executable, __file__,
             "--run", backend, shape, op, str(calls)],
            capture_output=True, text=True, check=True, env=os.environ,
        )  # fmt: skip
    found = re.search(r"Collected : (\d+)", out.stderr)
    if found is None:
        raise RuntimeError(out.stderr[-2000:])
    return int(found.group(1))


def main() -> None:
    if len(sys.argv) == 6 and sys.argv[1] == "--run":
        run_calls(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", default="query 1 KiB,query 64 KiB,document,page")
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--calls", type=int, default=10)
    args = parser.parse_args()
    print(f"{'value':<14}{'op':<5}{'backend':<15}{'instructions per call':>24}")
    for shape in args.shapes.split(","):
        for op in ("set", "get"):
            for backend in args.backends.split(","):
                few = instructions(backend, shape, op, args.calls)
                many = instructions(backend, shape, op, 3 * args.calls)
                print(f"{shape:<14}{op:<5}{backend:<15}{(many - few) / (2 * args.calls):>24,.0f}", flush=True)


if __name__ == "__main__":
    main()
