"""Keys every language derives identically (spec/FORMAT.md §5), so an entry written by one is found by another.

`safe_key` fits memcached's rules (at most 250 bytes, no spaces or control characters) by hashing what does not fit,
keeping a readable prefix; `namespaced_key` prefixes a namespace; `http_key` and `url_key` turn a request into a key
with the query sorted and tracking parameters dropped; for varying pages and other codings, the helpers every
language offers with the same names and arguments (FORMAT.md §5.5): `selecting_values`, `variant_key`,
`alternate_key` and `url_keys`. Lengths and comparisons are over UTF-8 bytes, and case changes are ASCII-only,
exactly as the spec says: no Unicode case folding, no percent-decoding.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from .response import CONTENT_ENCODINGS

#: memcached's key length limit.
MAX_KEY_LEN: Final = 250
#: Longest readable prefix kept in a hashed key.
HASHED_PREFIX_LEN: Final = 180
#: Query parameters dropped from HTTP keys unless told otherwise.
DEFAULT_DROP: Final = ("utm_*", "gclid", "fbclid", "msclkid")

#: A request's header lines: (name, value) pairs in order, duplicates kept; a value is text, or the bytes received.
RequestHeaders = Sequence[tuple[str, str | bytes]]

#: The bytes memcached refuses in a key: controls, space and DEL.
_UNSAFE_BYTES: Final = re.compile(b"[\x00-\x20\x7f]")
_ASCII_UPPER: Final = {c: c - 32 for c in range(ord("a"), ord("z") + 1)}
_ASCII_LOWER: Final = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}


def safe_key(key: str) -> str:
    """`key` unchanged if memcached accepts it, else its readable prefix, `#`, and the SHA-256 of the whole key."""
    if key.isascii() and len(key) <= MAX_KEY_LEN and key.isprintable() and " " not in key:
        return key  # the common case, without encoding: printable ASCII (0x20-0x7E) but the space is safe as it is
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


def selecting_values(names: Sequence[str], request_headers: RequestHeaders) -> str:
    """The selecting values of a request for the `Vary` names of a marker (spec/FORMAT.md §5.4): per name, in order,
    `name:` and the elements of every line of that header (split on `,`, trimmed of spaces and tabs, joined with
    `,`) and a newline, or `name`, NUL, `absent` and a newline when the request lacks it.

    `request_headers` are the request's (name, value) lines in order; names compare case-insensitively (ASCII). A
    value given as bytes is read as UTF-8, each invalid sequence replaced by U+FFFD, as every language does.
    """
    out = []
    for name in names:
        wanted = _ascii_lower(name)
        lines = [_text(value) for n, value in request_headers if _ascii_lower(n) == wanted]
        if not lines:
            out.append(name + "\u0000absent\n")
            continue
        elements = [element.strip(" \t") for line in lines for element in line.split(",")]
        out.append(name + ":" + ",".join(elements) + "\n")
    return "".join(out)


def variant_key(base_key: str, marker: Mapping[str, Any], request_headers: RequestHeaders) -> str:
    """The key of the variant of `base_key` that a request with `request_headers` selects under `marker`, the map
    a base key holds for a varying response (spec/FORMAT.md §5.4): `{"vary": [names], "generation": G}`, where a
    marker without `generation` (an older writer's) keys its variants without one.

    Raises ValueError for a marker that is not such a map.
    """
    vary, generation = _marker_fields(marker)
    selecting = selecting_values(vary, request_headers)
    if generation is None:
        return safe_key(f"{base_key}\n{selecting}")
    return safe_key(f"{base_key}\n\u0000generation:{generation}\n{selecting}")


def _marker_fields(marker: Mapping[str, Any]) -> tuple[list[str], str | None]:
    """A marker's `vary` names and `generation` (None when it has none); ValueError when it is not a marker."""
    if not isinstance(marker, Mapping):
        raise ValueError(f"a Vary marker is a map, not {type(marker).__name__}")
    vary, generation = marker.get("vary"), marker.get("generation")
    if not isinstance(vary, list) or not all(isinstance(name, str) for name in vary):
        raise ValueError(f"a Vary marker's vary is a list of header names, not {vary!r}")
    if generation is not None and not isinstance(generation, str):
        raise ValueError(f"a Vary marker's generation is a str, not {generation!r}")
    return vary, generation


def alternate_key(entry_key: str, coding: str) -> str:
    """The key a response stored under `entry_key` is kept under in another coding (spec/FORMAT.md §5.5): `coding`
    is identity, gzip, br or zstd (ValueError otherwise)."""
    if coding not in CONTENT_ENCODINGS:
        raise ValueError(f"coding is one of {', '.join(CONTENT_ENCODINGS)}, not {coding!r}")
    return safe_key(f"{entry_key}\n\u0000coding:{coding}")


def url_keys(base_key: str) -> list[str]:
    """`base_key` and its four alternates (identity, gzip, br, zstd): what a URL purge removes (spec/FORMAT.md
    §5.5). Removing a base key that holds a Vary marker makes every variant under it unreachable."""
    return [base_key, *(alternate_key(base_key, coding) for coding in CONTENT_ENCODINGS)]


def _text(value: str | bytes) -> str:
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else value


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
