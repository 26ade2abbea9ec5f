"""Key derivation details the vectors do not pin down on their own: byte lengths, ASCII-only case changes."""

from __future__ import annotations

import hashlib

import pytest

import larder


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
