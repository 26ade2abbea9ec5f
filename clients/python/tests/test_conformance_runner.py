"""The conformance runner (tests/conformance.py) keeps the contract of spec/vectors/README.md, "Conformance
runners": run from the repository root as `spec/conformance.py` runs it, it prints one JSON line per file, passes
every file of spec/vectors with as many cases as the suite runs, reports a wrong case by name (and only that one),
judges a storage.json-shaped file of generated cases, and fails (exit 0) a file it does not know or cannot read."""

from __future__ import annotations

import importlib.util
import json
import os
import random
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import conformance
from support import REPO_ROOT, VECTORS

RUNNER = Path(conformance.__file__).resolve()


def run(
    *files: str | Path, cwd: Path = REPO_ROOT, env: dict[str, str] | None = None, before: str = ""
) -> tuple[int, list[dict[str, Any]]]:
    """The runner's exit status and its reports, run as the matrix runs it (a subprocess, from `cwd`), with `env`
    added to the environment (a value of "" removes the variable), and the Python code `before` run first."""
    runner = str(RUNNER.relative_to(REPO_ROOT)) if cwd == REPO_ROOT else str(RUNNER)
    command = [sys.executable, runner, *map(str, files)]
    if before:
        start = (
            f"import runpy, sys; sys.argv = {[runner, *map(str, files)]!r}; sys.path.insert(0, {str(RUNNER.parent)!r})"
        )
        command = [sys.executable, "-c", f"{start}\n{before}\nrunpy.run_path({runner!r}, run_name='__main__')"]
    environ = {**os.environ, **(env or {})}
    done = subprocess.run(
        command,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={k: v for k, v in environ.items() if v},
    )
    return done.returncode, [json.loads(line) for line in done.stdout.splitlines()]


def copy_with(tmp_path: Path, name: str, change: Any) -> Path:
    """A copy of spec/vectors/`name` in `tmp_path`, after `change(document)`."""
    document = json.loads((VECTORS / name).read_text(encoding="utf-8"))
    change(document)
    path = tmp_path / name
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def test_every_vector_file_passes_from_the_repository_root(conformance_env: dict[str, str]) -> None:
    files = sorted(VECTORS.glob("*.json"))
    status, reports = run(*(f.relative_to(REPO_ROOT) for f in files), env=conformance_env)
    assert status == 0
    assert [r["file"] for r in reports] == [f.name for f in files]
    for path, report in zip(files, reports, strict=True):
        assert report == {
            "language": "python",
            "file": path.name,
            "status": "pass",
            "cases": len(conformance.cases(path)),
            "failed": [],
            "reason": None,
        }
    assert {r["file"]: r["cases"] for r in reports}["storage.json"] == 1 + len(
        json.loads((VECTORS / "storage.json").read_text())["cases"]
    )


def test_the_matrix_runs_this_runner() -> None:
    matrix = load_module(REPO_ROOT / "spec" / "conformance.py")
    assert Path(matrix.RUNNERS["python"][1]).resolve() == RUNNER


def test_a_wrong_case_fails_by_name_and_alone(tmp_path: Path) -> None:
    def wrong(document: dict[str, Any]) -> None:
        case = next(c for c in document["cases"] if c["name"] == "method_lowercase_get")
        case["expected"] = {"stored": False, "reason": "status"}

    status, (report,) = run(copy_with(tmp_path, "storage.json", wrong), cwd=tmp_path)
    assert status == 0
    assert report["status"] == "fail"
    assert report["failed"] == ["method_lowercase_get"]
    assert report["reason"].startswith("method_lowercase_get: AssertionError: expected {'stored': False, 'reason': ")
    assert "'method'" in report["reason"]

    def flipped(document: dict[str, Any]) -> None:
        for case in document["cases"][:25]:
            entry = bytearray.fromhex(case["entry_hex"])
            entry[0] ^= 0xFF
            case["entry_hex"] = entry.hex()

    _, (report,) = run(copy_with(tmp_path, "entries.json", flipped), cwd=tmp_path)
    assert report["status"] == "fail"
    assert len(report["failed"]) == 20, "at most 20 names"
    assert "bad_magic" in report["reason"]


