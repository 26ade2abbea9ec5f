"""Every case of every file of spec/vectors, through the conformance runner's own cases (tests/conformance.py,
tests/vector_checks): entries decode and encode (byte for byte when uncompressed), invalid entries fail with their
kind, keys derive to the exact text, the ring and store keys match, signed values verify, the storage rules give
every storage.json outcome, and the hostile_*.json attacks hold (issue 32): keys on the wire of a memcached and a
Redis of their own, pages' sites through WSGI, ASGI and Django, the hostile file tree, larder-hostile against every
command; and `fetch` holds while larder-faults freezes, kills, resets, black-holes, trickles and cuts a real
memcached and Redis (outage.json, issue 33). A vector file the runner does not know fails collection here."""

from __future__ import annotations

import pytest

import larder
from conformance import cases
from support import VECTORS, configure_django, load_vectors
from vector_checks import Case

FILES = sorted(VECTORS.glob("*.json"))
CASES = [(path.name, case) for path in FILES for case in cases(path)]


#: The files whose cases need servers (conftest.py's conformance_env), and the one that drives Django.
NEEDS_SERVERS = {"hostile_keys.json", "hostile_replies.json", "outage.json"}


@pytest.mark.parametrize(("file", "case"), CASES, ids=[f"{file}:{case.name}" for file, case in CASES])
def test_vector_case(file: str, case: Case, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if file in NEEDS_SERVERS:
        for name, value in request.getfixturevalue("conformance_env").items():
            monkeypatch.setenv(name, value)
    if file == "hostile_pages.json":
        configure_django()  # as the suite configures it, whichever test runs first (the runner would configure its own)
    case.check()


def test_every_vector_file_is_judged_case_by_case() -> None:
    names = {path.name for path in FILES}
    assert names >= {"entries.json", "invalid.json", "keys.json", "ring.json", "signed.json", "storage.json"}
    assert names >= {"hostile_keys.json", "hostile_pages.json", "hostile_files.json", "hostile_replies.json"}
    counted = {name: sum(1 for file, _ in CASES if file == name) for name in names}
    storage = load_vectors("storage.json")
    assert counted["storage.json"] == len(storage["cases"]) + 1, "every storage case, and the file's shape"
    keys = load_vectors("keys.json")
    assert counted["keys.json"] == sum(len(keys[s]) for s in ("http", "safe", "namespaced", "variants", "alternates"))
    assert "outage.json" in names
    for name in ("hostile_keys.json", "hostile_files.json", "hostile_replies.json", "outage.json"):
        assert counted[name] == len(load_vectors(name)["cases"]), name
    pages = load_vectors("hostile_pages.json")["cases"]
    assert counted["hostile_pages.json"] == 3 * len(pages), "each case through WSGI, ASGI and Django"


def test_the_vector_files_cover_what_the_readme_promises() -> None:
    entries = load_vectors("entries.json")["cases"]
    invalid = load_vectors("invalid.json")["cases"]
    assert {case["stored_compressor"] for case in entries} == set(larder.COMPRESSORS)
    assert {case["options"]["serializer"] for case in entries} == set(larder.SERIALIZERS)
    assert {case["error"] for case in invalid} == set(larder.ERROR_KINDS)
    assert len({case["name"] for case in entries + invalid}) == len(entries) + len(invalid)
