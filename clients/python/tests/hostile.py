"""The hostile server of crates/testkit (`larder-hostile`), started for a test: it answers handshakes like memcached
or Redis and every data command with one kind of bad reply (drip, huge, nested, endless-line, garbage, silent).
$LARDER_HOSTILE names the binary (`make test-python` passes it), else target/debug/larder-hostile; a missing binary
fails the test, never skips it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from support import REPO_ROOT
from vector_checks.hostile import HostileServer


def hostile_bin() -> Path:
    path = Path(os.environ.get("LARDER_HOSTILE", "target/debug/larder-hostile"))
    if not path.is_absolute():
        path = REPO_ROOT / path
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(
            f"larder-hostile is missing at {path}: build it with `cd {REPO_ROOT} && cargo build -p larder-testkit"
            " --bins` (or point LARDER_HOSTILE at it)",
            pytrace=False,
        )
    return path


class Hostile(HostileServer):
    """One hostile server of the suite's binary; it exits when its standard input closes (`stop`)."""

    def __init__(self, protocol: str, behaviour: str, *args: str) -> None:
        super().__init__(str(hostile_bin()), protocol, behaviour, list(args))
