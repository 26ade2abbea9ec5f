"""The serializers of spec/FORMAT.md §2: MessagePack (the default), JSON, raw bytes and UTF-8 text.

MessagePack is written in the canonical form every larder language produces for JSON-expressible values (smallest
integers, float64, str for text, bin for bytes, maps in their given order), which is what `msgpack.packb(...,
use_bin_type=True)` does; so an uncompressed entry is byte-identical across languages. JSON is read strictly
(RFC 8259: no NaN or Infinity, no lone surrogate escapes) so that Python accepts exactly what the other languages do.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Sequence
from itertools import chain, compress, repeat
from typing import Any, Final, cast

import msgpack

from .errors import BAD_VALUE, InvalidEntry

#: A JSON object as its (key, value) pairs, for callers that need order and duplicates kept.
PairsHook = Callable[[list[tuple[str, Any]]], Any]

#: Arrays and maps may nest this deep in a value (spec/FORMAT.md §2): the top-level value is at level 0, the
#: elements, keys and values of a container at level L are at level L + 1, and a container at level 100 or more is
#: too deep. So 100 nested arrays are fine and 101 are refused.
MAX_NESTING: Final = 100

_SURROGATE_ESCAPE: Final = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def serialize(name: str, value: object) -> bytes:
    """`value` serialized with the serializer called `name`. Raises TypeError or ValueError if it cannot be (for
    msgpack and json, a value nested more than `MAX_NESTING` deep is a ValueError)."""
    if name in ("msgpack", "json"):
        check_nesting(value)
    if name == "msgpack":
        try:
            return pack_msgpack(value)
        except OverflowError as e:
            raise ValueError(f"integer outside the MessagePack range [-2^63, 2^64-1]: {e}") from None
    if name == "json":
        return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")
    if name == "text":
        if not isinstance(value, str):
            raise TypeError(f"the text serializer takes a str, not {type(value).__name__}")
        return value.encode("utf-8")
    if name == "raw":
        if isinstance(value, str):
            return value.encode("utf-8")
        if isinstance(value, (bytes, bytearray, memoryview)):
            return bytes(value)
        raise TypeError(f"the raw serializer takes bytes or a str, not {type(value).__name__}")
    raise ValueError(f"unknown serializer {name!r}")


class _Packers(threading.local):
    """A MessagePack packer per thread: `msgpack.packb` makes (and frees) a new one with a 256 KiB buffer on every
    call, which costs more than packing a small value."""

    def __init__(self) -> None:
        self.packer = msgpack.Packer(use_bin_type=True)


_packers = _Packers()
#: A packer whose buffer grew past this (packing a large value) is dropped rather than kept by its thread.
_PACKER_KEEPS: Final = 256 * 1024


def pack_msgpack(value: object) -> bytes:
    """`msgpack.packb(value, use_bin_type=True)` (the same bytes, the same exceptions), on this thread's packer."""
    packed: bytes = _packers.packer.pack(value)  # resets itself after each value, and after an exception
    if len(packed) > _PACKER_KEEPS:
        _packers.packer = msgpack.Packer(use_bin_type=True)
    return packed


def check_nesting(value: object) -> None:
    """Raises ValueError if `value` holds arrays or maps (lists, tuples, dicts) nested more than `MAX_NESTING`
    deep; a container used as a map key counts as nested in its map. Iterative, so it cannot exhaust the stack, and
    it stops at the limit, so it terminates on a self-referencing list too. Scalars are skipped at C speed."""
    if not _is_container_type(type(value)):
        return
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if level >= MAX_NESTING:
            raise ValueError(f"value nested more than {MAX_NESTING} levels deep")
        if isinstance(item, dict):
            children: Sequence[object] = list(chain(item.keys(), item.values()))
        else:
            children = cast("Sequence[object]", item)  # only lists and tuples are ever pushed
        nested = compress(children, map(_is_container_type, map(type, children)))
        stack.extend(zip(nested, repeat(level + 1)))


class _ContainerTypes(dict):  # type: ignore[type-arg]
    """type -> whether it is a list, tuple or dict (or a subclass): a lookup that runs at C speed once cached."""

    def __missing__(self, kind: type) -> bool:
        self[kind] = answer = issubclass(kind, (list, tuple, dict))
        return answer


