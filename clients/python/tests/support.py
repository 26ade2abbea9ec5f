"""Shared by the tests: the spec's vectors, value comparison, hypothesis strategies, and the two CLIs as runners."""

from __future__ import annotations

import decimal
import io
import json
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import msgpack
import pytest
from hypothesis import strategies as st

import larder
from larder import cli
from vector_checks import same_json as same_json  # shared with the conformance runner
from vector_checks import vector_bytes as vector_bytes
from vector_checks import vector_response as vector_response
from vector_checks import vector_value as vector_value

REPO_ROOT = Path(__file__).resolve().parents[3]
VECTORS = REPO_ROOT / "spec" / "vectors"
DEFAULT_LARDER_BIN = "target/debug/larder"


def load_vectors(name: str) -> dict[str, Any]:
    """A vector file of spec/vectors, checked to be the schema these tests understand."""
    data: dict[str, Any] = json.loads((VECTORS / name).read_text(encoding="utf-8"))
    assert data["schema"] == 1, f"{name}: unknown schema {data['schema']}"
    return data


def examples(count: int) -> int:
    """A hypothesis example count, multiplied by $LARDER_TEST_SCALE (default 1) for a longer hunt for differences."""
    return max(1, round(count * float(os.environ.get("LARDER_TEST_SCALE", "1"))))


