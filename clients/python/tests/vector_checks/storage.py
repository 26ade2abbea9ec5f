"""storage.json (spec/HTTP.md §1): with each case's settings (the file's `rules_defaults` with the case's
`rules`), `larder.http_rules.storage` gives exactly the case's `expected`; and the file's shape (unique names,
notes, known reasons, lowercase sorted Vary names) is a case of its own, `file-shape`, as in the Rust runner
(without its "several hundred cases", so that a short generated file can be judged too).

The settings are named as `larder serve`'s configuration (`stale_if_error_secs`); `Rules` names them as its flags
(`stale_if_error`): the same names without `_secs`. The same code judges the generated cases of
spec/storage_differential.py."""

from __future__ import annotations

from typing import Any

from larder.http_rules import Rules, StorePlan, storage

from . import Case, each, header_pairs, section

REASONS = frozenset(
    {
        "method",
        "status",
        "no-store",
        "request-no-store",
        "private",
        "authorization",
        "set-cookie",
        "vary-star",
        "no-explicit-freshness",
    }
)


def cases(document: dict[str, Any]) -> list[Case]:
    defaults = document["rules_defaults"]
    if not isinstance(defaults, dict):
        raise TypeError("rules_defaults is not a map")
    listed = section(document, "cases")
    return [Case("file-shape", lambda: check_shape(document)), *each(listed, lambda c: check(defaults, c))]


def rules_for(defaults: dict[str, Any], overrides: dict[str, Any]) -> Rules:
    """`Rules` from the front's settings: `defaults` with `overrides` replaced (an unknown one is an error)."""
    settings = dict(defaults)
    for name, value in overrides.items():
        assert name in settings, f"unknown rule {name}"
        settings[name] = value
    return Rules(**{name.removesuffix("_secs"): value for name, value in settings.items()})


def decide(defaults: dict[str, Any], case: dict[str, Any]) -> dict[str, Any]:
    """Python's outcome for the case, in the form of `expected`."""
    request, response = case["request"], case["response"]
    plan = storage(
        rules_for(defaults, case["rules"]),
        request["method"],
        header_pairs(request["headers"]),
        response["status"],
        header_pairs(response["headers"]),
        case["request_time_ms"],
        case["response_time_ms"],
    )
    if not isinstance(plan, StorePlan):
        return {"stored": False, "reason": plan.reason}
    return {
        "stored": True,
        "fresh_ms": plan.fresh_ms,
        "initial_age_ms": plan.initial_age_ms,
        "keep_stale_ms": plan.keep_stale_ms,
        "vary": list(plan.vary),
    }


def check(defaults: dict[str, Any], case: dict[str, Any]) -> None:
    got = decide(defaults, case)
    assert got == case["expected"], f"expected {case['expected']}, got {got}"


def check_shape(document: dict[str, Any]) -> None:
    assert document["schema"] == 1, "schema 1"
    names: set[str] = set()
    for case in document["cases"]:
        name = case["name"]
        assert name not in names, f"{name} is not unique"
        names.add(name)
        assert case["note"], f"{name} has no note"
        expected = case["expected"]
        if expected["stored"] is True:
            assert sorted(expected) == ["fresh_ms", "initial_age_ms", "keep_stale_ms", "stored", "vary"], name
            vary = expected["vary"]
            assert vary == sorted(set(vary), key=str.encode), f"{name}: vary is sorted and unique"
            assert all(v == v.lower() for v in vary), f"{name}: vary is lowercase"
        else:
            assert expected["stored"] is False, f"{name}: stored is true or false"
            assert expected["reason"] in REASONS, f"{name}: unknown reason {expected['reason']}"
