"""The fault proxy of crates/testkit (`larder-faults`), which outage.json's cases put between a cache and a real
memcached or Redis (tests/vector_checks/outage.py drives it). $LARDER_FAULTS names the binary (`make test-python`
passes it), else target/debug/larder-faults; a missing binary fails the test, never skips it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from support import REPO_ROOT


def faults_bin() -> Path:
    path = Path(os.environ.get("LARDER_FAULTS", "target/debug/larder-faults"))
    if not path.is_absolute():
        path = REPO_ROOT / path
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(
            f"larder-faults is missing at {path}: build it with `cd {REPO_ROOT} && cargo build -p larder-testkit"
            " --bins` (or point LARDER_FAULTS at it)",
            pytrace=False,
        )
    return path