_is_container_type: Callable[[type], bool] = _ContainerTypes().__getitem__


def deserialize(name: str, payload: bytes | memoryview) -> Any:
    """The value in a decompressed `payload`. Raises only `InvalidEntry` (kind bad_value).

    MessagePack maps become dicts (the last of duplicate keys wins; array keys become tuples), ext types come back
    as `msgpack.ExtType` (`msgpack.Timestamp` for type -1); raw gives bytes, text a str, JSON the `json` module's
    types.
    """
    if name == "msgpack":
        return msgpack_value(payload)
    if name == "json":
        return loads_json(payload)
    if name == "text":
        return decode_text(payload)
    if name == "raw":
        return bytes(payload)
    raise ValueError(f"unknown serializer {name!r}")


def decode_text(payload: bytes | memoryview) -> str:
    """A text payload as a str; invalid UTF-8 is a bad_value error."""
    try:
        return str(payload, "utf-8")
    except UnicodeDecodeError as e:
        raise InvalidEntry(BAD_VALUE, f"text is not UTF-8: {e.reason} at byte {e.start}") from None


def loads_json(
    payload: bytes | memoryview,
    object_pairs_hook: PairsHook | None = None,
    parse_int: Callable[[str], Any] | None = None,
) -> Any:
    """Parses one JSON text (RFC 8259, UTF-8) strictly. Raises only `InvalidEntry` (kind bad_value).

    Integers become ints unless `parse_int` says otherwise; note that Python refuses to convert integers of over
    4,300 digits (a bad_value here)."""
    try:
        return parse_json_text(decode_text(payload), object_pairs_hook, parse_int)
    except InvalidEntry:
        raise
    except ValueError as e:
        raise InvalidEntry(BAD_VALUE, f"json: {e}") from None


def parse_json_text(
    text: str, object_pairs_hook: PairsHook | None = None, parse_int: Callable[[str], Any] | None = None
) -> Any:
    """`json.loads`, minus what RFC 8259 forbids and other languages refuse: NaN, Infinity and lone surrogates.

    Integers stay ints and numbers with a fraction or exponent become floats (FORMAT.md §2). Raises ValueError.
    """
    try:
        value = json.loads(
            text, parse_constant=_refuse_constant, object_pairs_hook=object_pairs_hook, parse_int=parse_int
        )
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    # Valid UTF-8 holds no surrogates, so one in the result came from a lone "\ud8xx" escape.
    if _SURROGATE_ESCAPE.search(text) and _holds_surrogate(value):
        raise ValueError("JSON string holds a lone surrogate escape")
    return value


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _holds_surrogate(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return False


def msgpack_value(payload: bytes | memoryview) -> Any:
    """The value of a msgpack payload (`deserialize("msgpack", payload)`). Raises only `InvalidEntry`."""
    try:
        return msgpack.unpackb(payload, raw=False, strict_map_key=False)
    except TypeError:
        pass  # a map key that a dict cannot hold (an array or a map): retry below, with keys made hashable
    except Exception as e:
        raise InvalidEntry(BAD_VALUE, f"msgpack: {_describe(e)}") from None
    try:
        return msgpack.unpackb(payload, raw=False, strict_map_key=False, object_pairs_hook=_dict_with_frozen_keys)
    except Exception as e:
        raise InvalidEntry(BAD_VALUE, f"msgpack: {_describe(e)}") from None


def _dict_with_frozen_keys(pairs: list[tuple[Any, Any]]) -> dict[Any, Any]:
    return {_freeze(key): value for key, value in pairs}


def _freeze(key: Any) -> Any:
    if isinstance(key, list):
        return tuple(_freeze(item) for item in key)
    if isinstance(key, dict):
        raise TypeError("a map used as a map key cannot be a Python dict key")
    return key


def _describe(error: Exception) -> str:
    text = str(error)
    if isinstance(error, msgpack.ExtraData):
        return "bytes after the value"
    if isinstance(error, msgpack.StackError):
        return "value nested too deeply"
    if isinstance(error, msgpack.FormatError):
        return "reserved or invalid marker"
    return text or type(error).__name__
