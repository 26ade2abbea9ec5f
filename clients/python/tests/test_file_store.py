"""The file store deletes only files it wrote (spec/STORES.md §7): links planted under the root, at the file or the
directory level, are never followed by any operation (read, written through, replaced, descended into or deleted);
foreign files (wrong names, wrong magic, a key that does not hash to the name, FIFOs) are left alone, not counted
toward capacity, and reported by `stats().foreign_files`; what the store creates is its owner's alone unless
`mode=` says otherwise. Every attack here is what anyone who can write to the directory could do."""

from __future__ import annotations

import hashlib
import os
import struct
import threading
from pathlib import Path

import pytest

import larder
from larder.stores import ServerError, open_store
from larder.stores.file import FileStore


def layout(root: Path, key: str) -> Path:
    h = hashlib.sha256(key.encode()).hexdigest()
    return root / h[:2] / h[2:4] / h


def file_bytes(key: str, value: bytes, expires: int = 0) -> bytes:
    raw = key.encode()
    return struct.pack("<4sQH", b"LDR1", expires, len(raw)) + raw + value


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    root, outside = tmp_path / "cache", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    return root, outside


def test_a_link_in_place_of_a_file_is_a_miss_and_is_never_deleted(dirs: tuple[Path, Path]) -> None:
    root, outside = dirs
    store = open_store(f"file://{root}")
    store.set("victim", b"mine")
    path = layout(root, "victim")
    secret = outside / "secret"
    secret.write_bytes(file_bytes("victim", b"read through a link"))
    path.unlink()
    path.symlink_to(secret)
    assert store.get("victim") is None, "a link is a miss, never followed"
    assert store.delete("victim") is False
    store.clear()
    assert store.purge_prefix("") == 0
    assert store.purge_tag("t") == 0
    assert path.is_symlink()
    assert secret.read_bytes() == file_bytes("victim", b"read through a link")
    assert store.stats().foreign_files == 1
    assert store.stats().entries == 0
    with pytest.raises(ServerError, match="symbolic link"):
        store.set("victim", b"again")  # a write neither writes through the link nor replaces it
    assert path.is_symlink()
    assert secret.read_bytes() == file_bytes("victim", b"read through a link")


def test_a_linked_directory_is_never_descended_into(dirs: tuple[Path, Path]) -> None:
    root, outside = dirs
    key = "somewhere"
    h = hashlib.sha256(key.encode()).hexdigest()
    # Outside the root, a tree that looks like the store's own: a valid file for `key`.
    (outside / h[2:4]).mkdir()
    planted = outside / h[2:4] / h
    planted.write_bytes(file_bytes(key, b"outside"))
    (root / h[:2]).symlink_to(outside, target_is_directory=True)
    store = open_store(f"file://{root}?capacity=1K")
    assert store.get(key) is None
    with pytest.raises(ServerError, match="symbolic link or not a directory"):
        store.set(key, b"written through the link?")
    assert planted.read_bytes() == file_bytes(key, b"outside")
    for i in range(20):  # fill past capacity: eviction runs
        store.set(f"k{i}", b"x" * 200)
    store.clear()
    assert store.purge_prefix("") == 0
    assert planted.exists(), "eviction, clear and purges never reach through a linked directory"
    assert (root / h[:2]).is_symlink()
    assert store.stats().foreign_files == 1


def test_foreign_files_are_left_alone_and_reported(dirs: tuple[Path, Path]) -> None:
    root, _ = dirs
    store = open_store(f"file://{root}?capacity=4K")
    store.set("own", b"value")
    shard = layout(root, "own").parent
    wrong_key = layout(root, "own").with_name("0" * 64)  # an LDR1 file whose key does not hash to its name
    foreign = {
        root / "README": b"the operator's notes",
        root / "zz": b"not a shard",
        shard / "notes.txt": b"a name that is not 64 hex digits",
        shard / ("ab" * 32): b"64 hex digits, but not in its own shard",
        wrong_key: file_bytes("own", b"copied under another name"),
        layout(root, "bad-magic"): b"LDR2" + file_bytes("bad-magic", b"v")[4:],
        layout(root, "short"): file_bytes("short", b"")[:16],
    }
    for path, data in foreign.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    fifo = layout(root, "a-fifo")
    fifo.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(fifo)
    stats = store.stats()
    assert (stats.entries, stats.foreign_files) == (1, len(foreign) + 1)
    assert stats.bytes == layout(root, "own").stat().st_size, "foreign files do not count toward capacity"
    assert store.get("a-fifo") is None, "a FIFO is not read (nor waited on)"
    assert store.get("bad-magic") is None
    for i in range(40):  # past capacity many times over: only the store's own files are evicted
        store.set(f"k{i}", b"x" * 300)
    store.purge_prefix("")
    store.clear()
    for path, data in foreign.items():
        assert path.read_bytes() == data, path
    assert fifo.exists()
    assert store.stats().entries == 0


def test_a_linked_lock_file_is_refused(dirs: tuple[Path, Path]) -> None:
    root, outside = dirs
    store = open_store(f"file://{root}")
    store.set("counter", b"1")
    target = outside / "passwd"
    target.write_bytes(b"root:x:0:0")
    lock = layout(root, "counter").parent / ".lock"
    lock.unlink(missing_ok=True)
    lock.symlink_to(target)
    with pytest.raises(ServerError, match="lock file"):
        store.incr("counter", 1)
    assert target.read_bytes() == b"root:x:0:0"


