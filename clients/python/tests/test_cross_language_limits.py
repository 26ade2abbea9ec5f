"""The limits of the format commands, Python and Rust side by side (FORMAT.md §2, spec/CLI.md): values nested more
than 100 deep, and displays longer than 16 characters per payload byte plus 1 MiB.

Nesting: the top-level value is at level 0, the elements (and, for a map, the keys and values) of a container at
level L are at level L + 1, and a container at level 100 or more is too deep: 100 nested arrays are fine, 101 are
not. `encode` refuses such documents (exit 2); `inspect` refuses such values (exit 1, bad_value).

Size: `inspect` refuses (exit 1, too_large) a display longer than the limit. Where a value is both too deep and too
large, which one is reported depends on which the display meets first, exactly as the Rust CLI writes it: the depth
when a container opens, the UTF-8 length of the text being written (4 bytes a character) after each value, the
characters of the whole display at the end. The cases below pin each of those, and the depth budget of the Rust
MessagePack reader (which refuses, as bad_value, what it cannot read before anything is displayed).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from larder.display import display_json
from larder.msgpack_reader import read_whole_tree
from larder.report import display_limit
from support import (
    ExtObject,
    PairsMap,
    Run,
    bare_header,
    examples,
    larder_bin,
    msgpack_objects,
    pack_msgpack,
    run_python,
    run_rust,
)

DEPTHS = [99, 100, 101]


@pytest.fixture(scope="module")
def rust() -> Path:
    return larder_bin()


def _kind(run: Run) -> str | None:
    """The error kind of an `inspect` that failed, None for one that succeeded."""
    return None if run.status == 0 else run.error_kind


def _inspect_alike(rust: Path, payload: bytes, serializer: str = "msgpack", as_json: bool = True) -> str | None:
    """Runs both `inspect`s on a bare entry holding `payload`: same exit status, stdout and error kind. Returns the
    error kind (None on success)."""
    args = ["inspect", "--json"] if as_json else ["inspect"]
    entry = bare_header(serializer=serializer) + payload
    rust_run, python_run = run_rust(rust, args, entry), run_python(args, entry)
    assert python_run.status == rust_run.status, (python_run.stderr, rust_run.stderr)
    assert python_run.stdout == rust_run.stdout
    assert _kind(python_run) == _kind(rust_run)
    assert python_run.stderr.count("\n") == rust_run.stderr.count("\n") == (0 if rust_run.status == 0 else 1)
    return _kind(rust_run)


# --- MessagePack payloads ------------------------------------------------------------------------------------------


def _str16(data: bytes) -> bytes:
    """A MessagePack str with a 16-bit length, whatever its length (so a payload grows by exactly its bytes)."""
    return b"\xda" + len(data).to_bytes(2, "big") + data


def _arrays(levels: int, leaf: bytes = b"\x01") -> bytes:
    """[[...[leaf]...]]: `levels` arrays."""
    return b"\x91" * levels + leaf


def _maps(levels: int) -> bytes:
    """{"a":{"a":...{"a":1}...}}: `levels` maps, each the value of the one around it."""
    return b"\x81\xa1a" * levels + b"\x01"


def _keyed_by_nested_maps(levels: int) -> bytes:
    """{{"a":{"a":...1...}}: 2}: `levels` maps, the outer one keyed by the others (nested through their values)."""
    return b"\x81" + _maps(levels - 1) + b"\x02"


def _keys_within_keys(levels: int, innermost: bytes = b"\x01") -> bytes:
    """{{{...{innermost: 2}...}: 2}: 2}: `levels` maps, each the key of the one around it. Each level escapes the
    display of the one inside it again, doubling its backslashes and quotes."""
    return b"\x81" * levels + innermost + b"\x02" * levels


MSGPACK_SHAPES: dict[str, Callable[[int], bytes]] = {
    "arrays": _arrays,
    "maps": _maps,
    "map-keyed-by-maps": _keyed_by_nested_maps,
    "key-arrays": lambda levels: b"\x81" + _arrays(levels - 1) + b"\x02",
}
JSON_SHAPES: dict[str, Callable[[int], bytes]] = {
    "arrays": lambda levels: b"[" * levels + b"1" + b"]" * levels,
    "maps": lambda levels: b'{"a":' * levels + b"1" + b"}" * levels,
}


@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("shape", list(MSGPACK_SHAPES))
def test_inspect_of_msgpack_nested_to_the_limit(rust: Path, shape: str, depth: int) -> None:
    payload = MSGPACK_SHAPES[shape](depth)
    expected = None if depth <= 100 else "bad_value"
    assert _inspect_alike(rust, payload) == expected
    assert _inspect_alike(rust, payload, as_json=False) == expected


@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("shape", list(JSON_SHAPES))
def test_inspect_of_json_nested_to_the_limit(rust: Path, shape: str, depth: int) -> None:
    payload = JSON_SHAPES[shape](depth)
    expected = None if depth <= 100 else "bad_value"
    assert _inspect_alike(rust, payload, "json") == expected
    assert _inspect_alike(rust, payload, "json", as_json=False) == expected


@pytest.mark.parametrize("depth", DEPTHS)
def test_keys_within_keys_are_too_large_before_they_are_too_deep(rust: Path, depth: int) -> None:
    """99 or 100 levels of map keys escape each other 2^99 times over: too_large, found while writing. At 101 the
    innermost map opens too deep before anything is written: bad_value."""
    assert _inspect_alike(rust, _keys_within_keys(depth)) == ("bad_value" if depth > 100 else "too_large")


@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("shape", list(JSON_SHAPES))
@pytest.mark.parametrize("serializer", ["msgpack", "json"])
def test_encode_of_documents_nested_to_the_limit(rust: Path, serializer: str, shape: str, depth: int) -> None:
    """A JSON document cannot key a map by a map, so arrays and maps; both serializers refuse the same depths."""
    document = JSON_SHAPES[shape](depth)
    args = ["encode", "--serializer", serializer, "--compressor", "none", "--created-at", "0"]
    rust_run, python_run = run_rust(rust, args, document), run_python(args, document)
    assert python_run.status == rust_run.status == (0 if depth <= 100 else 2), (python_run.stderr, rust_run.stderr)
    assert python_run.stdout == rust_run.stdout
    if depth > 100:
        for run in (rust_run, python_run):
            run.assert_one_line_error(2)
            assert "nested more than 100" in run.stderr
    else:
        assert _inspect_alike(rust, python_run.stdout[23:], serializer) is None


# --- display size ---------------------------------------------------------------------------------------------------

BLOWUP = _keys_within_keys(40)  # 121 bytes whose display would take 2^40 and more characters


def test_keys_within_keys_40_deep_are_too_large(rust: Path) -> None:
    assert _inspect_alike(rust, BLOWUP, as_json=False) == "too_large"


def test_too_large_first_then_too_deep_is_too_large(rust: Path) -> None:
    # the blow-up outgrows 4 bytes a character of the limit inside its keys, before the deep array is reached
    assert _inspect_alike(rust, b"\x92" + BLOWUP + _arrays(101)) == "too_large"


def test_too_deep_first_then_too_large_is_bad_value(rust: Path) -> None:
    assert _inspect_alike(rust, b"\x92" + _arrays(101) + BLOWUP) == "bad_value"


def _escaping(levels: int, backslashes: int, letters: int, more_backslashes: int, extra: tuple[bytes, ...]) -> bytes:
    """[K, "aaa…", "\\\\…", *extra] where K is `levels` keys within keys around {"\\…": 1}: its display grows
    by 2^(levels+1) characters per innermost backslash, the letters by 1 and the other backslashes by 2 each, while
    each byte of payload raises the limit by 16. Strings have fixed-size headers, so lengths add up exactly."""
    key = _keys_within_keys(levels, b"\x81" + _str16(b"\\" * backslashes) + b"\x01")
    items = [key, _str16(b"a" * letters), _str16(b"\\" * more_backslashes), *extra]
    return bytes([0x90 + len(items)]) + b"".join(items)


@functools.cache
def _tuned(past: int, *, levels: int = 11, in_bytes: bool = False, extra: tuple[bytes, ...] = ()) -> bytes:
    """An `_escaping` payload whose display is exactly `past` characters beyond its limit, or (`in_bytes`) exactly
    `past` UTF-8 bytes beyond 4 bytes a character of it; the display ends before a last element of `extra` that
    starts with an array, as a too deep one does, and is measured there."""
    hidden = extra[-1:] if extra and extra[-1].startswith(b"\x91") else ()
    shown = extra[: len(extra) - len(hidden)]

    def measure(backslashes: int, letters: int = 0, more: int = 0) -> int:
        full = _escaping(levels, backslashes, letters, more, shown + hidden)
        text = display_json(read_whole_tree(_escaping(levels, backslashes, letters, more, shown)))
        if hidden:
            text = text[:-1]  # where the last shown element ends: the display stops at the next one
        if in_bytes:
            return len(text.encode()) - 4 * display_limit(full)
        return len(text) - display_limit(full)

    # one more letter adds a byte of text and 16 (64) to the limit; one more top-level backslash adds two of text
    letter_cost, backslash_cost = (63, 62) if in_bytes else (15, 14)
    slack = letter_cost * backslash_cost  # any excess beyond this is a sum of those two costs
    base, per_backslash = measure(0), measure(1) - measure(0)
    backslashes = max(0, -(-(past + slack - base) // per_backslash))
    excess = measure(backslashes) - past
    more = next(m for m in range(letter_cost) if (excess - m * backslash_cost) % letter_cost == 0)
    letters = (excess - more * backslash_cost) // letter_cost
    assert measure(backslashes, letters, more) == past, "the construction itself is off"
    return _escaping(levels, backslashes, letters, more, shown + hidden)


@pytest.mark.parametrize("past", [0, 1])
def test_a_display_exactly_at_the_limit_is_shown_one_more_character_is_not(rust: Path, past: int) -> None:
    payload = _tuned(past)
    assert _inspect_alike(rust, payload) == (None if past == 0 else "too_large")
    assert _inspect_alike(rust, payload, as_json=False) == (None if past == 0 else "too_large")
    if past == 0:
        value = json.loads(run_python(["inspect", "--json"], bare_header() + payload).stdout)["value"]
        assert len(json.dumps(value, ensure_ascii=False, separators=(",", ":"))) == display_limit(payload)


def test_a_display_past_the_limit_is_refused_at_the_end_so_a_deeper_container_is_met_first(rust: Path) -> None:
    """Twice the limit is too large, found at the end: it is short of 4 bytes a character, so the early check lets
    the text be written on, and a container too deep after it is met first (bad_value)."""
    assert _inspect_alike(rust, _tuned(1_100_000)) == "too_large"
    assert _inspect_alike(rust, _tuned(1_100_000, extra=(_arrays(101),))) == "bad_value"


@pytest.mark.parametrize("past", [0, 1])
def test_the_early_check_counts_utf8_bytes(rust: Path, past: int) -> None:
    """Four-byte characters after the escaped keys take the text `past` bytes beyond 4 bytes a character of the
    limit, while its characters stay below that: one byte over is too large at once (too_large); exactly at it, the
    text is written on and the container too deep after it is met (bad_value)."""
    emoji = _str16("\U0001f35e".encode() * 20)
    payload = _tuned(past, levels=13, in_bytes=True, extra=(emoji, _arrays(101)))
    assert _inspect_alike(rust, payload) == ("too_large" if past else "bad_value")


#: The deepest each kind of innermost object can be, inside one array, for Rust's reader to read it (rmpv: 1024 units
#: of depth budget, 2 per container around an object, and 1 for a scalar, 2 for bin, array or map, 3 for str or ext).
READABLE = {
    "str": (b"\xa1x", 509),
    "ext": (b"\xd4\x01\x01", 509),
    "int": (b"\x01", 510),
    "bin": (b"\xc4\x01x", 510),
    "array": (b"\x90", 510),
    "map": (b"\x80", 510),
}


def test_what_the_rust_reader_can_read_is_displayed_until_too_large(rust: Path) -> None:
    """A display too large, then nestings as deep as Rust's reader can read: too_large (not bad_value)."""
    deep = [_arrays(levels, leaf) for leaf, levels in READABLE.values()]
    assert _inspect_alike(rust, bytes([0x90 + 1 + len(deep)]) + BLOWUP + b"".join(deep)) == "too_large"


