"""The Python and Rust implementations side by side (spec/CLI.md): same entry bytes from `encode` when the payload
is stored uncompressed, each decoding the other's entries to equal values, byte-identical `inspect` and `key`
output, and the same exit status and error kind for every invalid entry.

The Rust binary is $LARDER_BIN (default target/debug/larder from the repo root). Without it these tests fail, they
do not skip: build it with `cargo build -p larder-cli`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import larder
from support import (
    Run,
    entry_options,
    examples,
    has_tied_float,
    http_responses,
    json_values,
    larder_bin,
    load_vectors,
    run_python,
    run_python_process,
    run_rust,
    same_json,
    sized_json_values,
)

ENTRIES = load_vectors("entries.json")["cases"]
INVALID = load_vectors("invalid.json")["cases"]
HTTP_KEYS = load_vectors("keys.json")["http"]
U64_MAX = 2**64 - 1


@pytest.fixture(scope="module")
def rust() -> Path:
    return larder_bin()


def _same_run(rust_run: Run, python_run: Run, what: str) -> None:
    assert python_run.status == rust_run.status, f"{what}: exit {python_run.status} (Python) vs {rust_run.status}"
    assert python_run.stdout == rust_run.stdout, f"{what}: stdout differs"


# --- inspect ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("as_json", [False, True], ids=["human", "json"])
@pytest.mark.parametrize("case", ENTRIES, ids=[case["name"] for case in ENTRIES])
def test_inspect_of_every_vector_is_identical(rust: Path, case: dict[str, Any], as_json: bool) -> None:
    args = ["inspect", "--json"] if as_json else ["inspect"]
    data = bytes.fromhex(case["entry_hex"])
    rust_run, python_run = run_rust(rust, args, data), run_python(args, data)
    assert rust_run.status == 0, rust_run.stderr
    _same_run(rust_run, python_run, case["name"])


@pytest.mark.parametrize("case", INVALID, ids=[case["name"] for case in INVALID])
def test_every_invalid_vector_fails_alike(rust: Path, case: dict[str, Any]) -> None:
    args = ["inspect", "--max-size", str(case.get("max_size", larder.DEFAULT_MAX_SIZE))]
    data = bytes.fromhex(case["entry_hex"])
    rust_run, python_run = run_rust(rust, args, data), run_python(args, data)
    assert (rust_run.status, python_run.status) == (1, 1)
    assert python_run.stdout == rust_run.stdout == b""
    assert python_run.error_kind == rust_run.error_kind == case["error"]
    assert python_run.stderr.count("\n") == rust_run.stderr.count("\n") == 1


def _value_for(serializer: str) -> st.SearchStrategy[Any]:
    if serializer in ("msgpack", "json"):
        return sized_json_values()
    if serializer == "text":
        return st.one_of(st.text(), st.text(min_size=1, max_size=4).map(lambda t: t * 400))
    return st.one_of(st.binary(), st.binary(min_size=1, max_size=4).map(lambda b: b * 400))


@settings(max_examples=examples(60))
@given(data=st.data(), options=entry_options())
def test_inspect_of_generated_entries_is_identical(rust: Path, data: st.DataObject, options: dict[str, Any]) -> None:
    kind = data.draw(st.sampled_from(["value", "value", "response"]), label="kind")
    if kind == "response":
        entry = larder.encode_response(data.draw(http_responses, label="response"), **options)
    else:
        serializer = data.draw(st.sampled_from(larder.SERIALIZERS), label="serializer")
        value = data.draw(_value_for(serializer), label="value")
        assume(not has_tied_float(value))  # a known difference, pinned by test_float_ties_display_as_python_repr
        entry = larder.encode(value, serializer=serializer, **options)
    for args in (["inspect"], ["inspect", "--json"]):
        rust_run, python_run = run_rust(rust, args, entry), run_python(args, entry)
        assert rust_run.status == 0, rust_run.stderr
        _same_run(rust_run, python_run, " ".join(args))


# --- encode -------------------------------------------------------------------------------------------------------


@st.composite
def _encode_flags(draw: st.DrawFn, threshold: bool = True) -> list[str]:
    """Header flags of `encode`, everything but --compressor, --serializer and --kind."""
    flags = [f"--created-at={draw(st.integers(min_value=0, max_value=U64_MAX))}"]
    ttl = draw(st.one_of(st.just(0), st.integers(min_value=0, max_value=10**9), st.integers(min_value=0)))
    if ttl or draw(st.booleans()):
        flags.append(f"--ttl={min(ttl, U64_MAX)}")
    stale = draw(st.one_of(st.just(0), st.integers(min_value=0, max_value=10**6)))
    if stale:
        flags.append(f"--stale={stale}")
    arg_text = st.text(st.characters(blacklist_characters="\x00", blacklist_categories=["Cs"]), max_size=12)
    version = draw(st.one_of(st.none(), arg_text))
    if version is not None:
        flags.append(f"--version={version}")
    flags.extend(f"--tag={tag}" for tag in draw(st.lists(arg_text, max_size=3)))
    if threshold and draw(st.booleans()):
        flags.append(f"--threshold={draw(st.sampled_from([0, 1, 100, 1024, 5000]))}")
    return flags


def _document(value: Any, ascii_only: bool) -> bytes:
    return json.dumps(value, ensure_ascii=ascii_only).encode("utf-8")


@settings(max_examples=examples(60))
@given(value=sized_json_values(), flags=_encode_flags(), ascii_only=st.booleans())
def test_uncompressed_msgpack_entries_are_byte_identical(
    rust: Path, value: Any, flags: list[str], ascii_only: bool
) -> None:
    args = ["encode", "--compressor", "none", *flags]
    document = _document(value, ascii_only)
    rust_run, python_run = run_rust(rust, args, document), run_python(args, document)
    assert rust_run.status == 0, rust_run.stderr
    _same_run(rust_run, python_run, "encode")
    assert same_json(larder.decode(python_run.stdout).value, value)


@settings(max_examples=examples(40))
@given(
    data=st.data(),
    serializer=st.sampled_from(["text", "raw"]),
    flags=_encode_flags(threshold=False),
    ascii_only=st.booleans(),
)
def test_uncompressed_text_and_raw_entries_are_byte_identical(
    rust: Path, data: st.DataObject, serializer: str, flags: list[str], ascii_only: bool
) -> None:
    if serializer == "raw" and data.draw(st.booleans(), label="as base64"):
        import base64

        document: Any = {"$base64": base64.b64encode(data.draw(st.binary(max_size=300), label="bytes")).decode()}
    else:
        document = data.draw(st.text(max_size=300), label="text")
    # any compressor: no payload here reaches the threshold, so none is tried and the bytes must be identical
    args = [
        "encode",
        "--serializer",
        serializer,
        "--compressor",
        data.draw(st.sampled_from(larder.COMPRESSORS)),
        *flags,
    ]
    args.append("--threshold=100000")
    rust_run, python_run = (
        run_rust(rust, args, _document(document, ascii_only)),
        run_python(args, _document(document, ascii_only)),
    )
    assert rust_run.status == 0, rust_run.stderr
    _same_run(rust_run, python_run, "encode")


@settings(max_examples=examples(30))
@given(response=http_responses, flags=_encode_flags())
def test_uncompressed_response_entries_are_byte_identical(
    rust: Path, response: larder.HttpResponse, flags: list[str]
) -> None:
    import base64

    def as_json(data: bytes) -> Any:
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return {"$base64": base64.b64encode(data).decode()}

    document = {
        "status": response.status,
        "headers": [[as_json(name), as_json(value)] for name, value in response.headers],
        "body": as_json(response.body),
        "content_encoding": response.content_encoding,
    }
    args = ["encode", "--kind", "response", "--compressor", "none", *flags]
    rust_run, python_run = run_rust(rust, args, _document(document, True)), run_python(args, _document(document, True))
    assert rust_run.status == 0, rust_run.stderr
    _same_run(rust_run, python_run, "encode --kind response")
    assert larder.decode(python_run.stdout).value == response


@settings(max_examples=examples(50))
@given(
    value=sized_json_values(),
    serializer=st.sampled_from(["msgpack", "json"]),
    compressor=st.sampled_from(["lz4", "lz4", *larder.COMPRESSORS]),
    threshold=st.sampled_from([None, 0]),
)
def test_each_decodes_the_others_entries(
    rust: Path, value: Any, serializer: str, compressor: str, threshold: int | None
) -> None:
    assume(not has_tied_float(value))  # a known difference, pinned by test_float_ties_display_as_python_repr
    args = ["encode", "--serializer", serializer, "--created-at", "1700000000000"]
    if compressor != "lz4" or threshold is None:
        args += ["--compressor", compressor]  # lz4 is also the default: sometimes give it, sometimes not
    if threshold is not None:
        args += ["--threshold", str(threshold)]
    document = _document(value, ascii_only=False)
    rust_entry, python_entry = run_rust(rust, args, document), run_python(args, document)
    assert rust_entry.status == python_entry.status == 0, rust_entry.stderr + python_entry.stderr
    # Python decodes Rust's entry...
    assert same_json(larder.decode(rust_entry.stdout).value, value)
    # ...and Rust decodes Python's: its inspect --json shows the same value, and prints what Python prints.
    rust_view, python_view = (
        run_rust(rust, ["inspect", "--json"], python_entry.stdout),
        run_python(["inspect", "--json"], python_entry.stdout),
    )
    assert rust_view.status == 0, rust_view.stderr
    _same_run(rust_view, python_view, "inspect --json")
    assert same_json(json.loads(rust_view.stdout)["value"], value)
    # Whether compression was kept may differ: two LZ4 encoders need not find the same matches (FORMAT.md §3).
    assert larder.read_header(rust_entry.stdout).compressor in ("none", compressor)
    assert larder.read_header(python_entry.stdout).compressor in ("none", compressor)


@pytest.mark.xfail(
    strict=True,
    reason="known Rust difference: its float_repr breaks a tie between two shortest texts upwards "
    "(562949953421312.25 -> 562949953421312.3), Python's repr (named by spec/CLI.md) to even (...2). "
    "When the Rust side is fixed this test passes, strict xfail fails the run: then remove this mark and the "
    "has_tied_float() filters above.",
)
@pytest.mark.parametrize("serializer", ["msgpack", "json"])
def test_float_ties_display_as_python_repr(rust: Path, serializer: str) -> None:
    values = [2.0**49 + 0.25, 2.0**49 + 0.75, 2.0**49 + 1234.25, 2.0**49 + 99.75]
    assert all(has_tied_float(value) for value in values)
    assert [repr(value) for value in values] == [
        "562949953421312.2",
        "562949953421312.8",
        "562949953422546.2",
        "562949953421411.8",
    ]
    entry = larder.encode(values, serializer=serializer, created_at=0)
    rust_run, python_run = run_rust(rust, ["inspect", "--json"], entry), run_python(["inspect", "--json"], entry)
    assert python_run.stdout.endswith(
        b'"value":[562949953421312.2,562949953421312.8,562949953422546.2,562949953421411.8]}\n'
    )
    _same_run(rust_run, python_run, "inspect --json")


def test_the_worked_example_is_encoded_alike_by_both_and_by_python_m_larder(rust: Path) -> None:
    args = ["encode", "--created-at", "1700000000000", "--ttl", "60", "--version", "v1", "--tag", "user:7"]
    document = b'{"id":7,"name":"Ada"}'
    expected = bytes.fromhex(next(case for case in ENTRIES if case["name"] == "worked_example")["entry_hex"])
    for run in (run_rust(rust, args, document), run_python(args, document), run_python_process(args, document)):
        assert (run.status, run.stdout, run.stderr) == (0, expected, "")


@pytest.mark.parametrize(
    ("args", "stdin"),
    [
        (["encode"], b"{not json"),
        (["encode"], b""),
        (["encode"], b"[1, 2] 3"),
        (["encode"], b"NaN"),
        (["encode"], b'"\\ud800"'),
        (["encode"], b"\xff"),
        (["encode"], b"18446744073709551616"),
        (["encode"], b"-9223372036854775809"),
        (["encode", "--serializer", "text"], b"1"),
        (["encode", "--serializer", "raw"], b'{"$base64": "not base64!"}'),
        (["encode", "--serializer", "raw"], b'{"$base64": "QQ"}'),
        (["encode", "--serializer", "raw"], b'{"$base64": "QR=="}'),
        (["encode", "--serializer", "raw"], b'{"$base64": "QQ==", "x": 1}'),
        (["encode", "--kind", "response"], b'{"status": 99}'),
        (["encode", "--kind", "response"], b'{"status": 200.0}'),
        (["encode", "--kind", "response"], b'{"status": 200, "headers": [["a"]]}'),
        (["encode", "--kind", "response"], b'{"status": 200, "content_encoding": "deflate"}'),
        (["encode", "--kind", "response", "--serializer", "json"], b'{"status": 200}'),
        (["encode", "--version", "v" * 65536], b"1"),
        (["key", "example.com/no-scheme"], b""),
        (["inspect", "/nonexistent/entry"], b""),
    ],
)
def test_bad_input_exits_2_in_both(rust: Path, args: list[str], stdin: bytes) -> None:
    rust_run, python_run = run_rust(rust, args, stdin), run_python(args, stdin)
    assert (rust_run.status, python_run.status) == (2, 2), (rust_run.stderr, python_run.stderr)
    for run in (rust_run, python_run):
        assert run.stdout == b""
        assert run.stderr.startswith("larder: ")
        assert run.stderr.count("\n") == 1


def test_python_m_larder_exits_like_the_library_says() -> None:
    invalid = bytes.fromhex(INVALID[0]["entry_hex"])
    assert run_python_process(["inspect"], invalid).status == 1
    assert run_python_process(["inspect", "--json"], invalid).error_kind == INVALID[0]["error"]
    assert run_python_process(["key", "no-scheme"]).status == 2
    usage = run_python_process(["encode", "--ttl", "-1"], b"1")
    assert usage.status == 2
    assert usage.stderr.startswith("larder: ")
    assert usage.stderr.count("\n") == 1
    assert run_python_process(["key", "HTTP://Example.COM:80"]).stdout == b"GET:http://example.com/\n"


# --- key ----------------------------------------------------------------------------------------------------------


def _key_args(url: str, method: str | None, namespace: str | None, drop: list[str] | None) -> list[str]:
    args = ["key"]
    if method is not None:
        args.append(f"--method={method}")
    if namespace is not None:
        args.append(f"--namespace={namespace}")
    if drop is not None:
        args.append("--no-default-drops")
        args.extend(f"--drop={pattern}" for pattern in drop)
    return [*args, "--", url]


@pytest.mark.parametrize("case", HTTP_KEYS, ids=[case["name"] for case in HTTP_KEYS])
def test_key_of_every_vector_is_identical(rust: Path, case: dict[str, Any]) -> None:
    args = _key_args(case["url"], case["method"], case.get("namespace"), case.get("drop"))
    rust_run, python_run = run_rust(rust, args), run_python(args)
    assert rust_run.status == 0, rust_run.stderr
    _same_run(rust_run, python_run, "key")
    assert python_run.stdout == f"{case['key']}\n".encode()


_arg_chars = st.characters(blacklist_characters="\x00", blacklist_categories=["Cs"])
_param_names = st.one_of(
    st.sampled_from(["a", "b", "a1", "q", "utm_source", "utm_", "utm", "UTM_x", "gclid", "GCLID", "fbclid", "msclkid"]),
    st.text(st.characters(blacklist_characters="\x00&=#", blacklist_categories=["Cs"]), max_size=6),
)


@st.composite
def _urls(draw: st.DrawFn) -> str:
    if draw(st.integers(min_value=0, max_value=4)) == 0:  # anything at all around a "://"
        return draw(st.text(_arg_chars, max_size=30)) + "://" + draw(st.text(_arg_chars, max_size=60))
    scheme = draw(st.sampled_from(["http", "https", "HTTP", "hTTps", "ftp", "ws"]))
    userinfo = draw(st.sampled_from(["", "user@", "u:p%40ss@", "a@b@"]))
    host = draw(
        st.one_of(st.from_regex(r"[A-Za-z0-9.\-]{0,20}", fullmatch=True), st.just("[::1]"), st.just("Bücher.DE"))
    )
    port = draw(st.sampled_from(["", ":", ":80", ":443", ":8080", ":080"]))
    segment = st.text(st.characters(blacklist_characters="\x00/?#", blacklist_categories=["Cs"]), max_size=8)
    path = "".join("/" + s for s in draw(st.lists(segment, max_size=4)))
    if draw(st.integers(min_value=0, max_value=5)) == 0:
        path += "/" + "x" * draw(st.integers(min_value=150, max_value=300))  # long keys are hashed
    url = f"{scheme}://{userinfo}{host}{port}{path}"
    if draw(st.booleans()):
        value = st.text(st.characters(blacklist_characters="\x00&#", blacklist_categories=["Cs"]), max_size=5)
        parts = draw(st.lists(st.tuples(_param_names, st.one_of(st.none(), value)), max_size=6))
        url += "?" + "&".join(name if v is None else f"{name}={v}" for name, v in parts)
    if draw(st.booleans()):
        url += "#" + draw(st.text(_arg_chars, max_size=8))
    return url


@settings(max_examples=examples(150))
@given(
    url=_urls(),
    method=st.one_of(st.none(), st.sampled_from(["get", "HEAD", "Post"]), st.text(_arg_chars, min_size=1, max_size=6)),
    namespace=st.one_of(st.none(), st.text(_arg_chars, max_size=10)),
    drop=st.one_of(st.none(), st.lists(st.one_of(_param_names, _param_names.map(lambda n: n + "*")), max_size=3)),
)
def test_key_of_generated_urls_is_identical(
    rust: Path, url: str, method: str | None, namespace: str | None, drop: list[str] | None
) -> None:
    assume(not (drop and any(pattern.startswith("-") for pattern in drop)))
    args = _key_args(url, method, namespace, drop)
    rust_run, python_run = run_rust(rust, args), run_python(args)
    assert rust_run.status == 0, rust_run.stderr
    _same_run(rust_run, python_run, "key")


def test_json_values_strategy_reaches_nested_maps() -> None:
    """Guards the generators above: they must produce nested maps and big integers, or the tests prove little."""
    seen: dict[str, bool] = {"nested map": False, "u64": False}

    @settings(max_examples=examples(200))
    @given(value=json_values)
    def look(value: Any) -> None:
        text = json.dumps(value)
        if text.count("{") >= 2:
            seen["nested map"] = True
        if any(len(token) >= 19 for token in text.replace(",", " ").replace("]", " ").split()):
            seen["u64"] = True

    look()
    assert all(seen.values()), seen