def has_tied_float(value: Any) -> bool:
    """Whether `value` holds a float whose exact value lies halfway between two shortest texts that both read back
    to it (2**49 + 0.25 is 562949953421312.2 or ...3). Python's repr, which spec/CLI.md names, picks the even
    digit, and so must every implementation's display."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and _tied(item):
            return True
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return False


def _tied(x: float) -> bool:
    if not math.isfinite(x) or x == 0:
        return False
    with decimal.localcontext() as context:
        context.prec = 1100  # enough for the exact value of any float64
        exact = abs(decimal.Decimal(x))
        unit = decimal.Decimal(1).scaleb(int(decimal.Decimal(repr(x)).as_tuple().exponent))
        lower = exact.quantize(unit, rounding=decimal.ROUND_FLOOR)
        upper = lower + unit
        return exact - lower == upper - exact and float(lower) == float(upper) == abs(x)


def bare_header(kind: str = "value", serializer: str = "msgpack", compressor: str = "none") -> bytes:
    """The smallest header for these codecs (times 0, no optional fields): prepend it to a payload under test."""
    return bytes(
        larder.header.pack_header(
            kind=kind,
            serializer=serializer,
            compressor=compressor,
            created_at=0,
            expires_at=0,
            stale_ms=0,
            version=None,
            tags=(),
        )
    )


# --- hypothesis strategies ---------------------------------------------------------------------------------------

INT64_MIN = -(2**63)
UINT64_MAX = 2**64 - 1

#: Floats whose exact value lies halfway between two shortest texts that both read back to it (see
#: has_tied_float): m + 0.25 and m + 0.75 for 2**49 <= m < 2**50, where floats are 1/8 apart. Random floats are
#: almost never ties, so they are drawn on purpose.
tied_floats = st.builds(
    lambda m, frac, sign: sign * (m + frac),
    st.integers(min_value=2**49, max_value=2**50 - 1),
    st.sampled_from([0.25, 0.75]),
    st.sampled_from([1.0, -1.0]),
)

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=INT64_MIN, max_value=UINT64_MAX),
    st.integers(min_value=-300, max_value=300),
    st.floats(allow_nan=False, allow_infinity=False),
    tied_floats,
    st.text(max_size=40),
)

#: Values a JSON document can express: maps with string keys (order matters), arrays, and the scalars.
json_values = st.recursive(
    json_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=6),
        st.dictionaries(st.text(max_size=12), children, max_size=6),
    ),
    max_leaves=25,
)


@st.composite
def sized_json_values(draw: st.DrawFn) -> Any:
    """JSON values, sometimes repeated into a list long enough (over 1 KiB) that compression is kept."""
    value = draw(json_values)
    if draw(st.booleans()):
        return [value] * draw(st.integers(min_value=40, max_value=120))
    return value


def values_for(serializer: str) -> st.SearchStrategy[Any]:
    """Values `serializer` can hold, some long and repetitive enough that compression is kept."""
    if serializer in ("msgpack", "json"):
        return sized_json_values()
    if serializer == "text":
        return st.one_of(st.text(), st.text(min_size=1, max_size=5).map(lambda t: t * 400))
    return st.one_of(st.binary(), st.binary(min_size=1, max_size=5).map(lambda b: b * 400))


header_texts = st.text(max_size=20)

http_responses = st.builds(
    larder.HttpResponse,
    status=st.integers(min_value=100, max_value=999),
    headers=st.lists(st.tuples(st.binary(max_size=20), st.binary(max_size=40)), max_size=6),
    body=st.one_of(st.binary(max_size=200), st.binary(min_size=1, max_size=8).map(lambda b: b * 300)),
    content_encoding=st.sampled_from(larder.CONTENT_ENCODINGS),
)


@st.composite
def entry_options(draw: st.DrawFn) -> dict[str, Any]:
    """Keyword arguments for `larder.encode`/`encode_response`: every header field, any compressor."""
    return {
        "compressor": draw(st.sampled_from(larder.COMPRESSORS)),
        "threshold": draw(st.sampled_from([0, 16, 1024])),
        "created_at": draw(st.integers(min_value=0, max_value=UINT64_MAX)),
        "expires_at": draw(st.one_of(st.just(0), st.integers(min_value=0, max_value=UINT64_MAX))),
        "stale_ms": draw(st.one_of(st.just(0), st.integers(min_value=0, max_value=UINT64_MAX))),
        "version": draw(st.one_of(st.none(), header_texts)),
        "tags": draw(st.lists(header_texts, max_size=4)),
    }


# --- any MessagePack, beyond what JSON expresses ---------------------------------------------------------------


class PairsMap(list):  # type: ignore[type-arg]
    """A MessagePack map to generate: any keys (maps, arrays, bytes…), duplicates allowed."""


class ExtObject(NamedTuple):
    """An ext object of any type code (msgpack.ExtType packs only 0..127)."""

    code: int
    data: bytes


_PACKER = msgpack.Packer(use_bin_type=True)
_FIXEXT = {1: 0xD4, 2: 0xD5, 4: 0xD6, 8: 0xD7, 16: 0xD8}


def pack_msgpack(obj: Any) -> bytes:
    """MessagePack of `obj`, where a `PairsMap` is written as a map of its pairs and an `ExtObject` as an ext."""
    if isinstance(obj, PairsMap):
        return _PACKER.pack_map_header(len(obj)) + b"".join(pack_msgpack(k) + pack_msgpack(v) for k, v in obj)
    if isinstance(obj, ExtObject):
        size = len(obj.data)
        head = bytes([_FIXEXT[size]]) if size in _FIXEXT else bytes([0xC7, size])
        return head + obj.code.to_bytes(1, "big", signed=True) + obj.data
    if isinstance(obj, list):
        return _PACKER.pack_array_header(len(obj)) + b"".join(pack_msgpack(item) for item in obj)
    return bytes(msgpack.packb(obj, use_bin_type=True))


msgpack_scalars = st.one_of(
    json_values,
    st.binary(max_size=8),
    st.builds(ExtObject, st.integers(min_value=-128, max_value=127), st.binary(max_size=20)),
    st.builds(
        msgpack.Timestamp,
        st.integers(min_value=-(2**40), max_value=2**40),
        st.integers(min_value=0, max_value=10**9 - 1),
    ),
)

#: MessagePack objects of every kind: ext types, bin, timestamps, maps keyed by anything (maps too), duplicate keys.
msgpack_objects = st.recursive(
    msgpack_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.lists(st.tuples(children, children), max_size=4).map(PairsMap),
    ),
    max_leaves=12,
)


# --- the two CLIs --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    """What a command did: exit status, stdout bytes, stderr text."""

    status: int
    stdout: bytes
    stderr: str

    def assert_one_line_error(self, status: int = 2) -> None:
        """The CLI's failure contract: exit `status`, nothing on stdout, a single `larder: ` line on stderr."""
        assert self.status == status, (self.status, self.stderr)
        assert self.stdout == b""
        assert self.stderr.startswith("larder: "), self.stderr
        assert self.stderr.count("\n") == 1, self.stderr

    @property
    def error_kind(self) -> str:
        """The error kind of an `inspect` failure line, `larder: invalid entry: <kind>: <detail>`."""
        prefix = "larder: invalid entry: "
        assert self.stderr.startswith(prefix), f"unexpected stderr: {self.stderr!r}"
        return self.stderr[len(prefix) :].split(":", 1)[0]


def command_env(force_tty: str | None = None) -> dict[str, str]:
    """This process's environment for a CLI run: $LARDER_FORCE_TTY set to `force_tty`, or removed when it is None
    (so a developer's own setting cannot change what the tests see)."""
    env = {name: value for name, value in os.environ.items() if name != cli.FORCE_TTY_VAR}
    if force_tty is not None:
        env[cli.FORCE_TTY_VAR] = force_tty
    return env


