"""Which values are stored as plain MessagePack and which are pickled (or refused): the contract the write path
kept when its Python walk over every element (`cache._plain`) gave way to plain.py's native one (issue 34). Plain:
None, bool, int (64 bits), float, str, bytes, and lists and str-keyed dicts of those, no container at level 100 or
deeper (spec/FORMAT.md §2); everything else is pickled with pickle=True, and refused without it by the Django
backend. A plain value's bytes are msgpack's, whatever packs them."""

from __future__ import annotations

import collections
import dataclasses
import datetime
import decimal
import enum
import math
import random
import uuid
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from larder import Cache
from larder.entry import decode
from larder.plain import is_plain, pack_plain
from larder.serializers import MAX_NESTING


class Colour(enum.IntEnum):
    RED = 1


class Flag(enum.Enum):
    ON = "on"


class Text(str):
    pass


@dataclasses.dataclass
class Point:
    x: int


def nested(levels: int, leaf: Any = 1) -> Any:
    """`leaf` inside `levels` lists: the lists sit at levels 0 to levels - 1, the leaf at `levels`."""
    value = leaf
    for _ in range(levels):
        value = [value]
    return value


def nested_dicts(levels: int, leaf: Any = 1) -> Any:
    value = leaf
    for _ in range(levels):
        value = {"k": value}
    return value


def self_referencing() -> list[Any]:
    value: list[Any] = []
    value.append(value)
    return value


def query_result(rows: int) -> dict[str, Any]:
    """What a Django view caches: `.values()` rows (ints, strs, floats, None, bools); its floats' bytes hold 0xc4-0xc6,
    the bin markers plain.py looks for."""
    rng = random.Random(rows)
    return {
        "count": rows,
        "rows": [
            {"id": i, "name": f"item {i}", "price": rng.random() * 100, "stock": rng.randint(0, 500),
             "active": i % 3 == 0, "note": None if i % 2 else "ą ok"}
            for i in range(rows)
        ],
    }  # fmt: skip


PLAIN: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    2**64 - 1,
    -(2**63),
    196,
    1.5,
    -0.0,
    math.inf,
    "",
    "Ąć",
    b"",
    b"\xc4\xc5\xc6",
    [],
    {},
    [1, "a", None, {"k": [b"x", 2.5]}],
    {"": {"a": [True, None]}},
    nested(MAX_NESTING),
    nested(MAX_NESTING - 1, []),
    nested_dicts(MAX_NESTING - 1, {}),
    {"k": nested(MAX_NESTING - 1)},
    [[b"\xc4"] * 3, [196.5, 197, 198]],
    query_result(15),
    query_result(1100),
]

NOT_PLAIN: list[Any] = [
    (1, 2),
    [1, (2,)],
    {"a": [{"b": (1,)}]},
    {1, 2},
    [frozenset()],
    collections.OrderedDict(a=1),
    [collections.defaultdict(list)],
    {"a": collections.Counter()},
    [Text("a")],
    {Text("a"): 1},
    Colour.RED,
    [Colour.RED],
    {"k": [Flag.ON]},
    {Colour.RED: 1},
    {1: 2},
    {"a": [{"b": {1: 2}}]},
    {"a": [{"b": {True: 2}}]},
    {None: 1},
    {b"a": 1},
    {1.5: 1},
    2**64,
    [-(2**63) - 1],
    {"k": [2**100]},
    bytearray(b"x"),
    [bytearray(b"x")],
    {"a": {"b": [bytearray(b"\xc4"), 1.5]}},
    {"rows": [*query_result(50)["rows"], {"blob": bytearray(b"y")}]},
    [memoryview(b"x")],
    [datetime.datetime(2026, 1, 1)],
    [datetime.date(2026, 1, 1)],
    [decimal.Decimal("1.5")],
    [uuid.UUID(int=1)],
    [Point(1)],
    [msgpack.ExtType(5, b"x")],
    ["\ud800"],
    {"k": "\udfff"},
    nested(MAX_NESTING + 1),
    nested(MAX_NESTING, []),
    nested(MAX_NESTING, {}),
    nested_dicts(MAX_NESTING, {}),
    {"k": nested(MAX_NESTING)},
    nested(300),
    self_referencing(),
    object(),
]


