"""The file store's filesystem access, without ever following a symbolic link below its root (spec/STORES.md §7,
"A file store deletes only files it wrote" and "Links are never followed below the root").

Anyone who can write to the store's directory can plant links and files in it; capacity eviction, purges and
`clear` delete files, and reads return what files hold. So every path is opened one component at a time from a
directory descriptor, each with `O_NOFOLLOW` (a link is `ELOOP`, never followed), files are read only when `fstat`
says they are regular, written as a temporary file renamed over the name (a write refuses a link at the name,
`is_link`, rather than replace it), and deleted by name within a directory opened this way. A file is the store's
own only when it proves it: `<2 hex>/<2 hex>/<64 hex>` under those directories, a regular file starting with
`LDR1`, a key length that fits the file, and a key whose SHA-256 is the name. Python's `pathlib` and `open` follow
links, hence this module. What the store creates gets its `mode` (files; default 0o600) and `dir_mode` of it
(directories), narrowed by the umask.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import re
import stat
import struct
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final

MAGIC: Final = b"LDR1"
HEADER: Final = struct.Struct("<4sQH")
_DIR: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: O_NONBLOCK: opening a FIFO planted under a file's name must not wait for a writer.
_FILE: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
#: What opening a link (or a non-directory as a directory, or a socket) with these flags answers.
_NOT_OURS_ERRNOS: Final = frozenset({errno.ELOOP, errno.ENOTDIR, errno.ENXIO, errno.EISDIR})
_SHARD: Final = re.compile("[0-9a-f]{2}")
_NAME: Final = re.compile("[0-9a-f]{64}")


class NotOurs(Exception):
    """A path component that is a link, not a directory, or missing: nothing this store made is there."""


def dir_mode(mode: int) -> int:
    """The mode of the directories the store creates for file mode `mode`: a search bit wherever there is a read bit
    (0o600 → 0o700, 0o640 → 0o750)."""
    return mode | ((mode & 0o444) >> 2)


def open_root(root: Path, *, create: int | None = None) -> int:
    """A descriptor of the root (which may be a link: the operator's choice), made with the directory mode `create`
    (and its parents) when it is missing and `create` is given."""
    try:
        return os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        if create is None:
            raise NotOurs("missing") from None
    os.makedirs(root, mode=create, exist_ok=True)
    return os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def open_dirs(root: Path, parts: Sequence[str], *, create: int | None = None) -> int:
    """A descriptor of `root/parts…` (the caller closes it), each part opened (and, with `create`, a directory mode,
    made) without following a link; `NotOurs` when one is missing (without `create`), a link or not a directory. The
    root itself is the operator's choice and may be a link."""
    fd = open_root(root, create=create)
    try:
        for part in parts:
            child = _open_dir(fd, part, create)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_dir(parent: int, name: str, create: int | None) -> int:
    try:
        return os.open(name, _DIR, dir_fd=parent)
    except FileNotFoundError:
        if create is None:
            raise NotOurs("missing") from None
    except OSError as e:
        if e.errno in _NOT_OURS_ERRNOS:
            raise NotOurs("a symbolic link or not a directory") from None
        raise
    with contextlib.suppress(FileExistsError):
        os.mkdir(name, create, dir_fd=parent)
    try:
        return os.open(name, _DIR, dir_fd=parent)
    except OSError as e:
        if e.errno in _NOT_OURS_ERRNOS:
            raise NotOurs("a symbolic link or not a directory") from None
        raise


def _open_regular(parent: int, name: str) -> tuple[int, os.stat_result] | None:
    """A descriptor and the status of the regular file `name`; None when it is missing, a link or anything else."""
    try:
        fd = os.open(name, _FILE, dir_fd=parent)
    except FileNotFoundError:
        return None
    except OSError as e:
        if e.errno in _NOT_OURS_ERRNOS:
            return None
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        return None
    return fd, st


def read_regular(parent: int, name: str) -> bytes | None:
    """The bytes of the regular file `name` in the directory `parent`; None when it is missing or not one."""
    opened = _open_regular(parent, name)
    if opened is None:
        return None
    with open(opened[0], "rb", closefd=True) as f:
        return f.read()


@dataclass(frozen=True)
class OwnFile:
    """One of the store's files, as a scan (or a check) found it."""

    shard: tuple[str, str]
    name: str
    size: int
    mtime_ns: int
    ino: int
    key: str
    expires: int
    value: bytes = b""


def own_file(parent: int, name: str, *, want_key: str | None = None, read_value: bool = False) -> OwnFile | None:
    """The file `name` if it proves itself the store's (magic, a key length that fits, the key's SHA-256 as its
    name; and the key `want_key`, when given); else None. `read_value` reads the value too."""
    opened = _open_regular(parent, name)
    if opened is None:
        return None
    fd, st = opened
    with open(fd, "rb", closefd=True) as f:
        head = f.read(HEADER.size)
        if len(head) < HEADER.size:
            return None
        magic, expires, key_len = HEADER.unpack(head)
        if magic != MAGIC or HEADER.size + key_len > st.st_size:
            return None
        raw_key = f.read(key_len)
        if len(raw_key) != key_len or hashlib.sha256(raw_key).hexdigest() != name:
            return None
        try:
            key = raw_key.decode("utf-8")
        except UnicodeDecodeError:
            return None
        if want_key is not None and key != want_key:
            return None
        value = f.read() if read_value else b""
    return OwnFile((name[:2], name[2:4]), name, st.st_size, st.st_mtime_ns, st.st_ino, key, expires, value)


def is_link(parent: int, name: str) -> bool:
    """Whether `name` in the directory `parent` is a symbolic link (not followed)."""
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
    except FileNotFoundError:
        return False


def unlink_quietly(parent: int, name: str) -> None:
    """Removes the name `name` from the directory `parent` (a link is removed, never followed)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(name, dir_fd=parent)


def delete_own(root: Path, file: OwnFile) -> bool:
    """Deletes `file` if its name still holds that same file of the store's; True if it did."""
    try:
        parent = open_dirs(root, file.shard)
    except NotOurs:
        return False
    try:
        again = own_file(parent, file.name, want_key=file.key)
        if again is None or again.ino != file.ino:
            return False
        unlink_quietly(parent, file.name)
        return True
    finally:
        os.close(parent)


def replace_file(parent: int, name: str, temp: str, data: bytes, mode: int) -> None:
    """Writes `data` to the new file `temp` (created with `mode`), then renames it over `name`: a reader sees the
    old file or the new one, and nothing is written through a link. (The caller refuses a link at `name` first.)"""
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=parent)
    try:
        with open(fd, "wb", closefd=True) as f:
            f.write(data)
        os.replace(temp, name, src_dir_fd=parent, dst_dir_fd=parent)
    except BaseException:
        unlink_quietly(parent, temp)
        raise


