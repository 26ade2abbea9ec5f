"""The hostile server of crates/testkit (`larder-hostile`), started for a test: it answers handshakes like memcached
or Redis and every data command with one kind of bad reply (drip, huge, nested, endless-line, garbage, silent).
$LARDER_HOSTILE names the binary (`make test-python` passes it), else target/debug/larder-hostile; a missing binary
fails the test, never skips it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from support import REPO_ROOT


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


class Hostile:
    """One hostile server; it exits when its standard input closes (`stop`)."""

    def __init__(self, protocol: str, behaviour: str, *args: str) -> None:
        self.process = subprocess.Popen(
            [str(hostile_bin()), protocol, behaviour, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert self.process.stdout is not None
        self.address = self.process.stdout.readline().decode().strip()
        if not self.address:
            self.stop()
            raise RuntimeError(f"larder-hostile {protocol} {behaviour} did not start")

    def stop(self) -> None:
        if self.process.stdin is not None and not self.process.stdin.closed:
            self.process.stdin.close()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()
