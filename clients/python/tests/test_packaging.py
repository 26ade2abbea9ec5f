"""Packaging: a wheel and an sdist build (`python -m build --no-isolation`, with the build backend pinned in
requirements-dev.txt) and hold every module, the `py.typed` marker and the metadata; the supported Python version is
stated the same way everywhere."""

from __future__ import annotations

import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent


def test_a_wheel_and_an_sdist_build_with_every_module(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "build", "--no-isolation", "--wheel", "--sdist", "--outdir", str(tmp_path), "."]
    built = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stdout + built.stderr
    wheels = list(tmp_path.glob("larder-*-py3-none-any.whl"))
    sdists = list(tmp_path.glob("larder-*.tar.gz"))
    assert len(wheels) == 1, list(tmp_path.iterdir())
    assert len(sdists) == 1, list(tmp_path.iterdir())
    modules = {str(p.relative_to(ROOT / "src")) for p in (ROOT / "src" / "larder").rglob("*.py")}
    with zipfile.ZipFile(wheels[0]) as wheel:
        names = set(wheel.namelist())
        metadata = next(wheel.read(n).decode() for n in names if n.endswith(".dist-info/METADATA"))
    assert modules <= names, sorted(modules - names)
    assert "larder/py.typed" in names
    assert not any("tests/" in n or "django_tests" in n for n in names)
    assert "Requires-Python: >=3.10" in metadata
    for dependency in ("msgpack", "lz4", "cramjam", "zstandard", "brotli"):
        assert re.search(rf"^Requires-Dist: {dependency}\b", metadata, re.MULTILINE), dependency
    with tarfile.open(sdists[0]) as sdist:
        assert any(n.endswith("src/larder/py.typed") for n in sdist.getnames())


def test_python_3_10_or_newer_is_stated_alike_everywhere() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["requires-python"] == ">=3.10"
    assert project["tool"]["ruff"]["target-version"] == "py310"
    assert project["tool"]["mypy"]["python_version"] == "3.10"
    readme = (ROOT / "README.md").read_text()
    assert "Python 3.10 or newer" in readme
    stated = set(re.findall(r"Python (?:≥|>=) ?(3\.\d+)|Python (3\.\d+) or newer", readme))
    assert {a or b for a, b in stated} == {"3.10"}, stated