@contextmanager
def exclusive_lock(parent: int, name: str, mode: int) -> Iterator[None]:
    """Holds an exclusive `flock` on the regular file `name` (created with `mode` if missing) in `parent`."""
    try:
        fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode, dir_fd=parent)
    except OSError as e:
        if e.errno in _NOT_OURS_ERRNOS:
            raise NotOurs("the lock file is a symbolic link or not a file") from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotOurs("the lock file is not a regular file")
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


class Scan:
    """A walk of the store's root: `own_files()` yields the store's files; afterwards `foreign` is how many other
    entries it met (files, links, directories; names starting with `.` in shard directories, the store's own
    temporary files and locks, are neither)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.foreign = 0

    def own_files(self, *, read_value: bool = False) -> Iterator[OwnFile]:
        self.foreign = 0
        try:
            root = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except FileNotFoundError:
            return
        try:
            for first in os.listdir(root):
                yield from self._level(root, first, None, read_value)
        finally:
            os.close(root)

    def _level(self, parent: int, name: str, first: str | None, read_value: bool) -> Iterator[OwnFile]:
        """The shard directory `name` under `parent` (`first` is the level above, None at the root's level)."""
        if not _SHARD.fullmatch(name):
            if first is None or not name.startswith("."):
                self.foreign += 1
            return
        try:
            fd = os.open(name, _DIR, dir_fd=parent)
        except FileNotFoundError:
            return
        except OSError as e:
            if e.errno not in _NOT_OURS_ERRNOS:
                raise
            self.foreign += 1
            return
        try:
            for entry in os.listdir(fd):
                if first is None:
                    yield from self._level(fd, entry, name, read_value)
                elif not entry.startswith("."):
                    own = None
                    if _NAME.fullmatch(entry) and entry[:2] == first and entry[2:4] == name:
                        own = own_file(fd, entry, read_value=read_value)
                    if own is None:
                        self.foreign += 1
                    else:
                        yield own
        finally:
            os.close(fd)
