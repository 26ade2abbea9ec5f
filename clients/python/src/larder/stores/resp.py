"""RESP2, the Redis protocol, over wire.py's bounded connections: commands packed as arrays of bulk strings, replies
read within the operation's deadline and within the bounds of spec/STORES.md §2 ("Replies are hostile too").

- A bulk string longer than `max_bulk` (the store's `max_value`) is refused when its length is announced, before a
  byte of it is read; a reply's bulk strings together hold at most `max_bytes`.
- Arrays nest at most `MAX_DEPTH` (8) deep, and a reply holds at most `max_elements` array elements in all (an MGET
  of n keys: n), so neither recursion nor a list of a billion small items can be forced on the reader.
- Lines (status, error, integer, lengths) are at most 8 KiB; integers are at most 19 digits.
- The whole reply, framing included (every line and CRLF), is at most `max_bytes` + `ALLOWANCE` (64 KiB) bytes on
  the wire ("Whole reply"): counted as it is read, and refused at the first line or announced length past it, so
  that a reply of small parts (statuses of 8 KiB in an array of many) cannot grow past its command's bound either.

Anything else, or a reply that does not parse, is a `WireFailure`: a failure of the server, whose connection the
caller closes. An error *reply* (`-ERR …`) is an answer, returned as an `ErrorReply` value.

`Node` is one server: a pool of connections, each opened with the handshake (AUTH, SELECT) within the deadline of
the request that needed it, and `call`, which pipelines commands in one write and reads one reply per command.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from .wire import Pool, Wire, WireFailure, connect_tcp

#: The deepest arrays may nest in a reply (larder's commands need 3: CLUSTER SLOTS).
MAX_DEPTH: Final = 8
#: What a whole reply may hold on the wire beyond its values' `max_bytes`: its framing (spec/STORES.md §2 allows
#: at most 64 KiB), and all of a reply that holds no value (a status, an integer, an error line).
ALLOWANCE: Final = 64 * 1024
_NUMBER: Final = re.compile(rb"-?[0-9]{1,19}")


class ErrorReply:
    """An error answer (`-ERR …`, `-MOVED …`, `-NOSCRIPT …`): the server is fine, the command was refused."""

    __slots__ = ("message",)

    def __init__(self, message: str) -> None:
        self.message = message

    def __repr__(self) -> str:
        return f"ErrorReply({self.message!r})"


@dataclass(frozen=True)
class Limits:
    """What one reply may hold: bulk strings of `max_bulk` bytes, `max_bytes` of them together, `max_elements`
    array elements in all."""

    max_bulk: int
    max_bytes: int
    max_elements: int


def pack(*args: bytes | str | int) -> bytes:
    """One command as RESP: an array of bulk strings."""
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        data = arg if isinstance(arg, bytes) else str(arg).encode("utf-8")
        parts.append(b"$%d\r\n" % len(data))
        parts.append(data)
        parts.append(b"\r\n")
    return b"".join(parts)


def _number(line: bytes) -> int:
    text = line[1:]
    if text.isdigit() and len(text) < 20:  # bytes.isdigit is ASCII only, and int() takes no sign or "_" then
        return int(text)
    if not _NUMBER.fullmatch(text):
        raise WireFailure(f"malformed reply: {line[:40]!r}")
    return int(text)


class _Budget:
    __slots__ = ("bytes", "elements", "wire")

    def __init__(self, limits: Limits) -> None:
        self.bytes = limits.max_bytes
        self.elements = limits.max_elements
        #: Bytes of the whole reply, framing included, still allowed.
        self.wire = limits.max_bytes + ALLOWANCE


def read_reply(wire: Wire, deadline: float, limits: Limits) -> Any:
    """One reply: bytes (bulk and status strings), int, None (nil), list, or `ErrorReply`."""
    return _value(wire, deadline, limits.max_bulk, _Budget(limits), 0)


def _value(wire: Wire, deadline: float, max_bulk: int, budget: _Budget, depth: int) -> Any:
    line = wire.line(deadline)
    budget.wire -= len(line) + 2
    if budget.wire < 0:
        raise WireFailure("reply refused: more bytes than its command can get (the whole reply's bound)")
    kind = line[:1]
    if kind == b"$":
        size = _number(line)
        if size == -1:
            return None
        if size < 0 or size > max_bulk or size > budget.bytes:
            raise WireFailure(f"reply refused: a value of {size} bytes (the bound is {min(max_bulk, budget.bytes)})")
        budget.bytes -= size
        budget.wire -= size + 2
        if budget.wire < 0:
            raise WireFailure("reply refused: more bytes than its command can get (the whole reply's bound)")
        return wire.exact(size, deadline)
    if kind == b"+":
        return line[1:]
    if kind == b":":
        return _number(line)
    if kind == b"-":
        return ErrorReply(line[1:].decode("utf-8", "replace"))
    if kind == b"*":
        count = _number(line)
        if count == -1:
            return None
        if count < 0 or count > budget.elements:
            raise WireFailure(f"reply refused: an array of {count} elements (the bound is {budget.elements})")
        if depth >= MAX_DEPTH:
            raise WireFailure(f"reply refused: arrays nested more than {MAX_DEPTH} deep")
        budget.elements -= count
        return [_value(wire, deadline, max_bulk, budget, depth + 1) for _ in range(count)]
    raise WireFailure(f"malformed reply: {line[:40]!r}")


#: Handshake replies are short statuses.
_HANDSHAKE: Final = Limits(max_bulk=1024, max_bytes=1024, max_elements=16)


class Node:
    """One Redis server: up to `pool` idle connections, each opened with the handshake, used one caller at a time."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        pool: int,
        connect_timeout: float,
        username: str | None = None,
        password: str | None = None,
        db: int = 0,
    ) -> None:
        self.host = host
        self.port = port
        self.name = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        self.connect_timeout = connect_timeout
        handshake = []
        if password is not None:
            handshake.append(pack("AUTH", *([username] if username else []), password))
        if db:
            handshake.append(pack("SELECT", db))
        self._handshake = b"".join(handshake)
        self._handshake_replies = len(handshake)
        self.pool = Pool(self._connect, pool)

    def _connect(self, deadline: float) -> Wire:
        wire = Wire(connect_tcp(self.host, self.port, deadline, self.connect_timeout))
        if self._handshake:
            try:
                wire.send(self._handshake, deadline)
                for _ in range(self._handshake_replies):
                    reply = read_reply(wire, deadline, _HANDSHAKE)
                    if isinstance(reply, ErrorReply):
                        raise WireFailure(f"the handshake was refused: {reply.message[:200]}")
            except BaseException:
                wire.close()
                raise
        return wire

    def call(self, commands: Sequence[bytes], limits: Sequence[Limits], deadline: float) -> list[Any]:
        """Sends `commands` (packed) in one write and reads one reply each, all before `deadline`. A failure closes
        the connection and is raised as `WireFailure` naming this server."""
        return self.finish(self.start(commands, deadline), limits, deadline)

    def start(self, commands: Sequence[bytes], deadline: float) -> Wire:
        """Sends `commands` on a connection taken for them; `finish` reads the replies (so that several servers
        work on their parts at once)."""
        try:
            wire = self.pool.take(deadline)
        except WireFailure as failure:
            failure.server = self.name
            raise
        try:
            wire.send(commands[0] if len(commands) == 1 else b"".join(commands), deadline)
        except BaseException as failure:
            self.pool.discard(wire)
            if isinstance(failure, WireFailure):
                failure.server = self.name
            raise
        return wire

    def finish(self, wire: Wire, limits: Sequence[Limits], deadline: float) -> list[Any]:
        """Reads one reply per command `start` sent, then gives the connection back."""
        try:
            replies = [read_reply(wire, deadline, limit) for limit in limits]
        except BaseException as failure:
            self.pool.discard(wire)
            if isinstance(failure, WireFailure):
                failure.server = self.name
            raise
        self.pool.give_back(wire)
        return replies

    def abandon(self, wire: Wire) -> None:
        """Closes a connection whose replies will not be read."""
        self.pool.discard(wire)

    def close(self) -> None:
        self.pool.close()
