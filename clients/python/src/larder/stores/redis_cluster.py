"""Where the Redis store's commands go: one server (`Standalone`), or the masters of a Redis Cluster (`Cluster`).

Both take a batch of requests (the key a command is about, the packed command, the bounds of its reply) and answer
one reply per request, all before the batch's deadline.

`Cluster` keeps the slot map of the cluster (`CLUSTER SLOTS`, asked of a known node, refreshed after a failure or a
`MOVED`): a key's slot is CRC16 of the key (or of its `{hash tag}`, as Redis defines it) modulo 16384. A batch is
split per master, each master's part pipelined in one write, every master's part sent before any reply is read.
`MOVED` updates the map and resends; `ASK` resends once to the importing node after `ASKING`; `TRYAGAIN` and
`CLUSTERDOWN` are resent after a short pause; all within the deadline and at most `MAX_ROUNDS` rounds. Nodes are
not ejected (spec/STORES.md §1): a failing node marks the map stale, so the next batch asks the cluster again and
follows its failover.
"""

from __future__ import annotations

import binascii
import threading
import time
from collections.abc import Callable, Sequence
from time import monotonic
from typing import Any, Final

from .resp import ErrorReply, Limits, Node, pack
from .wire import Wire, WireFailure

SLOTS: Final = 16384
MAX_ROUNDS: Final = 5
#: The bounds of a CLUSTER SLOTS reply: a few elements per slot range and node.
_SLOTS_LIMITS: Final = Limits(max_bulk=1024, max_bytes=4 << 20, max_elements=200_000)
_STATUS: Final = Limits(max_bulk=1024, max_bytes=1024, max_elements=0)
_ASKING: Final = pack("ASKING")

#: (the key the command is about, or None; the packed command; the bounds of its reply)
Request = tuple[bytes | None, bytes, Limits]


def key_slot(key: bytes) -> int:
    """The cluster slot of `key`: CRC16 (XMODEM) of its hash tag, if it has a non-empty `{…}`, else of the key."""
    start = key.find(b"{")
    if start != -1:
        end = key.find(b"}", start + 1)
        if end > start + 1:
            key = key[start + 1 : end]
    return binascii.crc_hqx(key, 0) % SLOTS


class Standalone:
    """One server: a batch is one pipeline."""

    def __init__(self, node: Node) -> None:
        self.node = node

    def run(self, requests: Sequence[Request], deadline: float) -> list[Any]:
        return self.node.call([r[1] for r in requests], [r[2] for r in requests], deadline)

    def masters(self, deadline: float) -> list[Node]:
        return [self.node]

    def close(self) -> None:
        self.node.close()


