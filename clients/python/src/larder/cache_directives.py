"""Cache directives as larder reads them (spec/HTTP.md §1.4): `Cache-Control` (RFC 9111 §5.2, also a request's),
`Surrogate-Control` (the W3C Edge Architecture) and targeted fields such as `CDN-Cache-Control` (RFC 9213).

- Cache-Control syntax: comma-separated elements (commas inside quoted strings do not split), `name` or
  `name=argument`, names in any case, a quoted argument unquoted; the first occurrence of a directive wins, even
  with an invalid argument. A delta-seconds argument that is not digits counts as 0.
- Surrogate-Control: the same, but `directive;name` is for a named surrogate and skipped, `max-age=N+M` reads as N,
  and the field counts only when it holds a directive larder acts on (`parse_surrogate_control` answers None).
- Targeted fields: an RFC 8941 Dictionary with typed values; None when absent, empty or invalid (wrong syntax, or a
  directive larder knows with a value of the wrong type), and then the next field governs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from .structured_fields import InvalidField, parse_dictionary

#: Largest delta-seconds value (RFC 9111 §1.2.2); anything larger counts as this.
MAX_DELTA_SECONDS: Final = 1 << 31
#: The flag directives larder acts on.
FLAGS: Final = ("no-store", "no-cache", "private", "public", "must-revalidate", "proxy-revalidate", "must-understand")
#: The delta-seconds directives larder acts on.
NUMBERS: Final = ("max-age", "s-maxage", "stale-while-revalidate", "stale-if-error")
#: Directives whose presence makes Surrogate-Control govern (spec/HTTP.md §1.4.3).
ACTED_ON: Final = frozenset(FLAGS + NUMBERS)
_SURROGATE_MAX_AGE: Final = re.compile(r"([0-9]+)\+[0-9]+")
_DIGITS: Final = re.compile(r"[0-9]+")
_ASCII_LOWER: Final = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}


@dataclass
class Directives:
    """The cache directives larder acts on; a number is None when absent (an invalid one is 0)."""

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

    def apply(self, name: str, argument: str | None) -> None:
        """Sets the directive `name` (lowercase); flags whatever their argument, numbers as delta-seconds."""
        attribute = name.replace("-", "_")
        if name in FLAGS:
            setattr(self, attribute, True)
        elif name in NUMBERS:
            seconds = delta_seconds(argument)
            setattr(self, attribute, 0 if seconds is None else seconds)


def delta_seconds(argument: str | None) -> int | None:
    """delta-seconds: one or more ASCII digits, past 2^31 counting as 2^31; None for anything else."""
    if argument is None or not _DIGITS.fullmatch(argument):
        return None
    return min(int(argument), MAX_DELTA_SECONDS)


def parse_cache_control(lines: Sequence[str]) -> Directives:
    """The directives of every line of a Cache-Control field (a response's or a request's)."""
    directives = Directives()
    seen: set[str] = set()
    for line in lines:
        for element in _elements(line):
            found = _directive(element)
            if found is not None and found[0] not in seen:
                seen.add(found[0])
                directives.apply(*found)
    return directives


def parse_surrogate_control(lines: Sequence[str]) -> Directives | None:
    """The directives of a Surrogate-Control field, or None when, after skipping the elements targeted at a named
    surrogate, it holds none that larder acts on (then Cache-Control governs)."""
    directives = Directives()
    seen: set[str] = set()
    for line in lines:
        for element in _elements(line):
            if _has_unquoted_semicolon(element):
                continue
            found = _directive(element)
            if found is None or found[0] in seen:
                continue
            name, argument = found
            seen.add(name)
            if name == "max-age" and argument is not None:
                extended = _SURROGATE_MAX_AGE.fullmatch(argument)
                argument = extended.group(1) if extended else argument
            directives.apply(name, argument)
    return directives if seen & ACTED_ON else None


def parse_targeted(lines: Sequence[str]) -> Directives | None:
    """The directives of a targeted field such as CDN-Cache-Control, or None when it is absent, empty or
    invalid."""
    if not lines:
        return None
    try:
        members = parse_dictionary(", ".join(lines))
    except InvalidField:
        return None
    if not members:
        return None
    directives = Directives()
    for key, value in members.items():
        if key in NUMBERS:
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                return None
            setattr(directives, key.replace("-", "_"), min(value, MAX_DELTA_SECONDS))
        elif key in FLAGS or key == "immutable":
            # no-cache and private may carry a field-name list (a String): read as unqualified.
            list_allowed = key in ("no-cache", "private") and type(value) is str
            if value is not True and not list_allowed:
                return None
            directives.apply(key, None)
        # Any other key is an extension larder does not know: ignored whatever its value.
    return directives


def _elements(line: str) -> list[str]:
    """The elements of one line of a comma-separated list (RFC 9110 §5.6.1): commas inside quoted strings do not
    split (an unterminated one runs to the end), empty elements and spaces and tabs around them dropped."""
    out: list[str] = []
    current: list[str] = []
    quoted = escaped = False
    for c in line:
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
            out.append("".join(current))
            current = []
        else:
            current.append(c)
    out.append("".join(current))
    return [stripped for element in out if (stripped := element.strip(" \t"))]


def _directive(element: str) -> tuple[str, str | None] | None:
    """(lowercase name, argument) of an element, split at its first `=`; None when the name is empty or has a
    space or tab in it (`max-age =60` is not max-age)."""
    name, equals, argument = element.partition("=")
    if not name or " " in name or "\t" in name:
        return None
    return name.translate(_ASCII_LOWER), (_unquote(argument) if equals else None)


def _unquote(argument: str) -> str:
    """A quoted argument's content with quoted-pairs resolved (a lone final backslash dropped); any other argument
    as written."""
    if len(argument) < 2 or argument[0] != '"' or argument[-1] != '"':
        return argument
    out: list[str] = []
    chars = iter(argument[1:-1])
    for c in chars:
        out.append(next(chars, "") if c == "\\" else c)
    return "".join(out)


def _has_unquoted_semicolon(element: str) -> bool:
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
