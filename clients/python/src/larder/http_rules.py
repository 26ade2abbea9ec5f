"""Which responses a shared cache may store, and for how long: the rules `larder serve` applies (its
crates/proxy/src/rfc9111/), in Python, so that an app writing its own pages into a shared store (larder.pages) stores
exactly what the front would have stored, with the same freshness and stale window.

- Governing directives: the first valid targeted field (`CDN-Cache-Control`, RFC 9213, a Structured Fields
  dictionary; an invalid one is ignored), else `Surrogate-Control`, else `Cache-Control` (with `Expires`).
- Not stored: methods other than GET; 1xx, 206 and 304; `no-store` (unless `must-understand` and a status larder
  understands); `private`; a request with `Authorization` unless `public`, `must-revalidate` or `s-maxage`;
  `Set-Cookie` (unless told otherwise); `Vary: *`; no explicit freshness and no validator.
- Freshness: `s-maxage`, `max-age`, `Expires` minus `Date`; less the response's corrected initial age; 0 with
  `no-cache`. Stale window kept: the larger of `stale-while-revalidate` and `stale-if-error` (larder's defaults when
  the response does not say; none after `must-revalidate`, `proxy-revalidate`, `no-cache` or `s-maxage`), and the
  revalidation window when the response has a validator.

Nothing here does I/O.
"""

from __future__ import annotations

import email.utils
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

#: Largest delta-seconds value (RFC 9111 §1.2.2); anything larger counts as this.
MAX_DELTA_SECONDS: Final = 1 << 31
#: Statuses whose semantics larder implements (for `must-understand`).
UNDERSTOOD: Final = frozenset({200, 203, 204, 300, 301, 302, 303, 307, 308, 404, 405, 410, 414, 451, 501})
#: Statuses a cache may give heuristic freshness (RFC 9110 §15.1); here: storable with validators alone.
HEURISTICALLY_CACHEABLE: Final = frozenset({200, 203, 204, 206, 300, 301, 308, 404, 405, 410, 414, 451, 501})
#: Codings larder can decode, so `Accept-Encoding` need not select a variant.
KNOWN_CODINGS: Final = ("identity", "gzip", "br", "zstd")

#: (name, value) header lines, names lowercase.
HeaderLines = Sequence[tuple[str, str]]


@dataclass
class Directives:
    """The cache directives larder acts on; None means absent."""

    no_store: bool = False
    no_cache: bool = False
    private: bool = False
    public: bool = False
    must_revalidate: bool = False
    proxy_revalidate: bool = False
    must_understand: bool = False
    max_age: int | None = None
    s_maxage: int | None = None
    stale_while_revalidate: int | None = None
    stale_if_error: int | None = None

    def _apply(self, name: str, arg: str | None) -> None:
        flags = {
            "no-store": "no_store",
            "no-cache": "no_cache",
            "private": "private",
            "public": "public",
            "must-revalidate": "must_revalidate",
            "proxy-revalidate": "proxy_revalidate",
            "must-understand": "must_understand",
        }
        if name in flags:
            setattr(self, flags[name], True)
        elif name == "max-age":
            # An invalid freshness value counts as zero: never fresher than the sender meant.
            self.max_age = delta_seconds(arg) or 0
        elif name == "s-maxage":
            self.s_maxage = delta_seconds(arg) or 0
        elif name == "stale-while-revalidate":
            self.stale_while_revalidate = delta_seconds(arg)
        elif name == "stale-if-error":
            self.stale_if_error = delta_seconds(arg)


def delta_seconds(arg: str | None) -> int | None:
    """delta-seconds: one or more ASCII digits, capped at 2^31; None for anything else."""
    if not arg or not (arg.isascii() and arg.isdigit()):
        return None
    return min(int(arg), MAX_DELTA_SECONDS)


def parse_cache_control(lines: Sequence[str]) -> Directives:
    """Directives from every line of a `Cache-Control`-syntax field; the first occurrence of a directive wins, commas
    inside quoted strings do not split, `name =value` is not `name=value`."""
    d = Directives()
    seen: set[str] = set()
    for line in lines:
        for name, arg in _split_directives(line):
            if name not in seen:
                d._apply(name, arg)
                seen.add(name)
    return d


