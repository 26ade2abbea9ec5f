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
    bare_header,
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
    values_for,
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
    for run in (rust_run, python_run):
        run.assert_one_line_error(1)
    assert python_run.error_kind == rust_run.error_kind == case["error"]


def test_the_invalid_vectors_include_the_cases_rust_was_lenient_about() -> None:
    """test_every_invalid_vector_fails_alike runs every case of spec/vectors/invalid.json; these are the ones the
    Rust implementation accepted until it was brought in line (trailing compressed bytes, huge snappy preambles,
    loosely typed responses). Guards against their being dropped from the file."""
    names = {case["name"] for case in INVALID}
    assert {
        "gzip_trailing_bytes",
        "gzip_second_member",
        "brotli_trailing_byte",
        "snappy_preamble_8gib",
        "snappy_preamble_cut",
        "response_body_as_str",
        "response_encoding_as_bin",
        "response_encoding_uppercase",
    } <= names


@settings(max_examples=examples(60))
@given(data=st.data(), options=entry_options())
def test_inspect_of_generated_entries_is_identical(rust: Path, data: st.DataObject, options: dict[str, Any]) -> None:
    kind = data.draw(st.sampled_from(["value", "value", "response"]), label="kind")
    if kind == "response":
        entry = larder.encode_response(data.draw(http_responses, label="response"), **options)
    else:
        serializer = data.draw(st.sampled_from(larder.SERIALIZERS), label="serializer")
        value = data.draw(values_for(serializer), label="value")
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
        "--json-input",
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


@pytest.mark.parametrize(
    ("payload", "shown"),
    [
        (b'{"a":1,"a":2,"b":3}', '{"a":1,"a":2,"b":3}'),
        (b' \r\n{ "a" : 1 , "a" : -0 }\t', '{"a":1,"a":0}'),
        (b'{"":0,"":{"":[]},"":1}', '{"":0,"":{"":[]},"":1}'),
        (
            b'{"x":{"y":{"x":1,"x":[{"k":null,"k":true}]},"y":{}},"x":false}',
            '{"x":{"y":{"x":1,"x":[{"k":null,"k":true}]},"y":{}},"x":false}',
        ),
        (
            b"[-0,1E2,1e2,-0.0,0E0,1e-7,1E400,-1E400,0.1,1.5e300,2.5E-5,1e15,1e16,562949953421312.25]",
            "[0,100.0,100.0,-0.0,0.0,1e-07,Infinity,-Infinity,0.1,1.5e+300,2.5e-05,1000000000000000.0,1e+16,"
            "562949953421312.2]",
        ),
        (
            b"[18446744073709551616,-9223372036854775809,123456789012345678901234567890]",
            "[18446744073709551616,-9223372036854775809,123456789012345678901234567890]",
        ),
        (b"[" + b"9" * 5000 + b",-" + b"1" * 4400 + b"]", "[" + "9" * 5000 + ",-" + "1" * 4400 + "]"),
        (b'"\\u00e9\\ud83c\\udf5e\\n\\"\\\\\\/\\u0001\x7f"', '"\u00e9\U0001f35e\\n\\"\\\\/\\u0001\x7f"'),
    ],
    ids=["duplicates", "spacing", "empty-keys", "nested", "numbers", "big-integers", "huge-integers", "escapes"],
)
def test_json_payloads_display_as_written(rust: Path, payload: bytes, shown: str) -> None:
    """json-serializer entries made by hand (no encoder writes duplicate keys): inspect shows every key, in order,
    and numbers as FORMAT.md says (`-0` is the integer 0, an exponent makes a float), integers of any length."""
    entry = bare_header(serializer="json") + payload
    for args in (["inspect"], ["inspect", "--json"]):
        rust_run, python_run = run_rust(rust, args, entry), run_python(args, entry)
        assert rust_run.status == 0, rust_run.stderr
        _same_run(rust_run, python_run, " ".join(args))
    assert python_run.stdout.endswith(f',"value":{shown}}}\n'.encode())


