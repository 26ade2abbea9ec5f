"""Every case of every file of spec/vectors, through the conformance runner's own cases (tests/conformance.py,
tests/vector_checks): entries decode and encode (byte for byte when uncompressed), invalid entries fail with their
kind, keys derive to the exact text, the ring and store keys match, signed values verify, and the storage rules give
every storage.json outcome. A vector file the runner does not know fails collection here."""

from __future__ import annotations

import pytest

import larder
from conformance import cases
from support import VECTORS, load_vectors
from vector_checks import Case

FILES = sorted(VECTORS.glob("*.json"))
CASES = [(path.name, case) for path in FILES for case in cases(path)]


@pytest.mark.parametrize(("file", "case"), CASES, ids=[f"{file}:{case.name}" for file, case in CASES])
def test_vector_case(file: str, case: Case) -> None:
    case.check()


def test_every_vector_file_is_judged_case_by_case() -> None:
    names = {path.name for path in FILES}
    assert names >= {"entries.json", "invalid.json", "keys.json", "ring.json", "signed.json", "storage.json"}
    counted = {name: sum(1 for file, _ in CASES if file == name) for name in names}
    storage = load_vectors("storage.json")
    assert counted["storage.json"] == len(storage["cases"]) + 1, "every storage case, and the file's shape"
    keys = load_vectors("keys.json")
    assert counted["keys.json"] == sum(len(keys[s]) for s in ("http", "safe", "namespaced", "variants", "alternates"))


def test_the_vector_files_cover_what_the_readme_promises() -> None:
    entries = load_vectors("entries.json")["cases"]
    invalid = load_vectors("invalid.json")["cases"]
    assert {case["stored_compressor"] for case in entries} == set(larder.COMPRESSORS)
    assert {case["options"]["serializer"] for case in entries} == set(larder.SERIALIZERS)
    assert {case["error"] for case in invalid} == set(larder.ERROR_KINDS)
    assert len({case["name"] for case in entries + invalid}) == len(entries) + len(invalid)