def _split_directives(text: str) -> list[tuple[str, str | None]]:
    out: list[tuple[str, str | None]] = []
    current: list[str] = []
    in_quotes = escaped = False
    for c in text:
        if in_quotes:
            current.append(c)
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_quotes = False
        elif c == '"':
            in_quotes = True
            current.append(c)
        elif c == ",":
            _push_directive(out, "".join(current))
            current = []
        else:
            current.append(c)
    _push_directive(out, "".join(current))
    return out


def _push_directive(out: list[tuple[str, str | None]], raw: str) -> None:
    raw = raw.strip(" \t")
    if not raw:
        return
    name, sep, arg = raw.partition("=")
    if not name or " " in name or "\t" in name:
        return
    out.append((name.lower(), _unquote(arg) if sep else None))


def _unquote(arg: str) -> str:
    if len(arg) >= 2 and arg.startswith('"') and arg.endswith('"'):
        return re.sub(r"\\(.)", r"\1", arg[1:-1], flags=re.DOTALL)
    return arg


# --- CDN-Cache-Control: an RFC 8941 dictionary ------------------------------------------------------------------


class _Invalid(ValueError):
    pass


_KEY = re.compile(r"[a-z*][a-z0-9_\-.*]*")
_TOKEN = re.compile(r"[A-Za-z*][!#$%&'*+\-.^_`|~0-9A-Za-z:/]*")
_NUMBER = re.compile(r"-?[0-9]+(\.[0-9]*)?")
_BYTES = re.compile(r":[A-Za-z0-9+/=]*:")


