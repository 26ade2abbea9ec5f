"""A small MessagePack reader for the places where msgpack-python's decoder loses information larder must keep.

Displaying a value (spec/CLI.md) needs every map pair in order with duplicates, the exact bytes of every ext type
(msgpack-python turns type -1 into a `Timestamp`, and refuses the bodies it cannot convert), and strings whose bytes
are not UTF-8. Reading an HTTP response (spec/FORMAT.md §4) needs to walk the array element by element and to skip
reserved elements of any type. This reader does both, without recursion: its work list stands in for a stack, and
since every object takes at least one byte, no count claimed by the input can make it loop or allocate beyond what
the input itself holds. For display, `read_display_tree` still takes msgpack-python's much faster C decoder when the
payload holds nothing it would lose.
"""

from __future__ import annotations

import struct
from typing import Final, NamedTuple

import msgpack

from .errors import BAD_VALUE, InvalidEntry

#: Deepest nesting of arrays and maps the reader accepts, as msgpack-python's decoder.
MAX_DEPTH: Final = 1024


class Ext(NamedTuple):
    """A MessagePack extension object: its type code (-128..127) and its data."""

    code: int
    data: bytes


class MapPairs(list):  # type: ignore[type-arg]
    """A MessagePack map (or JSON object) as its (key, value) pairs, in order, duplicate keys kept."""


#: What `read_tree` returns: None, bool, int, float, bytes (str and bin alike), Ext, list or MapPairs.
Tree = None | bool | int | float | bytes | Ext | list | MapPairs  # type: ignore[type-arg]

#: How a timestamp (ext type -1) that msgpack-python would convert starts: fixext 4, fixext 8, ext 8 of 12 bytes.
_TIMESTAMP_HEADS: Final = (b"\xd6\xff", b"\xd7\xff", b"\xc7\x0c\xff")

# Fixed-size scalars: marker -> (struct format, size).
_SCALARS: Final = {
    0xCC: (">B", 1),
    0xCD: (">H", 2),
    0xCE: (">I", 4),
    0xCF: (">Q", 8),
    0xD0: (">b", 1),
    0xD1: (">h", 2),
    0xD2: (">i", 4),
    0xD3: (">q", 8),
    0xCA: (">f", 4),
    0xCB: (">d", 8),
}
_FIXEXT_SIZES: Final = {0xD4: 1, 0xD5: 2, 0xD6: 4, 0xD7: 8, 0xD8: 16}


class _Frame:
    """An array or map being filled: how many more objects it takes (a map takes two per pair)."""

    __slots__ = ("key", "node", "remaining")

    def __init__(self, node: list, remaining: int) -> None:  # type: ignore[type-arg]
        self.node = node
        self.remaining = remaining
        self.key: object = _NO_KEY


_NO_KEY: Final = object()


