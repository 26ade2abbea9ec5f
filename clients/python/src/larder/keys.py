"""Keys every language derives identically (spec/FORMAT.md §5), so an entry written by one is found by another.

`safe_key` fits memcached's rules (at most 250 bytes, no spaces or control characters) by hashing what does not fit,
keeping a readable prefix; `namespaced_key` prefixes a namespace; `http_key` and `url_key` turn a request into a key
with the query sorted and tracking parameters dropped. Lengths and comparisons are over UTF-8 bytes, and case
changes are ASCII-only, exactly as the spec says: no Unicode case folding, no percent-decoding.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from typing import Final

#: memcached's key length limit.
MAX_KEY_LEN: Final = 250
#: Longest readable prefix kept in a hashed key.
HASHED_PREFIX_LEN: Final = 180
#: Query parameters dropped from HTTP keys unless told otherwise.
DEFAULT_DROP: Final = ("utm_*", "gclid", "fbclid", "msclkid")

#: The bytes memcached refuses in a key: controls, space and DEL.
_UNSAFE: Final = re.compile("[\x00-\x20\x7f]")
_UNSAFE_BYTES: Final = re.compile(b"[\x00-\x20\x7f]")
_ASCII_UPPER: Final = {c: c - 32 for c in range(ord("a"), ord("z") + 1)}
_ASCII_LOWER: Final = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}


def safe_key(key: str) -> str:
    """`key` unchanged if memcached accepts it, else its readable prefix, `#`, and the SHA-256 of the whole key."""
    if len(key) <= MAX_KEY_LEN and key.isascii() and not _UNSAFE.search(key):
        return key  # the common case, without encoding: an ASCII str is its own UTF-8
    raw = key.encode("utf-8")
    if len(raw) <= MAX_KEY_LEN and not _UNSAFE_BYTES.search(raw):
        return key
    prefix_len = 0
    for b in raw[:HASHED_PREFIX_LEN]:
        if not 0x21 <= b <= 0x7E:
            break
        prefix_len += 1
    return raw[:prefix_len].decode("ascii") + "#" + hashlib.sha256(raw).hexdigest()


def namespaced_key(namespace: str, key: str) -> str:
    """`namespace:key` (just `key` when the namespace is empty), made safe."""
    return safe_key(f"{namespace}:{key}" if namespace else key)


def http_key(
    method: str,
    scheme: str,
    authority: str,
    path_and_query: str,
    *,
    namespace: str = "",
    drop: Sequence[str] = DEFAULT_DROP,
) -> str:
    """The key of a request, from its parts as a server sees them (spec/FORMAT.md §5.3).

    `drop` lists query parameter names to leave out; a pattern ending in `*` matches names starting with the rest.
    """
    if isinstance(drop, str):
        raise TypeError("drop must be a sequence of patterns, not a single string")
    scheme = _ascii_lower(scheme)
    base = f"{_ascii_upper(method)}:{scheme}://{_normalize_authority(scheme, authority)}"
    without_fragment = path_and_query.split("#", 1)[0]
    path, _, query = without_fragment.partition("?")
    base += path or "/"
    parts = [part for part in query.split("&") if part and not _dropped(_param_name(part), drop)]
    parts.sort(key=_param_name)  # stable: parts with the same name keep their order
    if parts:
        base += "?" + "&".join(parts)
    return namespaced_key(namespace, base)


def url_key(method: str, url: str, *, namespace: str = "", drop: Sequence[str] = DEFAULT_DROP) -> str:
    """The key of a request given as a URL text, `scheme://authority/path?query`. Raises ValueError without `://`."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise ValueError(f'not an absolute URL (no "://"): {url!r}')
    end = len(rest)
    for stop in "/?#":
        found = rest.find(stop)
        if found != -1:
            end = min(end, found)
    return http_key(method, scheme, rest[:end], rest[end:], namespace=namespace, drop=drop)


def selecting_values(names: Sequence[str], request_values: Callable[[str], Sequence[str]]) -> str:
    """The selecting values of a request for the `Vary` names of a marker (spec/FORMAT.md §5.4).

    `request_values(name)` gives the request's lines of header `name` (empty when it lacks the header).
    """
    out = []
    for name in names:
        lines = request_values(name)
        if not lines:
            out.append(name + "\u0000absent\n")
            continue
        elements = [element.strip(" \t") for line in lines for element in line.split(",")]
        out.append(name + ":" + ",".join(elements) + "\n")
    return "".join(out)


def variant_key(base_key: str, generation: str | None, selecting: str) -> str:
    """The key a variant of `base_key` is stored under (spec/FORMAT.md §5.4); `generation` None for a marker
    written without one (older writers)."""
    if generation is None:
        return safe_key(f"{base_key}\n{selecting}")
    return safe_key(f"{base_key}\n\u0000generation:{generation}\n{selecting}")


def alternate_key(entry_key: str, coding: str) -> str:
    """The key a response stored under `entry_key` is kept under in another coding (spec/FORMAT.md §5.5)."""
    return safe_key(f"{entry_key}\n\u0000coding:{coding}")


def _param_name(part: str) -> str:
    return part.split("=", 1)[0]


def _dropped(name: str, patterns: Sequence[str]) -> bool:
    for pattern in patterns:
        if pattern.endswith("*"):
            if name.startswith(pattern[:-1]):
                return True
        elif name == pattern:
            return True
    return False


def _normalize_authority(scheme: str, authority: str) -> str:
    host = _ascii_lower(authority.rpartition("@")[2])
    if host.endswith(":"):
        return host[:-1]
    default_port = {"http": ":80", "https": ":443"}.get(scheme)
    if default_port and host.endswith(default_port):
        return host[: -len(default_port)]
    return host


def _ascii_upper(text: str) -> str:
    return text.translate(_ASCII_UPPER)


def _ascii_lower(text: str) -> str:
    return text.translate(_ASCII_LOWER)
