#!/usr/bin/env python3
"""Runs Django's own cache backend tests (the generic `BaseCacheTests` of Django's tests/cache/tests.py) against
`larder.django.LarderCache`, for the Django releases given (default: the current LTS and the newest release).

Django's test suite is not part of larder's repository: this script downloads each Django sdist with pip into a work
directory outside the repository (default `${LARDER_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/larder}/django-tests`,
or $LARDER_DJANGO_WORK, or --work), unpacks it, makes a virtualenv there with that Django and this package, writes
one test module beside Django's cache tests that runs `BaseCacheTests` on LarderCache (with the exclusions listed
in EXCLUDED, each with its reason), and runs it with Django's runtests.py against a memcached it starts on a free
loopback port (or the store given with --store).

    python clients/python/django_tests/run.py                      # 5.2 LTS and the newest
    python clients/python/django_tests/run.py --django 5.2.19 --store redis://127.0.0.1:6379/0

Django 6 needs Python >= 3.12: --python-for-6 (default: the first python3.12 or python3.13 found, pyenv included).
Exit status 0 when every run passed (skips are the listed exclusions), 1 otherwise.
"""

from __future__ import annotations

import argparse
import fcntl
import glob
import importlib.metadata
import os
import re
import shutil
import socket
import subprocess
import sys
import tarfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PACKAGE = HERE.parent
DEFAULT_VERSIONS = ["5.2.*", "newest"]

#: Tests of BaseCacheTests that cannot pass on LarderCache over a shared store, and why. Each is skipped with its
#: reason. On memory:// LarderCache culls as LocMemCache does, and they run.
EXCLUDED_ON_SHARED_STORES: dict[str, str] = {
    "test_cull": "Django's MAX_ENTRIES/CULL_FREQUENCY culling: a shared store bounds its memory itself (capacity "
    "in the URL, memcached's and Redis's own eviction), never by one client's cull options",
    "test_zero_cull": "as test_cull",
    "test_cull_delete_when_store_empty": "as test_cull",
}


def excluded(store: str) -> dict[str, str]:
    """The exclusions for `store`: none on memory://, the cull tests on the shared stores."""
    return {} if store.lower().startswith("memory:") else EXCLUDED_ON_SHARED_STORES