class _Sf:
    """A strict RFC 8941 parser for what `CDN-Cache-Control` needs: a dictionary of items (values: integers,
    decimals, strings, tokens, byte sequences, booleans; parameters ignored) or inner lists."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.at = 0

    def peek(self) -> str:
        return self.text[self.at] if self.at < len(self.text) else ""

    def dictionary(self) -> dict[str, object]:
        self.skip(" ")
        members: dict[str, object] = {}
        while self.at < len(self.text):
            key = self.key()
            if self.peek() == "=":
                self.at += 1
                members[key] = self.item_or_list()
            else:
                members[key] = True
                self.parameters()
            self.skip(" \t")
            if self.at >= len(self.text):
                return members
            if self.peek() != ",":
                raise _Invalid
            self.at += 1
            self.skip(" \t")
            if self.at >= len(self.text):
                raise _Invalid  # a trailing comma
        return members

    def skip(self, chars: str) -> None:
        while self.peek() and self.peek() in chars:
            self.at += 1

    def key(self) -> str:
        match = _KEY.match(self.text, self.at)
        if not match:
            raise _Invalid
        self.at = match.end()
        return match.group()

    def item_or_list(self) -> object:
        if self.peek() == "(":
            self.at += 1
            items: list[object] = []
            while True:
                self.skip(" ")
                if self.peek() == ")":
                    self.at += 1
                    self.parameters()
                    return tuple(items)
                items.append(self.bare_item())
                self.parameters()
                if self.peek() not in (" ", ")"):
                    raise _Invalid
        value = self.bare_item()
        self.parameters()
        return value

    def parameters(self) -> None:
        while self.peek() == ";":
            self.at += 1
            self.skip(" ")
            self.key()
            if self.peek() == "=":
                self.at += 1
                self.bare_item()

    def bare_item(self) -> object:
        c = self.peek()
        if c == "-" or c.isdigit():
            return self.number()
        if c == '"':
            return self.string()
        if c == ":":
            match = _BYTES.match(self.text, self.at)
            if not match:
                raise _Invalid
            self.at = match.end()
            return match.group().encode()
        if c == "?":
            value = self.text[self.at + 1 : self.at + 2]
            if value not in ("0", "1"):
                raise _Invalid
            self.at += 2
            return value == "1"
        match = _TOKEN.match(self.text, self.at)
        if not match:
            raise _Invalid
        self.at = match.end()
        return ("token", match.group())

    def number(self) -> object:
        match = _NUMBER.match(self.text, self.at)
        if not match:
            raise _Invalid
        text = match.group()
        digits = text.lstrip("-")
        if "." in digits:
            whole, fraction = digits.split(".")
            if not whole or len(whole) > 12 or not 1 <= len(fraction) <= 3:
                raise _Invalid
            self.at = match.end()
            return ("decimal", text)
        if not digits or len(digits) > 15:
            raise _Invalid
        self.at = match.end()
        return int(text)

    def string(self) -> str:
        self.at += 1
        out = []
        while self.at < len(self.text):
            c = self.text[self.at]
            self.at += 1
            if c == "\\":
                nxt = self.peek()
                if nxt not in ('"', "\\"):
                    raise _Invalid
                out.append(nxt)
                self.at += 1
            elif c == '"':
                return "".join(out)
            elif not " " <= c <= "~":
                raise _Invalid
            else:
                out.append(c)
        raise _Invalid


def parse_structured(lines: Sequence[str]) -> Directives | None:
    """Directives from a `CDN-Cache-Control` field (RFC 9213): None when it is absent or invalid (wrong syntax, an
    inner list, or a known directive with a value of the wrong type), and the next field then governs."""
    if not lines:
        return None
    joined = ", ".join(lines)
    if not joined or not joined.isascii():
        return None
    try:
        members = _Sf(joined).dictionary()
    except _Invalid:
        return None
    d = Directives()
    integers = {"max-age", "s-maxage", "stale-while-revalidate", "stale-if-error"}
    flags = {"no-store", "no-cache", "private", "public", "must-revalidate", "proxy-revalidate", "immutable"}
    for key, value in members.items():
        if isinstance(value, tuple) and not (len(value) == 2 and value[0] in ("token", "decimal")):
            return None  # an inner list
        if key in integers:
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                return None
            seconds = min(value, MAX_DELTA_SECONDS)
            setattr(d, key.replace("-", "_"), seconds)
        elif key in flags:
            if value is not True:
                return None
            if key != "immutable":
                setattr(d, key.replace("-", "_"), True)
    return d


# --- the decision ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rules:
    """The knobs of `larder serve`'s caching rules, with its defaults: set them as the front is configured."""

    #: `--targeted-fields`: fields addressing this cache (RFC 9213), first valid one wins.
    targeted_fields: tuple[str, ...] = ("cdn-cache-control",)
    #: `--surrogate-control`: honour `Surrogate-Control`.
    surrogate_control: bool = True
    #: `--cache-set-cookie`: store responses that set cookies.
    cache_set_cookie: bool = False
    #: `--stale-while-revalidate`, seconds, for responses that do not say.
    stale_while_revalidate: int = 0
    #: `--stale-if-error`, seconds, for responses that do not say.
    stale_if_error: int = 300
    #: `--revalidation-window`, seconds a stale response with validators is kept.
    revalidation_window: int = 3600


@dataclass(frozen=True)
class StorePlan:
    """How a storable response is stored."""

    fresh_ms: int
    initial_age_ms: int
    keep_stale_ms: int
    #: Request headers it varies on (lowercase, sorted, unique), `accept-encoding` left out when larder can decode.
    vary: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class NotStored:
    """Why a response is not stored: the same short reasons larder reports in `Cache-Status`."""

    reason: str


def _values(headers: HeaderLines, name: str) -> list[str]:
    return [value for n, value in headers if n == name]


def governing(rules: Rules, response: HeaderLines) -> tuple[Directives, bool]:
    """The directives that govern larder for a response, and whether `Expires` still counts."""
    for targeted in rules.targeted_fields:
        found = parse_structured(_values(response, targeted.lower()))
        if found is not None:
            return found, False
    if rules.surrogate_control:
        lines = _values(response, "surrogate-control")
        if lines:
            return parse_cache_control(lines), False
    return parse_cache_control(_values(response, "cache-control")), True


