"""outage.json (spec/vectors/README.md, "outage.json: `fetch` while the store fails"; spec/STORES.md §3 "When the
store fails"): `larder-faults` between a `larder.Cache` and a real memcached or Redis, driven through the case's
steps. For each case the runner starts `$LARDER_FAULTS HOST:PORT` in front of `$LARDER_CONFORMANCE_MEMCACHED` or
`$LARDER_CONFORMANCE_REDIS` and opens two caches with one fresh random namespace: the *faulted* cache over the proxy
(with the case's `url_query`, default options otherwise: outage memory on) and the *direct* cache over the server.

A case that lacks a variable fails, saying which; a failure names the step (its index and kind) and what differed.
Standard library and larder only, as every module of vector_checks.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any

from larder import Cache

from . import Case, section

#: The steps a case may have, by the key that names each.
STEPS = ("fault", "burst", "write_direct", "read_direct", "flush_direct", "await_value")
#: How long `fetch` keeps a value in these cases, as the README says (seconds).
TTL = 60.0
#: How often `await_value` fetches (seconds).
AWAIT_EVERY = 0.1
#: How long a fault command may take to be answered `ok` (seconds).
COMMAND_SECONDS = 10.0


def _env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise AssertionError(f"${name} is not set: the case needs it (spec/vectors/README.md, outage.json)")
    return value


def cases(document: dict[str, Any]) -> list[Case]:
    listed = section(document, "cases")
    for case in listed:
        if case["store"] not in ("memcached", "redis"):
            raise ValueError(f"{case['name']}: unknown store {case['store']!r}")
        for step in case["steps"]:
            kinds = [kind for kind in STEPS if kind in step]
            if len(kinds) != 1:
                raise ValueError(f"{case['name']}: a step that is not one of {', '.join(STEPS)}: {step!r}")
        str(case["url_query"])
    return [Case(str(case["name"]), _bind(case)) for case in listed]


def _bind(case: dict[str, Any]) -> Callable[[], None]:
    return lambda: check(case)


class Faults:
    """One larder-faults proxy (`binary`) in front of `upstream` (`host:port`): it prints its own address, takes one
    command per line on its standard input and answers each with a line (`ok`…), and exits when its input closes."""

    def __init__(self, binary: str, upstream: str) -> None:
        if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
            raise AssertionError(f"$LARDER_FAULTS ({binary}) is not an executable")
        self.process = subprocess.Popen(
            [binary, upstream],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.address = self._line(COMMAND_SECONDS)
        if not self.address:
            self.stop()
            raise AssertionError(f"{binary} {upstream} did not start")

    def _line(self, seconds: float) -> str:
        """The proxy's next line of output, within `seconds` (a proxy that says nothing fails the case, never hangs
        it)."""
        assert self.process.stdout is not None
        got: list[str] = []
        reader = threading.Thread(target=lambda: got.append(self.process.stdout.readline()), daemon=True)  # type: ignore[union-attr]
        reader.start()
        reader.join(seconds)
        if not got:
            raise AssertionError(f"larder-faults said nothing within {seconds:.0f} s")
        return got[0].strip()

    def command(self, line: str) -> None:
        """Sends `line` and waits for its `ok`."""
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()
        answer = self._line(COMMAND_SECONDS)
        if not answer.startswith("ok"):
            raise AssertionError(f"larder-faults answered {answer!r} to {line!r}")

    def stop(self) -> None:
        if self.process.stdin is not None and not self.process.stdin.closed:
            with contextlib.suppress(OSError):  # (a proxy that exited already)
                self.process.stdin.close()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


def check(case: dict[str, Any]) -> None:
    binary = _env("LARDER_FAULTS")
    store = str(case["store"])
    server = _env("LARDER_CONFORMANCE_MEMCACHED" if store == "memcached" else "LARDER_CONFORMANCE_REDIS")
    faults = Faults(binary, server)
    namespace = f"outage-{secrets.token_hex(8)}"
    query = str(case["url_query"])
    if store == "memcached":
        faulted_url, direct_url = f"memcached://{faults.address}?{query}", f"memcached://{server}"
    else:
        faulted_url, direct_url = f"redis://{faults.address}/0?{query}", f"redis://{server}/0"
    faulted: Cache | None = None
    direct: Cache | None = None
    try:
        faulted = Cache(faulted_url, namespace=namespace)
        direct = Cache(direct_url, namespace=namespace)
        for index, step in enumerate(case["steps"]):
            kind = next(kind for kind in STEPS if kind in step)
            try:
                _step(kind, step, faults, faulted, direct)
            except AssertionError as e:
                raise AssertionError(f"step {index} ({kind}): {e}") from None
            except Exception as e:
                raise AssertionError(f"step {index} ({kind}): {type(e).__name__}: {e}") from None
    finally:
        for cache in (faulted, direct):
            if cache is not None:
                cache.close()
        faults.stop()


def _step(kind: str, step: dict[str, Any], faults: Faults, faulted: Cache, direct: Cache) -> None:
    if kind == "fault":
        faults.command(str(step["fault"]))
    elif kind == "burst":
        _burst(step["burst"], step["expect"], faulted)
    elif kind == "write_direct":
        direct.set(str(step["write_direct"]["key"]), str(step["write_direct"]["value"]), TTL)
    elif kind == "read_direct":
        key, value = str(step["read_direct"]["key"]), str(step["read_direct"]["value"])
        got = direct.get(key)
        assert got == value, f"the direct cache reads {got!r} at {key!r}, not {value!r}"
    elif kind == "flush_direct":
        direct.store.clear()  # the server emptied (flush_all, FLUSHDB), as a restarted one is
    elif kind == "await_value":
        _await_value(step["await_value"], faulted)
    else:  # pragma: no cover - cases() lists only these
        raise AssertionError(f"unknown step {kind}")


class _Loader:
    """A loader that sleeps `ms` and returns `value`, counting its runs."""

    def __init__(self, value: str, ms: int) -> None:
        self.value = value
        self.seconds = ms / 1000
        self.runs = 0
        self._lock = threading.Lock()

    def __call__(self) -> str:
        with self._lock:
            self.runs += 1
        time.sleep(self.seconds)
        return self.value


def _burst(burst: dict[str, Any], expect: dict[str, Any], cache: Cache) -> None:
    key = str(burst["key"])
    callers, rounds = int(burst["callers"]), int(burst["rounds"])
    loader = _Loader(str(burst["loader_value"]), int(burst["loader_ms"]))
    value = str(expect["value"])
    within = int(expect["round_within_ms"]) / 1000
    for round_ in range(1, rounds + 1):
        try:
            _round(cache, key, loader, callers, value, within)
        except AssertionError as e:
            raise AssertionError(f"round {round_}: {e}") from None
    if "loads" in expect:
        assert loader.runs == int(expect["loads"]), f"the loader ran {loader.runs} times, not {expect['loads']}"
    if "loads_at_most" in expect:
        most = int(expect["loads_at_most"])
        assert loader.runs <= most, f"the loader ran {loader.runs} times, more than {most}"


def _round(cache: Cache, key: str, loader: _Loader, callers: int, value: str, within: float) -> None:
    """`callers` concurrent `fetch(key)` calls, let go at once: each must return `value` (none may raise), all
    within `within` seconds of the start."""
    start = threading.Barrier(callers + 1)
    results: list[Any] = [None] * callers
    errors: list[str] = []

    def call(i: int) -> None:
        start.wait()
        try:
            results[i] = cache.fetch(key, loader, TTL)
        except Exception as e:
            errors.append(f"{type(e).__name__}: {e}")

    threads = [threading.Thread(target=call, args=(i,), daemon=True) for i in range(callers)]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.monotonic()
    for thread in threads:
        thread.join(max(began + within + 5 - time.monotonic(), 0))
    elapsed = time.monotonic() - began
    assert not any(t.is_alive() for t in threads), f"callers still waiting after {elapsed:.1f} s"
    assert not errors, f"fetch raised {errors[0]}"
    wrong = [r for r in results if r != value]
    assert not wrong, f"{len(wrong)} of {callers} callers got {wrong[0]!r}, not {value!r}"
    assert elapsed <= within, f"it took {elapsed * 1000:.0f} ms, more than {within * 1000:.0f}"


def _await_value(wait: dict[str, Any], cache: Cache) -> None:
    key, value = str(wait["key"]), str(wait["value"])
    loader = _Loader(str(wait["loader_value"]), 0)
    deadline = time.monotonic() + int(wait["within_ms"]) / 1000
    got: Any = None
    while True:
        got = cache.fetch(key, loader, TTL)
        if got == value:
            return
        if time.monotonic() >= deadline:
            raise AssertionError(f"fetch still answered {got!r}, not {value!r}, after {wait['within_ms']} ms")
        time.sleep(AWAIT_EVERY)
