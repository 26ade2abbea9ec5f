"""Packaging: a wheel and an sdist of the distribution `larder-cache` (PyPI's `larder` is an unrelated project; the
import name stays `larder`) build (`python -m build --no-isolation`, with the build backend pinned in
requirements-dev.txt) and hold every module, the `py.typed` marker, the Redis scripts of spec/redis byte for byte
(setup.py copies them in) and the metadata with its extras; a wheel built from the sdist, installed alone, runs the
scripts it carries; every install line of the README names this package and extras it has; no file names a path of
the machine it was written on; the supported Python version is stated the same way everywhere."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parent.parent
SPEC_REDIS = ROOT.parent.parent / "spec" / "redis"
SCRIPTS = {path.name: path.read_bytes() for path in sorted(SPEC_REDIS.glob("*.lua"))}


def build(source: Path, outdir: Path, *kinds: str) -> None:
    command = [sys.executable, "-m", "build", "--no-isolation", *kinds, "--outdir", str(outdir), str(source)]
    built = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stdout + built.stderr


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel and an sdist built from this directory, as `pip install ./clients/python` builds them."""
    outdir = tmp_path_factory.mktemp("dist")
    build(ROOT, outdir, "--wheel", "--sdist")
    return outdir


def test_a_wheel_and_an_sdist_build_with_every_module(dist: Path) -> None:
    wheels = list(dist.glob("larder_cache-*-py3-none-any.whl"))
    sdists = list(dist.glob("larder_cache-*.tar.gz"))
    assert len(wheels) == 1, list(dist.iterdir())
    assert len(sdists) == 1, list(dist.iterdir())
    modules = {str(p.relative_to(ROOT / "src")) for p in (ROOT / "src" / "larder").rglob("*.py")}
    with zipfile.ZipFile(wheels[0]) as wheel:
        names = set(wheel.namelist())
        metadata = next(wheel.read(n).decode() for n in names if n.endswith(".dist-info/METADATA"))
    assert modules <= names, sorted(modules - names)
    assert "larder/py.typed" in names
    assert not any("tests/" in n or "django_tests" in n for n in names)
    assert re.search(r"^Name: larder-cache$", metadata, re.MULTILINE), metadata[:300]
    assert "Requires-Python: >=3.10" in metadata
    for dependency in ("msgpack", "ormsgpack", "lz4", "cramjam", "zstandard", "brotli"):
        assert re.search(rf"^Requires-Dist: {dependency}\b", metadata, re.MULTILINE), dependency
    extras = set(re.findall(r"^Provides-Extra: (\S+)$", metadata, re.MULTILINE))
    assert extras == {"redis", "postgres", "django", "all"}, extras
    for extra, package in (("postgres", "psycopg"), ("django", "django"), ("all", "psycopg"), ("all", "django")):
        assert re.search(rf'^Requires-Dist: {package}\b.*extra == "{extra}"', metadata, re.MULTILINE), (extra, package)
    assert not re.search(r"^Requires-Dist: redis\b", metadata, re.MULTILINE), "the Redis store needs no library"
    with tarfile.open(sdists[0]) as sdist:
        assert any(n.endswith("src/larder/py.typed") for n in sdist.getnames())


def test_the_distributions_carry_spec_redis_s_scripts_byte_for_byte(dist: Path) -> None:
    assert set(SCRIPTS) == {"delete_if.lua", "incr.lua", "tag.lua"}
    (wheel,) = dist.glob("*.whl")
    with zipfile.ZipFile(wheel) as opened:
        packaged = {
            n.rpartition("/")[2]: opened.read(n) for n in opened.namelist() if n.startswith("larder/stores/lua/")
        }
    assert packaged == SCRIPTS
    (sdist,) = dist.glob("*.tar.gz")
    with tarfile.open(sdist) as opened:
        carried = {
            m.name.rpartition("/")[2]: opened.extractfile(m).read()  # type: ignore[union-attr]
            for m in opened.getmembers()
            if "/src/larder/stores/lua/" in m.name and m.isfile()
        }
    assert carried == SCRIPTS


def test_a_wheel_built_from_the_sdist_runs_its_own_scripts(dist: Path, tmp_path: Path) -> None:
    """Built where spec/redis is out of reach (the sdist unpacked elsewhere), installed alone (unpacked on the
    path), the package loads the scripts it carries, and their SHA-1 is what the Redis store sends."""
    (sdist,) = dist.glob("*.tar.gz")
    with tarfile.open(sdist) as opened:
        opened.extractall(tmp_path / "unpacked", filter="data")
    (source,) = (tmp_path / "unpacked").iterdir()
    build(source, tmp_path / "wheel", "--wheel")
    (wheel,) = (tmp_path / "wheel").glob("*.whl")
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as opened:
        opened.extractall(site)
    probe = (
        "import json, larder, larder.stores.redis as r, larder.stores.scripts as s\n"
        "print(json.dumps({'file': larder.__file__, 'at': str(s.location()),"
        " 'sha': {n: r._Script(n).script.sha for n in s.NAMES}}))"
    )
    found = run_alone(site, probe)
    assert Path(found["file"]).is_relative_to(site), found
    assert Path(found["at"]) == site / "larder" / "stores" / "lua"
    assert found["sha"] == {name[:-4]: hashlib.sha1(data).hexdigest() for name, data in SCRIPTS.items()}
    for name in SCRIPTS:
        (site / "larder" / "stores" / "lua" / name).unlink()
    (site / "larder" / "stores" / "lua").rmdir()
    broken = run_alone(site, "import larder; larder.open_store('redis://127.0.0.1:1')", ok=False)
    assert "has no Redis scripts" in broken["stderr"]


def run_alone(site: Path, code: str, ok: bool = True) -> dict[str, str]:
    """Runs `code` with `site` first on the path (before this checkout's editable install)."""
    env = {**os.environ, "PYTHONPATH": str(site)}
    done = subprocess.run([sys.executable, "-c", code], cwd=site, env=env, capture_output=True, text=True, timeout=60)
    if not ok:
        assert done.returncode != 0
        return {"stderr": done.stderr}
    assert done.returncode == 0, done.stderr
    found: dict[str, str] = json.loads(done.stdout)
    return found


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
            # The install sections run from a folder of the user's, with $LARDER naming the checkout.
            name, _, rest = target.replace("$LARDER", str(repo)).partition("[")
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
    checked = [ROOT / "README.md", ROOT / "pyproject.toml", ROOT / "setup.py", *ROOT.glob("django_tests/*.py")]
    checked += [*ROOT.glob("bench/*")]
    checked += [*(ROOT / "src").rglob("*.py"), *(ROOT / "tests").rglob("*.py")]
    machine = re.compile("/" + "work/")  # spelled so that this file does not name it
    offenders = [str(p.relative_to(ROOT)) for p in checked if p.is_file() and machine.search(p.read_text())]
    assert offenders == []
