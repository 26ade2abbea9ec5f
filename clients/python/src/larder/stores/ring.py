"""memcached server selection: classic ketama (spec/STORES.md §4.2), the continuum every language builds alike.

160 points per server (scaled by weight), four per MD5 digest of `host-n` (or `host:port-n` off the default port),
sorted by (value, server index); a key goes to the first point at or after the first four bytes of its MD5.
`spec/vectors/ring.json` pins it; the Rust crate's `ring.rs` is the same algorithm.
"""

from __future__ import annotations

import bisect
import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

POINTS_PER_SERVER: Final = 160


@dataclass(frozen=True)
class RingServer:
    """A ring member: `host` exactly as written in the URL (an IPv6 address keeps its brackets)."""

    host: str
    port: int
    weight: int = 1

    def point_name(self, index: int) -> str:
        if self.port == 11211:
            return f"{self.host}-{index}"
        return f"{self.host}:{self.port}-{index}"


def key_hash(key: str) -> int:
    """The first four bytes of MD5(key), little-endian."""
    return int.from_bytes(hashlib.md5(key.encode("utf-8")).digest()[:4], "little")


class Ring:
    """The continuum over the servers `include` admits; indexes are into the full server list."""

    def __init__(self, servers: Sequence[RingServer], include: Callable[[int], bool] = lambda _: True) -> None:
        members = [(i, s) for i, s in enumerate(servers) if include(i)]
        total = sum(s.weight for _, s in members)
        points: list[tuple[int, int]] = []
        for index, server in members:
            count = math.floor(server.weight / total * POINTS_PER_SERVER / 4 * len(members) + 1e-10) * 4
            for n in range(count // 4):
                digest = hashlib.md5(server.point_name(n).encode("utf-8")).digest()
                for x in range(4):
                    points.append((int.from_bytes(digest[4 * x : 4 * x + 4], "little"), index))
        points.sort()
        self.points = points
        self._values = [value for value, _ in points]
        #: With one server on the ring every point is its own: no key needs hashing.
        self._only = members[0][0] if len(members) == 1 else None

    def server_for(self, key: str) -> int | None:
        """The index of the server for `key` (a stored key), or None when no server is on the ring."""
        if self._only is not None:
            return self._only
        if not self.points:
            return None
        at = bisect.bisect_left(self._values, key_hash(key))
        if at == len(self.points):
            at = 0
        return self.points[at][1]
