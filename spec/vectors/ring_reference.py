#!/usr/bin/env python3
"""Reference implementation of larder's memcached server selection (spec/STORES.md §4), written from the spec text
with nothing but hashlib, and the generator of spec/vectors/ring.json. Run it to regenerate the vectors:

    python3 spec/vectors/ring_reference.py > spec/vectors/ring.json
"""
import bisect
import hashlib
import json
import math

POINTS_PER_SERVER = 160


def point_name(host, port, index):
    # libmemcached's rule: the port is left out when it is memcached's default.
    if port == 11211:
        return f"{host}-{index}"
    return f"{host}:{port}-{index}"


def build(servers):
    """servers: list of (host, port, weight). Returns the sorted continuum [(point, server_index)]."""
    total = sum(w for _, _, w in servers)
    continuum = []
    for index, (host, port, weight) in enumerate(servers):
        share = weight / total
        points = math.floor(share * POINTS_PER_SERVER / 4 * len(servers) + 0.0000000001) * 4
        for i in range(points // 4):
            digest = hashlib.md5(point_name(host, port, i).encode()).digest()
            for x in range(4):
                value = int.from_bytes(digest[x * 4 : x * 4 + 4], "little")
                continuum.append((value, index))
    continuum.sort()
    return continuum


def key_hash(key):
    return int.from_bytes(hashlib.md5(key.encode()).digest()[:4], "little")


def pick(continuum, key):
    h = key_hash(key)
    at = bisect.bisect_left(continuum, (h, -1))
    if at == len(continuum):
        at = 0
    return continuum[at][1]


KEYS = [
    "",
    "a",
    "user:42",
    "GET:http://shop.example/p/42?a=1&b=2",
    "www:GET:http://shop.example/",
    "larder#" + "0" * 64,
    "views/products/index-2f1c",
    "日本語キー",
] + [f"key-{i}" for i in range(40)]

RINGS = [
    ("one_server", [("127.0.0.1", 11211, 1)]),
    ("three_default_port", [("10.0.0.1", 11211, 1), ("10.0.0.2", 11211, 1), ("10.0.0.3", 11211, 1)]),
    ("three_ports_one_host", [("127.0.0.1", 11211, 1), ("127.0.0.1", 11212, 1), ("127.0.0.1", 11213, 1)]),
    ("weighted", [("cache-a", 11211, 1), ("cache-b", 11211, 2), ("cache-c", 11300, 1)]),
    ("names", [("mc1.internal", 11211, 1), ("mc2.internal", 11211, 1), ("[::1]", 11211, 1), ("mc4.internal", 22122, 1)]),
]


def main():
    cases = []
    for name, servers in RINGS:
        continuum = build(servers)
        cases.append(
            {
                "name": name,
                "servers": [{"host": h, "port": p, "weight": w} for h, p, w in servers],
                "points": len(continuum),
                "first_points": [[value, index] for value, index in continuum[:8]],
                "keys": [{"key": k, "hash": key_hash(k), "server": pick(continuum, k)} for k in KEYS],
            }
        )
    # A server ejected after failures: the ring is rebuilt from the remaining servers (their indexes in the
    # original list are kept in the answer).
    servers = RINGS[2][1]
    remaining = [servers[0], servers[2]]
    continuum = build(remaining)
    original = [0, 2]
    cases.append(
        {
            "name": "three_ports_one_host_second_ejected",
            "servers": [{"host": h, "port": p, "weight": w} for h, p, w in servers],
            "ejected": [1],
            "points": len(continuum),
            "first_points": [[value, original[index]] for value, index in continuum[:8]],
            "keys": [{"key": k, "hash": key_hash(k), "server": original[pick(continuum, k)]} for k in KEYS],
        }
    )
    print(json.dumps({"schema": 1, "cases": cases}, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
