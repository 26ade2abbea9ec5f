"""Which values MessagePack holds as they are, learnt while packing them: no Python walk over the elements.

A value is *plain* when MessagePack round-trips it exactly: None, bool, int (64 bits), float, str, bytes, and lists
and dicts with str keys of those, no container at level `MAX_NESTING` or deeper (spec/FORMAT.md §2). Anything else
(a tuple, a set, a subclass such as an IntEnum or an OrderedDict, a non-str key, a bytearray, a datetime, an int
beyond 64 bits, a str with a lone surrogate) is not: the cache pickles it, or refuses it.

Asking that of every element in Python cost ten times the packing (issue 34: 3.0 of 3.2 ms for a 64 KiB query
result). ormsgpack answers it in the packing itself: with its pass-through options every type but the exact plain
ones goes to `default`, which refuses it, and dict keys must be str. What it does not say is checked here at the
cost of a scan of the packed bytes:
- nesting: its own limit (255 levels of containers, probed at import) is met `_WRAP` levels early by packing the
  value inside `_WRAP` one-element lists (a chain kept per thread), whose `_WRAP` heads are then cut off;
- bytearray and memoryview, which it packs as bin: only where the packed bytes hold a bin marker at all (0xc4-0xc6,
  which a float's bytes often do) are the value's objects looked at, by the garbage collector's C-speed
  `get_referents`, level by level (`_holds_buffer`).
Its bytes are msgpack's (`msgpack.packb(value, use_bin_type=True)`) for every plain value (tests/test_plain.py).
"""

from __future__ import annotations

import gc
import threading
from itertools import compress
from typing import Any, Final

import ormsgpack

from .serializers import MAX_NESTING

#: Every type ormsgpack would pack in a form of its own (a tuple as an array, an IntEnum as an int, a datetime as a
#: string, an int beyond 64 bits as…) is handed to `default` instead.
_OPTIONS: Final = (
    ormsgpack.OPT_PASSTHROUGH_SUBCLASS
    | ormsgpack.OPT_PASSTHROUGH_TUPLE
    | ormsgpack.OPT_PASSTHROUGH_DATACLASS
    | ormsgpack.OPT_PASSTHROUGH_DATETIME
    | ormsgpack.OPT_PASSTHROUGH_ENUM
    | ormsgpack.OPT_PASSTHROUGH_UUID
    | ormsgpack.OPT_PASSTHROUGH_BIG_INT
)
_packb: Final = ormsgpack.packb
_BIN_MARKERS: Final = (b"\xc4", b"\xc5", b"\xc6")
_CONTAINERS: Final = frozenset({list, dict})
_get_referents: Final = gc.get_referents
_is_tracked: Final = gc.is_tracked


def _refuse(value: Any) -> Any:
    raise TypeError(type(value).__name__)


def _container_limit() -> int:
    """How many levels of nested lists ormsgpack packs (255 in 1.x), found once by trying."""
    low, high = 1, 4096  # packs `low` levels; refuses `high` (or ormsgpack has no limit below it)
    while high - low > 1:
        middle = (low + high) // 2
        value: Any = 0
        for _ in range(middle):
            value = [value]
        try:
            _packb(value, option=_OPTIONS)
        except TypeError:
            high = middle
        else:
            low = middle
    return low


#: How many one-element lists a value is packed in, so that ormsgpack's limit falls where MAX_NESTING does: a
#: container at the value's level L is at level L + _WRAP, refused from L = MAX_NESTING on.
_WRAP: Final = _container_limit() - MAX_NESTING
if _WRAP < 0:  # pragma: no cover - an ormsgpack that nests less than FORMAT.md allows
    raise ImportError(f"ormsgpack nests only {_WRAP + MAX_NESTING} levels; larder needs {MAX_NESTING}")


class _Chain(threading.local):
    """This thread's `_WRAP` nested one-element lists, and the innermost, where the value is put while packed."""

    def __init__(self) -> None:
        inner: list[Any] = [None]
        outer: Any = inner
        for _ in range(_WRAP - 1):
            outer = [outer]
        self.outer: Any = outer
        self.inner = inner


_chain = _Chain()


def pack_plain(value: Any) -> bytes | None:
    """`msgpack.packb(value, use_bin_type=True)` if `value` is plain (see the module's doc), else None."""
    kind = type(value)
    if kind is list or kind is dict:
        chain = _chain
        inner = chain.inner
        inner[0] = value
        try:
            packed = _packb(chain.outer, default=_refuse, option=_OPTIONS)
        except (TypeError, ValueError, OverflowError):
            return None
        finally:
            inner[0] = None
        packed = packed[_WRAP:]
    else:
        try:
            packed = _packb(value, default=_refuse, option=_OPTIONS)
        except (TypeError, ValueError, OverflowError):
            return None
        if kind is bytes:
            return packed
    if (_BIN_MARKERS[0] in packed or _BIN_MARKERS[1] in packed or _BIN_MARKERS[2] in packed) and _holds_buffer(value):
        return None
    return packed


def is_plain(value: Any) -> bool:
    """Whether `value` is plain (see the module's doc)."""
    return pack_plain(value) is not None


def _holds_buffer(value: Any) -> bool:
    """Whether `value`, a list, dict or scalar that ormsgpack packed, is or holds a bytearray or a memoryview: the
    objects of each level at once, at C speed (`gc.get_referents` of a list gives its items, of a dict its values, and
    its keys unless they are all str). A level of dicts none of which the garbage collector tracks (CPython leaves
    untracked a dict that holds no object it tracks: no list, dict or memoryview) holds scalars only, and a bytearray
    is the one scalar here that has no hash: one hash of them all answers (a query result's rows, at a third of the
    cost of learning every object's type)."""
    kind = type(value)
    if kind is bytearray or kind is memoryview:
        return True
    if kind not in _CONTAINERS:
        return False
    level = [value]
    while level:
        items = _get_referents(*level)
        if not any(map(_is_tracked, level)):
            try:
                hash(tuple(items))
            except TypeError:
                return True
            return False
        kinds = list(map(type, items))
        seen = set(kinds)
        if bytearray in seen or memoryview in seen:
            return True
        level = list(compress(items, map(_CONTAINERS.__contains__, kinds)))
    return False
