"""What `inspect` prints (spec/CLI.md): an entry's header and value, as labelled lines or as one JSON object, and
on request its body.

The text is specified to the byte so that every implementation's `inspect` can be compared with every other's; the
value is decoded for display here (pairs kept, exact ext bytes, see msgpack_reader) rather than through `decode`.
A person reading on a terminal gets long texts cut (`cut=True`), which programs never see.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Final

from .compressors import DEFAULT_MAX_SIZE
from .display import (
    CUT_AT,
    DisplayTooDeep,
    DisplayTooLarge,
    JsonIntegerText,
    bytes_json,
    bytes_text,
    cut_text,
    display_json,
    quote,
)
from .entry import decode_payload
from .errors import BAD_VALUE, TOO_LARGE, InvalidEntry
from .header import Header
from .msgpack_reader import MapPairs, read_display_tree, within_read_budget
from .response import HttpResponse
from .serializers import MAX_NESTING, decode_text, loads_json

#: The last millisecond of year 9999: later times print without their date.
LAST_MS_OF_9999: Final = 253_402_300_799_999
#: `inspect` refuses (too_large) to write a value's display JSON longer than this many characters per payload byte,
#: plus the allowance: see `display_limit`.
DISPLAY_EXPANSION: Final = 16
DISPLAY_ALLOWANCE: Final = 1 << 20
_EPOCH: Final = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


@dataclass(frozen=True)
class Report:
    """An entry decoded for display: its header, its sizes, its value in display JSON (or its response), and the
    decompressed payload it was read from."""

    header: Header
    stored_bytes: int
    payload_bytes: int
    value: str | HttpResponse
    payload: bytes

    @classmethod
    def of(cls, data: bytes, max_size: int = DEFAULT_MAX_SIZE) -> Report:
        """Decodes `data` fully. Raises `InvalidEntry` whenever `decode` would, and also for a value nested more than
        100 deep (bad_value) or whose display would be unreasonably long (too_large): see `value_display`. It
        accepts a little more than `decode` otherwise: MessagePack that is well formed but that Python cannot turn
        into its own types (a str that is not UTF-8, an ext -1 that is not a valid timestamp, a map used as a map
        key) and JSON integers too long for `int()` are still displayed."""
        header, payload = decode_payload(data, max_size=max_size)
        value: str | HttpResponse
        if header.kind == "response":
            value = HttpResponse.from_payload(payload)
        else:
            value = value_display(header.serializer, payload)
        return cls(header, len(data), len(payload), value, payload)

    def human(self, *, cut: bool = False) -> str:
        """The labelled-lines form, each line `printf "%-12s %s\\n"`, ending with a newline; with `cut` (a person on a
        terminal), each text after a label is cut to `CUT_AT` characters."""
        h = self.header
        lines = [
            ("format", "1"),
            ("kind", h.kind),
            ("serializer", h.serializer),
            ("compressor", h.compressor),
            ("created_at", time_text(h.created_at)),
            ("expires_at", "never" if h.expires_at == 0 else time_text(h.expires_at)),
            ("stale_ms", str(h.stale_ms)),
            ("version", "(none)" if h.version is None else h.version),
            ("tags", ", ".join(h.tags) if h.tags else "(none)"),
            ("size", f"{self.stored_bytes} bytes stored, {self.payload_bytes} bytes payload"),
        ]
        if isinstance(self.value, HttpResponse):
            response = self.value
            lines.append(("status", str(response.status)))
            lines.append(("encoding", response.content_encoding))
            lines.extend(("header", f"{bytes_text(name)}: {bytes_text(value)}") for name, value in response.headers)
            lines.append(("body", f"{len(response.body)} bytes"))
        else:
            lines.append(("value", self.value))
        shown = (lambda text: cut_text(text, CUT_AT)) if cut else (lambda text: text)
        return "".join(f"{label + ':':<12} {shown(text)}\n" for label, text in lines)

    def body_output(self, *, terminal: bool, cut: bool) -> bytes:
        """What `--body` prints after the empty line: an HTTP response's body as stored, or a value's payload. As
        they are for a program; for a person on a terminal, their display text (cut to `CUT_AT` characters with
        `cut`) and a newline to end the output, unless it is empty or ends with one already."""
        body = self.value.body if isinstance(self.value, HttpResponse) else self.payload
        if not terminal:
            return bytes(body)
        text = bytes_text(bytes(body))
        if cut:
            text = cut_text(text, CUT_AT)
        if text and not text.endswith("\n"):
            text += "\n"
        return text.encode("utf-8")

    def json(self) -> str:
        """The one-line JSON form, ending with a newline."""
        h = self.header
        version = "null" if h.version is None else quote(h.version)
        tags = ",".join(quote(tag) for tag in h.tags)
        if isinstance(self.value, HttpResponse):
            response = self.value
            headers = ",".join(f"[{bytes_json(name)},{bytes_json(value)}]" for name, value in response.headers)
            value = (
                f'{{"status":{response.status},"headers":[{headers}],'
                f'"content_encoding":{quote(response.content_encoding)},"body":{bytes_json(response.body)}}}'
            )
        else:
            value = self.value
        return (
            f'{{"format":1,"kind":{quote(h.kind)},"serializer":{quote(h.serializer)},'
            f'"compressor":{quote(h.compressor)},"created_at":{h.created_at},"expires_at":{h.expires_at},'
            f'"stale_ms":{h.stale_ms},"version":{version},"tags":[{tags}],"stored_bytes":{self.stored_bytes},'
            f'"payload_bytes":{self.payload_bytes},"value":{value}}}\n'
        )


def value_display(serializer: str, payload: bytes) -> str:
    """The display JSON of a value payload. Raises `InvalidEntry`: bad_value if it does not deserialize or holds
    arrays or maps nested more than 100 deep (`MAX_NESTING`), too_large if its display would exceed
    `display_limit(payload)` characters (whichever the Rust CLI meets first: see `display_json`)."""
    if serializer == "msgpack":
        return _limited_display(read_display_tree(payload), payload, msgpack=True)
    if serializer == "json":
        tree = loads_json(payload, object_pairs_hook=MapPairs, parse_int=_int_or_text)
        return _limited_display(tree, payload, msgpack=False)
    if serializer == "text":
        return quote(decode_text(payload))
    return bytes_json(bytes(payload))


def _limited_display(tree: object, payload: bytes, *, msgpack: bool) -> str:
    limit = display_limit(payload)
    try:
        return display_json(tree, limit, MAX_NESTING)
    except DisplayTooDeep:
        raise InvalidEntry(BAD_VALUE, f"value nested more than {MAX_NESTING} levels deep") from None
    except DisplayTooLarge:
        if msgpack and not within_read_budget(payload):
            # The Rust CLI's reader refuses this before displaying anything (see within_read_budget).
            raise InvalidEntry(BAD_VALUE, "msgpack: depth limit exceeded") from None
        raise InvalidEntry(
            TOO_LARGE, f"displaying this {len(payload)}-byte payload would take more than {limit} characters"
        ) from None


def _int_or_text(text: str) -> int | JsonIntegerText:
    """A JSON integer for display: an int, or its text when it is too long for `int()` (over 4,300 digits)."""
    try:
        return int(text)
    except ValueError:
        return JsonIntegerText(text)


def display_limit(payload: bytes) -> int:
    """The longest display JSON `inspect` writes for a payload: far more than any value needs (escaping grows text
    at most sixfold) unless it nests map keys within map keys, whose escaping doubles at each level."""
    return DISPLAY_EXPANSION * len(payload) + DISPLAY_ALLOWANCE


def time_text(ms: int) -> str:
    """`ms (YYYY-MM-DDTHH:MM:SS.mmmZ)`, or just `ms` past the year 9999."""
    if ms > LAST_MS_OF_9999:
        return str(ms)
    moment = _EPOCH + datetime.timedelta(milliseconds=ms)
    date = f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}"
    return f"{ms} ({date}T{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}.{ms % 1000:03d}Z)"


def inspect_text(data: bytes, *, as_json: bool = False, max_size: int | None = None) -> str:
    """What `inspect` prints for `data`. Raises `InvalidEntry` for an invalid entry."""
    report = Report.of(data, DEFAULT_MAX_SIZE if max_size is None else max_size)
    return report.json() if as_json else report.human()