@pytest.mark.parametrize("value", PLAIN, ids=lambda v: repr(v)[:40])
def test_a_plain_value_packs_as_msgpack_does(value: Any) -> None:
    assert is_plain(value)
    assert pack_plain(value) == msgpack.packb(value, use_bin_type=True)


@pytest.mark.parametrize("value", NOT_PLAIN, ids=lambda v: repr(v)[:40])
def test_anything_else_is_not_plain(value: Any) -> None:
    assert not is_plain(value)
    assert pack_plain(value) is None


def test_math_nan_is_plain() -> None:
    assert pack_plain([math.nan]) == msgpack.packb([math.nan])


def payload_is_pickled(entry: bytes) -> bool:
    value = decode(entry).value
    return isinstance(value, msgpack.ExtType) and value.code == 80


@pytest.mark.parametrize("value", PLAIN, ids=lambda v: repr(v)[:40])
def test_a_pickling_cache_stores_a_plain_value_as_msgpack(value: Any) -> None:
    cache = Cache("memory://", pickle=True, signing_secret="s")
    entry, _ = cache.encode(value)
    assert not payload_is_pickled(entry)
    cache.set("k", value)
    assert msgpack.packb(cache.get("k")) == msgpack.packb(value)


#: What pickle takes (not a memoryview) and gives back with the same repr (not an object's address).
PICKLABLE = [value for value in NOT_PLAIN if "memory at" not in repr(value) and type(value) is not object]


@pytest.mark.parametrize("value", PICKLABLE, ids=lambda v: repr(v)[:40])
def test_a_pickling_cache_pickles_anything_else_and_gives_it_back(value: Any) -> None:
    cache = Cache("memory://", pickle=True, signing_secret="s")
    entry, _ = cache.encode(value)
    assert payload_is_pickled(entry)
    for write in (cache.set, cache.add):
        cache.delete("k")
        write("k", value)
        back = cache.get("k")
        assert type(back) is type(value)
        assert repr(back) == repr(value)
    cache.set_many({"a": value, "b": [value]})
    assert repr(cache.get_many(["a", "b"])) == repr({"a": value, "b": [value]})
    assert repr(cache.fetch("c", lambda: value)) == repr(value)
    assert repr(cache.get("c")) == repr(value)


def test_a_memoryview_inside_a_value_is_refused_as_before() -> None:
    cache = Cache("memory://", pickle=True, signing_secret="s")
    with pytest.raises(TypeError):
        cache.set("k", [memoryview(b"x")])


def test_without_pickling_a_plain_cache_packs_what_msgpack_packs_and_refuses_deep_values() -> None:
    cache = Cache("memory://")
    for value in ([1, (2,)], {1: 2}, [bytearray(b"x")], {"a": collections.OrderedDict(b=1)}):
        cache.set("k", value)
        assert msgpack.packb(cache.get("k")) == msgpack.packb(value)
    with pytest.raises(ValueError, match="nested"):
        cache.set("k", nested(MAX_NESTING + 1))
    with pytest.raises(ValueError, match="nested"):
        cache.set("k", [nested(MAX_NESTING, ())])


_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**64 - 1),
    st.floats(allow_nan=False),
    st.text(),
    st.binary(),
)
_plain_values = st.recursive(_scalars, lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner), max_leaves=40)


@given(_plain_values)
@settings(max_examples=300, deadline=None)
def test_every_plain_value_packs_as_msgpack_does(value: Any) -> None:
    assert pack_plain(value) == msgpack.packb(value, use_bin_type=True)


@given(_plain_values, st.sampled_from([(1,), {1: 1}, bytearray(b"\xc4"), Colour.RED, 2**64, {1}]))
@settings(max_examples=200, deadline=None)
def test_one_impure_element_anywhere_makes_a_value_not_plain(value: Any, impure: Any) -> None:
    assert not is_plain([value, {"x": [impure]}])
    assert not is_plain({"x": value, "y": impure})