@pytest.mark.parametrize("use", ["inspect", "encode-msgpack", "encode-json"])
def test_a_map_keyed_like_serde_json_internals_is_still_a_map(rust: Path, use: str) -> None:
    """The key serde_json's arbitrary_precision used for numbers internally (Rust once read such a map as a
    number) is an ordinary key."""
    document = b'{"$serde_json::private::Number":"1"}'
    if use == "inspect":
        args, stdin = ["inspect", "--json"], bare_header(serializer="json") + document
    else:
        args = ["encode", "--serializer", use.split("-")[1], "--compressor", "none", "--created-at", "0"]
        stdin = document
    rust_run, python_run = run_rust(rust, args, stdin), run_python(args, stdin)
    assert python_run.status == 0
    if use == "inspect":
        assert python_run.stdout.endswith(b',"value":{"$serde_json::private::Number":"1"}}\n')
    else:
        assert larder.decode(python_run.stdout).value == {"$serde_json::private::Number": "1"}
    _same_run(rust_run, python_run, " ".join(args))


@pytest.mark.parametrize(
    "document",
    [
        b'{"a":1,"b":2,"a":3}',
        b'{"a":{"x":1,"x":2},"b":[{"k":1,"j":2,"k":[3]}],"a":{"y":4}}',
        b'{"":0,"":{"":1,"":2}}',
        b'{"a":' + b"[" * 150 + b"1" + b"]" * 150 + b',"a":1}',
        b'{"a":1,"a":' + b"[" * 101 + b"]" * 101 + b"}",
    ],
    ids=["top-level", "nested", "empty-keys", "deep-value-replaced", "deep-value-kept"],
)
@pytest.mark.parametrize("serializer", ["msgpack", "json"])
def test_encode_keeps_the_last_of_duplicate_keys_where_the_first_stood(
    rust: Path, serializer: str, document: bytes
) -> None:
    """Encode reads the document as a dict does: a repeated key keeps its last value, at its first position, and
    only the values kept count toward the nesting limit."""
    args = ["encode", "--serializer", serializer, "--compressor", "none", "--created-at", "0"]
    rust_run, python_run = run_rust(rust, args, document), run_python(args, document)
    assert rust_run.status == python_run.status, (rust_run.stderr, python_run.stderr)
    if python_run.status == 0:
        assert larder.decode(rust_run.stdout).value == json.loads(document)
    # Byte-identical with json too: the JSON texts may differ in number formatting (FORMAT.md §6), and these
    # documents hold only integers, which both write as given.
    _same_run(rust_run, python_run, f"encode --serializer {serializer}")


@pytest.mark.parametrize(
    "args",
    [
        ["encode", "--serializer", "raw", "--json-input"],
        ["encode", "--kind", "response"],
    ],
)
def test_duplicate_keys_of_raw_and_response_documents_keep_the_last(rust: Path, args: list[str]) -> None:
    document = (
        b'{"$base64":"not base64","$base64":"/wA="}'
        if "raw" in args
        else b'{"status":99,"headers":[["a","b"]],"status":404,"body":"x","headers":[]}'
    )
    args = [*args, "--compressor", "none", "--created-at", "0"]
    rust_run, python_run = run_rust(rust, args, document), run_python(args, document)
    assert rust_run.status == 0, rust_run.stderr
    _same_run(rust_run, python_run, " ".join(args))


@pytest.mark.xfail(
    strict=True,
    reason="known Python limitation: int() refuses more than 4,300 digits (a guard against quadratic conversion), "
    "so python -m larder encode cannot read such a document (exit 2) where Rust stores it with --serializer json. "
    "inspect displays such integers alike (test_json_payloads_display_as_written).",
)
def test_json_integers_of_any_length_can_be_encoded_with_the_json_serializer(rust: Path) -> None:
    args = ["encode", "--serializer", "json", "--compressor", "none", "--created-at", "0"]
    document = b"[" + b"9" * 5000 + b"]"
    rust_run, python_run = run_rust(rust, args, document), run_python(args, document)
    assert rust_run.status == 0, rust_run.stderr
    _same_run(rust_run, python_run, "encode --serializer json")


