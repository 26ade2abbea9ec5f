"""A write and a read on `larder.Cache("memory://")` by the size and kind of the value: an ASCII str (held in parts,
stores/memory.py `Parts`), a str of other characters (encoded and joined) and bytes (held in parts), at 1, 4, 16 and
64 KiB. Prints the CPU time (thread time, ns per call, the least of 9 rounds) of `Cache.set` and of `Cache.get`, so
that the code before and after a change can be compared in turns on a loaded machine:

    ../../.venv/bin/python bench/set_sizes.py                                          (from clients/python)
    PYTHONPATH=/path/to/a/worktree/clients/python/src ../../.venv/bin/python bench/set_sizes.py
"""

from __future__ import annotations

import gc
import random
import string
import time
from collections.abc import Callable

import larder


def least_cpu_ns(call: Callable[[], object], calls: int = 20_000, rounds: int = 9) -> float:
    best = float("inf")
    gc.disable()
    try:
        for _ in range(rounds):
            start = time.thread_time_ns()
            for _ in range(calls):
                call()
            best = min(best, (time.thread_time_ns() - start) / calls)
    finally:
        gc.enable()
    return best


def main() -> None:
    print(f"larder from {larder.__file__}")
    print(f"{'value':<16}{'set ns':>10}{'get ns':>10}")
    cache = larder.Cache("memory://")
    rng = random.Random(7)
    for size in (1 << 10, 4 << 10, 16 << 10, 64 << 10):
        text = "".join(rng.choices(string.ascii_letters + string.digits + " ", k=size))
        for kind, value in (("ascii", text), ("utf-8", "é" + text[1:]), ("bytes", text.encode())):
            cache.set("k", value, 300)
            write = least_cpu_ns(lambda v=value: cache.set("k", v, 300))
            read = least_cpu_ns(lambda: cache.get("k"))
            print(f"{size >> 10:>3} KiB {kind:<8}{write:>10,.0f}{read:>10,.0f}")


if __name__ == "__main__":
    main()
