#!/usr/bin/env python3
"""bench/cpustat.py: each core's busy share per second (user, kernel, interrupts), from /proc/stat.

Why: a req/s figure says how fast, not what limited it. Run beside a benchmark (`python3 bench/cpustat.py >
cores.log &`, stop it after) to see whether the load generator's core or the server's was the bound, and whether the
time went to the server's own code (user) or to the kernel's copies (sys, irq). Only the standard library; Linux.
"""

from __future__ import annotations

import time
from pathlib import Path


def sample() -> dict[str, tuple[int, int, int, int, int]]:
    """cpuN -> (total, idle, user, system, interrupts) in jiffies since boot."""
    cores = {}
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("cpu") and line[3].isdigit():
            name, *fields = line.split()
            v = [int(f) for f in fields]
            cores[name] = (sum(v), v[3] + v[4], v[0] + v[1], v[2], v[5] + v[6])
    return cores


def main() -> None:
    previous = sample()
    while True:
        time.sleep(1)
        current = sample()
        parts = []
        for core in sorted(current):
            total, idle, user, system, irq = (a - b for a, b in zip(current[core], previous[core], strict=True))
            total = total or 1
            parts.append(f"{core} busy {100 * (1 - idle / total):5.1f}% usr {100 * user / total:4.1f} "
                         f"sys {100 * system / total:4.1f} irq {100 * irq / total:4.1f}")
        print(time.strftime("%H:%M:%S"), " | ".join(parts), flush=True)
        previous = current


if __name__ == "__main__":
    main()
