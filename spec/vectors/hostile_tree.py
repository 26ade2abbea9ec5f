"""Plants a hostile tree under a file store's root, and checks afterwards that the store kept away from it.

The one script every language's file store runs against (spec/vectors/README.md, "hostile_files.json"; spec/STORES.md
§7; issue 32). For one case of hostile_files.json:

    python3 spec/vectors/hostile_tree.py plant CASE ROOT OUTSIDE   # before the store is opened on file://ROOT
    python3 spec/vectors/hostile_tree.py check CASE ROOT OUTSIDE   # after the case's operations

ROOT and OUTSIDE are fresh empty directories. `plant` writes what it planted (paths, kinds, contents) to
OUTSIDE/.planted.json; `check` compares the tree with it and exits 1, saying what differed, when anything planted was
changed, deleted, replaced or written through, when something appeared outside, or when a file the store made has
another mode than the case wants (less the process umask). Only the standard library.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import struct
import sys
from pathlib import Path
from typing import Any

MAGIC = b"LDR1"
#: The value a planted file of the store's form holds: bytes no runner writes (they write hostile_files.json's entry).
PLANTED_VALUE = b"PLANTED: a file the store must neither read, write nor delete"


def name_of(key: str) -> str:
    """The file name §7 gives a stored key (no store prefix in these cases)."""
    return hashlib.sha256(key.encode()).hexdigest()


def shards(root: Path, key: str) -> tuple[Path, Path, Path]:
    """<root>/<h[0..2]>, <root>/<h[0..2]>/<h[2..4]> and the entry's path."""
    h = name_of(key)
    top = root / h[:2]
    second = top / h[2:4]
    return top, second, second / h


def store_file(key: str, value: bytes = PLANTED_VALUE) -> bytes:
    """A file of the store's own form (§7) for `key`, never expiring."""
    raw = key.encode()
    return MAGIC + struct.pack("<QH", 0, len(raw)) + raw + value


def umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def plant(case: str, root: Path, outside: Path) -> dict[str, Any]:
    """Builds the case's tree; returns what `check` needs."""
    top, second, entry = shards(root, "k1")
    wants: dict[str, Any] = {"links": {}, "files": {}, "fifos": [], "absent": [], "modes": None, "store_made": []}

    def outside_file(path: Path, data: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        wants["files"][str(path)] = data.hex()

    def link(at: Path, to: Path) -> None:
        at.parent.mkdir(parents=True, exist_ok=True)
        at.symlink_to(to)
        wants["links"][str(at)] = str(to)

    if case == "linked_top_shard":
        target = outside / "top"
        outside_file(target / second.name / entry.name, store_file("k1"))
        link(top, target)
    elif case == "linked_second_shard":
        target = outside / "second"
        outside_file(target / entry.name, store_file("k1"))
        link(second, target)
    elif case == "linked_entry":
        target = outside / "entry"
        outside_file(target, store_file("k1"))
        link(entry, target)
    elif case == "dangling_entry_link":
        link(entry, outside / "absent")
        wants["absent"].append(str(outside / "absent"))
    elif case == "entry_link_to_directory":
        target = outside / "dir"
        outside_file(target / "inside", b"an operator's file")
        link(entry, target)
    elif case == "foreign_files":
        for path, data in [
            (root / "notes.txt", b"an operator's notes"),
            (shards(root, "k2")[0] / "README", b"not a shard"),
            (shards(root, "k2")[2], b"not LDR1, at k2's name"),
            (shards(root, "k3")[2], store_file("somebody else")),
        ]:
            outside_file(path, data)
    elif case == "fifo_entry":
        second.mkdir(parents=True)
        os.mkfifo(entry)
        wants["fifos"].append(str(entry))
    elif case == "linked_root":
        real = outside / "real"
        real.mkdir()
        root.rmdir()
        root.symlink_to(real)
        wants["links"][str(root)] = str(real)
        wants["store_made"].append(str(real / shards(Path(), "k1")[2]))
    elif case in ("modes_default", "modes_0640", "modes_0644"):
        file_mode = {"modes_default": 0o600, "modes_0640": 0o640, "modes_0644": 0o644}[case]
        wants["modes"] = {"file": file_mode & ~umask(), "dir": (file_mode | (file_mode & 0o444) >> 2) & ~umask()}
    elif case.startswith("mode_"):
        pass  # the URL is refused: nothing to plant, nothing may appear
    else:
        raise SystemExit(f"hostile_tree.py: unknown case {case!r}")
    return wants


def entries(base: Path) -> set[str]:
    """Every path under `base`, not following links."""
    found = set()
    for directory, dirs, files in os.walk(base, followlinks=False):
        for name in dirs + files:
            found.add(str(Path(directory) / name))
    return found


def check(case: str, root: Path, outside: Path) -> list[str]:
    wants = json.loads((outside / ".planted.json").read_text())
    problems = []
    for at, to in wants["links"].items():
        if not os.path.islink(at):
            problems.append(f"{at} is no longer a link")
        elif os.readlink(at) != to:
            problems.append(f"{at} now points to {os.readlink(at)}, not {to}")
    for path, data in wants["files"].items():
        p = Path(path)
        if p.is_symlink() or not p.is_file():
            problems.append(f"{path} was deleted or replaced")
        elif p.read_bytes().hex() != data:
            problems.append(f"{path} was written to")
    for path in wants["fifos"]:
        if not stat.S_ISFIFO(os.lstat(path).st_mode):
            problems.append(f"the FIFO {path} was replaced or deleted")
    for path in wants["absent"]:
        if os.path.lexists(path):
            problems.append(f"{path} came to exist: a write went through a link")
    planted_outside = set()
    for path in wants["files"]:
        p = Path(path)
        while str(p).startswith(str(outside) + os.sep):
            planted_outside.add(str(p))
            p = p.parent
    for path in sorted(entries(outside) - planted_outside - {str(outside / ".planted.json")}):
        if not (case == "linked_root" and path.startswith(str(outside / "real"))):
            problems.append(f"{path} appeared outside the store")
    for path in wants["store_made"]:
        if not Path(path).is_file():
            problems.append(f"{path}: the store's file is not where the linked root leads")
    if case.startswith("mode_"):
        made = entries(root)
        if made:
            problems.append(f"a refused URL made files: {sorted(made)[:3]}")
    modes = wants["modes"]
    if modes:
        made = entries(root)
        if not made:
            problems.append("the store made no file")
        for path in sorted(made):
            mode = stat.S_IMODE(os.lstat(path).st_mode)
            want = modes["dir"] if os.path.isdir(path) else modes["file"]
            if mode != want:
                problems.append(f"{path} has mode {mode:04o}, the case wants {want:04o}")
    return problems


def main(argv: list[str]) -> int:
    if len(argv) != 4 or argv[0] not in ("plant", "check"):
        print(__doc__, file=sys.stderr)
        return 2
    action, case, root, outside = argv[0], argv[1], Path(argv[2]).absolute(), Path(argv[3]).absolute()
    if action == "plant":
        wants = plant(case, root, outside)
        (outside / ".planted.json").write_text(json.dumps(wants))
        return 0
    problems = check(case, root, outside)
    for problem in problems:
        print(f"hostile_tree.py {case}: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