@contextmanager
def _forced_tty(force_tty: str | None) -> Iterator[None]:
    """$LARDER_FORCE_TTY as `force_tty` (removed when None) while the block runs in this process."""
    saved = os.environ.pop(cli.FORCE_TTY_VAR, None)
    if force_tty is not None:
        os.environ[cli.FORCE_TTY_VAR] = force_tty
    try:
        yield
    finally:
        os.environ.pop(cli.FORCE_TTY_VAR, None)
        if saved is not None:
            os.environ[cli.FORCE_TTY_VAR] = saved


def run_python(args: list[str], stdin: bytes = b"", *, force_tty: str | None = None) -> Run:
    """`python -m larder ARGS`, run in this process (larder.cli.main) for speed; stdout is not a terminal unless
    `force_tty` says so ($LARDER_FORCE_TTY)."""
    out, err = io.BytesIO(), io.BytesIO()
    with _forced_tty(force_tty):
        status = cli.main(args, stdin=io.BytesIO(stdin), stdout=out, stderr=err)
    return Run(status, out.getvalue(), err.getvalue().decode("utf-8"))


def python_command() -> list[str]:
    """The command that runs `python -m larder` as a user runs it."""
    return [sys.executable, "-m", "larder"]


def run_python_process(args: list[str], stdin: bytes = b"", *, force_tty: str | None = None) -> Run:
    """`python -m larder ARGS` as a separate process, exactly as a user runs it."""
    done = subprocess.run(
        [*python_command(), *args],
        input=stdin,
        capture_output=True,
        timeout=60,
        check=False,
        env=command_env(force_tty),
    )
    return Run(done.returncode, done.stdout, done.stderr.decode("utf-8", errors="replace"))


def run_in_terminal(command: list[str]) -> Run:
    """`command` with stdout a pseudo-terminal (so `isatty` is true, with $LARDER_FORCE_TTY removed) and stdin
    empty. The terminal's output processing is turned off, so `\n` arrives as written rather than as `\r\n`."""
    import pty
    import termios

    leader, follower = pty.openpty()
    attributes = termios.tcgetattr(follower)
    attributes[1] &= ~termios.OPOST
    termios.tcsetattr(follower, termios.TCSANOW, attributes)
    try:
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=follower, stderr=subprocess.PIPE, env=command_env()
        )
    finally:
        os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 1 << 16)
        except OSError:  # EIO: every writer to the terminal has closed it
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert process.stderr is not None
    stderr = process.stderr.read()
    process.stderr.close()
    status = process.wait(timeout=60)
    return Run(status, b"".join(chunks), stderr.decode("utf-8", errors="replace"))


def larder_bin() -> Path:
    """The Rust `larder` binary: $LARDER_BIN (relative paths from the repo root), else target/debug/larder."""
    path = Path(os.environ.get("LARDER_BIN", DEFAULT_LARDER_BIN))
    if not path.is_absolute():
        path = REPO_ROOT / path
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(
            f"the Rust larder binary is missing at {path}: build it with `cd {REPO_ROOT} && cargo build -p larder-cli`"
            " (or point LARDER_BIN at it); the cross-language tests cannot run without it",
            pytrace=False,
        )
    return path


def run_rust(binary: Path, args: list[str], stdin: bytes = b"", *, force_tty: str | None = None) -> Run:
    """The Rust `larder ARGS`; stdout is not a terminal unless `force_tty` says so ($LARDER_FORCE_TTY)."""
    done = subprocess.run(
        [str(binary), *args],
        input=stdin,
        capture_output=True,
        timeout=60,
        check=False,
        env=command_env(force_tty),
    )
    return Run(done.returncode, done.stdout, done.stderr.decode("utf-8", errors="replace"))


#: The tests' Django SECRET_KEY: LarderCache signs its pickles with it (spec/FORMAT.md §2).
DJANGO_SECRET_KEY = "larder-tests-only-secret"


def default_cache(store_url: str) -> dict[str, dict[str, Any]]:
    return {
        "default": {
            "BACKEND": "larder.django.LarderCache",
            "LOCATION": store_url,
            "KEY_PREFIX": "dj",
            "OPTIONS": {"compressor": "zstd"},
        }
    }


def configure_django(store_url: str | None = None) -> None:
    """Configures Django once per test process (settings.configure cannot be repeated), and, given `store_url`,
    points the default cache at it (a LarderCache), whichever test configured Django first: tests run in any order.
    Tests change other settings with override_settings."""
    import django
    from django.conf import settings

    if not settings.configured:
        settings.configure(
            CACHES=default_cache(store_url or "memory://"),
            ALLOWED_HOSTS=["*"],
            SECRET_KEY=DJANGO_SECRET_KEY,
        )
        django.setup()
    if store_url is not None and settings.CACHES["default"]["LOCATION"] != store_url:
        from django.test import override_settings

        override_settings(CACHES=default_cache(store_url)).enable()  # resets django.core.cache.caches too
