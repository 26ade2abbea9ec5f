"""Whether larder, a shared cache, stores a response and for how long: the storage rules of spec/HTTP.md §1, which
`larder serve` applies (crates/proxy/src/rfc9111/), so that an app writing its own pages into a shared store
(larder.pages) stores exactly what the front would have stored, with the same freshness and stale window.
spec/vectors/storage.json is the contract (tests/conformance.py runs every case).

`storage(rules, method, request_headers, status, response_headers, request_time_ms, response_time_ms)` makes the
checks of §1.2 in their order, so the reason for not storing is the one every implementation reports. Header lines
are (name, value) pairs in message order, duplicates kept, names in any case. Directives are read by
larder.cache_directives, dates by larder.http_date. Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from .cache_directives import (
    MAX_DELTA_SECONDS,
    Directives,
    delta_seconds,
    parse_cache_control,
    parse_surrogate_control,
    parse_targeted,
)
from .http_date import format_http_date, parse_http_date
from .response import CONTENT_ENCODINGS

#: Statuses whose caching larder implements in full (for `must-understand`, spec/HTTP.md §1.9).
UNDERSTOOD: Final = frozenset({200, 203, 204, 300, 301, 302, 303, 307, 308, 404, 405, 410, 414, 451, 501})
#: Statuses a cache may give heuristic freshness (RFC 9110 §15.1); with a validator, storable without freshness.
HEURISTICALLY_CACHEABLE: Final = frozenset({200, 203, 204, 206, 300, 301, 308, 404, 405, 410, 414, 451, 501})
#: Codings larder can decode, so `Accept-Encoding` need not select a variant.
KNOWN_CODINGS: Final = CONTENT_ENCODINGS

#: (name, value) header lines in message order; names in any case.
HeaderLines = Sequence[tuple[str, str]]


@dataclass(frozen=True)
class Rules:
    """The settings of `larder serve`'s storage rules (spec/HTTP.md §1.8) with its defaults, each named as its flag
    (`--stale-if-error` is `stale_if_error`; its configuration key is `stale_if_error_secs`). Set them as the front
    is set. Durations are whole seconds."""

    #: `--targeted-fields`: fields addressing this cache (RFC 9213), the first valid one governing.
    targeted_fields: tuple[str, ...] = ("cdn-cache-control",)
    #: `--surrogate-control`: honour `Surrogate-Control`.
    surrogate_control: bool = True
    #: `--heuristic-max`: the longest heuristic freshness (10% of the time since `Last-Modified`); 0 = none.
    heuristic_max: int = 0
    #: `--cache-set-cookie`: store responses that set cookies.
    cache_set_cookie: bool = False
    #: `--stale-while-revalidate`, for responses that do not say.
    stale_while_revalidate: int = 0
    #: `--stale-if-error`, for responses that do not say.
    stale_if_error: int = 300
    #: `--revalidation-window`: how long a stale response with validators is kept.
    revalidation_window: int = 3600
    #: `--honor-request-cache-control`: a request's `no-store` keeps its response out of the cache.
    honor_request_cache_control: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.targeted_fields, (str, bytes)) or not all(isinstance(f, str) for f in self.targeted_fields):
            raise TypeError(f"targeted_fields is a sequence of field names, not {self.targeted_fields!r}")
        object.__setattr__(self, "targeted_fields", tuple(f.lower() for f in self.targeted_fields))
        for name in ("heuristic_max", "stale_while_revalidate", "stale_if_error", "revalidation_window"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} is whole seconds (an int >= 0), not {value!r}")
        for name in ("surrogate_control", "cache_set_cookie", "honor_request_cache_control"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} is True or False, not {getattr(self, name)!r}")


@dataclass(frozen=True)
class StorePlan:
    """How a storable response is stored (spec/HTTP.md §1.1): `expires_at` = response time + `fresh_ms`,
    `stale_ms` = `keep_stale_ms`."""

    fresh_ms: int
    initial_age_ms: int
    keep_stale_ms: int
    #: Request headers it varies on (lowercase, sorted, unique), `accept-encoding` left out when larder can decode.
    vary: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class NotStored:
    """Why a response is not stored: the `Cache-Status` detail larder reports (`method`, `status`,
    `request-no-store`, `no-store`, `private`, `authorization`, `set-cookie`, `vary-star`,
    `no-explicit-freshness`)."""

    reason: str


def storage(
    rules: Rules,
    method: str,
    request: HeaderLines,
    status: int,
    response: HeaderLines,
    request_time_ms: int,
    response_time_ms: int,
) -> StorePlan | NotStored:
    """Whether and how larder stores this response to this request (spec/HTTP.md §1.2, in its order)."""
    if method != "GET":  # case-sensitive: `get` is not GET
        return NotStored("method")
    if status < 200 or status >= 600 or status in (206, 304):
        return NotStored("status")
    request = _lowercase(request)
    response = _lowercase(response)
    if rules.honor_request_cache_control and parse_cache_control(_values(request, "cache-control")).no_store:
        return NotStored("request-no-store")
    d, use_expires = governing(rules, response)
    if d.must_understand:
        if status not in UNDERSTOOD:
            return NotStored("status")
    elif d.no_store:
        return NotStored("no-store")
    if d.private:
        return NotStored("private")
    if _values(request, "authorization") and not (d.public or d.must_revalidate or d.s_maxage is not None):
        return NotStored("authorization")
    if _values(response, "set-cookie") and not rules.cache_set_cookie:
        return NotStored("set-cookie")
    vary = vary_names(response)
    if vary is None:
        return NotStored("vary-star")
    if coding_is_decodable(response):
        vary = tuple(name for name in vary if name != "accept-encoding")
    has_validator = bool(_values(response, "etag") or _values(response, "last-modified"))
    lifetime = _lifetime_ms(rules, status, response, d, use_expires, response_time_ms)
    if lifetime is None:
        if not (has_validator and (status in HEURISTICALLY_CACHEABLE or d.public)):
            return NotStored("no-explicit-freshness")
        lifetime = 0
    initial_age_ms = _initial_age_ms(response, request_time_ms, response_time_ms)
    fresh_ms = 0 if d.no_cache else max(lifetime - initial_age_ms, 0)
    keep_ms = _stale_window_ms(rules, d)
    if has_validator:
        keep_ms = max(keep_ms, rules.revalidation_window * 1000)
    if fresh_ms == 0 and keep_ms == 0:
        return NotStored("no-explicit-freshness")
    return StorePlan(fresh_ms, initial_age_ms, keep_ms, vary)


def governing(rules: Rules, response: HeaderLines) -> tuple[Directives, bool]:
    """The directives that govern larder (spec/HTTP.md §1.3), and whether `Expires` counts: the first valid,
    non-empty targeted field, else Surrogate-Control when it says something larder acts on, else Cache-Control."""
    response = _lowercase(response)
    for targeted in rules.targeted_fields:
        found = parse_targeted(_values(response, targeted))
        if found is not None:
            return found, False
    if rules.surrogate_control:
        surrogate = parse_surrogate_control(_values(response, "surrogate-control"))
        if surrogate is not None:
            return surrogate, False
    return parse_cache_control(_values(response, "cache-control")), True


def vary_names(response: HeaderLines) -> tuple[str, ...] | None:
    """The lowercase names a response varies on (sorted by byte value, unique), or None for `Vary: *`."""
    names: set[str] = set()
    for line in _values(_lowercase(response), "vary"):
        for name in (n.strip(" \t") for n in line.split(",")):
            if name == "*":
                return None
            if name:
                names.add(_ascii_lower(name))
    return tuple(sorted(names, key=lambda n: n.encode()))


def coding_is_decodable(response: HeaderLines) -> bool:
    """No `Content-Encoding`, or exactly one line naming a coding larder decodes (any case)."""
    codings = _values(_lowercase(response), "content-encoding")
    return not codings or (len(codings) == 1 and _ascii_lower(codings[0].strip(" \t")) in KNOWN_CODINGS)


def _lifetime_ms(
    rules: Rules, status: int, response: HeaderLines, d: Directives, use_expires: bool, now_ms: int
) -> int | None:
    """The freshness lifetime (spec/HTTP.md §1.5), or None when the response gives none."""
    if d.s_maxage is not None:
        return d.s_maxage * 1000
    if d.max_age is not None:
        return d.max_age * 1000
    expires = _values(response, "expires")
    if use_expires and expires:
        # Several Expires lines, or one that is not an HTTP-date, mean "already expired" (RFC 9111 §5.3).
        at = parse_http_date(expires[0], now_ms) if len(expires) == 1 else None
        if at is None:
            return 0
        return min(max(at - _date_or(response, now_ms), 0), MAX_DELTA_SECONDS * 1000)
    if rules.heuristic_max > 0 and (status in HEURISTICALLY_CACHEABLE or d.public):
        last_modified = _first_date(response, "last-modified", now_ms)
        if last_modified is not None:
            age = max(_date_or(response, now_ms) - last_modified, 0)
            return min(age // 10, rules.heuristic_max * 1000)
    return None


def _stale_window_ms(rules: Rules, d: Directives) -> int:
    """How long past freshness the response may be served stale (spec/HTTP.md §1.7), before validators."""
    if d.must_revalidate or d.proxy_revalidate or d.no_cache or d.s_maxage is not None:
        return 0
    swr = rules.stale_while_revalidate if d.stale_while_revalidate is None else d.stale_while_revalidate
    sie = rules.stale_if_error if d.stale_if_error is None else d.stale_if_error
    return max(swr, sie) * 1000


def _initial_age_ms(response: HeaderLines, request_time_ms: int, response_time_ms: int) -> int:
    """RFC 9111 §4.2.3's corrected initial age."""
    date = _first_date(response, "date", response_time_ms)
    apparent = max(response_time_ms - date, 0) if date is not None else 0
    delay = max(response_time_ms - request_time_ms, 0)
    ages = _values(response, "age")
    age = delta_seconds(ages[0].split(",")[0].strip(" \t")) if ages else None
    return max(apparent, (age or 0) * 1000 + delay)


def _first_date(response: HeaderLines, name: str, now_ms: int) -> int | None:
    lines = _values(response, name)
    return parse_http_date(lines[0], now_ms) if lines else None


def _date_or(response: HeaderLines, response_time_ms: int) -> int:
    """`Date`, or the response time when it is absent or invalid (RFC 9110 §6.6.1)."""
    date = _first_date(response, "date", response_time_ms)
    return response_time_ms if date is None else date


_ASCII_LOWER: Final = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}


def _ascii_lower(text: str) -> str:
    return text.translate(_ASCII_LOWER)


def _lowercase(headers: HeaderLines) -> list[tuple[str, str]]:
    return [(_ascii_lower(name), value) for name, value in headers]


def _values(headers: HeaderLines, name: str) -> list[str]:
    """Every line of field `name` (lowercase), in order; `headers` already lowercased."""
    return [value for n, value in headers if n == name]


__all__ = [
    "HEURISTICALLY_CACHEABLE",
    "KNOWN_CODINGS",
    "UNDERSTOOD",
    "HeaderLines",
    "NotStored",
    "Rules",
    "StorePlan",
    "coding_is_decodable",
    "format_http_date",
    "governing",
    "storage",
    "vary_names",
]
