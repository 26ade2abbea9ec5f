"""Which site a page written by an app is for (spec/HTTP.md §2), so that a request that reaches the app directly
(health checks, internal callers, a second load balancer: not through larder's front) cannot write a page the front
then serves to every visitor of another site.

The authority is the configured `site`, else the request's Host; a Host (or forwarded host) that is not a plain
`host[:port]` (userinfo, a path, a bad port…) stores nothing. `X-Forwarded-Host`, `X-Forwarded-Proto` and `Forwarded`
count only when the peer the app received the request from is in `trusted_proxies`, as `larder serve
--trusted-proxies` does; frameworks' own helpers (Django's `get_host()` with `USE_X_FORWARDED_HOST`, its `scheme` with
`SECURE_PROXY_SSL_HEADER`) believe those fields from anyone, so they are not used. When no site can be told, the
page is not stored, with the reason `host`.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

#: A host name as `larder serve` takes it: letters, digits, `-`, `.`, `_`, `~`; or a bracketed IPv6 literal.
_NAME: Final = re.compile(r"[A-Za-z0-9._~-]+")
_V6: Final = re.compile(r"\[[0-9A-Fa-f:.]+\]")
_PORT: Final = re.compile(r"[0-9]{1,5}")
_DEFAULT_PORT: Final = {"http": "80", "https": "443"}

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def plain_authority(text: str) -> bool:
    """Whether `text` is `host[:port]` as larder's front accepts a Host: a DNS-style name, an IPv4 address or a
    bracketed IPv6 literal, then optionally `:` and 1 to 5 digits up to 65535."""
    host, port = text, None
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            return False
        host, rest = text[: end + 1], text[end + 1 :]
        if rest:
            if not rest.startswith(":"):
                return False
            port = rest[1:]
        if not _V6.fullmatch(host):
            return False
    else:
        if ":" in text:
            host, _, port = text.rpartition(":")
        if not _NAME.fullmatch(host):
            return False
    return port is None or (_PORT.fullmatch(port) is not None and int(port) <= 65535)


def normalise(authority: str, scheme: str) -> str:
    """spec/FORMAT.md §5.3 step 3 for a plain authority: ASCII lowercase, the scheme's default port removed."""
    lowered = authority.lower()
    default = _DEFAULT_PORT.get(scheme)
    if default is not None and lowered.endswith(":" + default) and not lowered.endswith("]"):
        return lowered[: -len(default) - 1]
    return lowered


def parse_networks(entries: Iterable[str]) -> tuple[Network, ...]:
    """`trusted_proxies`: addresses (`192.0.2.7`) and networks (`10.0.0.0/8`, `fd00::/8`); ValueError names a bad
    one."""
    if isinstance(entries, str):
        raise TypeError("trusted_proxies must be a sequence of addresses or networks, not a single string")
    networks = []
    for entry in entries:
        try:
            networks.append(ipaddress.ip_network(str(entry).strip(), strict=False))
        except ValueError:
            raise ValueError(f"{entry!r} is not an IP address or a network such as 10.0.0.0/8") from None
    return tuple(networks)


def _peer_in(peer: str | None, networks: Sequence[Network]) -> bool:
    if not peer or not networks:
        return False
    try:
        address = ipaddress.ip_address(peer.strip().strip("[]"))
    except ValueError:
        return False  # a Unix socket, or nothing an address can be read from: not a trusted proxy
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return any(address in network for network in networks)


def _first_element(headers: Sequence[tuple[str, str]], name: str) -> str | None:
    for field, value in headers:
        if field.lower() == name:
            first = value.split(",", 1)[0].strip()
            return first or None
    return None


def _claims(headers: Sequence[tuple[str, str]]) -> tuple[str | None, str | None] | None:
    """(proto, host) a trusted proxy claims, read as the front reads them (forwarding.rs `claimed`); None when
    `Forwarded` and `X-Forwarded-*` disagree, or the protocol is neither http nor https."""
    claimed: dict[str, str | None] = {
        "proto": _first_element(headers, "x-forwarded-proto"),
        "host": _first_element(headers, "x-forwarded-host"),
    }
    forwarded = next((value for field, value in headers if field.lower() == "forwarded"), None)
    if forwarded is not None:
        for pair in forwarded.split(",", 1)[0].split(";"):
            name, sep, value = pair.partition("=")
            name = name.strip().lower()
            if not sep or name not in claimed:
                continue
            value = value.strip().strip('"')
            existing = claimed[name]
            if existing is not None and existing.lower() != value.lower():
                return None
            claimed[name] = value
    proto = claimed["proto"]
    if proto is not None:
        proto = proto.lower()
        if proto not in ("http", "https"):
            return None
    return proto, claimed["host"]


@dataclass(frozen=True)
class SiteRule:
    """The page cache's `site` and `trusted_proxies` (spec/HTTP.md §2)."""

    site: str | None = None
    trusted: tuple[Network, ...] = ()

    @classmethod
    def of(cls, site: str | None, trusted_proxies: Iterable[str]) -> SiteRule:
        if site is not None and (not isinstance(site, str) or not plain_authority(site)):
            raise ValueError(
                f"site must be a plain host[:port] such as shop.example or shop.example:8443, not {site!r}"
            )
        return cls(site, parse_networks(trusted_proxies))

    def resolve(
        self,
        *,
        peer: str | None,
        host: str | None,
        scheme: str,
        target_authority: str | None,
        headers: Sequence[tuple[str, str]],
        scheme_option: str | None = None,
    ) -> tuple[str, str] | None:
        """(scheme, normalised authority) to key the page on, or None when it must not be stored (reason `host`).
        `host` is the request's Host field (None when it has none), `scheme` the connection's, `target_authority`
        an absolute-form target's authority."""
        proto: str | None = None
        authority = host
        if _peer_in(peer, self.trusted):
            claims = _claims(headers)
            if claims is None:
                return None
            proto, claimed_host = claims
            if claimed_host is not None:
                authority = claimed_host
        if not authority or not plain_authority(authority):
            return None
        if target_authority is not None:
            # An absolute-form target is never stored, whatever its Host (spec/HTTP.md §2 step 2): RFC 9112 §3.2.2
            # has the app ignore that Host for the target's authority, which a direct sender chooses.
            return None
        scheme = scheme_option or proto or (scheme.lower() if scheme.lower() in ("http", "https") else "http")
        key_authority = normalise(authority, scheme)
        if self.site is not None and key_authority != normalise(self.site, scheme):
            return None
        return scheme, key_authority


def target_authority(target: str) -> str | None:
    """The authority of an absolute-form request target (`http://a.example/x` → `a.example`), else None."""
    if target.startswith("/") or "://" not in target:
        return None
    rest = target.partition("://")[2]
    for i, c in enumerate(rest):
        if c in "/?#":
            return rest[:i]
    return rest
