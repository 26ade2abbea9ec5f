"""The checks of spec/vectors, one module per vector file, shared by the conformance runner (tests/conformance.py)
and the test suite (tests/test_vectors.py and the others call the runner's cases): so the matrix of `make
conformance` and the suite cannot disagree.

Each module's `cases(document)` lists a `Case` per vector case: its name and a check that raises AssertionError
(or any exception) on the first difference. Only the standard library and larder (and Django, for a page case
through its middleware) are imported, never pytest; only hostile_keys.json and hostile_replies.json need servers,
which the environment names (hostile.py).
"""

from __future__ import annotations

import base64
import math
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import larder


@dataclass(frozen=True)
class Case:
    """One vector case: `check()` returns when larder gives the expected outcome and raises otherwise."""

    name: str
    check: Callable[[], None]


def each(cases: list[dict[str, Any]], check: Callable[[dict[str, Any]], None], prefix: str = "") -> list[Case]:
    """A Case per vector case (a JSON object with a `name`), checked by `check(case)`; names get `prefix`."""
    return [Case(prefix + str(case["name"]), _bind(check, case)) for case in cases]


def _bind(check: Callable[[dict[str, Any]], None], case: dict[str, Any]) -> Callable[[], None]:
    return lambda: check(case)


def section(document: dict[str, Any], name: str) -> list[dict[str, Any]]:
    """A list of cases of the document; KeyError/TypeError (the file cannot be judged) when it has none."""
    cases = document[name]
    if not isinstance(cases, list):
        raise TypeError(f"{name} is not a list of cases")
    return cases


def same_json(actual: Any, expected: Any) -> bool:
    """Whether two JSON-like values are equal, telling apart what JSON equality would blur.

    bool vs int vs float are different; floats compare bit for bit (so -0.0 != 0.0); maps must have the same keys in
    the same order.
    """
    if isinstance(expected, bool) or expected is None:
        return actual is expected
    if isinstance(expected, int):
        return type(actual) is int and actual == expected
    if isinstance(expected, float):
        if not isinstance(actual, float):
            return False
        if math.isnan(expected):
            return math.isnan(actual)
        return struct.pack("<d", actual) == struct.pack("<d", expected)
    if isinstance(expected, str):
        return isinstance(actual, str) and actual == expected
    if isinstance(expected, (bytes, bytearray)):
        return isinstance(actual, bytes) and actual == expected
    if isinstance(expected, (list, tuple)):
        return (
            isinstance(actual, (list, tuple))
            and len(actual) == len(expected)
            and all(same_json(a, e) for a, e in zip(actual, expected, strict=False))
        )
    if isinstance(expected, dict):
        return (
            isinstance(actual, dict)
            and list(actual) == list(expected)
            and all(same_json(actual[k], expected[k]) for k in expected)
        )
    raise TypeError(f"not a JSON-like value: {expected!r}")


def vector_bytes(item: Any) -> bytes:
    """A vector's byte string: a str (its UTF-8) or {"$base64": "…"}."""
    if isinstance(item, str):
        return item.encode("utf-8")
    return base64.b64decode(item["$base64"])


def vector_response(case: dict[str, Any]) -> larder.HttpResponse:
    """The HTTP response a response-kind case of entries.json holds."""
    spec = case["response"]
    return larder.HttpResponse(
        spec["status"],
        [(vector_bytes(name), vector_bytes(value)) for name, value in spec["headers"]],
        base64.b64decode(spec["body_base64"]),
        spec["content_encoding"],
    )


def vector_value(case: dict[str, Any]) -> Any:
    """The value a value-kind case holds, as the Python type its serializer decodes to."""
    serializer = case["options"]["serializer"]
    if serializer == "raw":
        return base64.b64decode(case["value_base64"])
    if serializer == "text":
        return case["value_text"]
    return case["value"]


def header_pairs(lines: Any) -> list[tuple[str, str]]:
    """`[[name, value], …]` header lines as (name, value) pairs, checked to be strings."""
    pairs = []
    for line in lines:
        name, value = line
        if not (isinstance(name, str) and isinstance(value, str)):
            raise TypeError(f"a header line is [name, value] strings, not {line!r}")
        pairs.append((name, value))
    return pairs
