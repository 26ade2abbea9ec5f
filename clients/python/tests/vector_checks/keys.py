"""keys.json (spec/FORMAT.md §5): request keys, safe keys, namespaced keys, and the variant and alternate keys of
§5.4-5.5 through the helpers every language offers (`variant_key(base_key, marker, request_headers)`,
`alternate_key(entry_key, coding)`, and `url_keys`, whose alternates must be `alternate_key`'s). Case names are
prefixed with their section, as the Rust runner names them."""

from __future__ import annotations

from typing import Any

import larder
from larder.keys import alternate_key, url_keys, variant_key

from . import Case, each, section, vector_bytes


def cases(document: dict[str, Any]) -> list[Case]:
    sections = (
        ("http", check_http),
        ("safe", check_safe),
        ("namespaced", check_namespaced),
        ("variants", check_variant),
        ("alternates", check_alternate),
    )
    return [case for name, check in sections for case in each(section(document, name), check, f"{name}/")]


def check_http(case: dict[str, Any]) -> None:
    drop = case.get("drop", larder.DEFAULT_DROP)
    key = larder.url_key(case["method"], case["url"], namespace=case.get("namespace", ""), drop=drop)
    assert key == case["key"], f"{key!r}"


def check_safe(case: dict[str, Any]) -> None:
    assert larder.safe_key(case["key"]) == case["safe"], f"{larder.safe_key(case['key'])!r}"


def check_namespaced(case: dict[str, Any]) -> None:
    full = larder.namespaced_key(case["namespace"], case["key"])
    assert full == case["full"], f"{full!r}"


def check_variant(case: dict[str, Any]) -> None:
    lines = [(name, vector_bytes(value)) for name, value in case["request_headers"]]  # values are bytes (§5.4)
    key = variant_key(case["base_key"], case["marker"], lines)
    assert key == case["variant_key"], f"{key!r}"


def check_alternate(case: dict[str, Any]) -> None:
    key = alternate_key(case["entry_key"], case["coding"])
    assert key == case["alternate_key"], f"{key!r}"
    assert key in url_keys(case["entry_key"]), "url_keys holds every alternate of the key"
