"""The Python CLI's own contract (spec/CLI.md), without the Rust binary: inputs, outputs and exit statuses."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

import larder
from larder import cli
from support import run_python, run_python_process

EXAMPLE_ARGS = ["encode", "--created-at", "1700000000000", "--ttl", "60", "--version", "v1", "--tag", "user:7"]


def test_encode_then_inspect_from_a_file_and_from_stdin(tmp_path: Path) -> None:
    encoded = run_python(EXAMPLE_ARGS, b'{"id":7,"name":"Ada"}')
    assert encoded.status == 0
    path = tmp_path / "entry.bin"
    path.write_bytes(encoded.stdout)
    from_file, from_stdin, from_dash = (
        run_python(["inspect", str(path)]),
        run_python(["inspect"], encoded.stdout),
        run_python(["inspect", "-", "--json"], encoded.stdout),
    )
    assert from_file == from_stdin
    assert from_file.stdout.decode().endswith('value:       {"id":7,"name":"Ada"}\n')
    assert from_dash.stdout.count(b"\n") == 1
    assert b'"tags":["user:7"]' in from_dash.stdout


@pytest.mark.parametrize(
    ("args", "stdin", "value"),
    [
        (["encode", "--serializer", "text"], "héllo\n".encode(), "héllo\n"),
        (["encode", "--serializer", "text"], b'"h\\u00e9llo"', '"h\\u00e9llo"'),
        (["encode", "--serializer", "text"], b"", ""),
        (["encode", "--serializer", "raw"], b"\xff\x00\n", b"\xff\x00\n"),
        (["encode", "--serializer", "text", "--json-input"], b'"h\\u00e9llo"', "héllo"),
        (["encode", "--serializer", "raw", "--json-input"], b'{"$base64": "/wA="}', b"\xff\x00"),
        (["encode", "--serializer", "raw", "--json-input"], b'"text"', b"text"),
        (["encode", "--serializer", "msgpack", "--json-input"], b"[1]", [1]),
        (["encode", "--serializer", "json"], b'{"b": [1, 2.5], "a": null}', {"b": [1, 2.5], "a": None}),
        (["encode", "--compressor", "zstd", "--threshold", "0", "--level", "19"], b'"' + b"z" * 500 + b'"', "z" * 500),
    ],
)
def test_encode_documents(args: list[str], stdin: bytes, value: object) -> None:
    run = run_python(args, stdin)
    assert (run.status, run.stderr) == (0, "")
    assert larder.decode(run.stdout).value == value


def test_encode_response_document() -> None:
    document = b'{"status": 301, "headers": [["location", "/new"], ["x-bin", {"$base64": "/w=="}]], "body": "moved"}'
    run = run_python(["encode", "--kind", "response", "--stale", "30", "--created-at", "0", "--ttl", "1"], document)
    entry = larder.decode(run.stdout)
    assert (entry.kind, entry.expires_at, entry.stale_ms) == ("response", 1000, 30000)
    assert entry.value == larder.HttpResponse(301, [(b"location", b"/new"), (b"x-bin", b"\xff")], b"moved")


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["frobnicate"],
        ["encode", "--compressor", "lzma"],
        ["encode", "--ttl", "-1"],
        ["encode", "--ttl", "1_000"],
        ["encode", "--created-at", "18446744073709551616"],
        ["encode", "--level", "2147483648"],
        ["encode", "--threshold", "1", "--threshold", "2"],
        ["inspect", "--json", "--json"],
        ["inspect", "a", "b"],
        ["key"],
        ["key", "http://a/", "--method"],
        ["key", "http://a/", "--no-default-drops", "--no-default-drops"],
    ],
)
def test_usage_errors_are_one_line_and_exit_2(args: list[str]) -> None:
    run = run_python(args, b"1")
    run.assert_one_line_error(2)
    assert run.stderr.endswith(" (see --help)\n")  # as the Rust CLI words them


def test_bad_input_is_not_worded_as_a_usage_error() -> None:
    for args, stdin in ((["encode"], b"[" * 101 + b"]" * 101), (["encode", "--serializer", "json"], b"1e400")):
        run = run_python(args, stdin)
        assert run.status == 2
        assert run.stderr.startswith("larder: cannot encode: ")
        assert "(see --help)" not in run.stderr


def test_invalid_entry_exits_1_naming_the_kind() -> None:
    run = run_python(["inspect"], b"\xc1\x4c\x01\x00\x01\x06" + bytes(17))
    run.assert_one_line_error(1)
    assert run.stderr.startswith("larder: invalid entry: unknown_codec: ")


def test_key_flags() -> None:
    url = "https://Shop.Example:443/p/42?utm_source=news&b=2&a=1&gclid=x&session=9#top"
    assert (
        run_python(["key", url, "--namespace", "www"]).stdout
        == b"www:GET:https://shop.example/p/42?a=1&b=2&session=9\n"
    )
    assert run_python(["key", url, "--drop", "session", "--method", "head"]).stdout.startswith(b"HEAD:https://")
    assert b"utm_source=news" in run_python(["key", url, "--no-default-drops"]).stdout


def test_help_exits_0() -> None:
    run = run_python_process(["--help"])
    assert run.status == 0
    assert b"encode" in run.stdout
    assert b"inspect" in run.stdout


class _Terminal(io.BytesIO):
    """A stdout that says it is a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("stdout", "force_tty", "cut"),
    [
        (_Terminal, None, True),
        (_Terminal, "0", False),
        (_Terminal, "yes", True),  # only 0 and 1 override: anything else asks the stream
        (io.BytesIO, None, False),
        (io.BytesIO, "1", True),
        (io.BytesIO, "", False),
    ],
)
def test_inspect_asks_its_stdout_whether_it_is_a_terminal(
    monkeypatch: pytest.MonkeyPatch, stdout: type[io.BytesIO], force_tty: str | None, cut: bool
) -> None:
    if force_tty is None:
        monkeypatch.delenv("LARDER_FORCE_TTY", raising=False)
    else:
        monkeypatch.setenv("LARDER_FORCE_TTY", force_tty)
    entry = larder.encode("x" * 201, serializer="text", created_at=0)
    out = stdout()
    assert cli.main(["inspect"], stdin=io.BytesIO(entry), stdout=out, stderr=io.BytesIO()) == 0
    last = out.getvalue().decode().splitlines()[-1]
    assert last == ('value:       "' + "x" * 199 + "… (3 more characters)" if cut else f'value:       "{"x" * 201}"')


def test_help_describes_the_input_and_body_flags() -> None:
    encode_help, inspect_help = run_python_process(["encode", "--help"]), run_python_process(["inspect", "--help"])
    assert b"--json-input" in encode_help.stdout
    assert b"--body" in inspect_help.stdout
    assert b"--full" in inspect_help.stdout
