"""The Python and Rust CLIs side by side on what spec/CLI.md says about stdin, bodies and terminals: `encode` storing
text and raw stdin verbatim (`--json-input` for the JSON forms), `inspect --body`, the cut form a person sees on a
terminal (forced with $LARDER_FORCE_TTY, and under a real pseudo-terminal), and `--help` listing accepted values.

The Rust binary is $LARDER_BIN (default target/debug/larder from the repo root), as in test_cross_language.py.
"""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import larder
from support import (
    Run,
    entry_options,
    examples,
    http_responses,
    larder_bin,
    python_command,
    run_in_terminal,
    run_python,
    run_python_process,
    run_rust,
    values_for,
)

#: The label column of the human form: 12 characters and a space.
LABEL = 13
NOT_UTF8 = "larder: stdin is not UTF-8 text (--serializer text); use --serializer raw for other bytes\n"


@pytest.fixture(scope="module")
def rust() -> Path:
    return larder_bin()


def _same(rust_run: Run, python_run: Run, what: str) -> None:
    assert python_run.status == rust_run.status, f"{what}: exit {python_run.status} (Python) vs {rust_run.status}"
    assert python_run.stdout == rust_run.stdout, f"{what}: stdout differs"


def _both(rust: Path, args: list[str], stdin: bytes = b"", force_tty: str | None = None) -> Run:
    """Runs both CLIs, checks they agree (status and stdout) and that Rust succeeded; returns the Python run."""
    rust_run = run_rust(rust, args, stdin, force_tty=force_tty)
    python_run = run_python(args, stdin, force_tty=force_tty)
    assert rust_run.status == 0, rust_run.stderr
    _same(rust_run, python_run, " ".join(args))
    return python_run


def _head(serializer: str, kind: str, stored: int, payload: int) -> str:
    """The human form's first lines for an entry encoded with --created-at 0 and no optional header fields."""
    return (
        f"format:      1\nkind:        {kind}\nserializer:  {serializer}\ncompressor:  none\n"
        "created_at:  0 (1970-01-01T00:00:00.000Z)\nexpires_at:  never\nstale_ms:    0\nversion:     (none)\n"
        f"tags:        (none)\nsize:        {stored} bytes stored, {payload} bytes payload\n"
    )


BARE = ["--compressor", "none", "--created-at", "0"]

# --- encode: stdin as is -------------------------------------------------------------------------------------------


@settings(max_examples=examples(60))
@given(
    data=st.data(),
    serializer=st.sampled_from(["text", "raw"]),
    compressor=st.sampled_from(larder.COMPRESSORS),
    newline=st.sampled_from(["", "\n", "\r\n"]),
)
def test_text_and_raw_stdin_is_stored_verbatim_alike(
    rust: Path, data: st.DataObject, serializer: str, compressor: str, newline: str
) -> None:
    if serializer == "text":
        stdin = (data.draw(st.text(max_size=300), label="text") + newline).encode("utf-8")
    else:
        stdin = data.draw(st.binary(max_size=300), label="bytes") + newline.encode()
    # any compressor: no payload reaches the threshold, so the entries must be byte-identical
    args = ["encode", "--serializer", serializer, "--compressor", compressor, "--threshold=100000", "--created-at=0"]
    python_run = _both(rust, args, stdin)
    header, payload = larder.decode_payload(python_run.stdout)
    assert (header.serializer, payload) == (serializer, stdin)


@settings(max_examples=examples(40))
@given(stdin=st.binary(min_size=1, max_size=40))
def test_text_stdin_that_is_not_utf8_fails_alike(rust: Path, stdin: bytes) -> None:
    try:
        stdin.decode("utf-8")
    except UnicodeDecodeError:
        pass
    else:
        stdin += b"\xff"
    args = ["encode", "--serializer", "text"]
    for run in (run_rust(rust, args, stdin), run_python(args, stdin)):
        run.assert_one_line_error(2)
        assert run.stderr == NOT_UTF8


@pytest.mark.parametrize(
    ("args", "stdin", "payload"),
    [
        (["--serializer", "text", "--json-input"], b'"h\\u00e9llo\\n"', "héllo\n".encode()),
        (["--serializer", "raw", "--json-input"], b'{"$base64": "/wA="}', b"\xff\x00"),
        (["--serializer", "raw", "--json-input"], b'"text"', b"text"),
        (["--serializer", "text"], b'"h\\u00e9llo"\n', b'"h\\u00e9llo"\n'),
        (["--serializer", "raw"], b'{"$base64": "/wA="}', b'{"$base64": "/wA="}'),
        (["--serializer", "msgpack", "--json-input"], b"[1]", b"\x91\x01"),
        (["--serializer", "json", "--json-input"], b"[1, 2]", b"[1,2]"),
        (["--kind", "response", "--json-input"], b'{"status": 204}', b"\x94\xcc\xcc\x90\xc4\x00\xa8identity"),
    ],
    ids=["text-json", "raw-base64", "raw-string", "text-verbatim", "raw-verbatim", "msgpack", "json", "response"],
)
def test_json_input_reads_the_json_forms_alike(rust: Path, args: list[str], stdin: bytes, payload: bytes) -> None:
    python_run = _both(rust, ["encode", *args, *BARE], stdin)
    assert larder.decode_payload(python_run.stdout)[1] == payload


