#!/usr/bin/env python3
"""Reference for spec/vectors/storage.json: whether and how a shared cache stores a response (spec/HTTP.md).

Written from the text of RFC 9111 (HTTP caching), RFC 9110 (dates, status codes), RFC 9213 (targeted fields),
RFC 8941 (Structured Fields), RFC 5861 (stale-while-revalidate, stale-if-error) and the W3C Edge Architecture note
(Surrogate-Control), with larder's choices as spec/HTTP.md states them. It imports nothing from larder.

Every case below carries the outcome its author expected, written by hand from those texts; this script computes
the outcome again with its own reading of the rules and refuses to write the file when the two disagree. So each
expected value in storage.json was derived twice, once in the case list and once by the functions here.

    python3 spec/vectors/storage_reference.py            # rewrites spec/vectors/storage.json
    python3 spec/vectors/storage_reference.py --check    # fails if storage.json is not what it would write

Plain Python 3.10+, standard library only.
"""

from __future__ import annotations

import base64
import calendar
import json
import re
import sys
import time
from pathlib import Path

NOW = 1_700_000_000_000  # 2023-11-14T22:13:20Z, a whole second
MAX_DELTA = 1 << 31  # RFC 9111 §1.2.2

#: `larder serve`'s defaults (docs/ARCHITECTURE.md, [cache]): a case's `rules` object overrides these.
RULES_DEFAULTS = {
    "targeted_fields": ["CDN-Cache-Control"],
    "surrogate_control": True,
    "heuristic_max_secs": 0,
    "cache_set_cookie": False,
    "stale_while_revalidate_secs": 0,
    "stale_if_error_secs": 300,
    "revalidation_window_secs": 3600,
    "honor_request_cache_control": False,
}

#: spec/HTTP.md "must-understand": statuses whose caching requirements larder implements in full.
UNDERSTOOD = {200, 203, 204, 300, 301, 302, 303, 307, 308, 404, 405, 410, 414, 451, 501}
#: RFC 9110 §15.1 (and RFC 7725 for 451): heuristically cacheable statuses.
HEURISTIC = {200, 203, 204, 206, 300, 301, 308, 404, 405, 410, 414, 451, 501}
#: Content codings larder decodes (spec/FORMAT.md §4), compared case-insensitively (RFC 9110 §8.4.1).
DECODABLE = {"identity", "gzip", "br", "zstd"}
#: Directives whose presence makes Surrogate-Control govern (spec/HTTP.md).
ACTED_ON = {
    "no-store", "no-cache", "private", "public", "must-revalidate", "proxy-revalidate", "must-understand",
    "max-age", "s-maxage", "stale-while-revalidate", "stale-if-error",
}


# --- header access ---------------------------------------------------------------------------------------------


def values(headers, name):
    """Every line of a field, in order; names compare case-insensitively (RFC 9110 §5.1)."""
    return [v for n, v in headers if n.lower() == name]


# --- HTTP-date (RFC 9110 §5.6.7) ---------------------------------------------------------------------------------

MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
DAY_NAMES = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
FULL_DAY_NAMES = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]

IMF = re.compile(r"([A-Za-z]{3}), ([0-9]{2}) ([A-Za-z]{3}) ([0-9]{4}) ([0-9]{2}):([0-9]{2}):([0-9]{2}) ([A-Za-z]{3})")
RFC850 = re.compile(r"([A-Za-z]+), ([0-9]{2})-([A-Za-z]{3})-([0-9]{2}) ([0-9]{2}):([0-9]{2}):([0-9]{2}) ([A-Za-z]{3})")
ASCTIME = re.compile(r"([A-Za-z]{3}) ([A-Za-z]{3}) ([0-9]{2}| [0-9]) ([0-9]{2}):([0-9]{2}):([0-9]{2}) ([0-9]{4})")


def _epoch_ms(year, month_name, day, hour, minute, second):
    if month_name.lower() not in MONTHS:
        return None
    if not 1 <= day <= 31 or hour > 23 or minute > 59 or second > 60 or year < 1970:
        return None
    month = MONTHS.index(month_name.lower()) + 1
    return calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0)) * 1000