class MsgpackReader:
    """Reads MessagePack objects from `data`, starting at `pos`. Every error is `InvalidEntry` (bad_value)."""

    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data = data
        self.pos = pos

    @property
    def at_end(self) -> bool:
        return self.pos == len(self.data)

    def array_len(self, what: str) -> int:
        """The length of the array that starts here."""
        marker = self._marker(what)
        if 0x90 <= marker <= 0x9F:
            return marker & 0x0F
        if marker == 0xDC:
            return self._uint(what, 2)
        if marker == 0xDD:
            return self._uint(what, 4)
        raise _bad(f"{what}: expected an array, found {_marker_name(marker)}")

    def uint(self, what: str) -> int:
        """A non-negative integer, in any of MessagePack's integer forms."""
        marker = self._marker(what)
        if marker <= 0x7F:
            return marker
        if marker >= 0xE0:
            raise _bad(f"{what}: expected an unsigned integer, found {marker - 0x100}")
        if 0xCC <= marker <= 0xD3:
            fmt, size = _SCALARS[marker]
            value: int = struct.unpack(fmt, self._take(what, size))[0]
            if value < 0:
                raise _bad(f"{what}: expected an unsigned integer, found {value}")
            return value
        raise _bad(f"{what}: expected an unsigned integer, found {_marker_name(marker)}")

    def bytes_or_str(self, what: str) -> bytes:
        """The bytes of the bin or str that starts here."""
        marker = self._marker(what)
        size = self._str_size(marker, what)
        if size is None:
            size = self._bin_size(marker, what)
        if size is None:
            raise _bad(f"{what}: expected bytes or a string, found {_marker_name(marker)}")
        return self._take(what, size)

    def bin(self, what: str) -> bytes:
        """The bytes of the bin that starts here."""
        marker = self._marker(what)
        size = self._bin_size(marker, what)
        if size is None:
            raise _bad(f"{what}: expected bin, found {_marker_name(marker)}")
        return self._take(what, size)

    def str_bytes(self, what: str) -> bytes:
        """The bytes of the str that starts here."""
        marker = self._marker(what)
        size = self._str_size(marker, what)
        if size is None:
            raise _bad(f"{what}: expected a string, found {_marker_name(marker)}")
        return self._take(what, size)

    def skip(self) -> None:
        """Steps over one whole object of any type, at any depth."""
        pending = 1
        while pending:
            if pending > len(self.data) - self.pos:
                raise _bad("payload ends early")
            pending -= 1
            marker = self._marker("object")
            count, size = self._head(marker)
            pending += count
            self._take("object", size)

    def read_tree(self) -> Tree:
        """One whole object, as a `Tree`."""
        stack: list[_Frame] = []
        result: Tree = None
        while True:
            node, count = self._read_node(len(stack))
            if stack:
                _attach(stack[-1], node)
            else:
                result = node
            if count:
                if count > len(self.data) - self.pos:
                    raise _bad("payload ends early")
                stack.append(_Frame(node, count))  # type: ignore[arg-type]
                continue
            while stack and stack[-1].remaining == 0:
                stack.pop()
            if not stack:
                return result

    def _read_node(self, depth: int) -> tuple[Tree, int]:
        """The object starting here if it is a scalar, else its (empty) container and how many objects it takes."""
        marker = self._marker("value")
        if marker <= 0x7F:
            return marker, 0
        if marker >= 0xE0:
            return marker - 0x100, 0
        if marker == 0xC0:
            return None, 0
        if marker == 0xC2:
            return False, 0
        if marker == 0xC3:
            return True, 0
        if marker in _SCALARS:
            fmt, size = _SCALARS[marker]
            scalar: int | float = struct.unpack(fmt, self._take("value", size))[0]
            return scalar, 0
        count, size = self._head(marker)
        if marker in (0xDC, 0xDD) or 0x90 <= marker <= 0x9F:
            self._check_depth(depth)
            return [], count
        if marker in (0xDE, 0xDF) or 0x80 <= marker <= 0x8F:
            self._check_depth(depth)
            return MapPairs(), count
        if marker in _FIXEXT_SIZES or marker in (0xC7, 0xC8, 0xC9):
            body = self._take("ext", size)
            return Ext(struct.unpack(">b", body[:1])[0], body[1:]), 0
        return self._take("value", size), 0

    def _head(self, marker: int) -> tuple[int, int]:
        """For the object whose marker was just read: (objects it contains, bytes of data that follow its head)."""
        if marker <= 0x7F or marker >= 0xE0 or marker in (0xC0, 0xC2, 0xC3):
            return 0, 0
        if marker in _SCALARS:
            return 0, _SCALARS[marker][1]
        if 0x90 <= marker <= 0x9F:
            return marker & 0x0F, 0
        if 0x80 <= marker <= 0x8F:
            return 2 * (marker & 0x0F), 0
        if marker == 0xDC:
            return self._uint("array", 2), 0
        if marker == 0xDD:
            return self._uint("array", 4), 0
        if marker == 0xDE:
            return 2 * self._uint("map", 2), 0
        if marker == 0xDF:
            return 2 * self._uint("map", 4), 0
        if marker in _FIXEXT_SIZES:
            return 0, 1 + _FIXEXT_SIZES[marker]
        if marker in (0xC7, 0xC8, 0xC9):
            return 0, 1 + self._uint("ext", {0xC7: 1, 0xC8: 2, 0xC9: 4}[marker])
        size = self._str_size(marker, "value")
        if size is None:
            size = self._bin_size(marker, "value")
        if size is None:
            raise _bad("reserved marker 0xc1")
        return 0, size

    def _str_size(self, marker: int, what: str) -> int | None:
        if 0xA0 <= marker <= 0xBF:
            return marker & 0x1F
        if marker == 0xD9:
            return self._uint(what, 1)
        if marker == 0xDA:
            return self._uint(what, 2)
        if marker == 0xDB:
            return self._uint(what, 4)
        return None

    def _bin_size(self, marker: int, what: str) -> int | None:
        if marker == 0xC4:
            return self._uint(what, 1)
        if marker == 0xC5:
            return self._uint(what, 2)
        if marker == 0xC6:
            return self._uint(what, 4)
        return None

    def _check_depth(self, depth: int) -> None:
        if depth >= MAX_DEPTH:
            raise _bad(f"value nested more than {MAX_DEPTH} deep")

    def _marker(self, what: str) -> int:
        if self.pos >= len(self.data):
            raise _bad(f"{what}: payload ends early")
        marker = self.data[self.pos]
        self.pos += 1
        return marker

    def _uint(self, what: str, width: int) -> int:
        return int.from_bytes(self._take(what, width), "big")

    def _take(self, what: str, n: int) -> bytes:
        end = self.pos + n
        if end > len(self.data):
            raise _bad(f"{what}: payload ends early")
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk


def read_display_tree(payload: bytes) -> Tree:
    """What `read_whole_tree` returns, fast: through msgpack-python's C decoder when it can lose nothing.

    It loses nothing unless the payload holds a timestamp (ext -1, which it converts): the C decoder runs only when
    no timestamp header (`d6 ff`, `d7 ff`, `c7 0c ff`) appears anywhere in the bytes. Anything it refuses goes to
    this module's reader, which names the exact problem.
    """
    if not any(head in payload for head in _TIMESTAMP_HEADS):
        try:
            tree: Tree = msgpack.unpackb(
                payload, raw=True, strict_map_key=False, object_pairs_hook=MapPairs, ext_hook=Ext
            )
        except Exception:
            pass
        else:
            return tree
    return read_whole_tree(payload)


def read_whole_tree(payload: bytes) -> Tree:
    """The one object `payload` holds; trailing bytes are a bad_value error."""
    reader = MsgpackReader(payload)
    tree = reader.read_tree()
    if not reader.at_end:
        raise _bad(f"{len(payload) - reader.pos} bytes after the value")
    return tree


def within_read_budget(payload: bytes) -> bool:
    """Whether the Rust CLI's MessagePack reader (rmpv, with its default depth budget of 1024) reads the one object
    of a well-formed `payload`: it spends one unit per object, one more per array, map or bin, and two more per str
    or ext, along the path from the top, so an object inside `d` containers needs `2 * d + need` units, `need`
    being 1 for a scalar, 2 for a bin, array or map and 3 for a str or ext. `inspect` refuses (bad_value) what that
    reader cannot read, before it displays anything; this tells such payloads apart where it matters (a display
    that is also too large)."""
    reader = MsgpackReader(payload)
    remaining = [1]  # objects still to read in each open container; the top level holds one
    while remaining:
        if not remaining[-1]:
            remaining.pop()
            continue
        remaining[-1] -= 1
        marker = reader._marker("value")
        if 2 * (len(remaining) - 1) + _read_cost(marker) > _RMPV_DEPTH_BUDGET:
            return False
        count, size = reader._head(marker)
        reader._take("value", size)
        if 0x80 <= marker <= 0x9F or 0xDC <= marker <= 0xDF:
            remaining.append(count)
    return True


_RMPV_DEPTH_BUDGET: Final = 1024


def _read_cost(marker: int) -> int:
    if 0xA0 <= marker <= 0xBF or marker in (0xD9, 0xDA, 0xDB) or marker in _FIXEXT_SIZES or 0xC7 <= marker <= 0xC9:
        return 3  # str, ext
    if 0x80 <= marker <= 0x9F or 0xDC <= marker <= 0xDF or 0xC4 <= marker <= 0xC6:
        return 2  # array, map, bin
    return 1


def _attach(frame: _Frame, node: Tree) -> None:
    frame.remaining -= 1
    if isinstance(frame.node, MapPairs):
        if frame.key is _NO_KEY:
            frame.key = node
        else:
            frame.node.append((frame.key, node))
            frame.key = _NO_KEY
    else:
        frame.node.append(node)


def _marker_name(marker: int) -> str:
    return f"marker {marker:#04x}"


def _bad(detail: str) -> InvalidEntry:
    return InvalidEntry(BAD_VALUE, f"msgpack: {detail}")
