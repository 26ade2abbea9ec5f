"""RFC 8941 Structured Field Dictionaries, the syntax of targeted cache fields such as `CDN-Cache-Control` (RFC
9213, spec/HTTP.md §1.4.2).

A strict parser of the version RFC 9213 is defined on (RFC 8941: no Date `@…` or Display String `%"…"` items):
`parse_dictionary` answers the members, key to value, or raises `InvalidField`. Parameters are parsed (a syntax error
in one fails the field) and dropped, since no cache directive uses them. A repeated key keeps its last value.

Bare item types: Integer (`int`), Decimal (`SfDecimal`, its text), String (`str`), Token (`Token`), Byte Sequence
(`bytes`), Boolean (`bool`); an Inner List is an `InnerList` of bare items.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Final

_KEY: Final = re.compile(r"[a-z*][a-z0-9_\-.*]*")
_TOKEN: Final = re.compile(r"[A-Za-z*][!#$%&'*+\-.^_`|~0-9A-Za-z:/]*")
_INTEGER_OR_DECIMAL: Final = re.compile(r"-?([0-9]+)(\.[0-9]*)?")
_BYTES: Final = re.compile(r":([A-Za-z0-9+/=]*):")


class InvalidField(ValueError):
    """The field is not an RFC 8941 Dictionary."""


class Token(str):
    """An RFC 8941 Token (a str that is not a String)."""

    __slots__ = ()


class SfDecimal(str):
    """An RFC 8941 Decimal, kept as its text (no cache directive takes one)."""

    __slots__ = ()


class InnerList(tuple):  # type: ignore[type-arg]
    """An RFC 8941 Inner List of bare items."""

    __slots__ = ()


#: A member's value.
Value = int | bool | str | bytes | InnerList


def parse_dictionary(text: str) -> dict[str, Value]:
    """The members of a Dictionary field value (its lines joined with ", "); raises `InvalidField`."""
    if any(not (" " <= c <= "~" or c == "\t") for c in text):
        raise InvalidField("not visible ASCII")
    return _Parser(text).dictionary()


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.at = 0

    def peek(self) -> str:
        return self.text[self.at] if self.at < len(self.text) else ""

    def skip(self, chars: str) -> None:
        while self.at < len(self.text) and self.text[self.at] in chars:
            self.at += 1

    def dictionary(self) -> dict[str, Value]:
        self.skip(" ")
        members: dict[str, Value] = {}
        while self.at < len(self.text):
            key = self.key()
            if self.peek() == "=":
                self.at += 1
                value = self.item_or_inner_list()
            else:
                value = True
                self.parameters()
            members[key] = value  # a repeated key: the last value wins
            self.skip(" \t")
            if self.at >= len(self.text):
                break
            if self.peek() != ",":
                raise InvalidField(f"expected a comma at {self.at}")
            self.at += 1
            self.skip(" \t")
            if self.at >= len(self.text):
                raise InvalidField("a trailing comma")
        return members

    def key(self) -> str:
        found = _KEY.match(self.text, self.at)
        if not found:
            raise InvalidField(f"expected a key at {self.at}")
        self.at = found.end()
        return found.group()

    def item_or_inner_list(self) -> Value:
        if self.peek() != "(":
            value = self.bare_item()
            self.parameters()
            return value
        self.at += 1
        items: list[Value] = []
        while True:
            self.skip(" ")
            if self.peek() == ")":
                self.at += 1
                self.parameters()
                return InnerList(items)
            items.append(self.bare_item())
            self.parameters()
            if self.peek() not in (" ", ")"):
                raise InvalidField(f"an inner list needs a space or ')' at {self.at}")

    def parameters(self) -> None:
        while self.peek() == ";":
            self.at += 1
            self.skip(" ")
            self.key()
            if self.peek() == "=":
                self.at += 1
                self.bare_item()

    def bare_item(self) -> Value:
        c = self.peek()
        if c and c in "-0123456789":
            return self.number()
        if c == '"':
            return self.string()
        if c == ":":
            return self.byte_sequence()
        if c == "?":
            return self.boolean()
        found = _TOKEN.match(self.text, self.at)
        if not found:
            raise InvalidField(f"no item at {self.at}")  # among others: Date (@) and Display String (%)
        self.at = found.end()
        return Token(found.group())

    def number(self) -> int | SfDecimal:
        found = _INTEGER_OR_DECIMAL.match(self.text, self.at)
        if not found:
            raise InvalidField(f"expected a digit at {self.at}")
        whole, fraction = found.group(1), found.group(2)
        if fraction is None:
            if len(whole) > 15:
                raise InvalidField("an integer of more than 15 digits")
            self.at = found.end()
            return int(found.group())
        if len(whole) > 12 or not 2 <= len(fraction) <= 4:
            raise InvalidField("a decimal of more than 12 digits, or without 1-3 after the point")
        self.at = found.end()
        return SfDecimal(found.group())

    def string(self) -> str:
        self.at += 1
        out = []
        while self.at < len(self.text):
            c = self.text[self.at]
            self.at += 1
            if c == "\\":
                escaped = self.peek()
                if escaped not in ('"', "\\") or not escaped:
                    raise InvalidField('an escape other than \\" or \\\\')
                out.append(escaped)
                self.at += 1
            elif c == '"':
                return "".join(out)
            elif c == "\t":
                raise InvalidField("a tab in a string")
            else:
                out.append(c)
        raise InvalidField("an unterminated string")

    def byte_sequence(self) -> bytes:
        found = _BYTES.match(self.text, self.at)
        if not found:
            raise InvalidField(f"a byte sequence with a character outside base64, or unterminated, at {self.at}")
        self.at = found.end()
        return _base64(found.group(1))

    def boolean(self) -> bool:
        value = self.text[self.at + 1 : self.at + 2]
        if value not in ("0", "1"):
            raise InvalidField(f"a boolean is ?0 or ?1, at {self.at}")
        self.at += 2
        return value == "1"


def _base64(content: str) -> bytes:
    """Base64 with all, some or none of its padding (RFC 8941 §4.2.7: parsers should not fail without it; as the
    front's parser, sfv, reads it), but never with `=` inside, more `=` than the length needs, or a length no
    encoding has."""
    data = content.rstrip("=")
    padding = len(content) - len(data)
    if "=" in data or len(data) % 4 == 1 or padding > -len(data) % 4:
        raise InvalidField("not base64")
    try:
        return base64.b64decode(data + "=" * (-len(data) % 4), validate=True)
    except binascii.Error as e:
        raise InvalidField("not base64") from e