class Cluster:
    """The masters of a Redis Cluster, found from `seeds`. Thread-safe."""

    def __init__(self, seeds: Sequence[tuple[str, int]], make_node: Callable[[str, int], Node]) -> None:
        self._make_node = make_node
        self._lock = threading.Lock()
        self._nodes: dict[tuple[str, int], Node] = {}
        self._seeds = [self._node(h, p) for h, p in seeds]
        self._slots: list[Node | None] = [None] * SLOTS
        self._stale = True

    def _node(self, host: str, port: int) -> Node:
        with self._lock:
            node = self._nodes.get((host, port))
            if node is None:
                node = self._nodes[(host, port)] = self._make_node(host, port)
            return node

    # ------------------------------------------------------------------------------------------ the slot map

    def refresh(self, deadline: float) -> None:
        """Asks the known masters, then the seeds, for the slot map; the first good answer is the new map."""
        known = list(dict.fromkeys([n for n in self._slots if n is not None] + self._seeds))
        failure: WireFailure | None = None
        for node in known:
            try:
                reply = node.call([pack("CLUSTER", "SLOTS")], [_SLOTS_LIMITS], deadline)[0]
                slots = self._parse_slots(reply, node)
            except WireFailure as e:
                failure = e
                if e.timeout:
                    break
                continue
            with self._lock:
                self._slots = slots
                self._stale = False
            return
        raise failure or WireFailure("no cluster node answered")

    def _parse_slots(self, reply: Any, asked: Node) -> list[Node | None]:
        if isinstance(reply, ErrorReply):
            raise WireFailure(f"CLUSTER SLOTS refused: {reply.message[:200]}")
        if not isinstance(reply, list):
            raise WireFailure("malformed reply to CLUSTER SLOTS")
        slots: list[Node | None] = [None] * SLOTS
        for shard in reply:
            if not (isinstance(shard, list) and len(shard) >= 3 and isinstance(shard[2], list)):
                raise WireFailure("malformed reply to CLUSTER SLOTS")
            start, end, master = shard[0], shard[1], shard[2]
            if not (isinstance(start, int) and isinstance(end, int) and 0 <= start <= end < SLOTS):
                raise WireFailure("malformed slot range in CLUSTER SLOTS")
            if len(master) < 2 or not isinstance(master[0], bytes) or not isinstance(master[1], int):
                raise WireFailure("malformed node in CLUSTER SLOTS")
            host = master[0].decode("ascii", "replace") or asked.host
            if not 0 < master[1] < 65536 or len(host) > 255:
                raise WireFailure("malformed node in CLUSTER SLOTS")
            node = self._node(host, master[1])
            for slot in range(start, end + 1):
                slots[slot] = node
        return slots

    def _master_of(self, slot: int) -> Node:
        node = self._slots[slot]
        if node is None:
            raise WireFailure(f"no master serves slot {slot} (the cluster is not fully covered)")
        return node

    def masters(self, deadline: float) -> list[Node]:
        if self._stale:
            self.refresh(deadline)
        return list(dict.fromkeys(n for n in self._slots if n is not None))

    # -------------------------------------------------------------------------------------------- batches

    def run(self, requests: Sequence[Request], deadline: float) -> list[Any]:
        replies: list[Any] = [None] * len(requests)
        slots = [None if key is None else key_slot(key) for key, _, _ in requests]
        pending = list(range(len(requests)))
        asking: dict[int, Node] = {}
        for _ in range(MAX_ROUNDS):
            if self._stale:
                self.refresh(deadline)
            groups: dict[Node, list[int]] = {}
            for i in pending:
                slot = slots[i]
                node = asking.get(i) or self._master_of(0 if slot is None else slot)
                groups.setdefault(node, []).append(i)
            answers = self._send_all(groups, requests, asking, deadline)
            again: list[int] = []
            pause = False
            for indexes, got in answers:
                for i, reply in zip(indexes, got, strict=True):
                    asking.pop(i, None)
                    redirect = self._redirect(reply, slots[i])
                    if redirect is None:
                        replies[i] = reply
                        continue
                    again.append(i)
                    if redirect == "ask":
                        asking[i] = self._address_node(reply)
                    pause |= redirect == "pause"
            if not again:
                return replies
            pending = again
            if pause:
                time.sleep(max(0.0, min(0.01, deadline - monotonic())))
        raise WireFailure(f"the cluster kept redirecting after {MAX_ROUNDS} rounds")

    def _send_all(
        self, groups: dict[Node, list[int]], requests: Sequence[Request], asking: dict[int, Node], deadline: float
    ) -> list[tuple[list[int], list[Any]]]:
        """Every node's part sent first, then every node's replies read (ASKING replies dropped)."""
        started: list[tuple[Node, Wire, list[int], list[Limits]]] = []
        try:
            for node, indexes in groups.items():
                commands: list[bytes] = []
                limits: list[Limits] = []
                for i in indexes:
                    if i in asking:
                        commands.append(_ASKING)
                        limits.append(_STATUS)
                    commands.append(requests[i][1])
                    limits.append(requests[i][2])
                started.append((node, node.start(commands, deadline), indexes, limits))
            answers = []
            while started:
                node, wire, indexes, limits = started.pop(0)
                got = node.finish(wire, limits, deadline)
                kept = [r for r, limit in zip(got, limits, strict=True) if limit is not _STATUS]
                answers.append((indexes, kept))
            return answers
        except BaseException as failure:
            for node, wire, _, _ in started:
                node.abandon(wire)
            if isinstance(failure, WireFailure):
                self._stale = True
            raise

    def _redirect(self, reply: Any, slot: int | None) -> str | None:
        """None for an answer; "moved", "ask" or "pause" for a reply that says to send the command again."""
        if not isinstance(reply, ErrorReply):
            return None
        message = reply.message
        if message.startswith("MOVED ") and slot is not None:
            parts = message.split(" ")
            if len(parts) == 3 and parts[1] == str(slot):
                node = self._address_node(reply)
                with self._lock:
                    self._slots[slot] = node
                return "moved"
            return None
        if message.startswith("ASK "):
            return "ask"
        if message.startswith(("TRYAGAIN", "CLUSTERDOWN")):
            self._stale = True
            return "pause"
        return None

    def _address_node(self, reply: ErrorReply) -> Node:
        address = reply.message.split(" ")[-1]
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536 or len(host) > 255:
            raise WireFailure(f"malformed redirection: {reply.message[:100]!r}")
        return self._node(host.strip("[]"), int(port))

    def close(self) -> None:
        with self._lock:
            nodes = list(self._nodes.values())
        for node in nodes:
            node.close()