def http_date_ms(text, now_ms):
    """ms since the epoch, or None. Names of days, months and GMT in any case; the weekday is not checked against
    the date; everything else exactly as the grammar says (two-digit day, four-digit year in IMF-fixdate...)."""
    text = text.strip(" \t")
    m = IMF.fullmatch(text)
    if m:
        if m[1].lower() not in DAY_NAMES or m[8].lower() != "gmt":
            return None
        return _epoch_ms(int(m[4]), m[3], int(m[2]), int(m[5]), int(m[6]), int(m[7]))
    m = RFC850.fullmatch(text)
    if m:
        if m[1].lower() not in FULL_DAY_NAMES or m[8].lower() != "gmt":
            return None
        # RFC 9110 §5.6.7: a two-digit year more than 50 years in the future is in the past century.
        now_year = time.gmtime(now_ms // 1000).tm_year
        year = now_year // 100 * 100 + int(m[4])
        if year > now_year + 50:
            year -= 100
        return _epoch_ms(year, m[3], int(m[2]), int(m[5]), int(m[6]), int(m[7]))
    m = ASCTIME.fullmatch(text)
    if m:
        if m[1].lower() not in DAY_NAMES:
            return None
        return _epoch_ms(int(m[7]), m[2], int(m[3].strip()), int(m[4]), int(m[5]), int(m[6]))
    return None


def imf_fixdate(ms):
    t = time.gmtime(ms // 1000)
    return (f"{DAY_NAMES[t.tm_wday].title()}, {t.tm_mday:02d} {MONTHS[t.tm_mon - 1].title()} {t.tm_year:04d} "
            f"{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d} GMT")


def rfc850_date(ms):
    t = time.gmtime(ms // 1000)
    return (f"{FULL_DAY_NAMES[t.tm_wday].title()}, {t.tm_mday:02d}-{MONTHS[t.tm_mon - 1].title()}-"
            f"{t.tm_year % 100:02d} {t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d} GMT")


def asctime_date(ms):
    t = time.gmtime(ms // 1000)
    return (f"{DAY_NAMES[t.tm_wday].title()} {MONTHS[t.tm_mon - 1].title()} {t.tm_mday:2d} "
            f"{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d} {t.tm_year:04d}")


# --- delta-seconds (RFC 9111 §1.2.2) -------------------------------------------------------------------------------


def delta_seconds(arg):
    """1*DIGIT, values past 2^31 counting as 2^31; None when absent or not digits."""
    if arg is None or not re.fullmatch(r"[0-9]+", arg):
        return None
    return min(int(arg), MAX_DELTA)


# --- Cache-Control syntax (RFC 9111 §5.2; also Surrogate-Control) --------------------------------------------------


def list_elements(text):
    """The elements of a comma-separated list (RFC 9110 §5.6.1), commas inside quoted strings kept; empty elements
    dropped; optional whitespace around each removed."""
    items, current, quoted, escaped = [], [], False, False
    for c in text:
        if quoted:
            current.append(c)
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                quoted = False
        elif c == '"':
            quoted = True
            current.append(c)
        elif c == ",":
            items.append("".join(current))
            current = []
        else:
            current.append(c)
    items.append("".join(current))
    return [item.strip(" \t") for item in items if item.strip(" \t")]


def unquote(arg):
    """A quoted-string's content (quoted-pairs resolved); any other argument as it is."""
    if len(arg) >= 2 and arg[0] == '"' and arg[-1] == '"':
        out, chars = [], iter(arg[1:-1])
        for c in chars:
            out.append(next(chars, "") if c == "\\" else c)
        return "".join(out)
    return arg


def directive(element):
    """(lowercase name, argument or None), or None when the name is not a token (`max-age =5`)."""
    name, eq, arg = element.partition("=")
    if not name or " " in name or "\t" in name:
        return None
    return name.lower(), (unquote(arg) if eq else None)


def has_unquoted_semicolon(element):
    quoted = escaped = False
    for c in element:
        if quoted:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                quoted = False
        elif c == '"':
            quoted = True
        elif c == ";":
            return True
    return False


def cc_pairs(lines, surrogate=False):
    """name -> argument, the first occurrence of each name winning (RFC 9111 §4.2.1)."""
    found = {}
    for line in lines:
        for element in list_elements(line):
            # W3C Edge Architecture: `directive;device-token` is for the surrogate of that name; larder has none.
            if surrogate and has_unquoted_semicolon(element):
                continue
            pair = directive(element)
            if pair and pair[0] not in found:
                found[pair[0]] = pair[1]
    if surrogate and found.get("max-age") is not None:
        # Edge Architecture: max-age=N+M; M (a freshness extension) is not implemented: N alone counts.
        m = re.fullmatch(r"([0-9]+)\+[0-9]+", found["max-age"])
        if m:
            found["max-age"] = m[1]
    return found


class Directives:
    def __init__(self):
        self.flags = set()
        self.max_age = self.s_maxage = self.swr = self.sie = None

    def has(self, flag):
        return flag in self.flags


def from_pairs(pairs):
    d = Directives()
    for name in ("no-store", "no-cache", "private", "public", "must-revalidate", "proxy-revalidate",
                 "must-understand"):
        if name in pairs:
            d.flags.add(name)

    # Invalid values read as 0: a max-age or s-maxage that cannot be read makes the response stale (RFC 9111
    # §4.2.1), a stale-* that cannot be read allows no stale use (spec/HTTP.md).
    def number(name):
        if name not in pairs:
            return None
        n = delta_seconds(pairs[name])
        return 0 if n is None else n

    d.max_age, d.s_maxage = number("max-age"), number("s-maxage")
    d.swr, d.sie = number("stale-while-revalidate"), number("stale-if-error")
    return d


# --- Structured Fields dictionaries (RFC 8941 §4.2), for targeted fields -------------------------------------------


class SfError(Exception):
    pass


class Sf:
    LCALPHA = "abcdefghijklmnopqrstuvwxyz"
    DIGIT = "0123456789"
    ALPHA = LCALPHA + LCALPHA.upper()
    TCHAR = "!#$%&'*+-.^_`|~" + DIGIT + ALPHA

    def __init__(self, text):
        if any(not 0x20 <= ord(c) <= 0x7E and c != "\t" for c in text):
            raise SfError("not ASCII")
        self.s = text
        self.i = 0

    def peek(self):
        return self.s[self.i] if self.i < len(self.s) else ""

    def take(self):
        c = self.peek()
        self.i += 1
        return c

    def skip(self, chars):
        while self.peek() and self.peek() in chars:
            self.i += 1

    def dictionary(self):
        self.skip(" ")
        members = {}
        while self.i < len(self.s):
            key = self.key()
            if self.peek() == "=":
                self.i += 1
                members[key] = self.item_or_inner_list()
            else:
                members[key] = (("boolean", True), self.parameters())
            self.skip(" \t")
            if self.i >= len(self.s):
                break
            if self.take() != ",":
                raise SfError("expected a comma")
            self.skip(" \t")
            if self.i >= len(self.s):
                raise SfError("trailing comma")
        self.skip(" ")
        if self.i < len(self.s):
            raise SfError("trailing characters")
        return members

    def item_or_inner_list(self):
        if self.peek() == "(":
            self.i += 1
            items = []
            while True:
                self.skip(" ")
                if self.peek() == ")":
                    self.i += 1
                    return (("inner-list", items), self.parameters())
                items.append((self.bare_item(), self.parameters()))
                if self.peek() not in (" ", ")"):
                    raise SfError("bad inner list")
        return (self.bare_item(), self.parameters())

    def parameters(self):
        params = {}
        while self.peek() == ";":
            self.i += 1
            self.skip(" ")
            key = self.key()
            value = ("boolean", True)
            if self.peek() == "=":
                self.i += 1
                value = self.bare_item()
            params[key] = value
        return params

    def key(self):
        c = self.peek()
        if not c or c not in self.LCALPHA + "*":
            raise SfError("bad key")
        start = self.i
        while self.peek() and self.peek() in self.LCALPHA + self.DIGIT + "_-.*":
            self.i += 1
        return self.s[start:self.i]

    def bare_item(self):
        c = self.peek()
        if c == "-" or (c and c in self.DIGIT):
            return self.number()
        if c == '"':
            return self.string()
        if c and c in self.ALPHA + "*":
            return self.token()
        if c == ":":
            return self.byte_sequence()
        if c == "?":
            return self.boolean()
        raise SfError("unknown item type")  # RFC 8941 has no Date (@) or Display String (%)

    def number(self):
        kind, sign, digits = "integer", 1, ""
        if self.peek() == "-":
            self.i += 1
            sign = -1
        if not self.peek() or self.peek() not in self.DIGIT:
            raise SfError("bad number")
        while self.peek():
            c = self.peek()
            if c in self.DIGIT:
                digits += c
            elif kind == "integer" and c == ".":
                if len(digits) > 12:
                    raise SfError("decimal too long")
                digits += c
                kind = "decimal"
            else:
                break
            self.i += 1
            if kind == "integer" and len(digits) > 15:
                raise SfError("integer too long")
            if kind == "decimal" and len(digits) > 16:
                raise SfError("decimal too long")
        if kind == "integer":
            return ("integer", sign * int(digits))
        if digits.endswith(".") or len(digits.split(".")[1]) > 3:
            raise SfError("bad decimal")
        return ("decimal", digits)

    def string(self):
        self.i += 1
        out = []
        while self.i < len(self.s):
            c = self.take()
            if c == "\\":
                if self.i >= len(self.s) or self.peek() not in '"\\':
                    raise SfError("bad escape")
                out.append(self.take())
            elif c == '"':
                return ("string", "".join(out))
            elif not 0x20 <= ord(c) <= 0x7E:
                raise SfError("bad string character")
            else:
                out.append(c)
        raise SfError("unterminated string")

    def token(self):
        start = self.i
        self.i += 1
        while self.peek() and self.peek() in self.TCHAR + ":/":
            self.i += 1
        return ("token", self.s[start:self.i])

    def byte_sequence(self):
        self.i += 1
        start = self.i
        while self.peek() and self.peek() != ":":
            if self.peek() not in self.ALPHA + self.DIGIT + "+/=":
                raise SfError("bad byte sequence")
            self.i += 1
        if self.take() != ":":
            raise SfError("unterminated byte sequence")
        content = self.s[start:self.i - 1]
        try:
            base64.b64decode(content + "=" * (-len(content) % 4), validate=True)
        except ValueError as error:
            raise SfError("bad base64") from error
        return ("bytes", content)

    def boolean(self):
        self.i += 1
        c = self.take()
        if c not in ("0", "1"):
            raise SfError("bad boolean")
        return ("boolean", c == "1")


INTEGER_DIRECTIVES = {"max-age", "s-maxage", "stale-while-revalidate", "stale-if-error"}
FLAG_DIRECTIVES = {"no-store", "public", "must-revalidate", "proxy-revalidate", "must-understand", "immutable"}
FLAG_OR_LIST_DIRECTIVES = {"no-cache", "private"}


def targeted_directives(lines):
    """Directives of a targeted field (RFC 9213 §2.1), or None when the field is absent, empty or invalid."""
    if not lines:
        return None
    try:
        members = Sf(", ".join(lines)).dictionary()
    except SfError:
        return None
    if not members:
        return None
    d = Directives()
    for key, (item, _params) in members.items():
        kind, value = item
        if key in INTEGER_DIRECTIVES:
            if kind != "integer" or value < 0:
                return None
            setattr(d, {"max-age": "max_age", "s-maxage": "s_maxage", "stale-while-revalidate": "swr",
                        "stale-if-error": "sie"}[key], min(value, MAX_DELTA))
        elif key in FLAG_DIRECTIVES:
            if (kind, value) != ("boolean", True):
                return None
            d.flags.add(key)
        elif key in FLAG_OR_LIST_DIRECTIVES:
            if (kind, value) != ("boolean", True) and kind != "string":
                return None
            d.flags.add(key)
        # any other member, whatever its value: an extension this cache does not know, ignored
    return d


# --- the decision ----------------------------------------------------------------------------------------------


def governing(rules, response):
    """(directives, whether Expires counts)."""
    for field in rules["targeted_fields"]:
        d = targeted_directives(values(response, field.lower()))
        if d is not None:
            return d, False
    if rules["surrogate_control"]:
        pairs = cc_pairs(values(response, "surrogate-control"), surrogate=True)
        if ACTED_ON & pairs.keys():
            return from_pairs(pairs), False
    return from_pairs(cc_pairs(values(response, "cache-control"))), True


def vary_names(response):
    names = set()
    for line in values(response, "vary"):
        for name in line.split(","):
            name = name.strip(" \t")
            if name == "*":
                return None
            if name:
                names.add(name.lower())
    return sorted(names)


def decodable(response):
    codings = values(response, "content-encoding")
    return not codings or (len(codings) == 1 and codings[0].strip(" \t").lower() in DECODABLE)


def first_date(response, name, now_ms):
    lines = values(response, name)
    return http_date_ms(lines[0], now_ms) if lines else None


def age_seconds(response):
    lines = values(response, "age")
    if not lines:
        return 0
    n = delta_seconds(lines[0].split(",")[0].strip(" \t"))
    return 0 if n is None else n


def lifetime_ms(rules, status, response, d, use_expires, response_time):
    if d.s_maxage is not None:
        return d.s_maxage * 1000
    if d.max_age is not None:
        return d.max_age * 1000
    expires = values(response, "expires")
    if use_expires and expires:
        at = http_date_ms(expires[0], response_time) if len(expires) == 1 else None
        if at is None:
            return 0  # RFC 9111 §5.3: invalid (or repeated) means already expired
        base = first_date(response, "date", response_time)
        base = response_time if base is None else base
        return min(max(at - base, 0), MAX_DELTA * 1000)
    cap = rules["heuristic_max_secs"]
    if cap > 0 and (status in HEURISTIC or d.has("public")):
        last_modified = first_date(response, "last-modified", response_time)
        if last_modified is not None:
            base = first_date(response, "date", response_time)
            base = response_time if base is None else base
            return min(max(base - last_modified, 0) // 10, cap * 1000)
    return None


def storage(rules, method, request, status, response, request_time, response_time):
    """{"stored": False, "reason": ...} or {"stored": True, "fresh_ms", "initial_age_ms", "keep_stale_ms", "vary"}."""
    def refused(reason):
        return {"stored": False, "reason": reason}

    if method != "GET":
        return refused("method")
    if status < 200 or status > 599 or status in (206, 304):
        return refused("status")
    if rules["honor_request_cache_control"] and from_pairs(cc_pairs(values(request, "cache-control"))).has("no-store"):
        return refused("request-no-store")
    d, use_expires = governing(rules, response)
    if d.has("must-understand"):
        if status not in UNDERSTOOD:
            return refused("status")
    elif d.has("no-store"):
        return refused("no-store")
    if d.has("private"):
        return refused("private")
    if values(request, "authorization") and not (d.has("public") or d.has("must-revalidate") or d.s_maxage is not None):
        return refused("authorization")
    if values(response, "set-cookie") and not rules["cache_set_cookie"]:
        return refused("set-cookie")
    vary = vary_names(response)
    if vary is None:
        return refused("vary-star")
    if decodable(response):
        vary = [name for name in vary if name != "accept-encoding"]
    validator = bool(values(response, "etag") or values(response, "last-modified"))
    lifetime = lifetime_ms(rules, status, response, d, use_expires, response_time)
    if lifetime is None:
        if not (validator and (status in HEURISTIC or d.has("public"))):
            return refused("no-explicit-freshness")
        lifetime = 0
    date = first_date(response, "date", response_time)
    apparent_age = max(0, response_time - date) if date is not None else 0
    response_delay = max(0, response_time - request_time)
    initial_age = max(apparent_age, age_seconds(response) * 1000 + response_delay)
    fresh = 0 if d.has("no-cache") else max(0, lifetime - initial_age)
    if d.has("must-revalidate") or d.has("proxy-revalidate") or d.has("no-cache") or d.s_maxage is not None:
        stale = 0
    else:
        swr = rules["stale_while_revalidate_secs"] if d.swr is None else d.swr
        sie = rules["stale_if_error_secs"] if d.sie is None else d.sie
        stale = max(swr, sie) * 1000
    keep = max(stale, rules["revalidation_window_secs"] * 1000) if validator else stale
    if fresh == 0 and keep == 0:
        return refused("no-explicit-freshness")
    return {"stored": True, "fresh_ms": fresh, "initial_age_ms": initial_age, "keep_stale_ms": keep, "vary": vary}


# --- the cases -------------------------------------------------------------------------------------------------

CASES = []
AREA = [""]

K = 300_000  # the default stale window kept: stale-if-error 300 s
R = 3_600_000  # the default revalidation window: 3600 s
CAP = MAX_DELTA * 1000
NO_STALE = {"stale_if_error_secs": 0}


def area(name):
    AREA[0] = name


def at(seconds):
    """An IMF-fixdate `seconds` from NOW."""
    return imf_fixdate(NOW + seconds * 1000)


def stored(fresh, age=0, keep=K, vary=()):
    return {"stored": True, "fresh_ms": fresh, "initial_age_ms": age, "keep_stale_ms": keep, "vary": list(vary)}


def refused(reason):
    return {"stored": False, "reason": reason}


def case(name, note, response, expect, *, status=200, method="GET", request=(), rules=None,
         request_time=NOW, response_time=NOW):
    CASES.append({
        "name": name,
        "area": AREA[0],
        "note": note,
        "rules": dict(rules or {}),
        "request": {"method": method, "headers": [list(h) for h in request]},
        "response": {"status": status, "headers": [list(h) for h in response]},
        "request_time_ms": request_time,
        "response_time_ms": response_time,
        "expected": expect,
    })


MA60 = [("Cache-Control", "max-age=60")]
AUTH = [("Authorization", "Basic dXNlcjpwYXNz")]
ETAG = ("ETag", '"v1"')


def define_cases():
    area("method")
    case("method_get", "RFC 9111 §5.2.2.1 max-age on a GET: fresh for 60 s; the default stale-if-error window (300 s) is "
         "kept", MA60, stored(60_000))
    for method in ["HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "TRACE"]:
        case(f"method_{method.lower()}", f"larder stores responses to GET only (spec/HTTP.md): {method} is not "
             "stored whatever its freshness", MA60, refused("method"), method=method)
    case("method_post_content_location", "RFC 9110 §9.3.3 would let a POST response with explicit freshness and a "
         "Content-Location equal to its target be reused for a later GET; larder keys only GETs and does not",
         MA60 + [("Content-Location", "/form")], refused("method"), method="POST")
    case("method_lowercase_get", "RFC 9110 §9.1: method names are case-sensitive; `get` is not GET",
         MA60, refused("method"), method="get")
    case("method_mixed_case_get", "RFC 9110 §9.1: method names are case-sensitive; `Get` is not GET",
         MA60, refused("method"), method="Get")
    case("method_head_no_store", "the method is checked first: HEAD with no-store reports method",
         [("Cache-Control", "no-store")], refused("method"), method="HEAD")

    area("status")
    for status in [200, 201, 202, 203, 204, 205, 226, 299, 300, 301, 302, 303, 305, 307, 308, 400, 401, 403, 404,
                   405, 406, 410, 414, 418, 429, 451, 499, 500, 501, 502, 503, 504, 599]:
        case(f"status_{status}_max_age", f"RFC 9111 §3: a final status ({status}) with explicit freshness may be "
             "stored, whether or not the status is heuristically cacheable", MA60, stored(60_000), status=status)
    for status in [100, 101, 103, 199]:
        case(f"status_{status}_max_age", f"RFC 9111 §3: only final responses are stored; {status} is interim",
             MA60, refused("status"), status=status)
    case("status_206_max_age", "RFC 9111 §3.3: larder does not store or combine partial content (spec/HTTP.md)",
         MA60 + [("Content-Range", "bytes 0-9/100")], refused("status"), status=206)
    case("status_304_max_age", "RFC 9111 §4.3.4: a 304 only refreshes a stored response; it is never stored itself",
         MA60, refused("status"), status=304)
    for status in [600, 999]:
        case(f"status_{status}_max_age", f"RFC 9110 §15: {status} is outside 100-599, not a valid status; larder "
             "does not store it (spec/HTTP.md)", MA60, refused("status"), status=status)
    for status in [200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 451, 501]:
        case(f"status_{status}_etag_only", f"RFC 9111 §3: {status} is heuristically cacheable (RFC 9110 §15.1), so "
             "it may be stored without freshness; with a validator it is kept stale for revalidation (3600 s)",
             [ETAG], stored(0, keep=R), status=status)
    for status in [201, 202, 302, 303, 307, 400, 403, 500, 503]:
        case(f"status_{status}_etag_only", f"RFC 9111 §3: {status} is not heuristically cacheable; without explicit "
             "freshness or public it may not be stored, validator or not", [ETAG], refused("no-explicit-freshness"),
             status=status)
    case("status_206_etag_only", "206 is heuristically cacheable but larder does not store partial content",
         [ETAG, ("Content-Range", "bytes 0-9/100")], refused("status"), status=206)

    area("must-understand")
    mu = [("Cache-Control", "max-age=60, no-store, must-understand")]
    for status in sorted(UNDERSTOOD):
        case(f"must_understand_{status}", f"RFC 9111 §5.2.2.3: larder understands {status} (spec/HTTP.md), so "
             "must-understand makes it ignore no-store", mu, stored(60_000), status=status)
    for status in [201, 202, 299, 400, 500, 503, 599]:
        case(f"must_understand_{status}", f"RFC 9111 §3, §5.2.2.3: {status} is not a status larder understands: "
             "with must-understand the response is not stored", mu, refused("status"), status=status)
    case("must_understand_206", "RFC 9111 §3: must-understand, and 206 is not understood (larder does not store "
         "partial content)", mu, refused("status"), status=206)
    case("must_understand_without_no_store_200", "RFC 9111 §5.2.2.3: must-understand alone, understood status: "
         "stored as usual", [("Cache-Control", "max-age=60, must-understand")], stored(60_000))
    case("must_understand_without_no_store_500", "RFC 9111 §3: must-understand restricts storing to understood "
         "statuses even without no-store", [("Cache-Control", "max-age=60, must-understand")], refused("status"),
         status=500)
    case("must_understand_private", "must-understand overrides no-store only; private still forbids a shared cache",
         [("Cache-Control", "max-age=60, no-store, must-understand, private")], refused("private"))
    case("must_understand_upper_case", "RFC 9111 §5.2: directive names are case-insensitive",
         [("Cache-Control", "MAX-AGE=60, NO-STORE, MUST-UNDERSTAND")], stored(60_000))
    case("must_understand_second_line", "directives of every Cache-Control line count",
         [("Cache-Control", "max-age=60, no-store"), ("Cache-Control", "must-understand")], stored(60_000))
    case("must_understand_no_freshness", "must-understand lifts no-store but gives no freshness",
         [("Cache-Control", "no-store, must-understand")], refused("no-explicit-freshness"))

    area("cache-control")
    cc = lambda value: [("Cache-Control", value)]
    case("cc_upper_case_name", "RFC 9111 §5.2: directive names are case-insensitive", cc("MAX-AGE=60"), stored(60_000))
    case("cc_mixed_case_name", "RFC 9111 §5.2: directive names are case-insensitive", cc("Max-Age=60"), stored(60_000))
    case("cc_upper_case_no_store", "RFC 9111 §5.2: NO-STORE is no-store", cc("max-age=60, NO-STORE"),
         refused("no-store"))
    case("cc_field_name_upper_case", "RFC 9110 §5.1: field names are case-insensitive",
         [("CACHE-CONTROL", "max-age=60")], stored(60_000))
    case("cc_duplicate_same_line_long_first", "RFC 9111 §4.2.1: the first occurrence of a directive is used",
         cc("max-age=1800, max-age=1"), stored(1_800_000))
    case("cc_duplicate_same_line_short_first", "RFC 9111 §4.2.1: the first occurrence of a directive is used",
         cc("max-age=1, max-age=1800"), stored(1_000))
    case("cc_duplicate_lines_long_first", "RFC 9111 §4.2.1: the first occurrence, across field lines",
         cc("max-age=1800") + cc("max-age=1"), stored(1_800_000))
    case("cc_duplicate_lines_short_first", "RFC 9111 §4.2.1: the first occurrence, across field lines",
         cc("max-age=1") + cc("max-age=1800"), stored(1_000))
    case("cc_duplicate_first_invalid", "the first occurrence wins even when invalid, and an invalid max-age is 0 "
         "(stale, RFC 9111 §4.2.1); kept for the 300 s stale window", cc("max-age=abc, max-age=60"), stored(0))
    case("cc_quoted_max_age", "RFC 9111 §5.2: recipients accept the quoted-string form of an argument",
         cc('max-age="60"'), stored(60_000))
    case("cc_quoted_pair", "RFC 9110 §5.6.4: a quoted-pair in a quoted string stands for its character",
         cc('max-age="6\\0"'), stored(60_000))
    case("cc_quoted_upper_case", "quoted argument, upper-case name", cc('MAX-AGE="60"'), stored(60_000))
    case("cc_unterminated_quote_in_argument", "`\"60` is neither a token nor a quoted string: invalid, so 0",
         cc('max-age="60'), stored(0))
    case("cc_single_quoted", "single quotes are not HTTP syntax: invalid, so 0 (stale)", cc("max-age='60'"), stored(0))
    case("cc_negative", "RFC 9111 §1.2.2: delta-seconds is digits only; -1 is invalid, so 0 (stale)",
         cc("max-age=-1"), stored(0))
    case("cc_negative_no_stale_window", "an invalid max-age is 0, and with no stale window nothing is kept",
         cc("max-age=-1"), refused("no-explicit-freshness"), rules=NO_STALE)
    case("cc_decimal", "RFC 9111 §1.2.2: 1.5 is not delta-seconds: invalid, so 0", cc("max-age=1.5"), stored(0))
    case("cc_decimal_zero", "3600.0 is not delta-seconds either: 0", cc("max-age=3600.0"), stored(0))
    case("cc_empty_argument", "`max-age=` has an empty argument: invalid, so 0", cc("max-age="), stored(0))
    case("cc_missing_argument", "`max-age` without an argument: invalid, so 0", cc("max-age"), stored(0))
    case("cc_leading_alpha", "a60 is not delta-seconds: 0", cc("max-age=a60"), stored(0))
    case("cc_trailing_alpha", "60a is not delta-seconds: 0", cc("max-age=60a"), stored(0))
    case("cc_plus_extension", "`60+30` (Surrogate-Control syntax) is not delta-seconds in Cache-Control: 0",
         cc("max-age=60+30"), stored(0))
    case("cc_semicolon_argument", "`60;foo` is not delta-seconds: 0", cc("max-age=60;foo"), stored(0))
    case("cc_space_before_equals", "RFC 9111 §5.2: a directive name is a token; `max-age =60` is not max-age, so "
         "there is no freshness", cc("max-age =60"), refused("no-explicit-freshness"))
    case("cc_space_after_equals", "`max-age= 60`: the argument ` 60` is not delta-seconds: 0", cc("max-age= 60"),
         stored(0))
    case("cc_leading_zeros", "RFC 9111 §1.2.2: 0060 is delta-seconds 60", cc("max-age=0060"), stored(60_000))
    case("cc_zero", "max-age=0: stale at once; kept for the default 300 s stale-if-error window", cc("max-age=0"),
         stored(0))
    case("cc_zero_no_stale_window", "max-age=0 and no stale window: nothing to keep", cc("max-age=0"),
         refused("no-explicit-freshness"), rules=NO_STALE)
    case("cc_2_31_minus_1", "2147483647 s fits", cc("max-age=2147483647"), stored(2_147_483_647_000))
    case("cc_2_31", "2^31 s", cc("max-age=2147483648"), stored(CAP))
    case("cc_past_2_31", "RFC 9111 §1.2.2: a value past 2^31 counts as 2^31", cc("max-age=2147483649"), stored(CAP))
    case("cc_past_2_32", "RFC 9111 §1.2.2: past 2^32 counts as 2^31", cc("max-age=4294967296"), stored(CAP))
    case("cc_past_u64", "RFC 9111 §1.2.2: past 2^64 counts as 2^31 (no overflow)",
         cc("max-age=99999999999999999999999"), stored(CAP))
    case("cc_empty_elements", "RFC 9110 §5.6.1: empty list elements are ignored", cc(", , max-age=60 ,,"),
         stored(60_000))
    case("cc_tab_separator", "RFC 9110 §5.6.3: optional whitespace includes tabs", cc("public,\tmax-age=60"),
         stored(60_000))
    case("cc_quoted_comma", "RFC 9110 §5.6.4: a comma inside a quoted string does not split; no-store there is "
         "text", cc('foo="a, no-store", max-age=60'), stored(60_000))
    case("cc_quoted_directive_before", "max-age inside a quoted string is not a directive: the real one is 1 s",
         cc('extension="max-age=3600", max-age=1'), stored(1_000))
    case("cc_quoted_directive_after", "max-age inside a quoted string is not a directive: the real one is 1 s",
         cc('max-age=1, extension="max-age=3600"'), stored(1_000))
    case("cc_escaped_quote", "an escaped quote does not end a quoted string", cc('foo="a\\", no-store", max-age=60'),
         stored(60_000))
    case("cc_unterminated_quote_at_end", "an unterminated quoted string runs to the end of the line; what came "
         "before still counts", cc('max-age=60, foo="bar'), stored(60_000))
    case("cc_unterminated_quote_swallows", "an unterminated quoted string runs to the end: max-age after it is text",
         cc('foo="bar, max-age=60'), refused("no-explicit-freshness"))
    case("cc_unknown_extension", "RFC 9111 §5.2.3: unknown extensions are ignored", cc('community="UCI", max-age=60'),
         stored(60_000))
    case("cc_only_unknown", "only an unknown directive: no freshness", cc("foo"), refused("no-explicit-freshness"))
    case("cc_empty_field", "an empty Cache-Control says nothing", cc(""), refused("no-explicit-freshness"))
    case("cc_no_store_with_argument", "no-store takes no argument (RFC 9111 §5.2.2.5); one given does not undo it",
         cc('no-store="x", max-age=60'), refused("no-store"))
    case("cc_conflict_max_age_no_store", "RFC 9111 §4.2.1: conflicting directives, the most restrictive wins",
         cc("max-age=60, no-store"), refused("no-store"))
    case("cc_conflict_public_private", "RFC 9111 §4.2.1: public and private: private wins",
         cc("public, private, max-age=60"), refused("private"))
    case("cc_no_store_second_line", "no-store on a second Cache-Control line", cc("max-age=60") + cc("no-store"),
         refused("no-store"))
    case("cc_immutable", "immutable (RFC 8246) does not change what is stored", cc("max-age=60, immutable"),
         stored(60_000))
    case("cc_no_transform", "no-transform does not change whether a response is stored",
         cc("no-transform, max-age=60"), stored(60_000))
    case("cc_response_pragma_no_cache", "RFC 9111 §5.4: Pragma has no meaning in a response",
         MA60 + [("Pragma", "no-cache")], stored(60_000))

    area("no-store-no-cache-private-public")
    case("no_store", "RFC 9111 §5.2.2.5 no-store", cc("no-store"), refused("no-store"))
    case("no_store_with_validator", "no-store wins over validators", cc("no-store") + [ETAG], refused("no-store"))
    case("no_cache_without_validator", "RFC 9111 §5.2.2.4: no-cache may be stored but never reused without "
         "revalidation; without a validator there is nothing to revalidate and no-cache forbids stale use, so it is "
         "not kept", cc("max-age=60, no-cache"), refused("no-explicit-freshness"))
    case("no_cache_with_etag", "RFC 9111 §5.2.2.4: stored stale (fresh 0) and kept 3600 s for revalidation",
         cc("max-age=60, no-cache") + [ETAG], stored(0, keep=R))
    case("no_cache_with_last_modified", "no-cache with Last-Modified: kept for revalidation",
         cc("no-cache") + [("Last-Modified", at(-86_400))], stored(0, keep=R))
    case("no_cache_qualified", "RFC 9111 §5.2.2.4: larder treats qualified no-cache as unqualified (spec/HTTP.md)",
         cc('no-cache="Set-Cookie", max-age=60') + [ETAG], stored(0, keep=R))
    case("no_cache_qualified_without_validator", "qualified no-cache, treated as unqualified, no validator",
         cc('no-cache="Set-Cookie", max-age=60'), refused("no-explicit-freshness"))
    case("no_cache_forbids_stale", "RFC 9111 §4.2.4: no-cache forbids stale use, so stale-while-revalidate gives "
         "nothing; only the revalidation window keeps it", cc("no-cache, max-age=60, stale-while-revalidate=86400")
         + [ETAG], stored(0, keep=R))
    case("private", "RFC 9111 §5.2.2.7: private forbids a shared cache", cc("private, max-age=60"), refused("private"))
    case("private_qualified", "RFC 9111 §5.2.2.7: larder treats qualified private as unqualified (spec/HTTP.md)",
         cc('private="Set-Cookie", max-age=60'), refused("private"))
    case("private_upper_case", "PRIVATE is private", cc("PRIVATE, max-age=60"), refused("private"))
    case("private_with_s_maxage", "private forbids a shared cache whatever s-maxage says",
         cc("private, s-maxage=60"), refused("private"))
    case("public_alone", "RFC 9111 §3: public makes a response storable, but with no freshness and no validator "
         "there is nothing to reuse", cc("public"), refused("no-explicit-freshness"))
    case("public_max_age", "public with max-age", cc("public, max-age=60"), stored(60_000))
    case("public_etag_200", "public with a validator: kept for revalidation", cc("public") + [ETAG], stored(0, keep=R))
    case("public_etag_302", "RFC 9111 §3: public makes a 302 storable without freshness; with a validator it is kept "
         "for revalidation", cc("public") + [ETAG], stored(0, keep=R), status=302)
    case("public_no_validator_302", "public 302 without freshness or validator: nothing to reuse", cc("public"),
         refused("no-explicit-freshness"), status=302)

    area("s-maxage-revalidate")
    case("s_maxage_overrides_max_age", "RFC 9111 §5.2.2.10: s-maxage wins for a shared cache and implies "
         "proxy-revalidate, so no stale window is kept", cc("max-age=600, s-maxage=10"), stored(10_000, keep=0))
    case("s_maxage_first", "s-maxage wins whatever the order", cc("s-maxage=10, max-age=600"), stored(10_000, keep=0))
    case("s_maxage_longer", "s-maxage longer than max-age still wins", cc("max-age=10, s-maxage=600"),
         stored(600_000, keep=0))
    case("s_maxage_zero", "s-maxage=0: stale at once and no stale use allowed: nothing to keep",
         cc("max-age=60, s-maxage=0"), refused("no-explicit-freshness"))
    case("s_maxage_zero_etag", "s-maxage=0 with a validator: kept for revalidation", cc("max-age=60, s-maxage=0")
         + [ETAG], stored(0, keep=R))
    case("s_maxage_stale_while_revalidate", "RFC 9111 §4.2.4: s-maxage forbids stale use; stale-while-revalidate "
         "gives nothing", cc("s-maxage=60, stale-while-revalidate=600"), stored(60_000, keep=0))
    case("s_maxage_stale_if_error", "s-maxage forbids stale use; stale-if-error gives nothing",
         cc("s-maxage=60, stale-if-error=600"), stored(60_000, keep=0))
    case("s_maxage_etag", "s-maxage with a validator: kept 3600 s for revalidation, not for stale use",
         cc("s-maxage=60") + [ETAG], stored(60_000, keep=R))
    case("s_maxage_invalid", "an invalid s-maxage is 0 and still overrides max-age (and forbids stale use)",
         cc("s-maxage=abc, max-age=60"), refused("no-explicit-freshness"))
    case("s_maxage_quoted", "RFC 9111 §5.2: quoted form accepted", cc('s-maxage="30"'), stored(30_000, keep=0))
    case("s_maxage_upper_case", "S-MAXAGE is s-maxage", cc("S-MAXAGE=60"), stored(60_000, keep=0))
    case("s_maxage_overrides_expires", "RFC 9111 §5.3: a shared cache ignores Expires when s-maxage is present",
         cc("s-maxage=60") + [("Date", at(0)), ("Expires", at(-3600))], stored(60_000, keep=0))
    case("must_revalidate", "RFC 9111 §5.2.2.2: must-revalidate forbids stale use", cc("max-age=60, must-revalidate"),
         stored(60_000, keep=0))
    case("must_revalidate_etag", "must-revalidate with a validator: kept for revalidation only",
         cc("max-age=60, must-revalidate") + [ETAG], stored(60_000, keep=R))
    case("proxy_revalidate", "RFC 9111 §5.2.2.8: proxy-revalidate forbids a shared cache stale use",
         cc("max-age=60, proxy-revalidate"), stored(60_000, keep=0))
    case("proxy_revalidate_etag", "proxy-revalidate with a validator: kept for revalidation only",
         cc("max-age=60, proxy-revalidate") + [ETAG], stored(60_000, keep=R))
    case("must_revalidate_with_stale_directives", "RFC 9111 §4.2.4: must-revalidate wins over RFC 5861's directives",
         cc("max-age=60, must-revalidate, stale-while-revalidate=600, stale-if-error=600"), stored(60_000, keep=0))
    case("must_revalidate_zero", "max-age=0, must-revalidate, no validator: nothing to keep",
         cc("max-age=0, must-revalidate"), refused("no-explicit-freshness"))

    area("stale")
    case("swr_from_response", "RFC 5861 §3: stale-while-revalidate=600 keeps it 600 s past freshness",
         cc("max-age=60, stale-while-revalidate=600"), stored(60_000, keep=600_000), rules=NO_STALE)
    case("swr_smaller_than_default_sie", "the window kept is the larger of stale-while-revalidate and "
         "stale-if-error (here the 300 s default)", cc("max-age=60, stale-while-revalidate=30"), stored(60_000))
    case("sie_from_response", "RFC 5861 §4: stale-if-error=600", cc("max-age=60, stale-if-error=600"),
         stored(60_000, keep=600_000))
    case("sie_smaller_than_default", "the response's stale-if-error replaces the default, even when smaller",
         cc("max-age=60, stale-if-error=30"), stored(60_000, keep=30_000))
    case("sie_zero_replaces_default", "stale-if-error=0 replaces the 300 s default: nothing kept past freshness",
         cc("max-age=60, stale-if-error=0"), stored(60_000, keep=0))
    case("swr_and_sie", "both: the larger one is kept", cc("max-age=60, stale-while-revalidate=120, stale-if-error=900"),
         stored(60_000, keep=900_000))
    case("default_swr", "the configured stale-while-revalidate applies to responses that do not say",
         MA60, stored(60_000, keep=120_000), rules={"stale_while_revalidate_secs": 120, "stale_if_error_secs": 0})
    case("default_swr_and_sie", "both defaults: the larger", MA60, stored(60_000, keep=600_000),
         rules={"stale_while_revalidate_secs": 120, "stale_if_error_secs": 600})
    case("defaults_zero", "no defaults and nothing in the response: nothing kept past freshness", MA60,
         stored(60_000, keep=0), rules=NO_STALE)
    case("swr_invalid", "an invalid stale-while-revalidate allows no stale use (spec/HTTP.md), it does not fall "
         "back to the default", cc("max-age=60, stale-while-revalidate=abc"), stored(60_000, keep=0),
         rules={"stale_while_revalidate_secs": 120, "stale_if_error_secs": 0})
    case("sie_invalid", "an invalid stale-if-error allows no stale use; it does not fall back to the 300 s default",
         cc("max-age=60, stale-if-error=-1"), stored(60_000, keep=0))
    case("sie_without_argument", "stale-if-error without its argument is invalid: no stale use",
         cc("max-age=60, stale-if-error"), stored(60_000, keep=0))
    case("swr_quoted", "RFC 9111 §5.2: quoted form accepted", cc('max-age=60, stale-while-revalidate="600"'),
         stored(60_000, keep=600_000), rules=NO_STALE)
    case("swr_upper_case", "directive names are case-insensitive", cc("max-age=60, STALE-WHILE-REVALIDATE=600"),
         stored(60_000, keep=600_000), rules=NO_STALE)
    case("swr_duplicate", "the first occurrence wins", cc("max-age=60, stale-while-revalidate=600, "
         "stale-while-revalidate=10"), stored(60_000, keep=600_000), rules=NO_STALE)
    case("sie_huge", "RFC 9111 §1.2.2 applies to the stale directives too: past 2^31 counts as 2^31",
         cc("max-age=60, stale-if-error=99999999999"), stored(60_000, keep=CAP))
    case("stale_with_etag_smaller", "with a validator at least the revalidation window (3600 s) is kept",
         cc("max-age=60, stale-if-error=600") + [ETAG], stored(60_000, keep=R))
    case("stale_with_etag_larger", "a stale window longer than the revalidation window wins",
         cc("max-age=60, stale-if-error=7200") + [ETAG], stored(60_000, keep=7_200_000))
    case("revalidation_window_configured", "the configured revalidation window (60 s) for a response with a "
         "validator", MA60 + [ETAG], stored(60_000, keep=60_000),
         rules={"revalidation_window_secs": 60, "stale_if_error_secs": 0})
    case("revalidation_window_zero", "no revalidation window, no stale window: only the fresh time",
         MA60 + [ETAG], stored(60_000, keep=0), rules={"revalidation_window_secs": 0, "stale_if_error_secs": 0})
    case("revalidation_window_zero_validator_only", "validator only, no revalidation window: the default "
         "stale-if-error window still keeps it", [ETAG], stored(0), rules={"revalidation_window_secs": 0})
    case("revalidation_window_zero_validator_only_no_stale", "validator only, no window of any kind: not stored",
         [ETAG], refused("no-explicit-freshness"), rules={"revalidation_window_secs": 0, "stale_if_error_secs": 0})
    case("stale_on_arrival_kept", "Age 120 > max-age 60: stale on arrival, kept for the 300 s window",
         MA60 + [("Age", "120")], stored(0, age=120_000))
    case("stale_on_arrival_not_kept", "stale on arrival, no stale window, no validator: not stored",
         MA60 + [("Age", "120")], refused("no-explicit-freshness"), rules=NO_STALE)
    case("swr_validator_only", "no freshness, a validator and stale-while-revalidate: the larger window",
         cc("stale-while-revalidate=7200") + [ETAG], stored(0, keep=7_200_000))

    area("expires")
    date0 = ("Date", at(0))
    exp = lambda value: [date0, ("Expires", value)]
    case("expires_future", "RFC 9111 §4.2.1: Expires minus Date", exp(at(3600)), stored(3_600_000))
    case("expires_future_without_date", "RFC 9110 §6.6.1: without Date the response time stands for it",
         [("Expires", at(3600))], stored(3_600_000))
    case("expires_past", "an Expires in the past: stale at once, kept for the 300 s window", exp(at(-3600)),
         stored(0))
    case("expires_past_no_stale_window", "past Expires, no stale window", exp(at(-3600)),
         refused("no-explicit-freshness"), rules=NO_STALE)
    case("expires_equals_date", "Expires equal to Date: lifetime 0", exp(at(0)), stored(0))
    case("expires_before_date", "Expires before Date: lifetime 0", exp(at(-100)), stored(0))
    case("expires_invalid_zero", "RFC 9111 §5.3: an invalid Expires, especially 0, is in the past", exp("0"),
         stored(0))
    case("expires_invalid_zero_no_stale_window", "invalid Expires, no stale window: not stored", exp("0"),
         refused("no-explicit-freshness"), rules=NO_STALE)
    case("expires_invalid_minus_one", "-1 is not an HTTP-date: already expired", exp("-1"), stored(0))
    case("expires_empty", "an empty Expires is invalid: already expired", exp(""), stored(0))
    case("expires_invalid_with_etag", "already expired, kept 3600 s for revalidation", exp("0") + [ETAG],
         stored(0, keep=R))
    case("expires_two_lines", "RFC 9111 §4.2.1: two Expires lines make the response stale (larder's choice of the "
         "two the RFC allows)", exp(at(3600)) + [("Expires", at(7200))], stored(0))
    case("expires_two_identical_lines", "two Expires lines, even identical ones: stale", exp(at(3600))
         + [("Expires", at(3600))], stored(0))
    case("expires_rfc850", "RFC 9110 §5.6.7: the obsolete RFC 850 form is accepted", exp(rfc850_date(NOW + 3_600_000)),
         stored(3_600_000))
    case("expires_asctime", "RFC 9110 §5.6.7: the asctime form is accepted", exp(asctime_date(NOW + 3_600_000)),
         stored(3_600_000))
    case("expires_asctime_one_digit_day", "asctime with a space-padded day (Dec  5)",
         exp(asctime_date(NOW + 21 * 86_400_000)), stored(21 * 86_400_000))
    case("expires_asctime_two_digit_day", "asctime with a zero-padded day is the same date",
         exp(asctime_date(NOW + 21 * 86_400_000).replace("  5", " 05")), stored(21 * 86_400_000))
    case("expires_rfc850_two_digit_year_past_century", "RFC 9110 §5.6.7: a two-digit year is the nearest year with "
         "those digits not more than 50 years ahead: 94 is 1994, long past", exp("Sunday, 06-Nov-94 08:49:37 GMT"),
         stored(0))
    case("expires_rfc850_year_read_at_the_response_time", "spec/HTTP.md §1.5: a two-digit year is resolved against "
         "the response's time (2023), not the clock it is replayed on: 74 is 1974 (2074 would be 51 years ahead), "
         "so this response is long expired", exp("Wednesday, 06-Nov-74 08:49:37 GMT"), stored(0))
    case("expires_upper_case_weekday", "names in dates are case-insensitive", exp(at(3600).replace("Tue", "TUE")),
         stored(3_600_000))
    case("expires_upper_case_month", "names in dates are case-insensitive", exp(at(3600).replace("Nov", "NOV")),
         stored(3_600_000))
    case("expires_mixed_case_gmt", "GMT in any case", exp(at(3600).replace("GMT", "gMT")), stored(3_600_000))
    case("expires_lower_case", "names in dates are case-insensitive", exp(at(3600).lower()), stored(3_600_000))
    case("expires_wrong_weekday", "the weekday is not checked against the date", exp(at(3600).replace("Tue", "Fri")),
         stored(3_600_000))
    case("expires_surrounding_spaces", "whitespace around the field value is not part of it",
         exp(" " + at(3600) + " "), stored(3_600_000))
    for name, value in [
        ("utc", at(3600).replace("GMT", "UTC")),
        ("aest", at(3600).replace("GMT", "AEST")),
        ("numeric_zone", at(3600).replace("GMT", "+0000")),
        ("two_digit_year", at(3600).replace("2023", "23")),
        ("no_comma", at(3600).replace(",", "")),
        ("double_spaces", at(3600).replace(" ", "  ")),
        ("date_dashes", "Tue, 14-Nov-2023 23:13:20 GMT"),
        ("time_periods", "Tue, 14 Nov 2023 23.13.20 GMT"),
        ("one_digit_hour", "Wed, 15 Nov 2023 1:13:20 GMT"),
        ("one_digit_day", "Tue, 5 Dec 2023 22:13:20 GMT"),
        ("day_32", "Thu, 32 Nov 2023 22:13:20 GMT"),
        ("hour_24", "Tue, 14 Nov 2023 24:13:20 GMT"),
        ("minute_60", "Tue, 14 Nov 2023 23:60:20 GMT"),
        ("unknown_month", "Tue, 14 Nom 2023 23:13:20 GMT"),
        ("unknown_weekday", "Tux, 14 Nov 2023 23:13:20 GMT"),
        ("rfc850_short_weekday", "Tue, 14-Nov-23 23:13:20 GMT"),
        ("iso8601", "2023-11-14T23:13:20Z"),
        ("epoch_seconds", "1700003600"),
        ("trailing_garbage", at(3600) + " x"),
    ]:
        case(f"expires_invalid_{name}", "RFC 9111 §5.3: not an HTTP-date (RFC 9110 §5.6.7), so already expired; "
             "kept only for the 300 s stale window", exp(value), stored(0))
    case("expires_2038", "RFC 9110 §5.6.7: dates past 2^31 s since the epoch work",
         exp("Tue, 19 Jan 2038 03:14:08 GMT"), stored(CAP - NOW))
    case("expires_far_future", "a lifetime past 2^31 s counts as 2^31 s (RFC 9111 §1.2.2: overflowing calculations)",
         exp("Sun, 21 Nov 2286 04:46:39 GMT"), stored(CAP))
    case("expires_max_age_overrides_past", "RFC 9111 §5.3: max-age wins over Expires", MA60 + exp(at(-3600)),
         stored(60_000))
    case("expires_max_age_zero_overrides_future", "max-age=0 wins over a future Expires", cc("max-age=0")
         + exp(at(3600)), stored(0))
    case("expires_invalid_max_age_overrides", "an invalid max-age is still max-age: Expires is ignored and the "
         "lifetime is 0", cc("max-age=abc") + exp(at(3600)), stored(0))
    case("expires_invalid_date", "an invalid Date is ignored: Expires counts from the response time",
         [("Date", "foo"), ("Expires", at(10))], stored(10_000))
    case("expires_date_in_future", "Date 100 s ahead (a fast origin clock): lifetime is Expires - Date = 100 s, and "
         "the apparent age is 0", [("Date", at(100)), ("Expires", at(200))], stored(100_000))
    case("expires_date_in_past", "Date 100 s ago: lifetime 200 s, apparent age 100 s, fresh 100 s",
         [("Date", at(-100)), ("Expires", at(100))], stored(100_000, age=100_000))
    case("expires_age_over_lifetime", "lifetime Expires - Date = 20 s; Age 25 s makes it stale on arrival",
         [("Date", at(-10)), ("Expires", at(10)), ("Age", "25")], stored(0, age=25_000))
    case("expires_public", "public with Expires", cc("public") + exp(at(3600)), stored(3_600_000))
    case("expires_field_name_upper_case", "field names are case-insensitive", [date0, ("EXPIRES", at(3600))],
         stored(3_600_000))
    case("expires_with_no_cache", "no-cache makes a response with Expires stale at once; without a validator it is "
         "not kept", cc("no-cache") + exp(at(3600)), refused("no-explicit-freshness"))

    area("date-age")
    ma = cc("max-age=3600")
    case("no_date_no_age", "no Date, no Age, no delay: initial age 0", ma, stored(3_600_000))
    case("date_now", "Date equal to the response time: apparent age 0", ma + [date0], stored(3_600_000))
    case("date_past", "RFC 9111 §4.2.3: apparent age = response time - Date = 100 s", ma + [("Date", at(-100))],
         stored(3_500_000, age=100_000))
    case("date_future", "RFC 9111 §4.2.3: a Date after the response time gives apparent age 0 (max with 0)",
         ma + [("Date", at(100))], stored(3_600_000))
    case("date_invalid", "an invalid Date is ignored", ma + [("Date", "yesterday")], stored(3_600_000))
    case("date_rfc850", "Date in RFC 850 form", ma + [("Date", rfc850_date(NOW - 100_000))],
         stored(3_500_000, age=100_000))
    case("date_asctime", "Date in asctime form", ma + [("Date", asctime_date(NOW - 100_000))],
         stored(3_500_000, age=100_000))
    case("date_two_lines", "two Date lines: the first is used", ma + [("Date", at(-100)), ("Date", at(-500))],
         stored(3_500_000, age=100_000))
    case("date_field_name_upper_case", "field names are case-insensitive", ma + [("DATE", at(-100))],
         stored(3_500_000, age=100_000))
    case("date_subsecond_response_time", "a response time between seconds: apparent age in ms",
         ma + [date0], stored(3_599_500, age=500), request_time=NOW + 500, response_time=NOW + 500)
    case("age_30", "RFC 9111 §4.2.3: Age 30 s", ma + [("Age", "30")], stored(3_570_000, age=30_000))
    case("age_and_date_apparent_larger", "initial age is the larger of apparent age (100 s) and Age (30 s)",
         ma + [("Date", at(-100)), ("Age", "30")], stored(3_500_000, age=100_000))
    case("age_and_date_age_larger", "initial age is the larger of apparent age (10 s) and Age (30 s)",
         ma + [("Date", at(-10)), ("Age", "30")], stored(3_570_000, age=30_000))
    case("age_and_future_date", "a future Date gives apparent age 0; Age 20 s counts",
         ma + [("Date", at(100)), ("Age", "20")], stored(3_580_000, age=20_000))
    for name, value in [("non_numeric", "abc"), ("negative", "-7200"), ("decimal", "7200.0"), ("empty", ""),
                        ("parameter", "7200;foo=bar"), ("quoted", '"7200"'), ("unit", "7200s")]:
        case(f"age_invalid_{name}", f"RFC 9111 §5.1: Age is delta-seconds; `{value}` is not, so it is ignored",
             ma + [("Age", value)], stored(3_600_000))
    case("age_list_old_first", "a list in one Age line: the first element is used (7200 s, stale on arrival)",
         ma + [("Age", "7200, 0")], stored(0, age=7_200_000))
    case("age_list_new_first", "a list in one Age line: the first element is used (0)", ma + [("Age", "0, 7200")],
         stored(3_600_000))
    case("age_two_lines_old_first", "two Age lines: the first is used", ma + [("Age", "7200"), ("Age", "0")],
         stored(0, age=7_200_000))
    case("age_two_lines_new_first", "two Age lines: the first is used", ma + [("Age", "0"), ("Age", "7200")],
         stored(3_600_000))
    case("age_spaces", "whitespace around the value is not part of it", ma + [("Age", " 30 ")],
         stored(3_570_000, age=30_000))
    case("age_leading_zeros", "0030 is 30 s", ma + [("Age", "0030")], stored(3_570_000, age=30_000))
    case("age_field_name_upper_case", "field names are case-insensitive", ma + [("AGE", "30")],
         stored(3_570_000, age=30_000))
    case("age_equals_lifetime", "Age equal to max-age: stale on arrival (fresh only while lifetime > age)",
         ma + [("Age", "3600")], stored(0, age=3_600_000))
    case("age_2_31_minus_1", "a large Age: stale", ma + [("Age", "2147483647")], stored(0, age=2_147_483_647_000))
    case("age_2_31", "2^31 s", ma + [("Age", "2147483648")], stored(0, age=CAP))
    case("age_past_2_31", "RFC 9111 §1.2.2: past 2^31 counts as 2^31", ma + [("Age", "2147483649")],
         stored(0, age=CAP))
    case("age_past_u64", "past 2^64 counts as 2^31", ma + [("Age", "99999999999999999999999")], stored(0, age=CAP))
    case("response_delay", "RFC 9111 §4.2.3: response_delay (2 s from request to response) is added to Age (0)",
         ma, stored(3_598_000, age=2_000), request_time=NOW - 2_000)
    case("response_delay_and_age", "corrected_age_value = Age 30 s + delay 2 s", ma + [("Age", "30")],
         stored(3_568_000, age=32_000), request_time=NOW - 2_000)
    case("response_delay_and_date", "apparent age 100 s beats Age 0 + delay 2 s", ma + [("Date", at(-100))],
         stored(3_500_000, age=100_000), request_time=NOW - 2_000)
    case("response_delay_beats_date", "apparent age 1 s is less than delay 5 s", ma + [("Date", at(-1))],
         stored(3_595_000, age=5_000), request_time=NOW - 5_000)
    case("response_delay_date_and_age", "max(apparent 10 s, Age 5 s + delay 8 s) = 13 s",
         ma + [("Date", at(-10)), ("Age", "5")], stored(3_587_000, age=13_000), request_time=NOW - 8_000)
    case("response_delay_not_added_to_apparent_age", "the delay is added to Age, not to the apparent age: "
         "max(apparent 100 s, Age 0 + delay 3 s)", ma + [("Date", at(-100)), ("Age", "0")],
         stored(3_500_000, age=100_000), request_time=NOW - 3_000)
    case("request_time_after_response_time", "a request time after the response time (clock step) gives delay 0",
         ma, stored(3_600_000), request_time=NOW + 1_000)

    area("authorization")
    case("authorization_max_age", "RFC 9111 §3.5: a request with Authorization needs explicit permission to be shared",
         MA60, refused("authorization"), request=AUTH)
    case("authorization_public", "RFC 9111 §3.5: public allows it", cc("public, max-age=60"), stored(60_000),
         request=AUTH)
    case("authorization_public_upper_case", "PUBLIC is public", cc("PUBLIC, max-age=60"), stored(60_000),
         request=AUTH)
    case("authorization_s_maxage", "RFC 9111 §3.5: s-maxage allows it", cc("s-maxage=60"), stored(60_000, keep=0),
         request=AUTH)
    case("authorization_must_revalidate", "RFC 9111 §3.5: must-revalidate allows it",
         cc("max-age=60, must-revalidate"), stored(60_000, keep=0), request=AUTH)
    case("authorization_proxy_revalidate", "proxy-revalidate is not among the directives of RFC 9111 §3.5",
         cc("max-age=60, proxy-revalidate"), refused("authorization"), request=AUTH)
    case("authorization_no_cache", "no-cache is not among the directives of RFC 9111 §3.5",
         cc("no-cache") + [ETAG], refused("authorization"), request=AUTH)
    case("authorization_expires", "Expires alone does not allow sharing", [date0, ("Expires", at(3600))],
         refused("authorization"), request=AUTH)
    case("authorization_public_expires", "public with Expires", cc("public") + [date0, ("Expires", at(3600))],
         stored(3_600_000), request=AUTH)
    case("authorization_private", "private is checked before Authorization", cc("private, public, max-age=60"),
         refused("private"), request=AUTH)
    case("authorization_no_store", "no-store is checked first", cc("no-store, public, max-age=60"),
         refused("no-store"), request=AUTH)
    case("authorization_empty_value", "an Authorization field is present even when empty", MA60,
         refused("authorization"), request=[("Authorization", "")])
    case("authorization_field_name_upper_case", "field names are case-insensitive", MA60, refused("authorization"),
         request=[("AUTHORIZATION", "Bearer x")])
    case("authorization_s_maxage_zero", "s-maxage=0 allows sharing but gives neither freshness nor stale use",
         cc("s-maxage=0"), refused("no-explicit-freshness"), request=AUTH)
    case("authorization_s_maxage_invalid", "an invalid s-maxage is still s-maxage (0): allowed, but nothing to keep",
         cc("s-maxage=abc, max-age=60"), refused("no-explicit-freshness"), request=AUTH)
    case("proxy_authorization_only", "RFC 9111 §3.5 is about Authorization; Proxy-Authorization is for larder",
         MA60, stored(60_000), request=[("Proxy-Authorization", "Basic dXNlcjpwYXNz")])
    case("authorization_cdn_public", "the governing targeted field's public allows sharing (spec/HTTP.md)",
         [("CDN-Cache-Control", "max-age=60, public")], stored(60_000), request=AUTH)
    case("authorization_cdn_without_public", "a targeted field replaces Cache-Control: its public does not count",
         [("CDN-Cache-Control", "max-age=60"), ("Cache-Control", "public")], refused("authorization"), request=AUTH)
    case("authorization_cdn_s_maxage", "s-maxage in the targeted field allows sharing",
         [("CDN-Cache-Control", "s-maxage=60")], stored(60_000, keep=0), request=AUTH)
    case("authorization_surrogate_public", "Surrogate-Control's public allows sharing",
         [("Surrogate-Control", "max-age=60, public")], stored(60_000), request=AUTH)

    area("set-cookie")
    cookie = ("Set-Cookie", "session=abc; Path=/; HttpOnly")
    case("set_cookie", "larder does not share one user's cookie (spec/HTTP.md)", MA60 + [cookie],
         refused("set-cookie"))
    case("set_cookie_allowed", "cache_set_cookie on: stored with the cookie", MA60 + [cookie], stored(60_000),
         rules={"cache_set_cookie": True})
    case("set_cookie_field_name_upper_case", "field names are case-insensitive",
         MA60 + [("SET-COOKIE", "a=b")], refused("set-cookie"))
    case("set_cookie_empty", "a Set-Cookie field is present even when empty", MA60 + [("Set-Cookie", "")],
         refused("set-cookie"))
    case("set_cookie_public", "public does not make a cookie shareable", cc("public, max-age=60") + [cookie],
         refused("set-cookie"))
    case("set_cookie_cdn", "a targeted field does not make a cookie shareable",
         [("CDN-Cache-Control", "max-age=60"), cookie], refused("set-cookie"))
    case("set_cookie_no_store", "no-store is checked before Set-Cookie", cc("no-store") + [cookie],
         refused("no-store"))
    case("set_cookie_private", "private is checked before Set-Cookie", cc("private, max-age=60") + [cookie],
         refused("private"))
    case("set_cookie_authorization", "Authorization is checked before Set-Cookie", MA60 + [cookie],
         refused("authorization"), request=AUTH)
    case("set_cookie_vary_star", "Set-Cookie is checked before Vary", MA60 + [cookie, ("Vary", "*")],
         refused("set-cookie"))
    case("set_cookie_allowed_vary_star", "with cookies allowed, Vary: * still forbids storing",
         MA60 + [cookie, ("Vary", "*")], refused("vary-star"), rules={"cache_set_cookie": True})
    case("set_cookie_no_freshness_allowed", "with cookies allowed, freshness is still needed", [cookie],
         refused("no-explicit-freshness"), rules={"cache_set_cookie": True})

    area("vary")
    case("vary_none", "no Vary: no names", MA60, stored(60_000))
    case("vary_one", "RFC 9111 §4.1: one name, kept lowercase", MA60 + [("Vary", "Accept-Language")],
         stored(60_000, vary=["accept-language"]))
    case("vary_upper_case", "names lowercase", MA60 + [("Vary", "ACCEPT-LANGUAGE")],
         stored(60_000, vary=["accept-language"]))
    case("vary_two_sorted", "names sorted", MA60 + [("Vary", "User-Agent, Accept")],
         stored(60_000, vary=["accept", "user-agent"]))
    case("vary_two_lines", "names from every line", MA60 + [("Vary", "User-Agent"), ("Vary", "Accept")],
         stored(60_000, vary=["accept", "user-agent"]))
    case("vary_duplicates", "duplicates once", MA60 + [("Vary", "Accept, accept, ACCEPT")],
         stored(60_000, vary=["accept"]))
    case("vary_duplicate_lines", "duplicates across lines once", MA60 + [("Vary", "Cookie"), ("Vary", "cookie")],
         stored(60_000, vary=["cookie"]))
    case("vary_whitespace", "whitespace around names dropped", MA60 + [("Vary", "  Accept ,\tCookie  ")],
         stored(60_000, vary=["accept", "cookie"]))
    case("vary_empty_elements", "RFC 9110 §5.6.1: empty elements ignored", MA60 + [("Vary", ", Accept,,")],
         stored(60_000, vary=["accept"]))
    case("vary_empty", "an empty Vary names nothing", MA60 + [("Vary", "")], stored(60_000))
    case("vary_field_name_upper_case", "field names are case-insensitive", MA60 + [("VARY", "Cookie")],
         stored(60_000, vary=["cookie"]))
    case("vary_star", "RFC 9111 §4.1: Vary: * never matches; not stored", MA60 + [("Vary", "*")], refused("vary-star"))
    case("vary_star_among_names", "* among names", MA60 + [("Vary", "Accept, *")], refused("vary-star"))
    case("vary_star_second_line", "* on a second line", MA60 + [("Vary", "Accept"), ("Vary", "*")],
         refused("vary-star"))
    case("vary_star_spaces", "* with whitespace", MA60 + [("Vary", " * ")], refused("vary-star"))
    case("vary_star_with_validator", "Vary: * with a validator: still not stored", cc("max-age=60") + [ETAG,
         ("Vary", "*")], refused("vary-star"))
    case("vary_star_before_freshness", "Vary: * is reported before missing freshness", [("Vary", "*")],
         refused("vary-star"))
    case("vary_with_validator_only", "variants kept for revalidation", [ETAG, ("Vary", "Accept-Language")],
         stored(0, keep=R, vary=["accept-language"]))
    case("vary_accept_encoding_identity_body", "spec/FORMAT.md §5.4: no Content-Encoding, so larder serves the body "
         "to every client and Accept-Encoding does not select a variant", MA60 + [("Vary", "Accept-Encoding")],
         stored(60_000))
    case("vary_accept_encoding_upper_case", "ACCEPT-ENCODING is accept-encoding",
         MA60 + [("Vary", "ACCEPT-ENCODING")], stored(60_000))
    for coding in ["gzip", "GZIP", "br", "zstd", "identity", "Zstd"]:
        case(f"vary_accept_encoding_{coding.lower()}_{'upper' if coding != coding.lower() else 'decodable'}",
             f"spec/FORMAT.md §5.4: larder decodes {coding} (codings are case-insensitive, RFC 9110 §8.4.1), so "
             "accept-encoding is left out", MA60 + [("Vary", "Accept-Encoding"), ("Content-Encoding", coding)],
             stored(60_000))
    for coding in ["deflate", "compress", "x-gzip", "gzip, br", "exi"]:
        case(f"vary_accept_encoding_{re.sub('[^a-z]+', '_', coding)}", f"spec/FORMAT.md §5.4: larder cannot serve "
             f"`{coding}` decoded, so Accept-Encoding stays a variant", MA60 + [("Vary", "Accept-Encoding"),
             ("Content-Encoding", coding)], stored(60_000, vary=["accept-encoding"]))
    case("vary_accept_encoding_two_coding_lines", "two Content-Encoding lines are two codings: not decodable",
         MA60 + [("Vary", "Accept-Encoding"), ("Content-Encoding", "gzip"), ("Content-Encoding", "gzip")],
         stored(60_000, vary=["accept-encoding"]))
    case("vary_accept_encoding_and_language_gzip", "only accept-encoding is left out",
         MA60 + [("Vary", "Accept-Encoding, Accept-Language"), ("Content-Encoding", "gzip")],
         stored(60_000, vary=["accept-language"]))
    case("vary_accept_encoding_and_language_deflate", "both kept, sorted",
         MA60 + [("Vary", "Accept-Language, Accept-Encoding"), ("Content-Encoding", "deflate")],
         stored(60_000, vary=["accept-encoding", "accept-language"]))
    case("vary_accept_encoding_coding_spaces", "whitespace around the coding is not part of it",
         MA60 + [("Vary", "Accept-Encoding"), ("Content-Encoding", " gzip ")], stored(60_000))
    case("content_encoding_without_vary", "a coding larder cannot decode, without Vary: nothing to vary on",
         MA60 + [("Content-Encoding", "deflate")], stored(60_000))

    area("validators")
    case("etag_only", "RFC 9111 §3: 200 is heuristically cacheable; with a validator and no freshness it is kept "
         "3600 s for revalidation", [ETAG], stored(0, keep=R))
    case("weak_etag_only", "a weak ETag is a validator", [("ETag", 'W/"v1"')], stored(0, keep=R))
    case("last_modified_only", "Last-Modified is a validator", [("Last-Modified", at(-86_400))], stored(0, keep=R))
    case("last_modified_invalid", "a Last-Modified that is not a date is still a validator field (sent back as "
         "If-Modified-Since)", [("Last-Modified", "yesterday")], stored(0, keep=R))
    case("etag_and_last_modified", "both validators", [ETAG, ("Last-Modified", at(-86_400))], stored(0, keep=R))
    case("etag_field_name_upper_case", "field names are case-insensitive", [("ETAG", '"v1"')], stored(0, keep=R))
    case("etag_with_age", "initial age is recorded even when stale", [ETAG, ("Age", "30")], stored(0, age=30_000,
         keep=R))
    case("etag_must_revalidate", "must-revalidate forbids stale use but the response is kept for revalidation",
         cc("must-revalidate") + [ETAG], stored(0, keep=R))
    case("etag_no_validator_no_freshness", "neither validator nor freshness: not stored", [("Content-Type",
         "text/html")], refused("no-explicit-freshness"))
    case("etag_302", "302 is not heuristically cacheable: a validator alone does not make it storable", [ETAG],
         refused("no-explicit-freshness"), status=302)

    area("heuristic")
    heur = {"heuristic_max_secs": 7 * 86_400}
    lm10d = ("Last-Modified", at(-864_000))
    case("heuristic_off", "heuristics off (the default): Last-Modified alone only keeps it for revalidation",
         [date0, lm10d], stored(0, keep=R))
    case("heuristic_ten_percent", "RFC 9111 §4.2.2: 10% of the 10 days since Last-Modified = 1 day",
         [date0, lm10d], stored(86_400_000, keep=R), rules=heur)
    case("heuristic_capped", "the heuristic is capped by heuristic_max_secs (1 h)", [date0, lm10d],
         stored(3_600_000, keep=R), rules={"heuristic_max_secs": 3600})
    case("heuristic_small", "10% of 1000 s = 100 s", [date0, ("Last-Modified", at(-1000))], stored(100_000, keep=R),
         rules=heur)
    case("heuristic_last_modified_future", "Last-Modified after Date: lifetime 0", [date0, ("Last-Modified",
         at(100))], stored(0, keep=R), rules=heur)
    case("heuristic_last_modified_equals_date", "Last-Modified equal to Date: lifetime 0",
         [date0, ("Last-Modified", at(0))], stored(0, keep=R), rules=heur)
    case("heuristic_last_modified_invalid", "no usable Last-Modified, no heuristic: kept for revalidation",
         [date0, ("Last-Modified", "yesterday")], stored(0, keep=R), rules=heur)
    case("heuristic_last_modified_rfc850", "Last-Modified in RFC 850 form", [date0, ("Last-Modified",
         rfc850_date(NOW - 1_000_000))], stored(100_000, keep=R), rules=heur)
    case("heuristic_without_date", "without Date the response time stands for it",
         [("Last-Modified", at(-1000))], stored(100_000, keep=R), rules=heur)
    case("heuristic_invalid_date", "an invalid Date is ignored: the response time stands for it",
         [("Date", "foo"), ("Last-Modified", at(-1000))], stored(100_000, keep=R), rules=heur)
    case("heuristic_age", "heuristic lifetime 100 s less Age 30 s", [date0, ("Last-Modified", at(-1000)),
         ("Age", "30")], stored(70_000, age=30_000, keep=R), rules=heur)
    case("heuristic_404", "404 is heuristically cacheable", [date0, ("Last-Modified", at(-1000))],
         stored(100_000, keep=R), rules=heur, status=404)
    case("heuristic_201", "201 is not heuristically cacheable, and a validator alone does not make it storable",
         [date0, ("Last-Modified", at(-1000))], refused("no-explicit-freshness"), rules=heur, status=201)
    case("heuristic_201_public", "RFC 9111 §4.2.2: public allows heuristics for any status",
         cc("public") + [date0, ("Last-Modified", at(-1000))], stored(100_000, keep=R), rules=heur, status=201)
    case("heuristic_302", "302 is not heuristically cacheable", [date0, ("Last-Modified", at(-1000))],
         refused("no-explicit-freshness"), rules=heur, status=302)
    case("heuristic_no_cache", "no-cache: stale at once whatever the heuristic", cc("no-cache") + [date0,
         ("Last-Modified", at(-1000))], stored(0, keep=R), rules=heur)
    case("heuristic_expires_wins", "RFC 9111 §4.2.2: heuristics only without explicit freshness; an invalid "
         "Expires is explicit (already expired)", [date0, ("Last-Modified", at(-1000)), ("Expires", "0")],
         stored(0, keep=R), rules=heur)
    case("heuristic_max_age_wins", "max-age is explicit", cc("max-age=10") + [date0, ("Last-Modified", at(-1000))],
         stored(10_000, keep=R), rules=heur)
    case("heuristic_etag_only", "heuristics need Last-Modified; an ETag alone keeps it for revalidation", [ETAG],
         stored(0, keep=R), rules=heur)
    case("heuristic_nothing", "heuristics on, but neither Last-Modified nor a validator", [date0],
         refused("no-explicit-freshness"), rules=heur)
    case("heuristic_under_targeted_field", "a targeted field with no freshness replaces Cache-Control and Expires, "
         "but heuristics still apply", [("CDN-Cache-Control", "public"), ("Cache-Control", "max-age=10"), date0,
                                        ("Last-Modified", at(-1000))], stored(100_000, keep=R), rules=heur)
    case("heuristic_stale_window", "heuristic freshness allows the default stale windows; with a validator at least "
         "the revalidation window", [date0, ("Last-Modified", at(-1000))], stored(100_000, keep=7_200_000),
         rules={**heur, "stale_if_error_secs": 7200})

    area("request-cache-control")
    honor = {"honor_request_cache_control": True}
    case("request_no_store_ignored", "honor_request_cache_control off (the default): request directives do not "
         "change storage", MA60, stored(60_000), request=[("Cache-Control", "no-store")])
    case("request_no_store_honored", "RFC 9111 §5.2.1.5: a request no-store forbids storing its response", MA60,
         refused("request-no-store"), request=[("Cache-Control", "no-store")], rules=honor)
    case("request_no_store_upper_case_honored", "directive names are case-insensitive", MA60,
         refused("request-no-store"), request=[("Cache-Control", "NO-STORE")], rules=honor)
    case("request_no_store_second_line_honored", "every request Cache-Control line counts", MA60,
         refused("request-no-store"), request=[("Cache-Control", "max-age=0"), ("Cache-Control", "no-store")],
         rules=honor)
    case("request_no_store_quoted_honored", "no-store inside a quoted string is text", MA60, stored(60_000),
         request=[("Cache-Control", 'foo="no-store"')], rules=honor)
    case("request_no_cache_honored", "request no-cache affects reuse, not storage", MA60, stored(60_000),
         request=[("Cache-Control", "no-cache")], rules=honor)
    case("request_max_age_zero_honored", "request max-age=0 affects reuse, not storage", MA60, stored(60_000),
         request=[("Cache-Control", "max-age=0")], rules=honor)
    case("request_pragma_no_cache_honored", "RFC 9111 §5.4: Pragma: no-cache is no-cache, not no-store", MA60,
         stored(60_000), request=[("Pragma", "no-cache")], rules=honor)
    case("request_only_if_cached_honored", "only-if-cached affects reuse, not storage", MA60, stored(60_000),
         request=[("Cache-Control", "only-if-cached")], rules=honor)
    case("request_no_store_before_response_no_store", "the request's no-store is checked before the response's",
         cc("no-store"), refused("request-no-store"), request=[("Cache-Control", "no-store")], rules=honor)
    case("request_no_store_head", "the method is checked first", MA60, refused("method"), method="HEAD",
         request=[("Cache-Control", "no-store")], rules=honor)
    case("request_no_store_206", "the status is checked before request directives", MA60, refused("status"),
         status=206, request=[("Cache-Control", "no-store")], rules=honor)

    area("targeted")
    cdn = lambda value: ("CDN-Cache-Control", value)
    case("cdn_max_age", "RFC 9213 §2.2: the targeted field governs; Cache-Control is ignored",
         [cdn("max-age=600"), ("Cache-Control", "max-age=60")], stored(600_000))
    case("cdn_shorter_than_cc", "the targeted field's shorter lifetime wins",
         [("Cache-Control", "max-age=3600"), cdn("max-age=1")], stored(1_000))
    case("cdn_over_cc_no_store", "RFC 9213 §3.1: CDN-Cache-Control: max-age=600 with Cache-Control: no-store is "
         "stored by a CDN", [("Cache-Control", "no-store"), cdn("max-age=600")], stored(600_000))
    case("cdn_no_store", "no-store in the targeted field", [cdn("no-store"), ("Cache-Control", "max-age=600")],
         refused("no-store"))
    case("cdn_private", "private in the targeted field", [cdn("private"), ("Cache-Control", "max-age=600")],
         refused("private"))
    case("cdn_no_cache", "no-cache in the targeted field; Cache-Control's max-age does not count",
         [cdn("no-cache"), ("Cache-Control", "max-age=600")], refused("no-explicit-freshness"))
    case("cdn_no_cache_etag", "no-cache in the targeted field, with a validator", [cdn("max-age=600, no-cache"),
         ETAG], stored(0, keep=R))
    case("cdn_no_cache_string", "RFC 9213 §2.1: no-cache may be a String (its field-name list); the field is valid "
         "and, as in Cache-Control, treated as unqualified", [cdn('no-cache="set-cookie", max-age=600'),
                                                             ("Cache-Control", "max-age=60"), ETAG], stored(0, keep=R))
    case("cdn_private_string", "private with a String (field-name list) is valid and treated as unqualified",
         [cdn('private="set-cookie", max-age=600'), ("Cache-Control", "max-age=60")], refused("private"))
    case("cdn_expires_past_ignored", "RFC 9213 §2.2: Expires is ignored under a targeted field",
         [cdn("max-age=600"), date0, ("Expires", at(-3600))], stored(600_000))
    case("cdn_expires_invalid_ignored", "an invalid Expires is ignored too", [cdn("max-age=600"), ("Expires", "0")],
         stored(600_000))
    case("cdn_expires_future_ignored", "a future Expires gives no freshness under a targeted field",
         [cdn("public"), date0, ("Expires", at(3600))], refused("no-explicit-freshness"))
    case("cdn_max_age_zero_future_expires", "max-age=0 in the targeted field, future Expires ignored",
         [cdn("max-age=0"), date0, ("Expires", at(3600))], stored(0))
    case("cdn_extension", "RFC 9213 §2.2: unknown directives are ignored", [cdn("foobar, max-age=3600")],
         stored(3_600_000))
    case("cdn_none", "RFC 9213 §3.1: `CDN-Cache-Control: none` governs (a valid, non-empty field) though it names no "
         "directive larder knows: Cache-Control's no-store does not apply, and there is no freshness",
         [("Cache-Control", "no-store"), cdn("none")], refused("no-explicit-freshness"))
    case("cdn_none_etag", "`none` with a validator: kept for revalidation",
         [("Cache-Control", "no-store"), cdn("none"), ETAG], stored(0, keep=R))
    case("cdn_s_maxage", "s-maxage in the targeted field: no stale use", [cdn("s-maxage=600")],
         stored(600_000, keep=0))
    case("cdn_swr", "RFC 5861 directives in the targeted field", [cdn("max-age=60, stale-while-revalidate=600")],
         stored(60_000, keep=600_000), rules=NO_STALE)
    case("cdn_sie", "stale-if-error in the targeted field", [cdn("max-age=60, stale-if-error=900")],
         stored(60_000, keep=900_000))
    case("cdn_must_revalidate", "must-revalidate in the targeted field", [cdn("max-age=600, must-revalidate")],
         stored(600_000, keep=0))
    case("cdn_must_revalidate_explicit_true", "RFC 8941: `?1` is the Boolean true a bare key stands for",
         [cdn("max-age=600, must-revalidate=?1")], stored(600_000, keep=0))
    case("cdn_proxy_revalidate", "proxy-revalidate in the targeted field", [cdn("max-age=600, proxy-revalidate")],
         stored(600_000, keep=0))
    case("cdn_must_understand", "RFC 9213 §2.2: a targeted field carries the Cache-Control directives the cache "
         "implements, must-understand included", [cdn("max-age=600, no-store, must-understand")], stored(600_000))
    case("cdn_must_understand_599", "must-understand in the targeted field, status not understood",
         [cdn("max-age=600, no-store, must-understand")], refused("status"), status=599)
    case("cdn_parameters_ignored", "RFC 9213 §2.1: parameters on directives are ignored",
         [cdn("max-age=600;foo=bar")], stored(600_000))
    case("cdn_flag_with_parameter", "a flag with a parameter is still the flag", [cdn("no-store;foo"),
         ("Cache-Control", "max-age=60")], refused("no-store"))
    case("cdn_inner_list_unknown", "an unknown directive is ignored whatever its value, an inner list included "
         "(spec/HTTP.md)", [cdn("foo=(a b), max-age=600"), ("Cache-Control", "max-age=60")], stored(600_000))
    case("cdn_byte_sequence_unknown", "an unknown directive with a byte sequence is ignored",
         [cdn("foo=:aGVsbG8=:, max-age=600")], stored(600_000))
    case("cdn_duplicate_key", "RFC 8941 §4.2.2: a repeated dictionary key keeps its last value (unlike "
         "Cache-Control's first)", [cdn("max-age=600, max-age=10")], stored(10_000))
    case("cdn_two_lines", "RFC 8941 §4.2: field lines are combined before parsing", [cdn("max-age=600"),
         cdn("no-store")], refused("no-store"))
    case("cdn_two_lines_duplicate_key", "combined lines: the last value of a key wins", [cdn("max-age=600"),
         cdn("max-age=10")], stored(10_000))
    case("cdn_leading_space", "RFC 8941 §4.2: leading spaces are discarded", [cdn("  max-age=600")],
         stored(600_000))
    case("cdn_field_name_case", "field names are case-insensitive", [("cdn-cache-control", "max-age=600"),
         ("Cache-Control", "max-age=60")], stored(600_000))
    case("cdn_big_integer", "an 11-digit integer is valid and past 2^31 counts as 2^31", [cdn("max-age=99999999999")],
         stored(CAP))
    case("cdn_2_31", "2^31", [cdn("max-age=2147483648")], stored(CAP))
    case("cdn_15_digits", "RFC 8941 §3.3.1: integers have at most 15 digits", [cdn("max-age=999999999999999")],
         stored(CAP))
    for name, value, note in [
        ("invalid_syntax", "max-age=600, &&&&&", "not a dictionary"),
        ("upper_case_key", "MAX-AGE=600", "RFC 8941 §3.2: keys are lowercase"),
        ("mixed_case_key", "Max-Age=600", "RFC 8941 §3.2: keys are lowercase"),
        ("string_value", 'max-age="600"', "max-age must be an Integer, not a String"),
        ("decimal_value", "max-age=600.0", "max-age must be an Integer, not a Decimal (RFC 9213 §2.1)"),
        ("decimal_fraction", "max-age=1.5", "max-age must be an Integer, not a Decimal"),
        ("negative", "max-age=-1", "delta-seconds cannot be negative"),
        ("token_value", "max-age=abc", "max-age must be an Integer, not a Token"),
        ("bare_max_age", "max-age", "a bare key is Boolean true, not an Integer"),
        ("inner_list_known", "max-age=(600)", "max-age must be an Integer, not an inner list"),
        ("16_digits", "max-age=1000000000000000", "RFC 8941 §3.3.1: more than 15 digits is not an Integer"),
        ("flag_false", "no-store=?0, max-age=600", "RFC 9213 §2.1: no-store is always Boolean true"),
        ("flag_integer", "no-store=1, max-age=600", "no-store must be Boolean true"),
        ("immutable_integer", "immutable=1, max-age=600", "immutable must be Boolean true"),
        ("sie_string", 'max-age=600, stale-if-error="600"', "stale-if-error must be an Integer"),
        ("trailing_comma", "max-age=600,", "RFC 8941 §4.2.2: a trailing comma is an error"),
        ("space_before_equals", "max-age =600", "RFC 8941: no space between key and ="),
        ("space_after_equals", "max-age= 600", "RFC 8941: no space after ="),
        ("bad_escape", 'foo="\\x", max-age=600', "RFC 8941 §4.2.5: only \\\" and \\\\ are escapes"),
        ("date_item", "foo=@1700000000, max-age=600", "RFC 9213 is defined on RFC 8941, which has no Date type"),
        ("display_string", 'foo=%"x", max-age=600', "RFC 8941 has no Display String type"),
    ]:
        case(f"cdn_invalid_{name}", f"RFC 9213 §2.1: {note}; the field is ignored and Cache-Control governs",
             [cdn(value), ("Cache-Control", "max-age=60")], stored(60_000))
    case("cdn_semicolon_is_a_parameter", "RFC 8941 §4.2.3.2: in `max-age=600; no-store` the `no-store` is a "
         "parameter of max-age (spaces may follow ;), not a directive: the field says max-age=600 only",
         [cdn("max-age=600; no-store"), ("Cache-Control", "max-age=60")], stored(600_000))
    case("cdn_invalid_falls_back_to_no_store", "RFC 9213 §2.1: an invalid targeted field is ignored, and "
         "Cache-Control's no-store applies", [cdn("max-age=10000, &&&&&"), ("Cache-Control", "no-store")],
         refused("no-store"))
    case("cdn_wrong_type_falls_back_to_no_store", "a known directive of the wrong type makes the field invalid",
         [cdn('max-age="10000"'), ("Cache-Control", "no-store")], refused("no-store"))
    case("cdn_invalid_second_line", "one invalid line makes the combined field invalid",
         [cdn("max-age=600"), cdn("&&"), ("Cache-Control", "max-age=60")], stored(60_000))
    case("cdn_empty", "RFC 9213 §2.2: an empty targeted field is ignored", [cdn(""), ("Cache-Control", "max-age=60")],
         stored(60_000))
    case("cdn_empty_first_line", "RFC 9213 §2.1 / RFC 8941 §4.2: a field's lines are joined with commas before "
         "parsing, so an empty first line makes the dictionary invalid (`, private`) and the field is ignored",
         [cdn(""), cdn("private"), ("Cache-Control", "max-age=60")], stored(60_000))
    case("targeted_list_first_wins", "RFC 9213 §2.2: the first valid field of the target list governs",
         [("Larder-Cache-Control", "max-age=600"), cdn("max-age=60")], stored(600_000),
         rules={"targeted_fields": ["Larder-Cache-Control", "CDN-Cache-Control"]})
    case("targeted_list_first_invalid", "an invalid first field gives way to the next",
         [("Larder-Cache-Control", "max-age=1.5"), cdn("max-age=60")], stored(60_000),
         rules={"targeted_fields": ["Larder-Cache-Control", "CDN-Cache-Control"]})
    case("targeted_list_first_absent", "an absent first field gives way to the next",
         [cdn("max-age=60"), ("Cache-Control", "no-store")], stored(60_000),
         rules={"targeted_fields": ["Larder-Cache-Control", "CDN-Cache-Control"]})
    case("targeted_list_empty", "no target list: CDN-Cache-Control is an ordinary field",
         [cdn("max-age=600"), ("Cache-Control", "max-age=60")], stored(60_000), rules={"targeted_fields": []})
    case("targeted_not_on_list", "RFC 9213 §2.2: fields not on the target list change nothing",
         [cdn("no-store"), ("Cache-Control", "max-age=60")], stored(60_000),
         rules={"targeted_fields": ["Larder-Cache-Control"]})
    case("cdn_over_surrogate", "a valid targeted field comes before Surrogate-Control",
         [cdn("max-age=600"), ("Surrogate-Control", "max-age=60")], stored(600_000))
    case("cdn_invalid_then_surrogate", "an invalid targeted field gives way to Surrogate-Control",
         [cdn("max-age=1.5"), ("Surrogate-Control", "max-age=60"), ("Cache-Control", "no-store")], stored(60_000))

    area("surrogate-control")
    sc = lambda value: ("Surrogate-Control", value)
    case("surrogate_max_age", "Surrogate-Control governs before Cache-Control", [sc("max-age=600"),
         ("Cache-Control", "max-age=60")], stored(600_000))
    case("surrogate_over_cc_no_store", "Cache-Control is ignored when Surrogate-Control governs",
         [("Cache-Control", "no-store"), sc("max-age=600")], stored(600_000))
    case("surrogate_no_store", "Edge Architecture: no-store", [sc("no-store"), ("Cache-Control", "max-age=600")],
         refused("no-store"))
    case("surrogate_expires_ignored", "Expires is ignored when Surrogate-Control governs",
         [sc("max-age=600"), date0, ("Expires", at(-3600))], stored(600_000))
    case("surrogate_public_expires_ignored", "Surrogate-Control governs (public is a directive larder acts on), so "
         "Expires gives no freshness", [sc("public"), date0, ("Expires", at(3600))], refused("no-explicit-freshness"))
    case("surrogate_content_only", "spec/HTTP.md: a Surrogate-Control with no directive larder acts on (only ESI's "
         "content=) leaves Cache-Control in charge", [sc('content="ESI/1.0"'), ("Cache-Control", "max-age=60")],
         stored(60_000))
    case("surrogate_content_only_cc_no_store", "content= only: Cache-Control's no-store applies",
         [sc('content="ESI/1.0"'), ("Cache-Control", "no-store, max-age=60")], refused("no-store"))
    case("surrogate_empty", "an empty Surrogate-Control leaves Cache-Control in charge", [sc(""),
         ("Cache-Control", "max-age=60")], stored(60_000))
    case("surrogate_unknown_only", "only unknown directives: Cache-Control governs", [sc("foo, bar=1"),
         ("Cache-Control", "max-age=60")], stored(60_000))
    case("surrogate_no_store_remote", "Edge Architecture: no-store-remote is for surrogates far from the origin; "
         "larder sits beside it and ignores it (Cache-Control governs)", [sc("no-store-remote"),
                                                                           ("Cache-Control", "max-age=60")],
         stored(60_000))
    case("surrogate_no_store_remote_max_age", "no-store-remote ignored, max-age honoured",
         [sc("no-store-remote, max-age=600")], stored(600_000))
    case("surrogate_targeted_elsewhere", "Edge Architecture §3: `no-store;abc` is for the surrogate named abc; "
         "larder has no name and applies max-age=600", [sc("max-age=600, no-store;abc")], stored(600_000))
    case("surrogate_targeted_only", "every directive targeted at another surrogate: nothing for larder, "
         "Cache-Control governs", [sc("max-age=600;abc"), ("Cache-Control", "max-age=60")], stored(60_000))
    case("surrogate_max_age_extension", "Edge Architecture: max-age=600+300; larder reads the 600 s and does not "
         "implement the +300 extension", [sc("max-age=600+300")], stored(600_000, keep=0), rules=NO_STALE)
    case("surrogate_max_age_bad_extension", "`600+abc` is not max-age syntax: invalid, so 0",
         [sc("max-age=600+abc")], stored(0))
    case("surrogate_disabled", "surrogate_control off: Surrogate-Control is an ordinary field",
         [sc("max-age=600"), ("Cache-Control", "max-age=60")], stored(60_000), rules={"surrogate_control": False})
    case("surrogate_disabled_no_store", "surrogate_control off: its no-store changes nothing",
         [sc("no-store"), ("Cache-Control", "max-age=60")], stored(60_000), rules={"surrogate_control": False})
    case("surrogate_upper_case", "Cache-Control syntax: names case-insensitive", [sc("MAX-AGE=600")],
         stored(600_000))
    case("surrogate_field_name_upper_case", "field names are case-insensitive",
         [("SURROGATE-CONTROL", "max-age=600")], stored(600_000))
    case("surrogate_quoted", "Cache-Control syntax: quoted argument accepted", [sc('max-age="600"')], stored(600_000))
    case("surrogate_swr", "RFC 5861 directives in Surrogate-Control", [sc("max-age=60, stale-while-revalidate=600")],
         stored(60_000, keep=600_000), rules=NO_STALE)
    case("surrogate_private", "private in Surrogate-Control", [sc("private, max-age=600")], refused("private"))
    case("surrogate_s_maxage", "s-maxage in Surrogate-Control: no stale use", [sc("s-maxage=600")],
         stored(600_000, keep=0))
    case("surrogate_two_lines", "every line counts", [sc("max-age=600"), sc("no-store")], refused("no-store"))
    case("surrogate_duplicate", "first occurrence wins, as in Cache-Control", [sc("max-age=600, max-age=10")],
         stored(600_000))
    case("surrogate_must_understand", "must-understand in Surrogate-Control", [sc("max-age=600, no-store, "
         "must-understand")], stored(600_000))
    case("surrogate_invalid_max_age", "an invalid max-age is still max-age: Surrogate-Control governs, lifetime 0",
         [sc("max-age=abc"), ("Cache-Control", "max-age=60")], stored(0))

    area("order")
    case("order_method_before_status", "method, then status", MA60, refused("method"), method="POST", status=206)
    case("order_status_before_no_store", "status, then no-store", cc("no-store"), refused("status"), status=206)
    case("order_no_store_before_private", "no-store, then private", cc("private, no-store"), refused("no-store"))
    case("order_private_before_authorization", "private, then Authorization", cc("private, max-age=60"),
         refused("private"), request=AUTH)
    case("order_authorization_before_set_cookie", "Authorization, then Set-Cookie", MA60 + [cookie],
         refused("authorization"), request=AUTH)
    case("order_set_cookie_before_vary", "Set-Cookie, then Vary", MA60 + [cookie, ("Vary", "*")],
         refused("set-cookie"))
    case("order_vary_before_freshness", "Vary, then freshness", [("Vary", "*")], refused("vary-star"))
    case("order_must_understand_before_private", "must-understand's status check comes before private",
         cc("no-store, must-understand, private, max-age=60"), refused("status"), status=599)


# --- the file --------------------------------------------------------------------------------------------------

HEADER = {
    "schema": 1,
    "description": "Whether and how a shared cache stores a response: spec/HTTP.md, section Storage rules. Format "
                   "in spec/vectors/README.md; written by spec/vectors/storage_reference.py.",
    "rules_defaults": RULES_DEFAULTS,
}


def check_and_render():
    define_cases()
    names = set()
    problems = []
    for c in CASES:
        if c["name"] in names:
            problems.append(f"duplicate name {c['name']}")
        names.add(c["name"])
        rules = {**RULES_DEFAULTS, **c["rules"]}
        unknown = c["rules"].keys() - RULES_DEFAULTS.keys()
        if unknown:
            problems.append(f"{c['name']}: unknown rules {sorted(unknown)}")
        got = storage(rules, c["request"]["method"], c["request"]["headers"], c["response"]["status"],
                      c["response"]["headers"], c["request_time_ms"], c["response_time_ms"])
        if got != c["expected"]:
            problems.append(f"{c['name']}: written {c['expected']}, computed {got}")
    if problems:
        sys.exit("\n".join(problems))
    lines = ["{"]
    for key, value in HEADER.items():
        lines.append(f"  {json.dumps(key)}: {json.dumps(value, ensure_ascii=False)},")
    lines.append('  "cases": [')
    lines.extend(f"    {json.dumps(c, ensure_ascii=False)}," for c in CASES)
    lines[-1] = lines[-1].rstrip(",")
    lines.append("  ]")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main():
    text = check_and_render()
    path = Path(__file__).with_name("storage.json")
    if "--check" in sys.argv[1:]:
        if path.read_text(encoding="utf-8") != text:
            sys.exit(f"{path} is not what {Path(__file__).name} writes")
        print(f"{path.name}: {len(CASES)} cases, up to date")
        return
    path.write_text(text, encoding="utf-8")
    areas = {}
    for c in CASES:
        areas[c["area"]] = areas.get(c["area"], 0) + 1
    print(f"wrote {path.name}: {len(CASES)} cases")
    for name, count in areas.items():
        print(f"  {name}: {count}")


if __name__ == "__main__":
    main()
