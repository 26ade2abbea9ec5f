"""Packaging: a wheel and an sdist of the distribution `larder-cache` (PyPI's `larder` is an unrelated project; the
import name stays `larder`) build (`python -m build --no-isolation`, with the build backend pinned in
requirements-dev.txt) and hold every module, the `py.typed` marker and the metadata with its extras; every install
line of the README names this package and extras it has; no file names a path of the machine it was written on; the
supported Python version is stated the same way everywhere."""

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
    wheels = list(tmp_path.glob("larder_cache-*-py3-none-any.whl"))
    sdists = list(tmp_path.glob("larder_cache-*.tar.gz"))
    assert len(wheels) == 1, list(tmp_path.iterdir())
    assert len(sdists) == 1, list(tmp_path.iterdir())
    modules = {str(p.relative_to(ROOT / "src")) for p in (ROOT / "src" / "larder").rglob("*.py")}
    with zipfile.ZipFile(wheels[0]) as wheel:
        names = set(wheel.namelist())
        metadata = next(wheel.read(n).decode() for n in names if n.endswith(".dist-info/METADATA"))
    assert modules <= names, sorted(modules - names)
    assert "larder/py.typed" in names
    assert not any("tests/" in n or "django_tests" in n for n in names)
    assert re.search(r"^Name: larder-cache$", metadata, re.MULTILINE), metadata[:300]
    assert "Requires-Python: >=3.10" in metadata
    for dependency in ("msgpack", "lz4", "cramjam", "zstandard", "brotli"):
        assert re.search(rf"^Requires-Dist: {dependency}\b", metadata, re.MULTILINE), dependency
    extras = set(re.findall(r"^Provides-Extra: (\S+)$", metadata, re.MULTILINE))
    assert extras == {"redis", "postgres", "django", "all"}, extras
    for extra, package in (("postgres", "psycopg"), ("django", "django"), ("all", "psycopg"), ("all", "django")):
        assert re.search(rf'^Requires-Dist: {package}\b.*extra == "{extra}"', metadata, re.MULTILINE), (extra, package)
    assert not re.search(r"^Requires-Dist: redis\b", metadata, re.MULTILINE), "the Redis store needs no library"
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


def test_every_readme_install_line_names_this_package_and_its_extras() -> None:
    """`pip install` lines in the README (both READMEs that talk about this package) install what exists: this
    directory (relative to where the line says it runs) with extras it declares, or a requirements file here."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["name"] == "larder-cache"
    extras = set(project["project"]["optional-dependencies"])
    repo = ROOT.parent.parent
    lines = []
    for readme in (ROOT / "README.md", repo / "README.md"):
        for line in readme.read_text().splitlines():
            found = re.search(r"pip install ([^`#]*)", line)
            if found:
                lines.append((readme, found.group(1).strip()))
    assert lines
    for readme, args in lines:
        tokens = [t.strip("\"';,()") for t in args.split()]
        targets = [t for t in tokens if "larder" in t or "python" in t or t.endswith(".txt") or t == "."]
        assert targets, f"{readme}: {args}: installs nothing this test recognises"
        for target in targets:
            name, _, rest = target.partition("[")
            wanted = set(rest.rstrip("]").split(",")) if rest else set()
            assert wanted <= extras, f"{readme}: {args}: no extra {wanted - extras}"
            if name.endswith(".txt"):
                assert any((base / name).is_file() for base in (repo, ROOT, ROOT / "bench")), f"{readme}: {args}"
            elif "/" in name or name == ".":
                assert any((base / name).resolve() == ROOT for base in (repo, ROOT)), f"{readme}: {args}"
            else:
                assert name == "larder-cache", f"{readme}: {args}: PyPI's larder is another project"


def test_no_file_names_a_path_of_this_machine() -> None:
    """README, scripts, sources and tests work on any machine: no path of the development machine's checkout."""
    checked = [ROOT / "README.md", ROOT / "pyproject.toml", *ROOT.glob("django_tests/*.py"), *ROOT.glob("bench/*")]
    checked += [*(ROOT / "src").rglob("*.py"), *(ROOT / "tests").rglob("*.py")]
    machine = re.compile("/" + "work/")  # spelled so that this file does not name it
    offenders = [str(p.relative_to(ROOT)) for p in checked if p.is_file() and machine.search(p.read_text())]
    assert offenders == []