def test_expired_files_are_deleted_only_when_they_are_the_store_s(dirs: tuple[Path, Path]) -> None:
    root, outside = dirs
    store = open_store(f"file://{root}")
    past = larder.now_ms() - 1000
    store.set("gone", b"v", ttl=60)
    path = layout(root, "gone")
    path.write_bytes(file_bytes("gone", b"v", expires=past))
    assert store.get("gone") is None
    assert not path.exists(), "an expired file of the store is deleted on read"
    target = outside / "expired-looking"
    target.write_bytes(file_bytes("gone", b"v", expires=past))
    path.symlink_to(target)
    assert store.get("gone") is None
    assert target.exists()
    assert path.is_symlink()


def test_the_scan_counts_what_it_met_and_writers_race_safely(dirs: tuple[Path, Path]) -> None:
    root, _ = dirs
    store = FileStore(root)
    errors: list[BaseException] = []

    def write(n: int) -> None:
        try:
            for i in range(50):
                store.set(f"w{n}-{i}", b"v" * 10)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    stats = store.stats()
    assert (stats.entries, stats.foreign_files) == (200, 0)


def _walk(directory: Path) -> list[str]:
    return sorted(str(p) for p in directory.rglob("*"))


@pytest.mark.parametrize("level", ["first shard", "second shard", "entry"])
def test_a_link_in_any_component_is_followed_by_no_operation(dirs: tuple[Path, Path], level: str) -> None:
    """Issue 32, finding 2: each link leads to a file of the store's own form for its key, so a store that followed
    it would read a hit, delete it, or create a file beside it."""
    root, outside = dirs
    key = "linked-" + level.replace(" ", "-")
    h = hashlib.sha256(key.encode()).hexdigest()
    (outside / h[2:4]).mkdir()
    if level == "first shard":
        planted = outside / h[2:4] / h
        (root / h[:2]).symlink_to(outside, target_is_directory=True)
        link = root / h[:2]
    elif level == "second shard":
        planted = outside / h
        (root / h[:2]).mkdir()
        (root / h[:2] / h[2:4]).symlink_to(outside, target_is_directory=True)
        link = root / h[:2] / h[2:4]
    else:
        planted = outside / "precious"
        (root / h[:2] / h[2:4]).mkdir(parents=True)
        (root / h[:2] / h[2:4] / h).symlink_to(planted)
        link = root / h[:2] / h[2:4] / h
    planted.write_bytes(file_bytes(key, b"planted"))
    before = _walk(outside)
    store = open_store(f"file://{root}")
    assert store.get(key) is None, "get read through the link"
    assert store.get_many([key]) == [None]
    with pytest.raises(ServerError):
        store.set(key, b"mine")
    with pytest.raises(ServerError):
        store.set_many([(key, b"mine")])
    with pytest.raises(ServerError):
        store.add(key, b"mine")
    with pytest.raises(ServerError):
        store.incr(key, 1)
    assert store.delete(key) is False, "a delete through a link is a no-op"
    assert store.delete_many([key]) == 0
    assert store.delete_if(key, b"planted") is False
    store.purge_prefix("")
    store.purge_tag("t")
    store.clear()
    assert store.stats().entries == 0
    assert link.is_symlink(), "the link is left as it is"
    assert planted.read_bytes() == file_bytes(key, b"planted"), "its target is untouched"
    assert _walk(outside) == before, "nothing was created or removed behind the link"


def _umask() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("Umask:"):
            return int(line.split()[1], 8)
    raise AssertionError("no Umask line")


@pytest.mark.parametrize(("option", "file_mode", "dir_mode"), [("", 0o600, 0o700), ("?mode=0640", 0o640, 0o750)])
def test_files_are_the_owner_s_alone_unless_mode_says_otherwise(
    tmp_path: Path, option: str, file_mode: int, dir_mode: int
) -> None:
    """Issue 32, finding 6: values were created 0644 and directories 0755, so a cache of private pages was
    world-readable. The umask may narrow the modes further."""
    mask = _umask()
    root = tmp_path / "cache"
    store = open_store(f"file://{root}{option}")
    store.set("k", b"v")
    store.add("a", b"v")
    path = layout(root, "k")
    lock = layout(root, "a").parent / ".lock"

    def mode(p: Path) -> int:
        return p.stat().st_mode & 0o7777

    assert mode(root) == dir_mode & ~mask
    assert (mode(path.parent.parent), mode(path.parent)) == (dir_mode & ~mask, dir_mode & ~mask)
    assert mode(path) == file_mode & ~mask
    assert mode(lock) == file_mode & ~mask


@pytest.mark.parametrize("bad", ["0400", "0200", "4600", "0680", "60", "00600", "rw"])
def test_a_mode_that_is_not_the_owner_s_read_and_write_is_a_url_error(tmp_path: Path, bad: str) -> None:
    with pytest.raises(larder.stores.UrlError, match="mode"):
        open_store(f"file://{tmp_path}?mode={bad}")
