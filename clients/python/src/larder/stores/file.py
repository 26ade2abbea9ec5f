"""`file:///var/cache/larder?capacity=10G`: a directory of files (spec/STORES.md §7), mirroring `larder-file`.

`<root>/<h[0..2]>/<h[2..4]>/<h>` with `h` the hex SHA-256 of the stored key; each file is `LDR1`, the expiry (u64 LE
ms, 0 = never), the key's length (u16 LE) and the key, then the value. Writes go to a temporary file renamed over
the final name, so readers see a whole file or none, in any number of processes; `add`, `incr` and `delete_if`
hold an exclusive `flock` on the shard's `.lock` while they read and write. `capacity` bounds the bytes of all
files: past it a writer deletes the oldest files until the total is under 90%.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import secrets
import struct
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Final

from .base import (
    NotACounter,
    ServerError,
    Store,
    StoreStats,
    entry_tags,
    expires_at_ms,
    now_ms,
    parse_counter,
    saturate,
    stored_key,
)
from .url import StoreUrl

MAGIC: Final = b"LDR1"
HEADER: Final = struct.Struct("<4sQH")
RESCAN_SECONDS: Final = 60.0


class FileStore(Store):
    """Files under a root directory, shared by any number of processes."""

    backend = "file"

    def __init__(self, root: str | os.PathLike[str], *, prefix: str = "", capacity: int = 0) -> None:
        self.root = Path(root)
        self.prefix = prefix
        self.capacity = capacity
        try:
            self.root.mkdir(parents=True, exist_ok=True)
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
        url.finish()
        if len(url.path) < 2:
            raise url.error("file:// needs a directory: file:///var/cache/larder")
        return cls(url.path, prefix=prefix, capacity=capacity)

    # ------------------------------------------------------------------------------------------ layout

    def _path(self, stored: str) -> Path:
        h = hashlib.sha256(stored.encode("utf-8")).hexdigest()
        return self.root / h[:2] / h[2:4] / h

    def _error(self, message: str) -> ServerError:
        return ServerError(self.backend, message, str(self.root))

    @staticmethod
    def _parse(data: bytes) -> tuple[str, int, bytes] | None:
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

    def _read(self, stored: str, now: int) -> bytes | None:
        path = self._path(stored)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as e:
            raise self._error(f"{path}: {e}") from None
        parsed = self._parse(data)
        if parsed is None or parsed[0] != stored:
            return None
        _, expires, value = parsed
        if expires and expires <= now:
            path.unlink(missing_ok=True)
            return None
        return value

    def _write(self, stored: str, value: bytes, expiry: int | None) -> None:
        path = self._path(stored)
        key = stored.encode("utf-8")
        data = HEADER.pack(MAGIC, expiry or 0, len(key)) + key + bytes(value)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            temp = path.parent / f".{path.name}.{secrets.token_hex(8)}.tmp"
            with open(temp, "wb") as f:
                f.write(data)
            os.replace(temp, path)
        except OSError as e:
            raise self._error(f"{path}: {e}") from None
        if self.capacity:
            with self._lock:
                self._total += len(data)
            self._bound()

    def _remove(self, stored: str) -> bool:
        path = self._path(stored)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return False
        parsed = self._parse(data)
        if parsed is None or parsed[0] != stored:
            return False
        path.unlink(missing_ok=True)
        return not (parsed[1] and parsed[1] <= now_ms())

    @contextmanager
    def _locked(self, stored: str) -> Iterator[None]:
        shard = self._path(stored).parent
        shard.mkdir(parents=True, exist_ok=True)
        with open(shard / ".lock", "a+b") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def _files(self) -> Iterator[Path]:
        for first in self.root.iterdir() if self.root.is_dir() else ():
            if first.name.startswith(".") or not first.is_dir():
                continue
            for second in first.iterdir():
                if second.name.startswith(".") or not second.is_dir():
                    continue
                for file in second.iterdir():
                    if not file.name.startswith("."):
                        yield file

    def _rescan(self) -> None:
        total = 0
        for file in self._files():
            try:
                total += file.stat().st_size
            except FileNotFoundError:
                continue
        with self._lock:
            self._total = total
            self._scanned_at = time.monotonic()

    def _bound(self) -> None:
        if time.monotonic() - self._scanned_at > RESCAN_SECONDS:
            self._rescan()
        if self._total <= self.capacity:
            return
        files = []
        for file in self._files():
            try:
                st = file.stat()
            except FileNotFoundError:
                continue
            files.append((st.st_mtime_ns, st.st_size, file))
        files.sort()
        total = sum(size for _, size, _ in files)
        for _, size, file in files:
            if total <= self.capacity * 9 // 10:
                break
            file.unlink(missing_ok=True)
            total -= size
        with self._lock:
            self._total = total

    # ----------------------------------------------------------------------------------------- Store

    def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        now = now_ms()
        return [self._read(stored_key(self.prefix, k), now) for k in keys]

    def set_many(self, items: Sequence[tuple[str, bytes]], ttl: float | None = None) -> None:
        now = now_ms()
        for key, value in items:
            stored = stored_key(self.prefix, key)
            expiry = expires_at_ms(value, ttl, now)
            if expiry is not None and expiry <= now:
                self._remove(stored)
            else:
                self._write(stored, value, expiry)

    def add(self, key: str, value: bytes, ttl: float | None = None) -> bool:
        stored = stored_key(self.prefix, key)
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
        stored = stored_key(self.prefix, key)
        with self._locked(stored):
            now = now_ms()
            current = self._read(stored, now)
            if current is None:
                if not create:
                    return None
                number = saturate(delta)
                self._write(stored, str(number).encode(), None if ttl is None else now + max(1, round(ttl * 1000)))
                return number
            old = parse_counter(current)
            if old is None:
                raise NotACounter(self.backend, key)
            number = saturate(old + delta)
            parsed = self._parse(self._path(stored).read_bytes())
            expiry = parsed[1] if parsed else 0
            self._write(stored, str(number).encode(), expiry or None)
            return number

    def delete_if(self, key: str, expected: bytes) -> bool:
        stored = stored_key(self.prefix, key)
        with self._locked(stored):
            if self._read(stored, now_ms()) != bytes(expected):
                return False
            return self._remove(stored)

    def delete_many(self, keys: Sequence[str]) -> int:
        return sum(self._remove(stored_key(self.prefix, k)) for k in keys)

    def _purge(self, match: str, tag: str | None) -> int:
        now = now_ms()
        removed = 0
        for file in list(self._files()):
            try:
                data = file.read_bytes()
            except FileNotFoundError:
                continue
            parsed = self._parse(data)
            if parsed is None:
                continue
            key, expires, value = parsed
            hit = tag in entry_tags(value) if tag is not None else key.startswith(match)
            if hit:
                file.unlink(missing_ok=True)
                removed += not (expires and expires <= now)
        return removed

    def clear(self) -> None:
        self._purge(stored_key(self.prefix, ""), None)

    def purge_prefix(self, prefix: str) -> int:
        return self._purge(stored_key(self.prefix, prefix), None)

    def purge_tag(self, tag: str) -> int:
        if self.prefix:
            removed = 0
            for file in list(self._files()):
                try:
                    parsed = self._parse(file.read_bytes())
                except FileNotFoundError:
                    continue
                if parsed and parsed[0].startswith(self.prefix) and tag in entry_tags(parsed[2]):
                    file.unlink(missing_ok=True)
                    removed += 1
            return removed
        return self._purge("", tag)

    def stats(self) -> StoreStats:
        entries = size = 0
        for file in self._files():
            try:
                size += file.stat().st_size
            except FileNotFoundError:
                continue
            entries += 1
        return StoreStats(entries=entries, bytes=size, capacity_bytes=self.capacity)
