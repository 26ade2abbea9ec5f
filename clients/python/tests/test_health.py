"""A remote server's health (spec/STORES.md §1 "Failure and recovery"): `failures` consecutive failures eject it for
`retry_after`; then probation is one probe at a time: the first request goes, every other one fails at once until
the probe's outcome is recorded (a good answer puts the server back, a failure ejects it again); a probe that never
reports is taken as lost after `retry_after`. And the stores refuse at once, with their own error, while the probe
is out."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from larder.stores import ServerError, open_store
from larder.stores.base import FailurePolicy, Health

POLICY = FailurePolicy(failures=2, retry_after_ms=1000)


def ejected(now: int = 10_000) -> Health:
    health = Health()
    assert health.record(False, POLICY, now) is False
    assert health.record(False, POLICY, now) is True, "the second failure in a row ejects"
    return health


def test_a_healthy_server_admits_everyone_and_a_good_answer_resets_the_count() -> None:
    health = Health()
    assert all(health.admits(0, POLICY) for _ in range(5))
    health.record(False, POLICY, 100)
    health.record(True, POLICY)
    assert health.record(False, POLICY, 200) is False, "the count started again"
    assert health.errors == 2


def test_an_ejected_server_is_refused_until_retry_after() -> None:
    health = ejected(10_000)
    assert health.is_ejected()
    assert not health.admits(10_999, POLICY)
    assert health.admits(11_000, POLICY), "retry_after has passed: this request is the probe"


def test_probation_is_one_probe_at_a_time_and_a_good_answer_ends_it() -> None:
    health = ejected(10_000)
    assert health.admits(11_000, POLICY)
    assert health.on_probation()
    assert [health.admits(11_000 + i, POLICY) for i in range(1, 20)] == [False] * 19, "the probe is out"
    health.record(True, POLICY)
    assert not health.on_probation()
    assert all(health.admits(11_100, POLICY) for _ in range(5)), "back in use: everyone goes"


def test_a_failed_probe_ejects_again_at_once() -> None:
    health = ejected(10_000)
    assert health.admits(11_000, POLICY)
    assert health.record(False, POLICY, 11_150) is True, "one failure on probation ejects"
    assert health.is_ejected()
    assert not health.admits(12_149, POLICY)
    assert health.admits(12_150, POLICY), "the next probe"
    assert not health.admits(12_151, POLICY)


def test_a_probe_that_never_reports_is_taken_as_lost_after_retry_after() -> None:
    health = ejected(10_000)
    assert health.admits(11_000, POLICY)
    assert not health.admits(11_999, POLICY)
    assert health.admits(12_000, POLICY), "a new probe"
    assert not health.admits(12_001, POLICY)


def test_memcached_s_readmission_puts_it_on_probation_without_a_probe_out() -> None:
    health = ejected(10_000)
    assert health.readmit_if_due(11_000)
    assert not health.is_ejected()
    assert health.admits(11_001, POLICY), "the first request is the probe"
    assert not health.admits(11_002, POLICY)


def test_concurrent_requests_on_probation_let_exactly_one_through() -> None:
    health = ejected(10_000)
    start = threading.Barrier(16)
    admitted: list[bool] = []

    def request() -> None:
        start.wait()
        admitted.append(health.admits(11_000, POLICY))

    threads = [threading.Thread(target=request) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(admitted) == [False] * 15 + [True]


class Silent:
    """A loopback server that accepts connections and never answers (a frozen server)."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.held: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.held.append(conn)

    def close(self) -> None:
        self.listener.close()
        for conn in self.held:
            conn.close()


@pytest.mark.parametrize("scheme", ["memcached", "redis"])
def test_while_a_store_s_probe_waits_for_its_timeout_every_other_request_fails_at_once(scheme: str) -> None:
    server = Silent()
    store = open_store(f"{scheme}://{server.address}?timeout=300ms&failures=1&retry_after=200ms")
    try:
        with pytest.raises(ServerError):
            store.get("k")  # a timeout: ejected
        time.sleep(0.25)
        probe_done = threading.Event()
        outcome: list[BaseException] = []

        def probe() -> None:
            try:
                store.get("probe")
            except ServerError as e:
                outcome.append(e)
            probe_done.set()

        threading.Thread(target=probe).start()
        health = store.health if scheme == "redis" else store.servers[0].health  # type: ignore[attr-defined]
        deadline = time.monotonic() + 5
        while not health._probe_since:  # the probe is out, waiting for its timeout
            assert time.monotonic() < deadline, "the probe never went out"
            time.sleep(0.005)
        started = time.monotonic()
        for key in ("a", "b", "c"):
            with pytest.raises(ServerError, match="probation"):
                store.get(key)
        assert time.monotonic() - started < 0.25, "refused at once, not after a timeout (300 ms) each"
        assert probe_done.wait(5)
        assert outcome, "the probe itself timed out"
        with pytest.raises(ServerError, match="ejected"):
            store.get("d")  # the failed probe ejected it again
    finally:
        store.close()
        server.close()
