"""larder.http_rules and the readers under it (cache_directives, structured_fields, http_date) beyond the cases of
spec/vectors/storage.json (which tests/test_vectors.py runs): the settings are the front's, by name and default,
and refuse what the front refuses; the parsers' edges that no storage case pins (base64 padding as the front's
sfv reads it, RFC 850 years relative to the response time, joined field lines); and the decision's interface."""

from __future__ import annotations

import time
from typing import Any

import pytest

from larder.cache_directives import parse_cache_control, parse_surrogate_control, parse_targeted
from larder.http_date import format_http_date, parse_http_date
from larder.http_rules import NotStored, Rules, StorePlan, storage
from larder.structured_fields import InnerList, InvalidField, SfDecimal, Token, parse_dictionary
from support import load_vectors

NOW = 1_700_000_000_000  # 2023-11-14T22:13:20Z


def plan(response: list[tuple[str, str]], request: list[tuple[str, str]] | None = None, **rules: Any) -> Any:
    return storage(Rules(**rules), "GET", request or [], 200, response, NOW, NOW)


# --- the settings -------------------------------------------------------------------------------------------------


def test_rules_are_the_front_s_settings_with_its_defaults() -> None:
    """Every setting of spec/HTTP.md §1.8, named as its flag (the configuration key without `_secs`), with the
    front's default: a page cache is set up as the front is."""
    front = load_vectors("storage.json")["rules_defaults"]
    ours = Rules()
    assert {name.removesuffix("_secs") for name in front} == set(Rules.__dataclass_fields__)
    for name, default in front.items():
        value = getattr(ours, name.removesuffix("_secs"))
        if name == "targeted_fields":
            assert value == tuple(f.lower() for f in default)
        else:
            assert value == default, name


@pytest.mark.parametrize(
    ("settings", "error"),
    [
        ({"heuristic_max": -1}, ValueError),
        ({"stale_if_error": 1.5}, ValueError),
        ({"revalidation_window": True}, ValueError),
        ({"stale_while_revalidate": "30"}, ValueError),
        ({"honor_request_cache_control": 1}, TypeError),
        ({"surrogate_control": "yes"}, TypeError),
        ({"targeted_fields": "CDN-Cache-Control"}, TypeError),
    ],
)
def test_rules_refuse_settings_the_front_would_refuse(settings: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error, match=next(iter(settings))):
        Rules(**settings)


def test_targeted_fields_are_names_in_any_case_in_order() -> None:
    rules = Rules(targeted_fields=["Larder-Cache-Control", "CDN-Cache-Control"])
    assert rules.targeted_fields == ("larder-cache-control", "cdn-cache-control")
    both = [("CDN-Cache-Control", "max-age=10"), ("larder-cache-control", "max-age=20")]
    assert plan(both, targeted_fields=rules.targeted_fields).fresh_ms == 20_000
    assert plan(both).fresh_ms == 10_000
    assert plan(both, targeted_fields=[]) == NotStored("no-explicit-freshness")


def test_heuristic_freshness_and_request_directives_are_off_unless_set() -> None:
    last_modified = [("Date", format_http_date(NOW)), ("Last-Modified", format_http_date(NOW - 1_000_000))]
    assert plan(last_modified).fresh_ms == 0, "stored stale for revalidation, no heuristic"
    assert plan(last_modified, heuristic_max=3600).fresh_ms == 100_000, "10% of the 1000 s since Last-Modified"
    assert plan(last_modified, heuristic_max=60).fresh_ms == 60_000, "capped"
    no_store = [("cache-control", "no-store")]
    assert isinstance(plan([("cache-control", "max-age=60")], no_store), StorePlan)
    found = plan([("cache-control", "max-age=60")], no_store, honor_request_cache_control=True)
    assert found == NotStored("request-no-store")


# --- the decision's interface --------------------------------------------------------------------------------------


def test_header_names_in_any_case_and_the_method_as_sent() -> None:
    assert plan([("CACHE-CONTROL", "max-age=60"), ("Vary", "Accept-Language")]) == StorePlan(
        60_000, 0, 300_000, ("accept-language",)
    )
    assert plan([("cache-control", "max-age=60")], [("AUTHORIZATION", "x")]) == NotStored("authorization")
    for method in ("get", "Get", "HEAD", "POST"):
        assert storage(Rules(), method, [], 200, [("cache-control", "max-age=60")], NOW, NOW) == NotStored("method")


# --- directives ----------------------------------------------------------------------------------------------------


def test_cache_control_reads_as_the_spec_says() -> None:
    d = parse_cache_control(["Max-Age=60, nO-StOrE", 's-maxage="30", stale-while-revalidate=5'])
    assert (d.max_age, d.s_maxage, d.stale_while_revalidate, d.no_store) == (60, 30, 5, True)
    assert parse_cache_control(['extension="max-age=3600", max-age=1']).max_age == 1
    assert not parse_cache_control(['a="x, no-store"']).no_store
    assert parse_cache_control(["max-age =3600"]).max_age is None
    assert parse_cache_control(["max-age=1800", "max-age=1"]).max_age == 1800, "the first occurrence, across lines"
    assert parse_cache_control(["stale-if-error=abc"]).stale_if_error == 0, "invalid counts as 0, not as absent"
    assert parse_cache_control(["max-age=99999999999999999999"]).max_age == 1 << 31


def test_surrogate_control_governs_only_with_something_larder_acts_on() -> None:
    for silent in ['content="ESI/1.0"', "no-store-remote", "", "max-age=60;edge", "foo=1"]:
        assert parse_surrogate_control([silent]) is None, silent
    found = parse_surrogate_control(["max-age=60+30, no-store;abc"])
    assert found is not None
    assert (found.max_age, found.no_store) == (60, False)
    extended = parse_surrogate_control(["max-age=60+x"])
    assert extended is not None
    assert extended.max_age == 0, "not N+M: invalid, so 0"