def test_files_it_cannot_judge_fail_with_a_reason(tmp_path: Path) -> None:
    (tmp_path / "keys.json").write_text("{not json")
    (tmp_path / "new.json").write_text('{"schema": 1, "cases": []}')
    (tmp_path / "ring.json").write_text('{"schema": 1, "rings": []}')
    status, reports = run(tmp_path / "keys.json", tmp_path / "new.json", tmp_path / "ring.json", cwd=tmp_path)
    assert status == 0
    assert [(r["file"], r["status"], r["cases"]) for r in reports] == [
        ("keys.json", "fail", 0),
        ("new.json", "fail", 0),
        ("ring.json", "fail", 0),
    ]
    assert "cannot read" in reports[0]["reason"]
    assert "not a vector file this runner knows" in reports[1]["reason"]
    assert "shape" in reports[2]["reason"]
    assert run(cwd=tmp_path)[0] == 2, "no file: a usage error"


def test_generated_storage_cases_agree_with_the_spec_s_reference(tmp_path: Path) -> None:
    """As spec/storage_differential.py does with the Rust rules, with the expected outcomes of the spec's own
    reference implementation (spec/vectors/storage_reference.py, which imports nothing from larder) instead."""
    generator = load_module(REPO_ROOT / "spec" / "storage_differential.py")
    reference = load_module(VECTORS / "storage_reference.py")
    document = json.loads((VECTORS / "storage.json").read_text(encoding="utf-8"))
    seed = random.randrange(1 << 31)
    rng = random.Random(seed)
    cases = [generator.random_case(rng, i) for i in range(1500)]
    for case in cases:
        rules = {**document["rules_defaults"], **case["rules"]}
        request, response = case["request"], case["response"]
        case["expected"] = reference.storage(
            rules,
            request["method"],
            request["headers"],
            response["status"],
            response["headers"],
            case["request_time_ms"],
            case["response_time_ms"],
        )
    path = tmp_path / "storage.json"
    path.write_text(json.dumps({**document, "cases": cases}), encoding="utf-8")
    status, (report,) = run(path, cwd=tmp_path)
    assert status == 0
    assert report["cases"] == 1501
    assert report["status"] == "pass", f"seed {seed}: {report}"


def load_module(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_hostile_file_without_its_servers_fails_saying_which(conformance_env: dict[str, str]) -> None:
    for name, variable in [
        ("hostile_keys.json", "LARDER_CONFORMANCE_MEMCACHED"),
        ("hostile_keys.json", "LARDER_CONFORMANCE_REDIS"),
        ("hostile_replies.json", "LARDER_HOSTILE"),
        ("outage.json", "LARDER_FAULTS"),
    ]:
        status, (report,) = run(VECTORS / name, env={**conformance_env, variable: ""})
        assert status == 0
        assert report["status"] == "fail", (name, variable)
        assert report["cases"] == len(json.loads((VECTORS / name).read_text())["cases"])
        assert f"${variable} is not set" in report["reason"], report["reason"]


#: A memcached client that checks a key's UTF-8 and writes each character's low byte (as Buffer.from(…, "latin1")
#: did in TypeScript, issue 32 finding 1).
LATIN1_MEMCACHED = """
import larder.stores.memcached as m
def low(text): return bytes(ord(c) & 0xFF for c in text)
m._get = lambda key, flags: low(f"mg {key} {flags}\\r\\n")
m._delete = lambda key, flags="": low(f"md {key}{' ' + flags if flags else ''}\\r\\n")
_set = m._set
def latin1_set(key, value, exptime, mode):
    head, *rest = _set(key, value, exptime, mode)
    return [low(head.decode()), *rest]
m._set = latin1_set
"""


def test_a_client_that_writes_other_bytes_than_it_checked_fails_hostile_keys(conformance_env: dict[str, str]) -> None:
    """The matrix's point (issue 32): a client whose memcached commands carry each character's low byte instead of
    the UTF-8 its check read fails the u01xx and smuggle cases, whatever else it gets right."""
    status, (report,) = run(VECTORS / "hostile_keys.json", env=conformance_env, before=LATIN1_MEMCACHED)
    assert status == 0
    assert report["status"] == "fail"
    assert {"u010a_low_lf", "u010d_low_cr", "u0120_low_space", "smuggle_flush_all"} <= set(report["failed"])
    assert "ascii_plain" not in report["failed"]
    assert "memcached" in report["reason"]