# --- inspect --body ------------------------------------------------------------------------------------------------


def test_inspect_body_prints_the_stored_body_after_an_empty_line(rust: Path) -> None:
    document = (
        b'{"status":200,"headers":[["content-type","text/plain"]],"body":{"$base64":"/wBoaQ=="},'
        b'"content_encoding":"gzip"}'
    )
    entry = _both(rust, ["encode", "--kind", "response", *BARE], document).stdout
    shown = _both(rust, ["inspect", "--body"], entry).stdout
    expected = _head("msgpack", "response", 65, 42) + (
        "status:      200\nencoding:    gzip\nheader:      content-type: text/plain\nbody:        4 bytes\n\n"
    )
    assert shown == expected.encode() + b"\xff\x00hi"  # still gzip-coded: inspect does not undo a content coding
    as_json = _both(rust, ["inspect", "--json", "--body"], entry).stdout
    assert as_json.endswith(b'"content_encoding":"gzip","body":{"$base64":"/wBoaQ=="}}}\n')


def test_inspect_body_of_a_value_prints_its_decompressed_payload(rust: Path) -> None:
    entry = _both(rust, ["encode", "--serializer", "text", *BARE], b"hi").stdout
    assert (
        _both(rust, ["inspect", "--body"], entry).stdout
        == (_head("text", "value", 25, 2) + 'value:       "hi"\n\nhi').encode()
    )
    entry = larder.encode([1] * 2000, compressor="zstd", threshold=0)  # zstd encoders need not agree on bytes
    assert larder.read_header(entry).compressor == "zstd"
    assert _both(rust, ["inspect", "--body"], entry).stdout.endswith(b"\n\n\xdc\x07\xd0" + b"\x01" * 2000)


class _Generated(NamedTuple):
    entry: bytes
    body: bytes  # a response's body, or a value's serialized payload
    lines: int  # lines in the human form, when no text in it holds a newline


@st.composite
def _entries(draw: st.DrawFn) -> _Generated:
    """An entry of any kind, serializer and compressor, some with texts far past 200 characters."""
    options = draw(entry_options())
    if draw(st.booleans()):
        response = draw(http_responses)
        if draw(st.booleans()):
            long_header = (draw(st.binary(max_size=20)), draw(st.binary(min_size=150, max_size=600)))
            response = larder.HttpResponse(
                response.status, [*response.headers, long_header], response.body, response.content_encoding
            )
        return _Generated(larder.encode_response(response, **options), response.body, 13 + len(response.headers))
    serializer = draw(st.sampled_from(larder.SERIALIZERS))
    entry = larder.encode(draw(values_for(serializer)), serializer=serializer, **options)
    return _Generated(entry, larder.decode_payload(entry)[1], 11)


@settings(max_examples=examples(60))
@given(generated=_entries())
def test_inspect_body_of_generated_entries_is_identical(rust: Path, generated: _Generated) -> None:
    shown = _both(rust, ["inspect", "--body"], generated.entry).stdout
    assert shown == _both(rust, ["inspect"], generated.entry).stdout + b"\n" + generated.body


# --- inspect on a terminal -----------------------------------------------------------------------------------------


def test_long_texts_are_cut_on_a_terminal_unless_full(rust: Path) -> None:
    entry = _both(rust, ["encode", "--serializer", "text", *BARE], b"x" * 300).stdout
    head = _head("text", "value", 323, 300)
    cut = _both(rust, ["inspect"], entry, force_tty="1").stdout
    assert cut == (head + 'value:       "' + "x" * 199 + "… (102 more characters)\n").encode()
    whole = (head + 'value:       "' + "x" * 300 + '"\n').encode()
    assert _both(rust, ["inspect", "--full"], entry, force_tty="1").stdout == whole
    assert _both(rust, ["inspect"], entry, force_tty="0").stdout == whole
    assert _both(rust, ["inspect"], entry).stdout == whole
    assert _both(rust, ["inspect", "--json"], entry, force_tty="1").stdout.endswith(b'"' + b"x" * 300 + b'"}\n')
    # 199 x and two quotes: one character over, and it is "character".
    entry = _both(rust, ["encode", "--serializer", "text", *BARE], b"x" * 199).stdout
    cut = _both(rust, ["inspect"], entry, force_tty="1").stdout
    assert cut.endswith(('value:       "' + "x" * 199 + "… (1 more character)\n").encode())