@pytest.mark.parametrize("document", [b"1e400", b"[1, -1e400]", b'{"a": {"b": 1E999}}', b"123e456", b"-0.1e99999"])
def test_numbers_beyond_float64_cannot_be_json_payloads(rust: Path, document: bytes) -> None:
    """JSON has no infinity, so the json serializer refuses them (exit 2); msgpack stores a float64 infinity."""
    args = ["encode", "--serializer", "json"]
    rust_run, python_run = run_rust(rust, args, document), run_python(args, document)
    for run in (rust_run, python_run):
        run.assert_one_line_error(2)
    args = ["encode", "--serializer", "msgpack", "--compressor", "none", "--created-at", "0"]
    rust_run, python_run = run_rust(rust, args, document), run_python(args, document)
    assert rust_run.status == 0, rust_run.stderr
    _same_run(rust_run, python_run, "encode --serializer msgpack")
    assert b"\xcb\x7f\xf0\x00\x00\x00\x00\x00\x00" in python_run.stdout or b"\xcb\xff\xf0" in python_run.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["encode", "--bogus"],
        ["inspect", "--bogus"],
        ["key", "--bogus"],
        ["key", "http://a/", "--bogus"],
        ["encode", "-x"],
        ["inspect", "--max-size", "-1"],
        ["encode", "--ttl"],
        ["frobnicate"],
    ],
)
def test_usage_errors_are_one_line_in_both(rust: Path, args: list[str]) -> None:
    rust_run, python_run = run_rust(rust, args, b"1"), run_python(args, b"1")
    for run in (rust_run, python_run):
        run.assert_one_line_error(2)
        assert run.stderr.endswith(" (see --help)\n")


def test_no_command_at_all_is_a_usage_error_in_both(rust: Path) -> None:
    """Bare `larder`: exit 2, nothing on stdout, one `larder: ` line on stderr in both (the wording differs)."""
    rust_run, python_run = run_rust(rust, []), run_python([])
    for run in (rust_run, python_run):
        run.assert_one_line_error(2)
        assert run.stderr.endswith(" (see --help)\n")


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
        (["encode", "--serializer", "text", "--json-input"], b"1"),
        (["encode", "--serializer", "text", "--json-input"], b"hello"),
        (["encode", "--serializer", "text"], b"\xff"),
        (["encode", "--serializer", "text"], b"\xed\xa0\x80"),
        (["encode", "--serializer", "text"], b"\xc0\xaf"),
        (["encode", "--serializer", "raw", "--json-input"], b'{"$base64": "not base64!"}'),
        (["encode", "--serializer", "raw", "--json-input"], b'{"$base64": "QQ"}'),
        (["encode", "--serializer", "raw", "--json-input"], b'{"$base64": "QR=="}'),
        (["encode", "--serializer", "raw", "--json-input"], b'{"$base64": "QQ==", "x": 1}'),
        (["encode", "--serializer", "text", "--kind", "response"], b'{"status": 200}'),
        (["encode", "--json-input", "--json-input"], b"1"),
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
    for run in (rust_run, python_run):
        run.assert_one_line_error(2)


def test_python_m_larder_exits_like_the_library_says() -> None:
    invalid = bytes.fromhex(INVALID[0]["entry_hex"])
    assert run_python_process(["inspect"], invalid).status == 1
    assert run_python_process(["inspect", "--json"], invalid).error_kind == INVALID[0]["error"]
    assert run_python_process(["key", "no-scheme"]).status == 2
    run_python_process(["encode", "--ttl", "-1"], b"1").assert_one_line_error(2)
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
    """Guards the generators above: they must produce nested maps, big integers and tied floats, or the tests prove
    little."""
    seen: dict[str, bool] = {"nested map": False, "u64": False, "tied float": False}

    @settings(max_examples=examples(200))
    @given(value=json_values)
    def look(value: Any) -> None:
        text = json.dumps(value)
        if text.count("{") >= 2:
            seen["nested map"] = True
        if any(len(token) >= 19 for token in text.replace(",", " ").replace("]", " ").split()):
            seen["u64"] = True
        if has_tied_float(value):
            seen["tied float"] = True

    look()
    assert all(seen.values()), seen
