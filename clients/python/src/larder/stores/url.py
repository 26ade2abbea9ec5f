"""Store URLs (spec/STORES.md §1): one string names a store the same way in every language.

`scheme://[user[:password]@]host[:port][,host[:port]…][/path][?options]`. Each backend takes the options it knows;
any option left over is an error that names it and lists the known ones, so a typo never silently falls back to a
default. Mirrors `larder-store`'s url.rs and size.rs, messages included.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import unquote_to_bytes

from .base import UrlError

_SIZE_SHIFTS = {"": 0, "K": 10, "M": 20, "G": 30, "T": 40}
_DURATION_UNITS = {"": 1, "ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}
# Digits (at most 12, as the Rust parser takes), then at most one unit; no sign, fraction, space or second unit.
_DURATION = re.compile(r"([0-9]{1,12})([a-z]*)")


def parse_size(text: str) -> int:
    """`1048576`, `512K`, `256M`, `1.5G`, `2GiB` (binary multiples; case and a trailing B/iB do not matter)."""
    trimmed = text.strip()
    if trimmed.startswith("-"):
        raise ValueError(f"{text!r}: a size cannot be negative")
    split = len(trimmed)
    for i, c in enumerate(trimmed):
        if not (c.isascii() and (c.isdigit() or c == ".")):
            split = i
            break
    number, suffix = trimmed[:split], trimmed[split:].strip().upper()
    if suffix.endswith("IB"):
        suffix = suffix[:-2]
    elif suffix.endswith("B"):
        suffix = suffix[:-1]
    if suffix not in _SIZE_SHIFTS:
        raise ValueError(f"{text!r}: unknown size suffix {suffix!r} (use K, M, G or T)")
    match = re.fullmatch(r"([0-9]*)(?:\.([0-9]*))?", number)
    if match is None or not (match.group(1) or match.group(2)):
        raise ValueError(f"{text!r} is not a size (examples: 1048576, 512K, 256M, 1.5G)")
    whole, fraction = match.group(1), match.group(2) or ""
    multiplier = 1 << _SIZE_SHIFTS[suffix]
    size = int(whole or "0") * multiplier
    if fraction:
        digits = fraction[:18]
        size += int(digits) * multiplier // 10 ** len(digits)
    if size >= 1 << 64:
        raise ValueError(f"{text!r} is too large")
    return size


def parse_duration_ms(text: str) -> int:
    """Milliseconds from a bare number of milliseconds (`250`) or a number with exactly one of the units `ms`, `s`,
    `m`, `h` (`250ms`, `2s`, `1m`, `1h`); nothing else (spec/STORES.md §1, as url.rs parses it)."""
    match = _DURATION.fullmatch(text)
    unit = _DURATION_UNITS.get(match.group(2)) if match else None
    if match is None or unit is None:
        raise ValueError("a number with ms, s, m or h")
    return int(match.group(1)) * unit


@dataclass(frozen=True)
class HostPort:
    """One `host[:port]` of a URL's host list; `host` has no brackets for IPv6."""

    host: str
    port: int | None

    def address(self, default_port: int) -> str:
        """`host:port` (brackets around IPv6), with `default_port` when none was given."""
        port = self.port if self.port is not None else default_port
        return f"[{self.host}]:{port}" if ":" in self.host else f"{self.host}:{port}"


