"""`python -m larder encode|inspect|key`: the format commands every larder implementation ships (spec/CLI.md).

Same flags, same output and same exit statuses as the Rust `larder` binary, so a script can use whichever is
installed and the test suite can compare the two byte for byte: 0 on success, 1 when `inspect` is given an invalid
entry, 2 for a usage error or bad input; error messages are one line on stderr beginning with `larder: `.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import os
import re
import sys
from collections.abc import Sequence
from typing import Any, BinaryIO, NoReturn

from .compressors import DEFAULT_MAX_SIZE
from .entry import DEFAULT_THRESHOLD, encode, encode_response
from .errors import InvalidEntry
from .header import COMPRESSORS, SERIALIZERS, U64_MAX
from .keys import DEFAULT_DROP, url_key
from .report import Report
from .response import CONTENT_ENCODINGS, HttpResponse
from .serializers import parse_json_text

_UNSIGNED = re.compile(r"\+?[0-9]+")
_SIGNED = re.compile(r"[+-]?[0-9]+")
_I32_MIN, _I32_MAX = -(2**31), 2**31 - 1

#: Overrides terminal detection (spec/CLI.md): `1` treats stdout as a terminal, `0` as not, so that tests and
#: scripts can see either form of `inspect` whatever stdout is.
FORCE_TTY_VAR = "LARDER_FORCE_TTY"
#: The same words in every implementation (spec/CLI.md), with no byte offset, whose counting could differ.
NOT_UTF8_TEXT = "stdin is not UTF-8 text (--serializer text); use --serializer raw for other bytes"


class Failure(Exception):
    """A command failed; `status` is its exit status, the message its one line on stderr."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one `larder: ` line and exit status 2, as spec/CLI.md says (worded as the Rust
    CLI words them: the message, then `(see --help)`)."""

    def error(self, message: str) -> NoReturn:
        raise Failure(2, f"{message} (see --help)")


class _Once(argparse.Action):
    """Stores an option's value, refusing the option a second time (as the Rust CLI does)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        seen = f"_given_{self.dest}"
        if getattr(namespace, seen, False):
            raise argparse.ArgumentError(self, "cannot be used multiple times")
        setattr(namespace, seen, True)
        setattr(namespace, self.dest, True if self.nargs == 0 else values)


def main(
    argv: Sequence[str] | None = None,
    *,
    stdin: BinaryIO | None = None,
    stdout: BinaryIO | None = None,
    stderr: BinaryIO | None = None,
) -> int:
    """Runs one command and returns its exit status. The streams default to the process's own (as bytes)."""
    stdin = stdin if stdin is not None else sys.stdin.buffer
    stdout = stdout if stdout is not None else sys.stdout.buffer
    stderr = stderr if stderr is not None else sys.stderr.buffer
    try:
        args = _parser().parse_args(argv)
        output = args.run(args, stdin, stdout)
    except Failure as failure:
        stderr.write(f"larder: {failure}\n".encode("utf-8", errors="backslashreplace"))
        stderr.flush()
        return failure.status
    stdout.write(output)
    stdout.flush()
    return 0


def run() -> NoReturn:
    """The console entry point: `main()` with the process's arguments and streams, then exit."""
    sys.exit(main())