def vary_names(response: HeaderLines) -> tuple[str, ...] | None:
    """The lowercase names a response varies on (sorted, unique), or None for `Vary: *`."""
    names: set[str] = set()
    for line in _values(response, "vary"):
        for name in (n.strip() for n in line.split(",")):
            if name == "*":
                return None
            if name:
                names.add(name.lower())
    return tuple(sorted(names))


def coding_is_decodable(response: HeaderLines) -> bool:
    codings = _values(response, "content-encoding")
    return not codings or (len(codings) == 1 and codings[0].strip().lower() in KNOWN_CODINGS)


def parse_http_date(text: str) -> int | None:
    """An HTTP-date (IMF-fixdate, or the obsolete RFC 850 and asctime forms) in ms, or None."""
    try:
        parsed = email.utils.parsedate_tz(text.strip())
    except (TypeError, ValueError, IndexError):
        return None
    if parsed is None:
        return None
    return int(email.utils.mktime_tz(parsed)) * 1000


def format_http_date(ms: int) -> str:
    return email.utils.formatdate(ms / 1000, usegmt=True)


def _age_seconds(response: HeaderLines) -> int:
    lines = _values(response, "age")
    if not lines:
        return 0
    return delta_seconds(lines[0].split(",")[0].strip()) or 0


def storage(
    rules: Rules,
    method: str,
    request: HeaderLines,
    status: int,
    response: HeaderLines,
    request_time_ms: int,
    response_time_ms: int,
) -> StorePlan | NotStored:
    """Whether and how larder would store this response to this request (Rules::storage in the proxy)."""
    if method.upper() != "GET":
        return NotStored("method")
    if 100 <= status < 200 or status in (206, 304):
        return NotStored("status")
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
    lifetime = _lifetime_ms(response, d, use_expires, response_time_ms)
    if lifetime is None:
        if not (has_validator and status in HEURISTICALLY_CACHEABLE):
            return NotStored("no-explicit-freshness")
        lifetime = (0, "max-age")
    lifetime_ms, source = lifetime
    initial_age_ms = _corrected_initial_age_ms(response, request_time_ms, response_time_ms)
    fresh_ms = 0 if d.no_cache else max(lifetime_ms - initial_age_ms, 0)
    keep_ms = 0
    if not (d.must_revalidate or d.proxy_revalidate or d.no_cache or source == "s-maxage"):
        swr = d.stale_while_revalidate if d.stale_while_revalidate is not None else rules.stale_while_revalidate
        sie = d.stale_if_error if d.stale_if_error is not None else rules.stale_if_error
        keep_ms = max(swr, sie) * 1000
    if has_validator:
        keep_ms = max(keep_ms, rules.revalidation_window * 1000)
    if fresh_ms == 0 and keep_ms == 0:
        return NotStored("no-explicit-freshness")
    return StorePlan(fresh_ms, initial_age_ms, keep_ms, vary)


def _lifetime_ms(response: HeaderLines, d: Directives, use_expires: bool, now: int) -> tuple[int, str] | None:
    if d.s_maxage is not None:
        return d.s_maxage * 1000, "s-maxage"
    if d.max_age is not None:
        return d.max_age * 1000, "max-age"
    expires = _values(response, "expires")
    if use_expires and expires:
        # Several Expires lines, or one that is not an HTTP-date, mean "already expired".
        at = parse_http_date(expires[0]) if len(expires) == 1 else None
        date = _date_ms(response)
        base = date if date is not None else now
        return (min(max(at - base, 0), MAX_DELTA_SECONDS * 1000) if at is not None else 0), "expires"
    return None


def _date_ms(response: HeaderLines) -> int | None:
    lines = _values(response, "date")
    return parse_http_date(lines[0]) if lines else None


def _corrected_initial_age_ms(response: HeaderLines, request_time_ms: int, response_time_ms: int) -> int:
    date = _date_ms(response)
    apparent = max(response_time_ms - date, 0) if date is not None else 0
    delay = max(response_time_ms - request_time_ms, 0)
    return max(apparent, _age_seconds(response) * 1000 + delay)
