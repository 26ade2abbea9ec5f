"""HTTP response entries (spec/FORMAT.md §4): what a proxy serves on a hit, as a MessagePack array.

The payload is `[status, [[name, value], ...], body, content_encoding]`: header pairs keep their order and
duplicates (two Set-Cookie headers stay two), names, values and body are bytes, and the body may be stored already
compressed (`gzip`, `br`, `zstd`) so a server can send it as is to a client that accepts that coding.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

import msgpack

from .errors import BAD_VALUE, InvalidEntry
from .msgpack_reader import MsgpackReader

#: The codings a body may be stored in.
CONTENT_ENCODINGS: Final = ("identity", "gzip", "br", "zstd")

HeaderPart = bytes | str


@dataclass(frozen=True, init=False)
class HttpResponse:
    """A stored HTTP response. Header names and values are bytes (str is accepted and stored as UTF-8)."""

    status: int
    headers: tuple[tuple[bytes, bytes], ...] = ()
    body: bytes = b""
    content_encoding: str = "identity"

    def __init__(
        self,
        status: int,
        headers: Iterable[tuple[HeaderPart, HeaderPart]] = (),
        body: bytes | bytearray | memoryview | str = b"",
        content_encoding: str = "identity",
    ) -> None:
        if isinstance(status, bool) or not isinstance(status, int) or not 100 <= status <= 999:
            raise ValueError(f"status must be an int in 100..999, not {status!r}")
        if content_encoding not in CONTENT_ENCODINGS:
            raise ValueError(
                f"content_encoding must be one of {', '.join(CONTENT_ENCODINGS)}, not {content_encoding!r}"
            )
        pairs = []
        for pair in headers:
            name, value = pair
            pairs.append((_as_bytes(name, "header name"), _as_bytes(value, "header value")))
        object.__setattr__(self, "status", status)
        object.__setattr__(self, "headers", tuple(pairs))
        object.__setattr__(self, "body", _as_bytes(body, "body"))
        object.__setattr__(self, "content_encoding", content_encoding)

    def header(self, name: bytes | str) -> bytes | None:
        """The first value of header `name`, compared case-insensitively; None if absent."""
        wanted = _as_bytes(name, "header name").lower()
        for header_name, value in self.headers:
            if header_name.lower() == wanted:
                return value
        return None

    def to_payload(self) -> bytes:
        """The MessagePack payload of a kind-1 entry."""
        headers = [[name, value] for name, value in self.headers]
        return bytes(msgpack.packb([self.status, headers, self.body, self.content_encoding], use_bin_type=True))

    @classmethod
    def from_payload(cls, payload: bytes) -> HttpResponse:
        """Parses a decompressed kind-1 payload. Raises only `InvalidEntry` (kind bad_value)."""
        reader = MsgpackReader(payload)
        elements = reader.array_len("response")
        if elements < 4:
            raise _bad(f"response array has {elements} elements, needs at least 4")
        status = reader.uint("status")
        if not 100 <= status <= 999:
            raise _bad(f"status {status} is outside 100-999")
        count = reader.array_len("headers")
        headers = []
        for _ in range(count):
            if reader.array_len("header pair") != 2:
                raise _bad("a header must be a [name, value] pair")
            name = reader.bytes_or_str("header name")
            value = reader.bytes_or_str("header value")
            headers.append((name, value))
        body = reader.bin("body")
        encoding = reader.str_bytes("content_encoding").decode("utf-8", errors="replace")
        if encoding not in CONTENT_ENCODINGS:
            raise _bad(f"unknown content_encoding {encoding!r}")
        for _ in range(elements - 4):
            reader.skip()  # reserved elements: readers ignore them
        if not reader.at_end:
            raise _bad(f"{len(payload) - reader.pos} bytes after the response")
        return cls(status, headers, body, encoding)


def _as_bytes(value: bytes | bytearray | memoryview | str, what: str) -> bytes:
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"{what} must be bytes or str, not {type(value).__name__}")


def _bad(detail: str) -> InvalidEntry:
    return InvalidEntry(BAD_VALUE, detail)
