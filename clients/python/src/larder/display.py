"""Display JSON (spec/CLI.md): how a decoded value is written, the same in every language, so outputs compare.

Compact JSON, non-ASCII written as itself; floats as Python's `repr` (`1.0`, `1e+16`, `NaN`, `Infinity`); byte
strings as JSON strings when they are UTF-8, else `{"$base64":"…"}`; MessagePack ext as `{"$ext":t,"$base64":"…"}`;
maps keep their order and duplicate keys, and a key that is not a string is written as the display JSON of the key,
as a string. Writing is iterative, so no nesting depth can exhaust Python's stack.
"""

from __future__ import annotations

import base64
import json
import math
from typing import Any, Final

from .msgpack_reader import Ext, MapPairs


class _Emit:
    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


class _KeyStart:
    __slots__ = ()


class _KeyEnd:
    __slots__ = ()


_KEY_START: Final = _KeyStart()
_KEY_END: Final = _KeyEnd()
_COMMA: Final = _Emit(",")
_COLON: Final = _Emit(":")


def display_json(value: Any) -> str:
    """The display JSON of a decoded value.

    Accepts None, bool, int, float, str, bytes (shown as text when UTF-8), `Ext`, lists and tuples, dicts, and
    `MapPairs` (maps as ordered pairs).
    """
    out: list[str] = []
    key_starts: list[int] = []
    work: list[Any] = [value]
    while work:
        item = work.pop()
        if isinstance(item, _Emit):
            out.append(item.text)
        elif isinstance(item, _KeyStart):
            key_starts.append(len(out))
        elif isinstance(item, _KeyEnd):
            start = key_starts.pop()
            text = "".join(out[start:])
            del out[start:]
            out.append(quote(text))
        elif isinstance(item, (MapPairs, dict)):
            pairs = list(item.items()) if isinstance(item, dict) else item
            out.append("{")
            work.append(_Emit("}"))
            for i in range(len(pairs) - 1, -1, -1):
                key, val = pairs[i]
                work.append(val)
                work.append(_COLON)
                key_text = _string_key(key)
                if key_text is None:
                    work.extend((_KEY_END, key, _KEY_START))
                else:
                    work.append(_Emit(key_text))
                if i:
                    work.append(_COMMA)
        elif isinstance(item, (list, tuple)) and not isinstance(item, Ext):
            out.append("[")
            work.append(_Emit("]"))
            for i in range(len(item) - 1, -1, -1):
                work.append(item[i])
                if i:
                    work.append(_COMMA)
        else:
            out.append(scalar_json(item))
    return "".join(out)


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
    """`text` as a JSON string: `"` and `\\` escaped, short forms for \\b \\f \\n \\r \\t, other controls \\u00xx."""
    return json.dumps(text, ensure_ascii=False)


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