@pytest.mark.parametrize("innermost", list(READABLE))
def test_what_the_rust_reader_cannot_read_is_bad_value_before_any_display(rust: Path, innermost: str) -> None:
    """One level deeper than READABLE, Rust's reader refuses the payload before anything is displayed: bad_value,
    even though the display would have been found too large first."""
    leaf, levels = READABLE[innermost]
    assert _inspect_alike(rust, b"\x92" + BLOWUP + _arrays(levels + 1, leaf)) == "bad_value"


# --- generated MessagePack, nested around the limit ---------------------------------------------------------------


@st.composite
def _nested_msgpack(draw: st.DrawFn) -> Any:
    """Any MessagePack object, sometimes wrapped in 90 to 103 arrays, maps (as a value) or, now and then, maps (as a
    key): around the nesting limit, with every kind of content."""
    obj = draw(msgpack_objects)
    levels = draw(st.one_of(st.just(0), st.integers(min_value=90, max_value=103)))
    for _ in range(levels):
        how = draw(st.sampled_from(["array"] * 6 + ["value"] * 6 + ["key"]))
        if how == "array":
            obj = [obj]
        elif how == "value":
            obj = PairsMap([(draw(st.sampled_from(["k", b"\xff", 7, ExtObject(1, b"")])), obj)])
        else:
            obj = PairsMap([(obj, None)])
    return obj


@settings(max_examples=examples(40))
@given(obj=_nested_msgpack())
def test_inspect_of_generated_msgpack_is_identical(rust: Path, obj: Any) -> None:
    _inspect_alike(rust, pack_msgpack(obj))