def test_targeted_fields_are_typed_and_ignored_when_invalid() -> None:
    def sf(*lines: str) -> Any:
        return parse_targeted(list(lines))

    assert sf("max-age=10000").max_age == 10000
    assert sf("max-age=5", "private").private is True, "lines join into one dictionary"
    assert sf("max-age=1, max-age=2").max_age == 2, "RFC 8941: the last value"
    assert sf('no-cache="set-cookie"').no_cache is True, "a field-name list reads as unqualified"
    assert sf("must-understand, no-store").must_understand is True
    assert sf("foo=(a b), bar=@x;y, max-age=1") is None, "a Date item is a syntax error in RFC 8941"
    assert sf("foo=(a b), bar=1.5, max-age=1").max_age == 1, "unknown members are ignored whatever their value"
    assert sf("none") is not None, "only unknown members: the field still governs"
    for invalid in ['max-age="1"', "max-age=-1", "max-age=1.5", "max-age=(1)", "no-store=?0", "public=1",
                    'public="x"', "immutable=tok", "Max-Age=1", "max-age=1,", "", " "]:  # fmt: skip
        assert sf(invalid) is None, invalid
    assert parse_targeted([]) is None
    assert sf("", "private") is None, "joined with ', ': an empty first line leaves a leading comma"


# --- structured fields ---------------------------------------------------------------------------------------------


def test_structured_dictionary_items() -> None:
    members = parse_dictionary('a=1, b=-2;p=1, c=1.25, d="x\\"y", e=tok/en:1, f=:aGk=:, g=?0, h, i=(1 "s" t);q')
    assert members == {"a": 1, "b": -2, "c": "1.25", "d": 'x"y', "e": "tok/en:1", "f": b"hi", "g": False,
                       "h": True, "i": (1, "s", "t")}  # fmt: skip
    assert type(members["c"]) is SfDecimal
    assert type(members["d"]) is str
    assert type(members["e"]) is Token
    assert type(members["i"]) is InnerList
    assert type(members["i"][2]) is Token


@pytest.mark.parametrize(
    "text",
    ["a=1234567890123456", "a=1234567890123.5", "a=1.2345", "a=1.", "a=-", 'a="\\x"', 'a="x', "a=?2", "a=:aG=k:",
     "a=:====:", "a=:aGk==:", "a=:a:", "A=1", "a=1 b=2", "a=1,", "a=%\"x\"", "a=@1", "a=\u00e9", 'a="\t"'],
)  # fmt: skip
def test_structured_dictionary_errors(text: str) -> None:
    """Each was checked against the front's parser (sfv 0.16, RFC 8941 mode), which refuses it too."""
    with pytest.raises(InvalidField):
        parse_dictionary(text)


def test_byte_sequences_take_some_or_no_padding_as_the_front_does() -> None:
    for text, data in (
        (":aGk:", b"hi"),
        (":aGk=:", b"hi"),
        (":aG:", b"h"),
        (":aG=:", b"h"),
        (":aG==:", b"h"),
        ("::", b""),
    ):
        assert parse_dictionary("a=" + text) == {"a": data}, text


# --- dates ---------------------------------------------------------------------------------------------------------


def test_the_three_date_forms_agree_and_nothing_else_is_a_date() -> None:
    nov_6_1994 = 784_111_777_000
    forms = [
        "Sun, 06 Nov 1994 08:49:37 GMT",
        "Sunday, 06-Nov-94 08:49:37 GMT",
        "Sun Nov  6 08:49:37 1994",
        "SUN, 06 NOV 1994 08:49:37 gmt",
        "Thu, 06 Nov 1994 08:49:37 GMT",
        " Sun Nov 06 08:49:37 1994\t",
    ]
    for text in forms:
        assert parse_http_date(text, NOW) == nov_6_1994, text
    for text in ["0", "Thu, 18 Aug 50 02:01:18 GMT", "Thu, 18-Aug-2050 02:01:18 GMT", "Thu, 18 Aug 2050 2:01:18 GMT",
                 "Thu 18 Aug 2050 02:01:18 GMT", "Thu,  18 Aug 2050 02:01:18 GMT", "Thu, 18 Aug 2050 02:01:18 UTC",
                 "Thu, 18 Aug 2050 02:01:18 +0000", "Thu, 32 Aug 2050 02:01:18 GMT", "Thu, 18 Aug 1969 02:01:18 GMT",
                 "Thu, 18 Aug 2050 24:00:00 GMT", "Thursday, 18 Aug 2050 02:01:18 GMT", "Sun Nov 6 08:49:37 1994",
                 "Sun Nov  6 08:49:37 94", "Thu, 18 Aug 2050 02:01:18 GMT x", "Thu, 18 Aug 2050 02:01:18"]:  # fmt: skip
        assert parse_http_date(text, NOW) is None, text


def test_rfc_850_years_are_read_from_the_response_time() -> None:
    text = "Monday, 01-Jan-80 00:00:00 GMT"
    in_2023, in_2031 = NOW, NOW + 8 * 365 * 86_400_000
    assert time.gmtime(parse_http_date(text, in_2023) // 1000).tm_year == 1980  # type: ignore[operator]
    assert time.gmtime(parse_http_date(text, in_2031) // 1000).tm_year == 2080  # type: ignore[operator]


def test_formatted_dates_read_back() -> None:
    for ms in range(0, 4_102_444_800_000, 86_399_987_654):
        assert parse_http_date(format_http_date(ms), NOW) == ms // 1000 * 1000
    assert format_http_date(NOW) == "Tue, 14 Nov 2023 22:13:20 GMT"
