"""The parts of spec/STORES.md beside its vectors (ring.json and stores.json run case by case in
tests/test_vectors.py): store URLs (§1: options parsed, unknown and repeated options refused, passwords hidden),
durations and sizes, memcached expiry times and counters."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from larder.stores import UrlError, open_store
from larder.stores.base import memcached_exptime, parse_counter
from larder.stores.url import StoreUrl, parse_duration_ms, parse_size

VECTORS = Path(__file__).resolve().parents[3] / "spec" / "vectors"


def load(name: str) -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = json.loads((VECTORS / name).read_text(encoding="utf-8"))["cases"]
    return cases


def test_the_vectors_hold_refused_and_accepted_keys() -> None:
    kinds = [c["kind"] for c in load("stores.json")]
    assert kinds.count("refused") >= 5
    assert kinds.count("accepted") >= 2


def test_urls_parse_every_shape_the_spec_lists() -> None:
    url = StoreUrl.parse("MEMCACHED://h1:11211,h2:11212,[::1]:11213?timeout=100ms")
    assert url.scheme == "memcached"
    assert [h.address(11211) for h in url.hosts] == ["h1:11211", "h2:11212", "[::1]:11213"]
    url = StoreUrl.parse("redis://user:p%40ss@cache.local:6380/2?pool=4")
    assert (url.username, url.password, url.path) == ("user", "p@ss", "/2")
    assert url.take_number("pool", 1, 1, 64) == 4
    url.finish()
    assert "p%40ss" not in url.shown
    assert "***" in url.shown
    url = StoreUrl.parse("sqlite:///var/lib/cache.db")
    assert (url.hosts, url.path) == ([], "/var/lib/cache.db")


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("memcached://h:1?timeot=5&timeout=10", "unknown option timeot for memcached:// (known: "),
        ("memcached://h:1?timeout=soon", "not a duration"),
        ("memcached://h:1?a=1&a=2", "given twice"),
        ("memcached://h:99999", "port must be 1-65535"),
        ("memcached://::1:11211", "brackets"),
        ("localhost:11211", "scheme://"),
        ("nosuch://h", "unknown store scheme"),
        ("memory://?capacity=lots", "capacity"),
        ("memory://host", "takes a path"),
        ("redis://h1,h2", "one host"),
        ("redis+cluster://h1/3", "only database 0"),
        ("redis://a:secret@h/0?bogus=1", "***"),
        ("memcached://h?weights=1,2", "one whole number > 0 per host"),
        ("memcached://h?pool=0", "from 1 to 64"),
        ("memcached://h?prefix_purge=maybe", "true or false"),
        ("sqlite:///tmp/x.db?timeout=1s", "unknown option timeout"),
        ("sqlite:///tmp/x.db?table=Bad-Name", "lowercase letters"),
        ("file://?capacity=1G", "needs a directory"),
        ("postgres://h1/db?retry=1s", "known: connect_timeout, failures, pool, prefix, retry_after, table, timeout"),
    ],
)
def test_bad_urls_are_refused_with_the_reason(url: str, message: str) -> None:
    with pytest.raises(UrlError) as caught:
        open_store(url)
    assert message in str(caught.value)
    assert "secret" not in str(caught.value)


def test_unknown_option_lists_the_known_ones() -> None:
    with pytest.raises(UrlError) as caught:
        open_store("memcached://h:1?timeot=5")
    text = str(caught.value)
    for name in ["connect_timeout", "failures", "max_item", "pool", "prefix", "prefix_purge", "purge_retention"]:
        assert name in text
    assert "purge_skew" in text
    assert "retry_after" in text
    assert "timeout" in text
    assert "weights" in text


def test_sizes_and_durations() -> None:
    assert parse_size("1048576") == 1 << 20
    assert parse_size("512K") == 512 << 10
    assert parse_size("256m") == 256 << 20
    assert parse_size("1.5G") == 3 << 29
    assert parse_size("2GiB") == 2 << 30
    assert parse_size("512kb") == 512 << 10
    for bad in ["", "-1", "1X", "1.2.3", "K"]:
        with pytest.raises(ValueError):  # noqa: PT011 - the message is checked through URLs above
            parse_size(bad)


# spec/STORES.md §1: a bare number of milliseconds, or a number with exactly one of the units ms, s, m, h.
GOOD_DURATIONS = [
    ("250", 250),
    ("0", 0),
    ("007", 7),
    ("250ms", 250),
    ("2s", 2_000),
    ("1m", 60_000),
    ("1h", 3_600_000),
    ("999999999999h", 999_999_999_999 * 3_600_000),
]
BAD_DURATIONS = [
    "soon",
    "",
    "s",
    "ms",
    "1min",
    "2d",
    "1s500ms",
    "1m 30s",
    "1.5s",
    "-1s",
    "+1s",
    "1 s",
    " 1s",
    "1s ",
    "1S",
    "1MS",
    "1sec",
    "1us",
    "1ns",
    "1w",
    "1y",
    "1e3",
    "0x10",
    "1_000",
    "\u0661",
    "1\n",
    "9999999999999",
    "99999999999999h",
]


@pytest.mark.parametrize(("text", "ms"), GOOD_DURATIONS)
def test_durations_accepted(text: str, ms: int) -> None:
    assert parse_duration_ms(text) == ms
    url = StoreUrl.parse(f"memcached://h:1?timeout={text}")
    assert url.take_duration_ms("timeout", 5) == ms


@pytest.mark.parametrize("text", BAD_DURATIONS)
def test_durations_refused(text: str) -> None:
    with pytest.raises(ValueError, match="a number with ms, s, m or h"):
        parse_duration_ms(text)
    url = StoreUrl.parse("memcached://h:1?timeout=" + quote(text, safe=""))
    with pytest.raises(UrlError, match=r"option timeout=.* is not a duration \(a number with ms, s, m or h\)"):
        url.take_duration_ms("timeout", 5)


def test_memcached_exptime_and_counters() -> None:
    now = 1_700_000_000_000
    assert memcached_exptime(None, now) == 0
    assert memcached_exptime(now + 1, now) == 1
    assert memcached_exptime(now + 30 * 86_400_000, now) == 30 * 86_400
    assert memcached_exptime(now + 30 * 86_400_000 + 1000, now) == 1_700_000_000 + 30 * 86_400 + 1
    assert memcached_exptime(now, now) == -1
    assert parse_counter(b"42") == 42
    assert parse_counter(b"-7") == -7
    assert parse_counter(b"9223372036854775807") == 2**63 - 1
    for bad in [b"", b"-", b"+1", b" 1", b"1 ", b"0x10", b"9223372036854775808", b"1.5", b"1\n"]:
        assert parse_counter(bad) is None, bad
