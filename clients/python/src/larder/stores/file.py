"""`file:///var/cache/larder?capacity=10G`: a directory of files (spec/STORES.md §7), mirroring `larder-file`.

`<root>/<h[0..2]>/<h[2..4]>/<h>` with `h` the hex SHA-256 of the stored key; each file is `LDR1`, the expiry (u64 LE
ms, 0 = never), the key's length (u16 LE) and the key, then the value. Writes go to a temporary file renamed over
the final name, so readers see a whole file or none, in any number of processes; `add`, `incr` and `delete_if`
hold an exclusive `flock` on the shard's `.lock` while they read and write. `capacity` bounds the bytes of all
files: past it a writer deletes the oldest files until the total is under 90%.

The store deletes only files it wrote (§7): every path below the root is walked one directory at a time with
`O_NOFOLLOW` (dirfd.py), so a symbolic link, at any level, is never followed, read through, written through,
replaced or deleted (a read meets it as a miss, a delete as a no-op, a write as an error); scans (capacity,
purges, `clear`, `stats`) count, evict or purge only regular files named `<64 hex>` in their `<2 hex>/<2 hex>`
shard that start with `LDR1`, whose key length fits and whose key hashes to the name. Everything else is foreign:
left alone and reported by `stats().foreign_files`. Files are created with `mode` (default 0o600: a cache of
private pages is its owner's alone) and directories with `dirfd.dir_mode(mode)`.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Final

from . import dirfd
from .base import (
    NotACounter,
    ServerError,
    Store,
    StoreStats,
    check_tag,
    checked_key,
    checked_prefix,
    entry_tags,
    expires_at_ms,
    now_ms,
    parse_counter,
    saturate,
)
from .dirfd import HEADER, MAGIC
from .url import StoreUrl

RESCAN_SECONDS: Final = 60.0
#: The mode of value files without `mode=`: the owner's alone.
DEFAULT_MODE: Final = 0o600


def parse_mode(text: str) -> int | None:
    """`mode=`: three or four octal digits of permission bits that let the owner read and write; None otherwise."""
    if not (3 <= len(text) <= 4) or any(c not in "01234567" for c in text):
        return None
    mode = int(text, 8)
    return mode if mode <= 0o777 and mode & 0o600 == 0o600 else None


def parse(data: bytes) -> tuple[str, int, bytes] | None:
    """(key, expires_at, value) of a file's bytes, or None when they are not a file of this store."""
    if len(data) < HEADER.size:
        return None
    magic, expires, key_len = HEADER.unpack_from(data)
    if magic != MAGIC or len(data) < HEADER.size + key_len:
        return None
    try:
        key = data[HEADER.size : HEADER.size + key_len].decode("utf-8")
    except UnicodeDecodeError:
        return None
    return key, expires, data[HEADER.size + key_len :]


def name_of(stored: str) -> str:
    return hashlib.sha256(stored.encode("utf-8")).hexdigest()