@dataclass
class StoreUrl:
    """A parsed store URL. Take the options a backend knows with the `take_*` methods, then call `finish()`."""

    scheme: str
    username: str | None
    password: str | None
    hosts: list[HostPort]
    path: str
    shown: str
    options: list[tuple[str, str]] = field(default_factory=list)
    known: set[str] = field(default_factory=set)

    @classmethod
    def parse(cls, url: str) -> StoreUrl:
        shown = redact(url)
        scheme, sep, rest = url.partition("://")
        if not sep:
            raise UrlError(shown, "not a store URL: expected scheme://… (for example memcached://127.0.0.1:11211)")
        scheme = scheme.lower()
        if not scheme or not all(c.isascii() and (c.isalnum() or c == "+") for c in scheme):
            raise UrlError(shown, f"{scheme!r} is not a URL scheme")
        rest, _, query = rest.partition("?")
        if "#" in rest or "#" in query:
            raise UrlError(shown, "a store URL has no fragment (#)")
        slash = rest.find("/")
        authority, path = (rest, "") if slash == -1 else (rest[:slash], rest[slash:])
        userinfo, at, host_list = authority.rpartition("@")
        username = password = None
        if at:
            user, colon, pw = userinfo.partition(":")
            username = _decode(shown, user) or None
            password = _decode(shown, pw) if colon else None
        hosts = [_parse_host(shown, part) for part in host_list.split(",")] if host_list else []
        options: list[tuple[str, str]] = []
        for pair in query.split("&"):
            if not pair:
                continue
            name, _, value = pair.partition("=")
            name, value = _decode(shown, name), _decode(shown, value)
            if any(n == name for n, _ in options):
                raise UrlError(shown, f"option {name!r} is given twice")
            options.append((name, value))
        return cls(scheme, username, password, hosts, _decode(shown, path), shown, options)

    def error(self, message: str) -> UrlError:
        return UrlError(self.shown, message)

    def take(self, name: str) -> str | None:
        self.known.add(name)
        for i, (n, value) in enumerate(self.options):
            if n == name:
                del self.options[i]
                return value
        return None

    def take_duration_ms(self, name: str, default_ms: int) -> int:
        text = self.take(name)
        if text is None:
            return default_ms
        try:
            return parse_duration_ms(text)
        except ValueError as e:
            raise self.error(f"option {name}={text!r} is not a duration ({e})") from None

    def take_size(self, name: str, default: int) -> int:
        text = self.take(name)
        if text is None:
            return default
        try:
            return parse_size(text)
        except ValueError as e:
            raise self.error(f"option {name}: {e}") from None

    def take_number(self, name: str, default: int, low: int, high: int) -> int:
        text = self.take(name)
        if text is None:
            return default
        if text.isascii() and text.isdigit() and low <= int(text) <= high:
            return int(text)
        raise self.error(f"option {name}={text!r} must be a whole number from {low} to {high}")

    def take_bool(self, name: str, default: bool) -> bool:
        text = self.take(name)
        if text is None:
            return default
        if text in ("true", "1", "yes"):
            return True
        if text in ("false", "0", "no"):
            return False
        raise self.error(f"option {name}={text!r} must be true or false")

    def finish(self) -> None:
        """Refuses options no backend took, naming the known ones. Call after taking every option."""
        if not self.options:
            return
        unknown = [n for n, _ in self.options]
        known = ", ".join(sorted(self.known)) or "none"
        plural = "" if len(unknown) == 1 else "s"
        raise self.error(f"unknown option{plural} {', '.join(unknown)} for {self.scheme}:// (known: {known})")

    def no_hosts(self) -> None:
        if self.hosts or self.username is not None:
            raise self.error(f"{self.scheme}:// takes a path, not a host (write {self.scheme}:///path)")

    def require_hosts(self) -> list[HostPort]:
        if not self.hosts:
            raise self.error(f"{self.scheme}:// needs at least one host")
        return self.hosts


def _decode(shown: str, text: str) -> str:
    try:
        return unquote_to_bytes(text).decode("utf-8")
    except UnicodeDecodeError:
        raise UrlError(shown, f"{text!r} is not UTF-8 once decoded") from None


def _parse_host(shown: str, part: str) -> HostPort:
    invalid = UrlError(shown, f"{part!r} is not host[:port]")
    port_text: str | None
    if part.startswith("["):
        host, bracket, after = part[1:].partition("]")
        if not bracket:
            raise invalid
        if after and not after.startswith(":"):
            raise invalid
        port_text = after[1:] if after else None
    elif ":" in part:
        host, _, port_text = part.rpartition(":")
        if ":" in host:
            raise UrlError(shown, f"{part!r}: write an IPv6 address in brackets, [::1]:11211")
    else:
        host, port_text = part, None
    if not host or any(c.isspace() or c in "/?#@" for c in host):
        raise invalid
    port = None
    if port_text is not None:
        if not (port_text.isascii() and port_text.isdigit()) or not 1 <= int(port_text) <= 65535:
            raise UrlError(shown, f"{part!r}: port must be 1-65535")
        port = int(port_text)
    return HostPort(host, port)


def redact(url: str) -> str:
    """The URL with any password replaced by `***`, for messages and logs."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    end = len(rest)
    for stop in "/?":
        found = rest.find(stop)
        if found != -1:
            end = min(end, found)
    userinfo, at, hosts = rest[:end].rpartition("@")
    if at and ":" in userinfo:
        return f"{scheme}://{userinfo.partition(':')[0]}:***@{hosts}{rest[end:]}"
    return url
