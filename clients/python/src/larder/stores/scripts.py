"""The Lua scripts of the Redis store, from the one copy every language loads: spec/redis/*.lua (spec/STORES.md §5,
"Scripts"). Their bytes are used as they are, so the SHA-1 sent with EVALSHA is the same from every language.

Where the files are: an installed package carries them as package data (`larder/stores/lua/`, copied from
spec/redis when the sdist or the wheel is built, clients/python/setup.py); a source checkout (an editable install,
or `src` on the path) has no such copy and reads spec/redis itself. A package with neither is broken: opening a Redis
store says so (RuntimeError), nothing else in larder needs the scripts.
"""

from __future__ import annotations

import hashlib
import threading
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from importlib.abc import Traversable  # importlib.resources.abc from Python 3.11

#: The scripts, by name (spec/redis/README.md).
NAMES: Final = ("delete_if", "incr", "tag")

_loaded: dict[str, bytes] = {}
_lock = threading.Lock()


class Script:
    """One script by name: its bytes as spec/redis holds them and their SHA-1 (what EVALSHA names)."""

    def __init__(self, name: str) -> None:
        if name not in NAMES:
            raise ValueError(f"no Redis script {name!r} (spec/redis has {', '.join(NAMES)})")
        self.name = name

    @property
    def source(self) -> bytes:
        return load(self.name)

    @property
    def sha(self) -> str:
        return hashlib.sha1(self.source).hexdigest()


def load(name: str) -> bytes:
    """The bytes of `name`.lua, every script read once per process; RuntimeError when there are none."""
    with _lock:
        if not _loaded:
            directory = location()
            _loaded.update({script: (directory / f"{script}.lua").read_bytes() for script in NAMES})
    return _loaded[name]


def location() -> Traversable:
    """The directory the scripts are read from: the package's own copy, else spec/redis of a source checkout."""
    packaged = resources.files(__package__) / "lua"
    if packaged.is_dir():
        return packaged
    checkout = Path(__file__).resolve().parents[5] / "spec" / "redis"
    if checkout.is_dir():
        return checkout
    raise RuntimeError(
        "this installation of larder has no Redis scripts (larder/stores/lua, copied from spec/redis when the"
        " package is built by clients/python/setup.py): install it from a wheel or sdist built from the repository"
    )
