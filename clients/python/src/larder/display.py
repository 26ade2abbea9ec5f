"""Display JSON (spec/CLI.md): how a decoded value is written, the same in every language, so outputs compare.

Compact JSON, non-ASCII written as itself; floats as Python's `repr` (`1.0`, `1e+16`, `NaN`, `Infinity`); byte
strings as JSON strings when they are UTF-8, else `{"$base64":"…"}`; MessagePack ext as `{"$ext":t,"$base64":"…"}`;
maps keep their order and duplicate keys, and a key that is not a string is written as the display JSON of the key,
as a string. Writing is iterative, so no nesting depth can exhaust Python's stack.
"""

from __future__ import annotations

import base64
import io
import json
import json.encoder
import math
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Final

from .msgpack_reader import Ext, MapPairs


class _Marker:
    """Where a map key that must be displayed before it is quoted starts or ends."""

    __slots__ = ()


_KEY_START: Final = _Marker()
_KEY_END: Final = _Marker()
_DONE: Final = object()
#: Scalars written in one piece, at most, before the length limit is checked again.
_BATCH: Final = 512


class DisplayTooLarge(ValueError):
    """The display JSON of a value would exceed the length it was allowed."""


def display_json(value: Any, limit: int | None = None) -> str:
    """The display JSON of a decoded value.

    Accepts None, bool, int, float, str, bytes (shown as text when UTF-8), `Ext`, lists and tuples, dicts, and
    `MapPairs` (maps as ordered pairs). With `limit`, raises `DisplayTooLarge` rather than build a longer text: a
    map key that is itself a map is written as an escaped string, so each level of keys within keys doubles the
    backslashes, and a few hundred bytes of MessagePack could otherwise ask for gigabytes.
    """
    # One generator per open array or map (so memory follows depth, not width), one writer per open map key. The
    # generators yield text already written (a str) or an object still to write (an array, a map, a key marker).
    writers = [io.StringIO()]
    size = 0
    stack: list[Iterator[Any]] = [_array_parts((value,), close="")]
    while stack:
        item = next(stack[-1], _DONE)
        if type(item) is str:
            text = item
        elif item is _DONE:
            stack.pop()
            continue
        elif item is _KEY_START:
            writers.append(io.StringIO())
            continue
        elif item is _KEY_END:
            key = writers.pop().getvalue()
            size -= len(key)
            text = quote(key)
        elif isinstance(item, (MapPairs, dict)):
            text = "{"
            stack.append(_map_parts(item.items() if isinstance(item, dict) else item))
        elif isinstance(item, (list, tuple)) and not isinstance(item, Ext):
            text = "["
            stack.append(_array_parts(item))
        else:
            text = scalar_json(item)
        writers[-1].write(text)
        size += len(text)
        if limit is not None and size > limit:
            raise DisplayTooLarge(f"the value's display JSON would exceed {limit} characters")
    return writers[0].getvalue()


def _array_parts(items: Iterable[Any], close: str = "]") -> Iterator[Any]:
    parts: list[str] = []
    for i, item in enumerate(items):
        if i:
            parts.append(",")
        write = _SCALAR_WRITERS.get(type(item))
        if write is not None:
            parts.append(write(item))
            if len(parts) < _BATCH:
                continue
        if parts:
            yield "".join(parts)
            parts = []
        if write is None:
            yield item
    parts.append(close)
    yield "".join(parts)


def _map_parts(pairs: Iterable[tuple[Any, Any]]) -> Iterator[Any]:
    parts: list[str] = []
    for i, (key, item) in enumerate(pairs):
        if i:
            parts.append(",")
        key_text = _string_key(key)
        if key_text is None:
            if parts:
                yield "".join(parts)
                parts = []
            yield from (_KEY_START, key, _KEY_END)
        else:
            parts.append(key_text)
        parts.append(":")
        write = _SCALAR_WRITERS.get(type(item))
        if write is not None:
            parts.append(write(item))
            if len(parts) < _BATCH:
                continue
        if parts:
            yield "".join(parts)
            parts = []
        if write is None:
            yield item
    parts.append("}")
    yield "".join(parts)


def scalar_json(value: Any) -> str:
    """The display JSON of a value that is not an array or a map."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        return float_text(value)
    if isinstance(value, str):
        return quote(value)
    if isinstance(value, Ext):
        return f'{{"$ext":{value.code},"$base64":"{_b64(value.data)}"}}'
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes_json(bytes(value))
    raise TypeError(f"cannot display a {type(value).__name__}")


def float_text(value: float) -> str:
    """The shortest text that reads back as the same float64, as Python's `repr` writes it."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return repr(float(value))


def quote(text: str) -> str:
    """`text` as a JSON string: `"` and `\\` escaped, short forms for \\b \\f \\n \\r \\t, other controls \\u00xx.

    This is exactly `json.dumps(text, ensure_ascii=False)`, through the encoder's string function for speed.
    """
    return _encode_basestring(text)


def bytes_json(data: bytes) -> str:
    """A byte string's display JSON: a JSON string when it is UTF-8, else `{"$base64":"…"}`."""
    try:
        return quote(data.decode("utf-8"))
    except UnicodeDecodeError:
        return f'{{"$base64":"{_b64(data)}"}}'


def bytes_text(data: bytes) -> str:
    """A byte string as shown in a human-form line: its text, unquoted, when UTF-8, else `{"$base64":"…"}`."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return f'{{"$base64":"{_b64(data)}"}}'


def _string_key(key: str | bytes | Any) -> str | None:
    """The quoted key when it is a string (or UTF-8 bytes); None when it must be displayed first."""
    if isinstance(key, str):
        return quote(key)
    if isinstance(key, (bytes, bytearray)):
        try:
            return quote(bytes(key).decode("utf-8"))
        except UnicodeDecodeError:
            return None
    return None


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


# The json module's own string writer (what json.dumps(s, ensure_ascii=False) calls), in C where available.
_encode_basestring: Callable[[str], str] = getattr(
    json.encoder, "encode_basestring", lambda text: json.dumps(text, ensure_ascii=False)
)

#: Writers for the scalar types decoding produces, by exact type (subclasses go through `scalar_json`).
_SCALAR_WRITERS: Final[dict[type, Callable[[Any], str]]] = {
    type(None): lambda _: "null",
    bool: lambda flag: "true" if flag else "false",
    int: int.__repr__,
    float: float_text,
    str: quote,
    bytes: bytes_json,
}
