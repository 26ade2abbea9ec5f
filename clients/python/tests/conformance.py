"""The Python column of the conformance matrix (spec/vectors/README.md, "Conformance runners"):

    .venv/bin/python clients/python/tests/conformance.py spec/vectors/storage.json [FILE…]

prints one JSON line per file, `{"language": "python", "file": …, "status": "pass" | "fail" | "not_applicable",
"cases": N, "failed": […], "reason": …}`, and exits 0 whenever it could judge the files (2 without any). A file is
known by its name (a storage.json-shaped file of generated cases is judged as storage.json); any other name is a
`fail` saying so. The cases are those of tests/vector_checks, which the test suite runs too (tests/test_vectors.py
calls `cases`), so the matrix and the suite cannot disagree. It runs from any directory; only hostile_keys.json,
hostile_replies.json and outage.json need servers, named by $LARDER_CONFORMANCE_MEMCACHED, $LARDER_CONFORMANCE_REDIS,
$LARDER_HOSTILE and $LARDER_FAULTS (spec/vectors/README.md): without them their cases fail, saying which is missing.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vector_checks import Case, entries, hostile, keys, outage, signed, storage, store_keys

#: The vector files this runner knows: their name, and what lists their cases.
FILES: dict[str, Callable[[dict[str, Any]], list[Case]]] = {
    "entries.json": entries.valid_cases,
    "invalid.json": entries.invalid_cases,
    "keys.json": keys.cases,
    "ring.json": store_keys.ring_cases,
    "stores.json": store_keys.store_cases,
    "signed.json": signed.cases,
    "storage.json": storage.cases,
    "hostile_keys.json": hostile.keys_cases,
    "hostile_pages.json": hostile.pages_cases,
    "hostile_files.json": hostile.files_cases,
    "hostile_replies.json": hostile.replies_cases,
    "outage.json": outage.cases,
}
#: Files with nothing for Python to check, and why: none (Python reads and writes everything the vectors cover).
NOT_APPLICABLE: dict[str, str] = {}
#: The most failed case names a report lists.
MAX_FAILED = 20


class Unknown(Exception):
    """The file cannot be judged: not a vector file this runner knows, not readable, or not of its shape."""


def cases(path: Path) -> list[Case]:
    """The cases of the vector file at `path`; raises `Unknown` when it cannot be judged."""
    lister = FILES.get(path.name)
    if lister is None:
        raise Unknown(
            f"{path.name} is not a vector file this runner knows: add it to clients/python/tests/conformance.py"
        )
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise Unknown(f"cannot read {path}: {e}") from e
    if not isinstance(document, dict) or document.get("schema") != 1:
        raise Unknown(f"{path.name} is not a schema 1 vector file")
    try:
        return lister(document)
    except (KeyError, TypeError, ValueError, AssertionError) as e:
        raise Unknown(f"{path.name} does not have the shape of {path.name}: {type(e).__name__}: {e}") from e


def judge(path: Path) -> dict[str, Any]:
    """The runner's report for one file: every case run, each failure caught as its own."""
    report: dict[str, Any] = {"language": "python", "file": path.name, "status": "pass", "cases": 0, "failed": []}
    if path.name in NOT_APPLICABLE:
        return {**report, "status": "not_applicable", "reason": NOT_APPLICABLE[path.name]}
    try:
        listed = cases(path)
    except Unknown as e:
        return {**report, "status": "fail", "reason": str(e)}
    failures = []
    for case in listed:
        try:
            case.check()
        except Exception as e:  # every failure is the case's own, whatever it raised
            failures.append(f"{case.name}: {_message(e)}")
            report["failed"].append(case.name)
    report["cases"] = len(listed)
    report["failed"] = report["failed"][:MAX_FAILED]
    if failures:
        return {**report, "status": "fail", "reason": failures[0]}
    return {**report, "reason": None}


def _message(error: Exception) -> str:
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: conformance.py FILE… (files of spec/vectors)", file=sys.stderr)
        return 2
    # Refused pickles are logged (larder.signing) as a running app wants; here they are the cases' expectation.
    logging.getLogger("larder").setLevel(logging.ERROR)
    for name in argv:
        print(json.dumps(judge(Path(name)), ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
