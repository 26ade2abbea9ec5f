"""Counted work of one Django `set` on memcached, larder's backend or PyMemcacheCache, for measurements that load on
the machine does not move: run N sets of a value after a warm-up, so that two runs under callgrind, with N and with 0,
give the user-space instructions per set as their difference; `--calls` prints the Python calls per set (cProfile)
instead. Values as bench/django_backends.py's (random text), or JSON rows LZ4 shrinks (`--json`).

    valgrind --tool=callgrind --callgrind-out-file=/dev/null ../../.venv/bin/python bench/count_set.py larder 65536 2000
    valgrind --tool=callgrind --callgrind-out-file=/dev/null ../../.venv/bin/python bench/count_set.py larder 65536 0
    ../../.venv/bin/python bench/count_set.py pymemcache 1024 1000 --calls            (from clients/python)
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import random
import string
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import django
from django.conf import settings

from servers import Memcached


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("backend", choices=("larder", "pymemcache"))
    parser.add_argument("size", type=int)
    parser.add_argument("sets", type=int)
    parser.add_argument("--json", action="store_true", help="JSON rows (LZ4 shrinks them) instead of random text")
    parser.add_argument("--calls", action="store_true", help="print Python calls per set (cProfile)")
    args = parser.parse_args()
    memcached = Memcached()
    try:
        settings.configure(
            CACHES={
                "larder": {"BACKEND": "larder.django.LarderCache", "LOCATION": f"memcached://{memcached.address}"},
                "pymemcache": {
                    "BACKEND": "django.core.cache.backends.memcached.PyMemcacheCache",
                    "LOCATION": memcached.address,
                },
            },
            SECRET_KEY="bench-" + "s" * 50,
        )
        django.setup()
        from django.core.cache import caches

        rng = random.Random(7)
        if args.json:
            rows = [{"id": i, "name": f"user{i}", "active": i % 3 == 0} for i in range(args.size // 30 + 1)]
            value = json.dumps(rows)[: args.size]
        else:
            value = "".join(rng.choices(string.ascii_letters + string.digits + " ", k=args.size))
        cache = caches[args.backend]
        for _ in range(20):
            cache.set("k", value, 300)
        profile = cProfile.Profile() if args.calls else None
        if profile is not None:
            profile.enable()
        for _ in range(args.sets):
            cache.set("k", value, 300)
        if profile is not None:
            profile.disable()
            calls = sum(stat[1] for stat in pstats.Stats(profile).stats.values())  # type: ignore[attr-defined]
            print(f"{args.backend}: {calls / max(args.sets, 1):.0f} Python calls per set")
    finally:
        memcached.stop()


if __name__ == "__main__":
    main()
