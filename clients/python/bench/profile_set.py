"""Where a write goes, stage by stage: larder's Django backend on memory:// against Django's LocMemCache, at 1 KiB and
64 KiB of random text (the values of bench/django_backends.py), and the entry a shared store's write builds. Prints
the CPU time (thread time, ns per call: the least of several interleaved rounds, so that other work on the machine
weighs as little as it can) of the whole `set` of each backend, and of each stage of larder's, so a ratio that
misses 1.0x can be read off its parts.

    ../../.venv/bin/python bench/profile_set.py [--rounds 7]     (from clients/python)

The stages are measured apart, so their sum is near the whole but not exactly it.
"""

from __future__ import annotations

import argparse
import gc
import pickle
import random
import string
import time
from collections.abc import Callable
from typing import Any

import django
from django.conf import settings

SIZES = {"1 KiB": 1 << 10, "64 KiB": 64 << 10}


def cpu_ns(cases: dict[str, Callable[[], object]], rounds: int) -> dict[str, float]:
    """The least thread CPU time per call of each case over `rounds` interleaved rounds."""
    counts = {}
    for name, call in cases.items():
        n = 1
        while True:
            start = time.thread_time()
            for _ in range(n):
                call()
            if time.thread_time() - start > 0.05:
                break
            n *= 2
        counts[name] = n
    best = dict.fromkeys(cases, float("inf"))
    gc.disable()
    try:
        for _ in range(rounds):
            for name, call in cases.items():
                n = counts[name]
                start = time.thread_time_ns()
                for _ in range(n):
                    call()
                best[name] = min(best[name], (time.thread_time_ns() - start) / n)
    finally:
        gc.enable()
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    settings.configure(
        CACHES={
            "larder": {"BACKEND": "larder.django.LarderCache", "LOCATION": "memory://"},
            "locmem": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "profile"},
        },
        SECRET_KEY="profile-" + "s" * 50,
    )
    django.setup()
    from django.core.cache import caches

    rng = random.Random(7)
    for size_name, size in SIZES.items():
        value = "".join(rng.choices(string.ascii_letters + string.digits + " ", k=size))
        profile(size_name, value, caches["larder"], caches["locmem"], args.rounds)


def profile(size_name: str, value: str, larder_cache: Any, locmem: Any, rounds: int) -> None:
    from larder.compressors import compress_lz4
    from larder.entry import build_plain, build_plain_msgpack, lz4_plain, plain_head
    from larder.serializers import pack_msgpack

    cache = larder_cache.larder
    store = cache.store
    payload = pack_msgpack(value)
    key = larder_cache.make_and_validate_key("bench:1")
    now = time.time_ns() // 1_000_000
    expires_at = now + 300_000
    head = plain_head(True, len(value), now, expires_at)
    entry = build_plain_msgpack(value, now, expires_at)
    note = (len(payload), value, expires_at, 0, None, None, None)
    shrinks = len(compress_lz4(payload)) < len(payload)
    cases: dict[str, Callable[[], object]] = {
        "LocMemCache.set (whole)": lambda: locmem.set("bench:1", value, 300),
        "  pickle.dumps (its serializer)": lambda: pickle.dumps(value, pickle.HIGHEST_PROTOCOL),
        "LarderCache.set (whole)": lambda: larder_cache.set("bench:1", value, 300),
        "  Django key (make_and_validate_key)": lambda: larder_cache.make_and_validate_key("bench:1"),
        "  Cache.set": lambda: cache.set(key, value, 300),
        "    entry head (plain_head)": lambda: plain_head(True, len(value), now, expires_at),
        "    MemoryStore.put_parts (ASCII str, unjoined)": lambda: store.put_parts(key, head, value, expires_at, note),
        "  (were it joined: build_plain_msgpack)": lambda: build_plain_msgpack(value, now, expires_at),
        "  (and MemoryStore.put of the joined bytes)": lambda: store.put(key, entry, expires_at),
        "  (MessagePack alone, pack_msgpack)": lambda: pack_msgpack(value),
        "  (an LZ4 attempt, were it made)": lambda: compress_lz4(payload),
        "a shared store's entry (lz4), packed first": lambda: build_plain(
            "msgpack", pack_msgpack(value), "lz4", 1024, now, 300_000
        ),
        "  the same, LZ4 tried in place (lz4_plain)": lambda: lz4_plain(entry, 1024),
        "    and the entry it is tried on (build_plain_msgpack)": lambda: build_plain_msgpack(value, now, expires_at),
    }
    figures = cpu_ns(cases, rounds)
    print(f"\n{size_name} of random text (LZ4 {'shrinks' if shrinks else 'does not shrink'} it): CPU ns per call")
    for name, ns in figures.items():
        print(f"{name:<54}{ns:>10,.0f}")
    ratio = figures["LocMemCache.set (whole)"] / figures["LarderCache.set (whole)"]
    print(f"{'LarderCache / LocMemCache, calls per CPU second':<58}{ratio:>6.2f}x")


if __name__ == "__main__":
    main()