def _parser() -> _Parser:
    parser = _Parser(
        prog="larder",
        description="Encode, inspect and key larder entries (spec/FORMAT.md, spec/CLI.md).",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="{encode,inspect,key}")

    encode_cmd = commands.add_parser(
        "encode",
        help="encode stdin as an entry, written to stdout",
        description="Encode stdin as a larder entry, written to stdout. With --serializer text, stdin's text "
        "(UTF-8) is stored verbatim, a trailing newline included; with raw, stdin's bytes. With msgpack or json, "
        'stdin is one JSON document; with --kind response it is {"status": 200, "headers": [["name", "value"], '
        '...], "body": "...", "content_encoding": "identity"}.',
    )
    encode_cmd.add_argument(
        "--serializer", action=_Once, choices=SERIALIZERS, default="msgpack", help="how the value is serialized"
    )
    encode_cmd.add_argument("--compressor", action=_Once, choices=COMPRESSORS, default="lz4", help="compressor to try")
    encode_cmd.add_argument(
        "--ttl", action=_Once, type=_u64, default=0, metavar="SECS", help="seconds until expiry (0 = never)"
    )
    encode_cmd.add_argument(
        "--stale", action=_Once, type=_u64, default=0, metavar="SECS", help="stale window in seconds"
    )
    encode_cmd.add_argument(
        "--created-at", action=_Once, type=_u64, metavar="MS", help="creation time in ms (default: now)"
    )
    encode_cmd.add_argument("--version", action=_Once, dest="entry_version", metavar="V", help="version string")
    encode_cmd.add_argument("--tag", dest="tags", action="append", default=[], metavar="T", help="a tag; repeatable")
    encode_cmd.add_argument(
        "--threshold",
        action=_Once,
        type=_u64,
        default=DEFAULT_THRESHOLD,
        metavar="BYTES",
        help="compress only payloads this long",
    )
    encode_cmd.add_argument(
        "--level", action=_Once, type=_i32, metavar="N", help="compression level (codec's default if absent)"
    )
    encode_cmd.add_argument(
        "--kind", action=_Once, choices=("value", "response"), default="value", help="what the document is"
    )
    encode_cmd.add_argument(
        "--json-input",
        action=_Once,
        nargs=0,
        default=False,
        help='read stdin as a JSON document with text and raw too: a JSON string, or for raw {"$base64": "..."}',
    )
    encode_cmd.set_defaults(run=_encode)

    inspect_cmd = commands.add_parser(
        "inspect",
        help="print an entry's header and decoded value",
        description="Print an entry's header and decoded value. Exits 1, naming the error kind, for an invalid entry. "
        "On a terminal (not with --json), texts longer than 200 characters are cut, saying how many characters were "
        "left out.",
    )
    inspect_cmd.add_argument("file", nargs="?", default="-", metavar="FILE", help="the entry file; - for stdin")
    inspect_cmd.add_argument(
        "--json", action=_Once, nargs=0, default=False, help="print one JSON object instead of labelled lines"
    )
    inspect_cmd.add_argument(
        "--max-size",
        action=_Once,
        type=_u64,
        default=DEFAULT_MAX_SIZE,
        metavar="BYTES",
        help="largest payload to decompress",
    )
    inspect_cmd.add_argument(
        "--body",
        action=_Once,
        nargs=0,
        default=False,
        help="after the lines, print an empty line and the body: a response's body as stored (still compressed if "
        "its content_encoding says so), or a value's payload (decompressed, still serialized); on a terminal as "
        'text, or {"$base64":...} when not UTF-8. The JSON form always holds the whole body.',
    )
    inspect_cmd.add_argument("--full", action=_Once, nargs=0, default=False, help="do not cut long texts on a terminal")
    inspect_cmd.set_defaults(run=_inspect)

    key_cmd = commands.add_parser(
        "key",
        help="print the cache key of a request URL",
        description="Print the cache key of a request URL (spec/FORMAT.md §5.3).",
    )
    key_cmd.add_argument("url", metavar="URL", help="the request URL, e.g. https://shop.example/p/42?b=2&a=1")
    key_cmd.add_argument("--method", action=_Once, default="GET", help="the request method (default GET)")
    key_cmd.add_argument("--namespace", action=_Once, default="", help="prefix keys with NAMESPACE and a colon")
    key_cmd.add_argument("--drop", dest="drops", action="append", default=[], metavar="PARAM", help="also drop PARAM")
    key_cmd.add_argument(
        "--no-default-drops", action=_Once, nargs=0, default=False, help="do not drop utm_*, gclid, fbclid, msclkid"
    )
    key_cmd.set_defaults(run=_key)
    return parser


def _encode(args: argparse.Namespace, stdin: BinaryIO, _stdout: BinaryIO) -> bytes:
    data = _read_stdin(stdin)
    options: dict[str, Any] = {
        "compressor": args.compressor,
        "threshold": args.threshold,
        "level": args.level,
        "created_at": args.created_at,
        "ttl_ms": min(args.ttl * 1000, U64_MAX),
        "stale_ms": min(args.stale * 1000, U64_MAX),
        "version": args.entry_version,
        "tags": args.tags,
    }
    try:
        if args.kind == "response":
            if args.serializer != "msgpack":
                raise Failure(2, "--kind response needs --serializer msgpack")
            return encode_response(_response_from_json(_json_document(data)), **options)
        if args.serializer in ("text", "raw") and not args.json_input:
            value: Any = _verbatim_value(data, args.serializer)
        else:
            value = _value_from_json(_json_document(data), args.serializer)
        return encode(value, serializer=args.serializer, **options)
    except (TypeError, ValueError) as e:
        raise Failure(2, f"cannot encode: {e}") from None


def _inspect(args: argparse.Namespace, stdin: BinaryIO, stdout: BinaryIO) -> bytes:
    if args.file == "-":
        data = _read_stdin(stdin)
    else:
        try:
            with open(args.file, "rb") as file:
                data = file.read()
        except OSError as e:
            raise Failure(2, f"cannot read {args.file}: {e.strerror or e}") from None
    try:
        report = Report.of(data, args.max_size)
    except InvalidEntry as e:
        raise Failure(1, f"invalid entry: {e.kind}: {e.detail}") from None
    if args.json:
        return report.json().encode("utf-8")
    terminal = _stdout_is_terminal(stdout)
    cut = terminal and not args.full
    output = report.human(cut=cut).encode("utf-8")
    if args.body:
        output += b"\n" + report.body_output(terminal=terminal, cut=cut)
    return output