class FileStore(Store):
    """Files under a root directory, shared by any number of processes."""

    backend = "file"

    def __init__(
        self, root: str | os.PathLike[str], *, prefix: str = "", capacity: int = 0, mode: int = DEFAULT_MODE
    ) -> None:
        if isinstance(mode, bool) or not isinstance(mode, int) or mode > 0o777 or mode & 0o600 != 0o600:
            raise ValueError(f"mode must be permission bits that let the owner read and write, not {mode!r}")
        self.root = Path(root)
        self.prefix = prefix
        self.capacity = capacity
        self.mode = mode
        self.dir_mode = dirfd.dir_mode(mode)
        try:
            os.close(dirfd.open_root(self.root, create=self.dir_mode))
        except OSError as e:
            raise ServerError(self.backend, f"cannot create {self.root}: {e}", str(self.root)) from None
        self._lock = threading.Lock()
        self._total = 0
        self._scanned_at = 0.0
        if capacity:
            self._rescan()

    @classmethod
    def from_url(cls, url: StoreUrl) -> FileStore:
        url.no_hosts()
        prefix = url.take("prefix") or ""
        capacity = url.take_size("capacity", 0)
        mode_text = url.take("mode")
        url.finish()
        mode = DEFAULT_MODE if mode_text is None else parse_mode(mode_text)
        if mode is None:
            raise url.error(
                f"mode={mode_text!r}: give three or four octal digits of permission bits that let the owner read "
                "and write, such as 0600 (the default) or 0640"
            )
        if len(url.path) < 2:
            raise url.error("file:// needs a directory: file:///var/cache/larder")
        return cls(url.path, prefix=prefix, capacity=capacity, mode=mode)

    # ------------------------------------------------------------------------------------------ layout

    def _error(self, message: str) -> ServerError:
        return ServerError(self.backend, message, str(self.root))

    def _key(self, key: str) -> str:
        return checked_key(self.backend, self.prefix, key)

    @contextmanager
    def _shard(self, name: str, create: bool) -> Iterator[int | None]:
        """The shard directory of `name`, opened without following links: None when it is missing or is not a
        directory this store could have made, unless `create`, which makes it (or raises)."""
        try:
            fd: int | None = dirfd.open_dirs(self.root, (name[:2], name[2:4]), create=self.dir_mode if create else None)
        except dirfd.NotOurs as e:
            if create:
                raise self._error(f"{self.root}/{name[:2]}/{name[2:4]}: {e}") from None
            fd = None
        except OSError as e:
            raise self._error(f"{self.root}/{name[:2]}/{name[2:4]}: {e}") from None
        try:
            yield fd
        finally:
            if fd is not None:
                os.close(fd)

    def _read_file(self, stored: str, now: int) -> tuple[int, bytes] | None:
        """(expires_at, value) of the live file of `stored`; an expired one is deleted."""
        name = name_of(stored)
        with self._shard(name, create=False) as shard:
            if shard is None:
                return None
            try:
                data = dirfd.read_regular(shard, name)
            except OSError as e:
                raise self._error(f"{name}: {e}") from None
            parsed = parse(data) if data is not None else None
            if parsed is None or parsed[0] != stored:
                return None
            _, expires, value = parsed
            if expires and expires <= now:
                dirfd.unlink_quietly(shard, name)
                return None
            return expires, value

    def _read(self, stored: str, now: int) -> bytes | None:
        found = self._read_file(stored, now)
        return None if found is None else found[1]

    def _write(self, stored: str, value: bytes, expiry: int | None) -> None:
        name = name_of(stored)
        key = stored.encode("utf-8")
        data = HEADER.pack(MAGIC, expiry or 0, len(key)) + key + bytes(value)
        with self._shard(name, create=True) as shard:
            assert shard is not None
            try:
                if dirfd.is_link(shard, name):
                    raise self._error(
                        f"{self.root}/{name[:2]}/{name[2:4]}/{name} is a symbolic link: the file store does not write "
                        "through or replace links"
                    )
                dirfd.replace_file(shard, name, f".{name}.{secrets.token_hex(8)}.tmp", data, self.mode)
            except OSError as e:
                raise self._error(f"{name}: {e}") from None
        if self.capacity:
            with self._lock:
                self._total += len(data)
            self._bound()

    def _remove(self, stored: str) -> bool:
        """Deletes the file of `stored` if it is this store's; True if it held a live value."""
        name = name_of(stored)
        with self._shard(name, create=False) as shard:
            if shard is None:
                return False
            owned = dirfd.own_file(shard, name, want_key=stored)
            if owned is None:
                return False
            dirfd.unlink_quietly(shard, name)
            return not (owned.expires and owned.expires <= now_ms())

    @contextmanager
    def _locked(self, stored: str) -> Iterator[None]:
        name = name_of(stored)
        with self._shard(name, create=True) as shard:
            assert shard is not None
            try:
                with dirfd.exclusive_lock(shard, ".lock", self.mode):
                    yield
            except dirfd.NotOurs as e:
                raise self._error(f"{name[:2]}/{name[2:4]}/.lock: {e}") from None

    # ------------------------------------------------------------------------------------------- scans

    def _scan(self) -> dirfd.Scan:
        return dirfd.Scan(self.root)

    def _rescan(self) -> None:
        scan = self._scan()
        total = sum(f.size for f in scan.own_files())
        with self._lock:
            self._total = total
            self._scanned_at = time.monotonic()

    def _bound(self) -> None:
        if time.monotonic() - self._scanned_at > RESCAN_SECONDS:
            self._rescan()
        if self._total <= self.capacity:
            return
        files = sorted(self._scan().own_files(), key=lambda f: (f.mtime_ns, f.name))
        total = sum(f.size for f in files)
        for file in files:
            if total <= self.capacity * 9 // 10:
                break
            if dirfd.delete_own(self.root, file):
                total -= file.size
        with self._lock:
            self._total = total

    def _purge(self, key_prefix: str, tag: str | None) -> int:
        """Deletes this store's files whose key starts with `key_prefix` (and, with `tag`, whose entry carries it);
        how many held live values."""
        now = now_ms()
        removed = 0
        for file in self._scan().own_files(read_value=tag is not None):
            if not file.key.startswith(key_prefix):
                continue
            if tag is not None and tag not in entry_tags(file.value):
                continue
            if dirfd.delete_own(self.root, file):
                removed += not (file.expires and file.expires <= now)
        return removed

    # ----------------------------------------------------------------------------------------- Store

    def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        stored = [self._key(k) for k in keys]
        now = now_ms()
        return [self._read(k, now) for k in stored]

    def set_many(self, items: Sequence[tuple[str, bytes]], ttl: float | None = None) -> None:
        batch = [(self._key(k), v) for k, v in items]
        now = now_ms()
        for stored, value in batch:
            expiry = expires_at_ms(value, ttl, now)
            if expiry is not None and expiry <= now:
                self._remove(stored)
            else:
                self._write(stored, value, expiry)

    def add(self, key: str, value: bytes, ttl: float | None = None) -> bool:
        stored = self._key(key)
        now = now_ms()
        expiry = expires_at_ms(value, ttl, now)
        if expiry is not None and expiry <= now:
            return False
        with self._locked(stored):
            if self._read(stored, now) is not None:
                return False
            self._write(stored, value, expiry)
            return True

    def incr(self, key: str, delta: int, ttl: float | None = None, create: bool = True) -> int | None:
        stored = self._key(key)
        with self._locked(stored):
            now = now_ms()
            current = self._read_file(stored, now)
            if current is None:
                if not create:
                    return None
                number = saturate(delta)
                self._write(stored, str(number).encode(), None if ttl is None else now + max(1, round(ttl * 1000)))
                return number
            expiry, value = current
            old = parse_counter(value)
            if old is None:
                raise NotACounter(self.backend, key)
            number = saturate(old + delta)
            self._write(stored, str(number).encode(), expiry or None)
            return number

    def delete_if(self, key: str, expected: bytes) -> bool:
        stored = self._key(key)
        if self._read(stored, now_ms()) != bytes(expected):
            # Nothing to delete (absent, or behind a link): no lock, and no shard directory made.
            return False
        with self._locked(stored):
            if self._read(stored, now_ms()) != bytes(expected):
                return False
            return self._remove(stored)

    def delete_many(self, keys: Sequence[str]) -> int:
        stored = [self._key(k) for k in keys]
        return sum(self._remove(k) for k in stored)

    def clear(self) -> None:
        self._purge(self.prefix, None)

    def purge_prefix(self, prefix: str) -> int:
        return self._purge(checked_prefix(self.backend, self.prefix, prefix), None)

    def purge_tag(self, tag: str) -> int:
        return self._purge(self.prefix, check_tag(self.backend, tag))

    def stats(self) -> StoreStats:
        scan = self._scan()
        entries = size = 0
        for file in scan.own_files():
            entries += 1
            size += file.size
        return StoreStats(entries=entries, bytes=size, capacity_bytes=self.capacity, foreign_files=scan.foreign)
