"""Key derivation details the vectors do not pin down on their own: byte lengths, ASCII-only case changes, and the
variant and alternate key helpers' interface (header names in any case, absent vs empty, markers checked)."""

from __future__ import annotations

import hashlib

import pytest

import larder
from larder.keys import alternate_key, selecting_values, url_keys, variant_key


def test_safe_key_counts_utf8_bytes_not_characters() -> None:
    fits = "é" * 125  # 250 bytes
    assert larder.safe_key(fits) == fits
    too_long = "é" * 126  # 126 characters, 252 bytes
    assert larder.safe_key(too_long) == "#" + hashlib.sha256(too_long.encode()).hexdigest()


def test_safe_key_prefix_is_cut_at_180_bytes_and_the_result_stays_short() -> None:
    key = "k" * 300
    safe = larder.safe_key(key)
    assert safe == "k" * 180 + "#" + hashlib.sha256(key.encode()).hexdigest()
    assert len(safe) == 245


@pytest.mark.parametrize("bad", ["a\x00b", "a\x1fb", "a\x7fb", "a b", "a\nb"])
def test_control_characters_and_spaces_are_hashed(bad: str) -> None:
    assert larder.safe_key(bad) == "a#" + hashlib.sha256(bad.encode()).hexdigest()


def test_case_changes_are_ascii_only() -> None:
    # Unicode case mapping would turn "ß" into "SS" and "É" into "é"; the spec says ASCII only
    assert larder.http_key("geß", "HTTP", "ÉCOLE.example", "/") == "GEß:http://École.example/"


def test_http_key_from_parts() -> None:
    key = larder.http_key(
        "get", "https", "user@Shop.Example:443", "/p/42?utm_source=x&b=2&a=1#top", namespace="www", drop=["b"]
    )
    assert key == "www:GET:https://shop.example/p/42?a=1&utm_source=x"


def test_url_without_scheme_separator_is_an_error() -> None:
    with pytest.raises(ValueError, match="://"):
        larder.url_key("GET", "example.com/path")
    with pytest.raises(TypeError):
        larder.url_key("GET", "http://a/?x=1", drop="x")


# --- variant and alternate keys (FORMAT.md §5.4-5.5): the helpers every language offers -------------------------


def test_variant_keys_follow_the_marker_and_the_request_headers() -> None:
    base = "GET:http://shop.example/p"
    headers = [("Accept-Language", " de , fr"), ("X-Other", "1"), ("accept-language", "en")]
    assert selecting_values(["accept-language", "cookie"], headers) == "accept-language:de,fr,en\ncookie\x00absent\n"
    marker = {"vary": ["accept-language", "cookie"], "generation": "00ff"}
    selecting = selecting_values(["accept-language", "cookie"], headers)
    assert variant_key(base, marker, headers) == larder.safe_key(f"{base}\n\x00generation:00ff\n{selecting}")
    older = {"vary": ["accept-language", "cookie"]}  # a marker without a generation (older writers)
    assert variant_key(base, older, headers) == larder.safe_key(f"{base}\n{selecting}")
    lowercase = [(name.lower(), value) for name, value in headers]
    assert variant_key(base, marker, lowercase) == variant_key(base, marker, headers), "names in any case"
    assert variant_key(base, marker, []) != variant_key(base, marker, [("Cookie", "")]), "absent is not empty"


@pytest.mark.parametrize(
    "marker", [{"vary": "accept"}, {"vary": [1]}, {"generation": "x"}, {"vary": [], "generation": 7}, ["accept"]]
)
def test_a_marker_that_is_not_one_is_refused(marker: object) -> None:
    with pytest.raises(ValueError, match="marker"):
        variant_key("GET:http://x/", marker, [])  # type: ignore[arg-type]


def test_url_keys_are_the_base_key_and_its_four_alternates() -> None:
    base = "www:GET:http://shop.example/p"
    assert url_keys(base) == [base, *(alternate_key(base, c) for c in ("identity", "gzip", "br", "zstd"))]
    assert alternate_key(base, "gzip") == larder.safe_key(f"{base}\n\x00coding:gzip")
    with pytest.raises(ValueError, match="coding"):
        alternate_key(base, "deflate")


def test_header_values_are_bytes_read_as_utf8_with_replacement() -> None:
    """FORMAT.md §5.4: a value that is not UTF-8 enters the selecting values with each invalid sequence replaced
    by U+FFFD, as Rust's from_utf8_lossy does; UTF-8 bytes select as the text they encode."""
    assert selecting_values(["x"], [("X", "é".encode())]) == selecting_values(["x"], [("X", "é")]) == "x:é\n"
    assert selecting_values(["x"], [("X", b"a\xffb\xc3")]) == "x:a\ufffdb\ufffd\n"