def test_headers_and_bodies_are_cut_on_a_terminal(rust: Path) -> None:
    document = b'{"status":200,"headers":[["x-long","' + b"v" * 300 + b'"]],"body":"' + b"b" * 250 + b'"}'
    entry = _both(rust, ["encode", "--kind", "response", *BARE], document).stdout
    expected = (
        _head("msgpack", "response", 600, 577)
        + "status:      200\nencoding:    identity\n"
        + "header:      x-long: "
        + "v" * 192
        + "… (108 more characters)\nbody:        250 bytes\n\n"
        + "b" * 200
        + "… (50 more characters)\n"
    )
    assert _both(rust, ["inspect", "--body"], entry, force_tty="1").stdout == expected.encode()


@pytest.mark.parametrize(
    ("body", "shown"),
    [
        ("/wA=", b'{"$base64":"/wA="}\n'),  # not UTF-8: shown as base64, --full or not
        ("b2sK", b"ok\n"),  # ends with a newline: no second one
        ("", b""),  # empty: nothing after the empty line
        (base64.b64encode("é".encode() * 199).decode(), "é".encode() * 199 + b"\n"),
    ],
    ids=["binary", "newline", "empty", "two-byte"],
)
@pytest.mark.parametrize("full", [False, True], ids=["cut", "full"])
def test_bodies_on_a_terminal_are_display_text_ending_a_line(rust: Path, body: str, shown: bytes, full: bool) -> None:
    document = f'{{"status":200,"body":{{"$base64":"{body}"}}}}'.encode()
    entry = _both(rust, ["encode", "--kind", "response", *BARE], document).stdout
    args = ["inspect", "--body", *(["--full"] if full else [])]
    assert _both(rust, args, entry, force_tty="1").stdout.endswith(b" bytes\n\n" + shown)
    assert _both(rust, args, entry, force_tty="0").stdout.endswith(b" bytes\n\n" + base64.b64decode(body))


def _cut(text: str) -> str:
    """spec/CLI.md's rule for a terminal, written out again here: 200 characters, then what was left out."""
    more = len(text) - 200
    return text if more <= 0 else f"{text[:200]}… ({more} more character{'' if more == 1 else 's'})"


def _terminal_body(body: bytes, cut: bool) -> str:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        text = f'{{"$base64":"{base64.b64encode(body).decode()}"}}'
    text = _cut(text) if cut else text
    return text if text == "" or text.endswith("\n") else text + "\n"


@settings(max_examples=examples(60))
@given(generated=_entries(), body=st.booleans(), full=st.booleans())
def test_the_terminal_form_of_generated_entries_is_identical(
    rust: Path, generated: _Generated, body: bool, full: bool
) -> None:
    args = ["inspect", *(["--body"] if body else []), *(["--full"] if full else [])]
    shown = _both(rust, args, generated.entry, force_tty="1").stdout.decode("utf-8")
    piped = _both(rust, ["inspect"], generated.entry).stdout.decode("utf-8")
    lines = piped.splitlines(keepends=True)
    if len(lines) != generated.lines or piped.count("\n") != generated.lines:
        return  # a version, tag or header holds a line break: the languages agree, which is what counts here
    expected = piped if full else "".join(line[:LABEL] + _cut(line[LABEL:-1]) + "\n" for line in lines)
    if body:
        expected += "\n" + _terminal_body(generated.body, cut=not full)
    assert shown == expected


def test_a_real_terminal_is_detected_alike(rust: Path, tmp_path: Path) -> None:
    """Under a pseudo-terminal, without $LARDER_FORCE_TTY, both must notice the terminal themselves."""
    path = tmp_path / "long.entry"
    path.write_bytes(larder.encode("x" * 300, serializer="text", created_at=0, compressor="none"))
    expected = (_head("text", "value", 323, 300) + 'value:       "' + "x" * 199 + "… (102 more characters)\n").encode()
    for command in ([str(rust)], python_command()):
        run = run_in_terminal([*command, "inspect", str(path)])
        assert (run.status, run.stderr) == (0, ""), command
        assert run.stdout == expected, command


def _values(help_text: str, option: str) -> list[str]:
    """The values help lists for `option`: clap's `[possible values: a, b]` after it, or argparse's `{a,b}`."""
    found = re.search(rf"^ +{option} ", help_text, re.MULTILINE)
    assert found is not None, f"{option} is not listed in\n{help_text}"
    after = help_text[found.end() :]
    if after.startswith("{"):
        return after[1 : after.index("}")].split(",")
    listed = after.split("[possible values: ", 1)[1]
    return listed[: listed.index("]")].split(", ")


@pytest.mark.parametrize(
    ("option", "values"),
    [
        ("--serializer", larder.SERIALIZERS),
        ("--compressor", larder.COMPRESSORS),
        ("--kind", ("value", "response")),
    ],
)
def test_help_lists_the_accepted_values(rust: Path, option: str, values: Any) -> None:
    for run in (run_rust(rust, ["encode", "--help"]), run_python_process(["encode", "--help"])):
        assert run.status == 0
        assert sorted(_values(run.stdout.decode(), option)) == sorted(values)