def cache_dir() -> Path:
    """Where downloads go: $LARDER_CACHE_DIR, else $XDG_CACHE_HOME/larder, else ~/.cache/larder (as the Makefile)."""
    if os.environ.get("LARDER_CACHE_DIR"):
        return Path(os.environ["LARDER_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "larder"


TEST_MODULE = '''\
"""Written by larder's clients/python/django_tests/run.py: Django's generic cache tests on LarderCache."""
import os
import unittest

from django.test import TestCase, override_settings

from .tests import BaseCacheTests, caches_setting_for_tests

EXCLUDED = {excluded!r}


@override_settings(
    CACHES=caches_setting_for_tests(BACKEND="larder.django.LarderCache", LOCATION=os.environ["LARDER_DJANGO_STORE"])
)
class LarderCacheTests(BaseCacheTests, TestCase):
    pass


for _name, _reason in EXCLUDED.items():
    if hasattr(LarderCacheTests, _name):
        setattr(LarderCacheTests, _name, unittest.skip(_reason)(getattr(LarderCacheTests, _name)))
'''


def run(command: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    print("+", " ".join(command), flush=True)
    return subprocess.run(command, check=True, text=True, **kwargs)  # type: ignore[call-overload,no-any-return]


def find_python(minimum: tuple[int, int]) -> str:
    candidates = [sys.executable, shutil.which("python3.13"), shutil.which("python3.12")]
    candidates += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.1[2-9]*/bin/python3")), reverse=True)
    for candidate in candidates:
        if not candidate:
            continue
        probe = subprocess.run(
            [candidate, "-c", "import sys; print(sys.version_info[0], sys.version_info[1])"],
            capture_output=True,
            text=True,
            check=False,
        )
        if probe.returncode == 0:
            major, minor = map(int, probe.stdout.split())
            if (major, minor) >= minimum:
                return candidate
    sys.exit(f"no Python >= {minimum[0]}.{minimum[1]} found (give one with --python-for-6)")


def download(spec: str, work: Path) -> Path:
    sdists = work / "sdists"
    sdists.mkdir(parents=True, exist_ok=True)
    requirement = "django" if spec == "newest" else f"django=={spec}"
    before = set(sdists.glob("django-*.tar.gz"))
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--no-binary",
            ":all:",
            "--ignore-requires-python",
            requirement,
            "-d",
            str(sdists),
        ]
    )
    found = sorted(set(sdists.glob("django-*.tar.gz")) - before) or sorted(
        sdists.glob("django-*.tar.gz"), key=lambda p: [int(x) for x in re.findall(r"\d+", p.name)]
    )
    if spec != "newest":
        prefix = spec.rstrip("*").rstrip(".")
        found = [p for p in found if p.name.startswith(f"django-{prefix}")] or found
    return found[-1]


def prepare(sdist: Path, work: Path, python: str) -> tuple[Path, Path]:
    version = sdist.name[len("django-") : -len(".tar.gz")]
    tree = work / f"django-{version}"
    if not (tree / "tests" / "runtests.py").exists():
        with tarfile.open(sdist) as archive:
            archive.extractall(work, filter="data")
    venv = work / f"venv-{version}"
    # The venv is shared by every checkout on the machine: it is rebuilt when the pinned requirements change, and
    # the checkout under test is put first on the path when the tests run (run_tests), whichever made the venv.
    requirements = (PACKAGE / "requirements-dev.txt").read_text()
    ready = venv / ".ready"
    if not ready.exists() or ready.read_text() != requirements:
        shutil.rmtree(venv, ignore_errors=True)
        run([python, "-m", "venv", str(venv)])
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet"]
        # larder's runtime dependencies at requirements-dev.txt's pins (not its test and lint tools, which these
        # tests never run); this venv's Django is the one whose tests it runs, installed last with what it needs.
        required = importlib.metadata.requires("larder-cache") or []
        needed = {re.split(r"[<>=\[ ;]", d, maxsplit=1)[0].lower() for d in required if "extra ==" not in d}
        pins = [line.split("#")[0].strip() for line in requirements.splitlines()]
        run([*pip, *[pin for pin in pins if pin and pin.split("==")[0].lower() in needed]])
        run([*pip, str(tree)])
        run([*pip, "--no-deps", "-e", str(PACKAGE)])
        ready.write_text(requirements)
    installed = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import django; print(django.get_version())"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    if installed != version:
        sys.exit(f"{venv} has Django {installed or '(none)'}, not {version}: delete it and run again")
    return tree, venv


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def start_memcached() -> tuple[subprocess.Popen[bytes], str]:
    binary = shutil.which("memcached")
    if binary is None:
        sys.exit("memcached is not installed: run `make services` at the repository root")
    port = free_port()
    command = [binary, "-l", "127.0.0.1", "-p", str(port), "-U", "0", "-m", "64"]
    if os.geteuid() == 0:
        command += ["-u", "root"]
    process = subprocess.Popen(command)
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return process, f"memcached://127.0.0.1:{port}?timeout=2s"
        except OSError:
            time.sleep(0.02)
    sys.exit("memcached did not start")


def run_tests(tree: Path, venv: Path, store: str) -> tuple[bool, str]:
    (tree / "tests" / "cache" / "tests_larder.py").write_text(TEST_MODULE.format(excluded=excluded(store)))
    env = dict(os.environ, LARDER_DJANGO_STORE=store, PYTHONDONTWRITEBYTECODE="1", PYTHONPATH=str(PACKAGE / "src"))
    command = [str(venv / "bin" / "python"), "runtests.py", "cache.tests_larder", "--parallel", "1", "-v", "2"]
    print("+", " ".join(command), flush=True)
    done = subprocess.run(command, cwd=tree / "tests", env=env, capture_output=True, text=True, check=False)
    output = done.stdout + done.stderr
    print(output[-20000:])
    summary = [line for line in output.splitlines() if line.startswith(("Ran ", "OK", "FAILED"))]
    return done.returncode == 0, " / ".join(summary)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--django", action="append", help="a Django version (5.2.*, 6.1.3) or 'newest'; repeatable")
    parser.add_argument("--work", default=os.environ.get("LARDER_DJANGO_WORK") or str(cache_dir() / "django-tests"))
    parser.add_argument("--store", help="the store URL to test on (default: a memcached started here)")
    parser.add_argument("--python-for-6", help="the Python (>= 3.12) for Django 6 and newer")
    args = parser.parse_args()
    work = Path(args.work)
    if PACKAGE.parent.parent in [work, *work.parents]:
        sys.exit("the work directory must be outside the repository (Django's tests are not larder's code)")
    work.mkdir(parents=True, exist_ok=True)
    # One run at a time in a work directory: two runs of make test on one machine share its venvs and trees.
    lock = (work / ".lock").open("w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    memcached = None
    store = args.store
    if store is None:
        memcached, store = start_memcached()
    results = []
    try:
        for spec in args.django or DEFAULT_VERSIONS:
            sdist = download(spec, work)
            major = int(re.findall(r"\d+", sdist.name)[0])
            python = args.python_for_6 or find_python((3, 12)) if major >= 6 else find_python((3, 10))
            tree, venv = prepare(sdist, work, python)
            ok, summary = run_tests(tree, venv, store)
            results.append((sdist.name, ok, summary))
    finally:
        if memcached is not None:
            memcached.terminate()
            memcached.wait()
    print("\nDjango cache tests on larder.django.LarderCache:")
    for name, ok, summary in results:
        print(f"  {name}: {'passed' if ok else 'FAILED'}: {summary}")
    return 0 if all(ok for _, ok, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
