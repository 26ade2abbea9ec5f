"""Display JSON (spec/CLI.md): how a decoded value is written, the same in every language, so outputs compare.

Compact JSON, non-ASCII written as itself; floats as Python's `repr` (`1.0`, `1e+16`, `NaN`, `Infinity`); byte
strings as JSON strings when they are UTF-8, else `{"$base64":"…"}`; MessagePack ext as `{"$ext":t,"$base64":"…"}`;
maps keep their order and duplicate keys, and a key that is not a string is written as the display JSON of the key,
as a string. Writing is iterative, so no nesting depth can exhaust Python's stack; `inspect` bounds the depth (100,
spec/FORMAT.md §2) and the length of what it writes (see `display_json`).
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


class _Open:
    """An array or map to write next: the separator (and key) text before it, then the container itself."""

    __slots__ = ("container", "prefix")

    def __init__(self, prefix: str, container: Any) -> None:
        self.prefix = prefix
        self.container = container


class _KeyOpen:
    """A map key that must be displayed before it is quoted starts here, after `prefix` (the separator)."""

    __slots__ = ("prefix",)

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix


#: The map key that `_KeyOpen` started is complete: quote it into the text around it.
_KEY_END: Final = object()
_DONE: Final = object()
#: Scalars written in one piece, at most, before the length limit is checked again.
_BATCH: Final = 512
#: A display may hold at most this many UTF-8 bytes per character of its limit while it is being written.
_BYTES_PER_CHAR: Final = 4


class DisplayTooLarge(ValueError):
    """The display JSON of a value would exceed the length it was allowed."""


class DisplayTooDeep(ValueError):
    """The value holds arrays or maps nested deeper than the display allows."""


class JsonIntegerText(str):
    """A JSON integer kept as its text, for one too long for `int()` (Python refuses over 4,300 digits)."""


def display_json(value: Any, limit: int | None = None, max_depth: int | None = None) -> str:
    """The display JSON of a decoded value.

    Accepts None, bool, int, float, str, bytes (shown as text when UTF-8), `Ext`, `JsonIntegerText`, lists and
    tuples, dicts, and `MapPairs` (maps as ordered pairs).

    With `max_depth`, raises `DisplayTooDeep` on reaching an array or map inside `max_depth` others (the top-level
    value is inside none; a map key counts as inside its map). With `limit`, raises `DisplayTooLarge` for a display
    longer than `limit` characters: a map key that is itself a map is written as an escaped string, so each level of
    keys within keys doubles the backslashes, and a few hundred bytes of MessagePack could otherwise ask for
    gigabytes. The two are checked as the Rust CLI checks them, so the two agree on which one a value meets first:
    the depth when a container opens; the length of the text being written (the whole display, or the map key being
    built) after each complete value, against `4 * limit` UTF-8 bytes; and the whole display, in characters,
    against `limit` at the end (or as soon as it passes `limit`, when no container is too deep).
    """
    # One generator per open array or map (so memory follows depth, not width), one writer per open map key. The
    # generators yield text that ends a value (a str, after which the limit is checked), or an `_Open`, `_KeyOpen`
    # or `_KEY_END` (whose text is written unchecked).
    writers = [io.StringIO()]
    sizes = [0]  # UTF-8 bytes in each writer
    total = 0  # characters in all writers, a finished key counted as quoted: never shrinks
    byte_limit = -1 if limit is None else _BYTES_PER_CHAR * limit
    watch_total = limit is not None
    stack: list[Iterator[Any]] = [_array_parts((value,), close="")]
    while stack:
        item: Any = next(stack[-1], _DONE)
        kind = type(item)
        if kind is str:
            text = item
        elif item is _DONE:
            stack.pop()
            continue
        elif kind is _Open:
            text = item.prefix
            if max_depth is not None and len(stack) - 1 >= max_depth:
                raise DisplayTooDeep(f"the value holds arrays or maps nested more than {max_depth} deep")
            container = item.container
            if isinstance(container, (MapPairs, dict)):
                text += "{"
                stack.append(_map_parts(container.items() if isinstance(container, dict) else container))
            else:
                text += "["
                stack.append(_array_parts(container))
        elif kind is _KeyOpen:
            text = item.prefix
            writers[-1].write(text)
            sizes[-1] += len(text)  # a separator: ASCII
            total += len(text)
            writers.append(io.StringIO())
            sizes.append(0)
            continue
        else:  # _KEY_END
            key = writers.pop().getvalue()
            sizes.pop()
            total -= len(key)
            text = quote(key)
        writers[-1].write(text)
        length = len(text)
        total += length
        sizes[-1] += length if text.isascii() else len(text.encode("utf-8", errors="surrogatepass"))
        if limit is None:
            continue
        if kind is str and sizes[-1] > byte_limit:
            raise DisplayTooLarge(f"the value's display JSON would exceed {limit} characters")
        if watch_total and total > limit:
            # Past the limit for good (the text only grows), so it fails: too large, unless a container further on
            # is too deep and is reached first. Look once.
            watch_total = False
            if max_depth is None or not _nests_deeper(value, max_depth):
                raise DisplayTooLarge(f"the value's display JSON would exceed {limit} characters")
    result = writers[0].getvalue()
    if limit is not None and len(result) > limit:
        raise DisplayTooLarge(f"the value's display JSON would exceed {limit} characters")
    return result


def _is_container(item: Any) -> bool:
    return type(item) in _CONTAINER_TYPES or (
        isinstance(item, (MapPairs, dict)) or (isinstance(item, (list, tuple)) and not isinstance(item, Ext))
    )


def _array_parts(items: Iterable[Any], close: str = "]") -> Iterator[Any]:
    parts: list[str] = []
    separator = ""
    for item in items:
        write = _SCALAR_WRITERS.get(type(item))
        if write is not None:
            parts.append(separator)
            parts.append(write(item))
        elif _is_container(item):
            if parts:
                yield "".join(parts)
                parts = []
            yield _Open(separator, item)
        else:
            parts.append(separator)
            parts.append(scalar_json(item))
        separator = ","
        if len(parts) >= _BATCH:
            yield "".join(parts)
            parts = []
    parts.append(close)
    yield "".join(parts)


def _map_parts(pairs: Iterable[tuple[Any, Any]]) -> Iterator[Any]:
    parts: list[str] = []
    separator = ""
    for key, item in pairs:
        key_text = _string_key(key)
        if key_text is None:
            if parts:
                yield "".join(parts)
                parts = []
            yield _KeyOpen(separator)
            yield _Open("", key) if _is_container(key) else scalar_json(key)
            yield _KEY_END
            prefix = ":"
        else:
            prefix = f"{separator}{key_text}:"
        write = _SCALAR_WRITERS.get(type(item))
        if write is not None:
            parts.append(prefix)
            parts.append(write(item))
        elif _is_container(item):
            if parts:
                yield "".join(parts)
                parts = []
            yield _Open(prefix, item)
        else:
            parts.append(prefix)
            parts.append(scalar_json(item))
        separator = ","
        if len(parts) >= _BATCH:
            yield "".join(parts)
            parts = []
    parts.append("}")
    yield "".join(parts)


def _nests_deeper(value: Any, max_depth: int) -> bool:
    """Whether `value` holds an array or map inside `max_depth` others (map keys count as inside their map)."""
    stack = [(value, 0)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, (MapPairs, dict)):
            pairs = node.items() if isinstance(node, dict) else node
            children: list[Any] = [part for pair in pairs for part in pair]
        elif _is_container(node):
            children = list(node)
        else:
            continue
        if level >= max_depth:
            return True
        stack.extend((child, level + 1) for child in children if _is_container(child))
    return False


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
    if isinstance(value, JsonIntegerText):
        return str.__str__(value)
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


#: On a terminal, `inspect` shows at most this many characters of a line's text (or of a body) unless --full.
CUT_AT: Final = 200


def cut_text(text: str, limit: int) -> str:
    """`text` cut to its first `limit` characters (code points, as every language can count them) followed by
    `… (N more characters)`; unchanged when it is no longer than `limit`."""
    more = len(text) - limit
    if more <= 0:
        return text
    return f"{text[:limit]}… ({more} more {'character' if more == 1 else 'characters'})"


def bytes_text(data: bytes) -> str:
    """A byte string as shown in a human-form line: its text, unquoted, when UTF-8, else `{"$base64":"…"}`."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return f'{{"$base64":"{_b64(data)}"}}'


def _string_key(key: str | bytes | Any) -> str | None:
    """The quoted key when it is a string (or UTF-8 bytes); None when it must be displayed first."""
    if type(key) is bytes:
        try:
            return _encode_basestring(key.decode("utf-8"))
        except UnicodeDecodeError:
            return None
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

#: The container types decoding produces (subclasses are recognised too, more slowly).
_CONTAINER_TYPES: Final = frozenset((list, MapPairs, dict, tuple))

#: Writers for the scalar types decoding produces, by exact type (subclasses go through `scalar_json`).
_SCALAR_WRITERS: Final[dict[type, Callable[[Any], str]]] = {
    type(None): lambda _: "null",
    bool: lambda flag: "true" if flag else "false",
    int: int.__repr__,
    float: float_text,
    str: quote,
    bytes: bytes_json,
    JsonIntegerText: str.__str__,
}
