"""ring.json and stores.json (spec/STORES.md §2, §4.2): the ketama continuum and the server each key goes to;
stored and internal keys; the keys every store refuses, and those at the edge of the rule it accepts."""

from __future__ import annotations

from typing import Any

from larder.stores import internal_key, stored_key
from larder.stores.base import key_problem, prefix_problem
from larder.stores.ring import Ring, RingServer, key_hash

from . import Case, each, section


def ring_cases(document: dict[str, Any]) -> list[Case]:
    return each(section(document, "cases"), check_ring)


def store_cases(document: dict[str, Any]) -> list[Case]:
    cases = section(document, "cases")
    return [Case(f"{case['kind']}/{_name(case)}", _bound(case)) for case in cases]


def _name(case: dict[str, Any]) -> str:
    """Refused and accepted keys by name; stored and internal keys by the key they give (their names repeat)."""
    return str(case["name"] if case["kind"] in ("refused", "accepted") else case["stored_key"])


def _bound(case: dict[str, Any]) -> Any:
    return lambda: check_store_key(case)


def check_ring(case: dict[str, Any]) -> None:
    servers = [RingServer(s["host"], s["port"], s["weight"]) for s in case["servers"]]
    ejected = set(case.get("ejected", []))
    ring = Ring(servers, lambda i: i not in ejected)
    assert len(ring.points) == case["points"], f"{len(ring.points)} points"
    assert [list(p) for p in ring.points[:8]] == case["first_points"], "first points"
    for key in case["keys"]:
        assert key_hash(key["key"]) == key["hash"], f"hash of {key['key']!r}: {key_hash(key['key'])}"
        assert ring.server_for(key["key"]) == key["server"], f"server of {key['key']!r}"


def check_store_key(case: dict[str, Any]) -> None:
    kind = case["kind"]
    if kind == "stored":
        assert stored_key(case["prefix"], case["key"]) == case["stored_key"], stored_key(case["prefix"], case["key"])
        assert key_problem(case["key"]) is None, key_problem(case["key"])
    elif kind == "internal":
        found = internal_key(case["prefix"], case["purpose"], case["name"])
        assert found == case["stored_key"], found
        assert key_problem(found) is None, "larder's own keys pass the rule they impose"
    elif kind == "refused":
        key = bytes.fromhex(case["key_hex"]).decode("utf-8")
        assert key_problem(key) is not None, "accepted"
        assert prefix_problem(key) is not None or key == "", "the empty prefix is allowed, the empty key is not"
    elif kind == "accepted":
        key = bytes.fromhex(case["key_hex"]).decode("utf-8")
        assert key_problem(key) is None, key_problem(key)
        assert prefix_problem(key) is None, prefix_problem(key)
    else:
        raise AssertionError(f"unknown kind {kind!r}")