def _stdout_is_terminal(stdout: BinaryIO) -> bool:
    """Whether stdout is a terminal, unless `FORCE_TTY_VAR` says otherwise."""
    forced = os.environ.get(FORCE_TTY_VAR)
    if forced in ("0", "1"):
        return forced == "1"
    try:
        return stdout.isatty()
    except (AttributeError, ValueError):  # a stream without a file behind it, or a closed one
        return False


def _key(args: argparse.Namespace, stdin: BinaryIO, _stdout: BinaryIO) -> bytes:
    drop = ([] if args.no_default_drops else list(DEFAULT_DROP)) + args.drops
    try:
        key = url_key(args.method, args.url, namespace=args.namespace, drop=drop)
    except ValueError as e:
        raise Failure(2, str(e)) from None
    return f"{key}\n".encode()


def _read_stdin(stdin: BinaryIO) -> bytes:
    try:
        return stdin.read()
    except OSError as e:
        raise Failure(2, f"cannot read stdin: {e}") from None


def _json_document(data: bytes) -> Any:
    try:
        return parse_json_text(data.decode("utf-8"))
    except ValueError as e:  # UnicodeDecodeError and json.JSONDecodeError are ValueErrors
        raise Failure(2, f"stdin is not a JSON document: {e}") from None


def _verbatim_value(data: bytes, serializer: str) -> str | bytes:
    """Stdin stored as it came, for text and raw: nothing is unwrapped or trimmed, not even a final newline."""
    if serializer == "raw":
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise Failure(2, NOT_UTF8_TEXT) from None


def _value_from_json(document: Any, serializer: str) -> Any:
    """The value of a JSON document read with `--json-input` or for the msgpack and json serializers."""
    if serializer == "text":
        if not isinstance(document, str):
            raise Failure(2, "--serializer text --json-input needs a JSON string on stdin")
        return document
    if serializer == "raw":
        return _bytes_from_json(document, '--serializer raw --json-input needs a JSON string or {"$base64": ...}')
    return document


def _response_from_json(document: Any) -> HttpResponse:
    status = document.get("status") if isinstance(document, dict) else None
    if isinstance(status, bool) or not isinstance(status, int):
        raise Failure(2, 'a response document needs an integer "status"')
    headers = []
    if "headers" in document:
        if not isinstance(document["headers"], list):
            raise Failure(2, '"headers" must be a list of [name, value]')
        for pair in document["headers"]:
            if not isinstance(pair, list) or len(pair) != 2:
                raise Failure(2, "each header must be a [name, value] pair")
            name = _bytes_from_json(pair[0], "a header name must be a string")
            value = _bytes_from_json(pair[1], "a header value must be a string")
            headers.append((name, value))
    body = (
        _bytes_from_json(document["body"], '"body" must be a string or {"$base64": ...}') if "body" in document else b""
    )
    encoding = document.get("content_encoding", "identity")
    if not isinstance(encoding, str):
        raise Failure(2, '"content_encoding" must be a string')
    # Accepted in any ASCII case, as the Rust CLI does; stored in the canonical lowercase form.
    canonical = encoding.lower() if encoding.isascii() else encoding
    if canonical not in CONTENT_ENCODINGS:
        raise Failure(2, f"unknown content encoding {encoding!r} (expected identity, gzip, br or zstd)")
    try:
        return HttpResponse(status, headers, body, canonical)
    except ValueError as e:
        raise Failure(2, str(e)) from None


def _bytes_from_json(value: Any, what: str) -> bytes:
    """A JSON string's UTF-8 bytes, or the bytes of `{"$base64": "..."}` (standard alphabet, padded)."""
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, dict) and len(value) == 1 and isinstance(value.get("$base64"), str):
        text = value["$base64"]
        try:
            data = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError) as e:
            raise Failure(2, f"bad base64: {e}") from None
        if base64.b64encode(data).decode("ascii") != text:
            raise Failure(2, "bad base64: not in canonical padded form")
        return data
    raise Failure(2, what)


def _u64(text: str) -> int:
    if not _UNSIGNED.fullmatch(text) or int(text) > U64_MAX:
        raise argparse.ArgumentTypeError(f"invalid value {text!r}: expected an integer in 0..2^64-1")
    return int(text)


def _i32(text: str) -> int:
    if not _SIGNED.fullmatch(text) or not _I32_MIN <= int(text) <= _I32_MAX:
        raise argparse.ArgumentTypeError(f"invalid value {text!r}: expected a 32-bit integer")
    return int(text)
