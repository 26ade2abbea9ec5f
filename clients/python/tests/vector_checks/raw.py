"""Raw probes of what a store wrote, in the runner's own socket and file code (spec/vectors/README.md,
hostile_keys.json): they take a key's wire bytes as bytes and never see the key as a string, so they cannot share a
mistake with the library's key encoding. memcached's meta `mg`/`flush_all`, Redis `GET`/`DBSIZE`/`FLUSHALL` (RESP2),
and the file store's file for a key (spec/STORES.md §7: `<root>/<h[0..2]>/<h[2..4]>/<h>`, h the SHA-256 of the wire
bytes, a header of `LDR1`, the expiry as u64 and the key's length as u16, little-endian, then the key and the value).
Standard library only; every reply is bounded (these servers are the runner's own, but a probe should not hang)."""

from __future__ import annotations

import hashlib
import socket
import struct
from pathlib import Path
from typing import Any

TIMEOUT = 5.0
#: The longest reply a probe reads (a value of hostile_keys.json is a small entry).
MAX_REPLY = 1 << 20


def address(text: str) -> tuple[str, int]:
    """`host:port` (as the LARDER_CONFORMANCE_* variables give it) as a (host, port) pair."""
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"not host:port: {text!r}")
    return host.strip("[]"), int(port)


class _Reader:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = b""

    def _more(self) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        self.buf += chunk
        if len(self.buf) > MAX_REPLY:
            raise ValueError("a reply longer than a probe reads")

    def line(self) -> bytes:
        while b"\r\n" not in self.buf:
            self._more()
        line, _, self.buf = self.buf.partition(b"\r\n")
        return line

    def exact(self, size: int) -> bytes:
        if size > MAX_REPLY:
            raise ValueError(f"a value of {size} bytes")
        while len(self.buf) < size + 2:
            self._more()
        data, tail, self.buf = self.buf[:size], self.buf[size : size + 2], self.buf[size + 2 :]
        if tail != b"\r\n":
            raise ValueError("a value not followed by CRLF")
        return data


def _connect(server: str) -> socket.socket:
    return socket.create_connection(address(server), timeout=TIMEOUT)


# ------------------------------------------------------------------------------------------------------ memcached


def memcached_get(server: str, key: bytes) -> bytes | None:
    """The value memcached holds under exactly `key` (`mg <key> v`), or None (`EN`)."""
    with _connect(server) as sock:
        sock.sendall(b"mg " + key + b" v\r\n")
        reader = _Reader(sock)
        line = reader.line()
        if line == b"EN":
            return None
        parts = line.split(b" ")
        if parts[0] != b"VA" or len(parts) < 2 or not parts[1].isdigit():
            raise AssertionError(f"memcached answered mg with {line[:100]!r}")
        return reader.exact(int(parts[1]))


def memcached_flush(server: str) -> None:
    with _connect(server) as sock:
        sock.sendall(b"flush_all\r\n")
        line = _Reader(sock).line()
        if line != b"OK":
            raise AssertionError(f"memcached answered flush_all with {line[:100]!r}")


# ---------------------------------------------------------------------------------------------------------- Redis


class RedisError(Exception):
    """An error reply (`-ERR …`, `-MOVED …`)."""


def _resp_value(reader: _Reader) -> Any:
    line = reader.line()
    kind, rest = line[:1], line[1:]
    if kind == b"+":
        return rest
    if kind == b"-":
        return RedisError(rest.decode("utf-8", "replace"))
    if kind == b":":
        return int(rest)
    if kind == b"$":
        size = int(rest)
        return None if size < 0 else reader.exact(size)
    if kind == b"*":
        count = int(rest)
        if count > 1024:
            raise ValueError(f"an array of {count} elements")
        return None if count < 0 else [_resp_value(reader) for _ in range(count)]
    raise ValueError(f"not RESP: {line[:100]!r}")


def redis_call(server: str, *args: bytes) -> Any:
    """One command (arguments as bytes, sent as a RESP array of bulk strings) and its reply; an error reply is
    returned as a `RedisError`, not raised."""
    command = b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)
    with _connect(server) as sock:
        sock.sendall(command)
        return _resp_value(_Reader(sock))


def redis_get(server: str, key: bytes) -> bytes | None:
    reply = redis_call(server, b"GET", key)
    if isinstance(reply, RedisError) or not (reply is None or isinstance(reply, bytes)):
        raise AssertionError(f"Redis answered GET with {reply!r}")
    return reply


def redis_dbsize(server: str) -> int:
    reply = redis_call(server, b"DBSIZE")
    if type(reply) is not int:
        raise AssertionError(f"Redis answered DBSIZE with {reply!r}")
    return reply


def redis_flush(server: str) -> None:
    reply = redis_call(server, b"FLUSHALL")
    if reply != b"OK":
        raise AssertionError(f"Redis answered FLUSHALL with {reply!r}")


# ----------------------------------------------------------------------------------------------------------- files

_HEADER = struct.Struct("<4sQH")


def file_path(root: Path, key: bytes) -> Path:
    """Where the file store keeps the entry whose stored key's wire bytes are `key`."""
    h = hashlib.sha256(key).hexdigest()
    return root / h[:2] / h[2:4] / h


def file_entry(root: Path, key: bytes) -> tuple[bytes, bytes] | None:
    """(the key in the file's header, the value) of `key`'s file, or None when there is none."""
    path = file_path(root, key)
    if not path.exists():
        return None
    data = path.read_bytes()
    magic, _expires, size = _HEADER.unpack_from(data)
    if magic != b"LDR1":
        raise AssertionError(f"{path} does not start with LDR1")
    start = _HEADER.size
    return data[start : start + size], data[start + size :]
