"""The reply readers' bounds case by case (spec/STORES.md §2), over a socket pair: what the test writes is what a
server sent. RESP (Redis): bulk strings refused when announced past the bound, arrays nested at most 8 deep and no
longer than the reply may hold, lines of 8 KiB, integers of 19 digits; memcached: values past max_item, lines,
replies that are not replies. Each bound at its edge: the last accepted and the first refused."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from larder.stores.memcached import read_reply as read_memcached
from larder.stores.resp import ErrorReply, Limits, pack, read_reply
from larder.stores.wire import MAX_LINE, Wire, WireFailure

WIDE = Limits(max_bulk=1 << 20, max_bytes=1 << 20, max_elements=1000)


@pytest.fixture(params=[0.0, 0.05], ids=["poll", "block_limit"])
def pair(request: pytest.FixtureRequest) -> Iterator[tuple[Wire, socket.socket]]:
    """Our end of a socket pair, non-blocking (reads wait in `poll`) or blocking with every call but the first read
    after a request said MSG_DONTWAIT (`block_limit`, as the memcached store makes them), and the server's end."""
    ours, theirs = socket.socketpair()
    yield Wire(ours, request.param), theirs
    ours.close()
    theirs.close()


def resp(pair: tuple[Wire, socket.socket], data: bytes, limits: Limits = WIDE, timeout: float = 1.0) -> Any:
    wire, server = pair
    server.sendall(data)
    return read_reply(wire, time.monotonic() + timeout, limits)


def test_resp_values(pair: tuple[Wire, socket.socket]) -> None:
    assert resp(pair, b"$5\r\nhello\r\n") == b"hello"
    assert resp(pair, b"$-1\r\n") is None
    assert resp(pair, b"+OK\r\n") == b"OK"
    assert resp(pair, b":-42\r\n") == -42
    assert resp(pair, b"*2\r\n$1\r\na\r\n$-1\r\n") == [b"a", None]
    error = resp(pair, b"-MOVED 3999 127.0.0.1:7001\r\n")
    assert isinstance(error, ErrorReply)
    assert error.message == "MOVED 3999 127.0.0.1:7001"
    assert pair[0].pos == len(pair[0].buf), "each reply consumed exactly"


def test_pack() -> None:
    assert pack("GET", b"k\r\n", 7) == b"*3\r\n$3\r\nGET\r\n$3\r\nk\r\n\r\n$1\r\n7\r\n"


def nested(depth: int) -> bytes:
    return b"*1\r\n" * depth + b":1\r\n"


def test_arrays_nest_at_most_eight_deep(pair: tuple[Wire, socket.socket]) -> None:
    value = resp(pair, nested(8))
    for _ in range(8):
        value = value[0]
    assert value == 1
    with pytest.raises(WireFailure, match="nested more than 8"):
        resp(pair, nested(9))


def test_a_reply_holds_no_more_elements_than_allowed(pair: tuple[Wire, socket.socket]) -> None:
    limits = Limits(max_bulk=100, max_bytes=100, max_elements=3)
    assert resp(pair, b"*3\r\n:1\r\n:2\r\n:3\r\n", limits) == [1, 2, 3]
    with pytest.raises(WireFailure, match="array of 4 elements"):
        resp(pair, b"*4\r\n", limits)
    with pytest.raises(WireFailure, match="array of 2 elements"):
        resp(pair, b"*2\r\n*2\r\n", limits)  # counted over the whole reply, nested arrays included
    with pytest.raises(WireFailure, match="array of 1000000000 elements"):
        resp(pair, b"*1000000000\r\n", limits)


def test_bulk_strings_are_refused_when_announced(pair: tuple[Wire, socket.socket]) -> None:
    limits = Limits(max_bulk=10, max_bytes=15, max_elements=5)
    assert resp(pair, b"$10\r\n0123456789\r\n", limits) == b"0123456789"
    started = time.monotonic()
    with pytest.raises(WireFailure, match="a value of 11 bytes"):
        resp(pair, b"$11\r\n", limits, timeout=5.0)  # nothing follows: refused without waiting for it
    assert time.monotonic() - started < 1.0
    with pytest.raises(WireFailure, match="a value of 6 bytes"):
        resp(pair, b"*2\r\n$10\r\n0123456789\r\n$6\r\n", limits)  # 15 bytes in all


def test_lines_and_numbers_are_bounded(pair: tuple[Wire, socket.socket]) -> None:
    assert resp(pair, b"+" + b"x" * (MAX_LINE - 1) + b"\r\n") == b"x" * (MAX_LINE - 1)
    with pytest.raises(WireFailure, match="longer than 8192"):
        resp(pair, b"+" + b"x" * 100_000)
    for bad in (b":" + b"9" * 4300 + b"\r\n", b":1_000\r\n", b": 12\r\n", b"$+5\r\n", b"$\r\n", b"!3\r\nabc\r\n"):
        wire = pair[0]
        wire.buf.clear()
        wire.pos = 0
        with pytest.raises(WireFailure, match="malformed"):
            resp(pair, bad)


def test_a_value_not_followed_by_crlf_is_malformed(pair: tuple[Wire, socket.socket]) -> None:
    with pytest.raises(WireFailure, match="not followed by CRLF"):
        resp(pair, b"$3\r\nabcXY")


def test_the_deadline_is_total_not_per_read(pair: tuple[Wire, socket.socket]) -> None:
    wire, server = pair
    server.sendall(b"$1000\r\n")
    stop = threading.Event()

    def drip() -> None:  # a byte every 50 ms would keep any per-read timeout happy
        while not stop.wait(0.05):
            server.sendall(b"x")

    dripping = threading.Thread(target=drip)
    dripping.start()
    started = time.monotonic()
    try:
        with pytest.raises(WireFailure) as caught:
            read_reply(wire, started + 0.3, WIDE)
    finally:
        stop.set()
        dripping.join()
    assert caught.value.timeout
    assert time.monotonic() - started < 1.0


def test_a_closed_connection_is_a_failure(pair: tuple[Wire, socket.socket]) -> None:
    wire, server = pair
    server.sendall(b"$10\r\nabc")
    server.close()
    with pytest.raises(WireFailure, match="closed"):
        read_reply(wire, time.monotonic() + 1, WIDE)


def memcached(pair: tuple[Wire, socket.socket], data: bytes, max_value: int = 100) -> Any:
    wire, server = pair
    server.sendall(data)
    return read_memcached(wire, time.monotonic() + 1.0, max_value)


def test_memcached_replies(pair: tuple[Wire, socket.socket]) -> None:
    reply = memcached(pair, b"VA 3 c42\r\nabc\r\n")
    assert (reply.code, reply.data, reply.flag("c")) == ("VA", b"abc", "42")
    assert memcached(pair, b"EN\r\n").code == "EN"
    assert memcached(pair, b"SERVER_ERROR out of memory\r\n").code == "ERROR"
    assert memcached(pair, b"VA 100\r\n" + b"x" * 100 + b"\r\n").data == b"x" * 100
    with pytest.raises(WireFailure, match="a value of 101 bytes"):
        memcached(pair, b"VA 101\r\n")
    for bad in (b"VA\r\n", b"VA -1\r\n", b"VA 1e3\r\n", b"VA \xd9\xa3\r\n", b"BOGUS\r\n", b"VA " + b"9" * 30 + b"\r\n"):
        wire = pair[0]
        wire.buf.clear()
        wire.pos = 0
        with pytest.raises(WireFailure, match="malformed"):
            memcached(pair, bad)


def test_a_request_in_parts_is_sent_whole_however_full_the_socket(pair: tuple[Wire, socket.socket]) -> None:
    wire, server = pair
    big = bytes(range(256)) * 16384  # 4 MiB: far more than a socket buffer holds
    parts = [b"ms key 4194304 T0 F0\r\n", big, b"\r\n"]
    received = bytearray()

    def drain() -> None:
        while len(received) < sum(map(len, parts)):
            received.extend(server.recv(1 << 16))

    reader = threading.Thread(target=drain)
    reader.start()
    wire.send(parts, time.monotonic() + 10)
    reader.join(10)
    assert bytes(received) == b"".join(parts)


def test_values_of_every_size_are_read_whole(pair: tuple[Wire, socket.socket]) -> None:
    wire, server = pair
    for size in (0, 1, 100, 8191, 8192, 8193, 70_000, 300_000):
        value = bytes(i % 251 for i in range(size))
        reply = b"$%d\r\n" % size + value + b"\r\n"
        sender = threading.Thread(
            target=lambda r=reply: [server.sendall(r[i : i + 7000]) for i in range(0, len(r), 7000)]
        )
        sender.start()
        assert read_reply(wire, time.monotonic() + 10, Limits(1 << 20, 1 << 20, 10)) == value
        sender.join()
        assert wire.pos == len(wire.buf)


# --- the first read after a request, waiting in the kernel (block_limit) -------------------------------------------


def blocking_pair(block_limit: float) -> tuple[Wire, socket.socket]:
    ours, theirs = socket.socketpair()
    return Wire(ours, block_limit), theirs


def test_a_reply_is_read_in_the_kernel_wait_and_after_it() -> None:
    wire, server = blocking_pair(0.05)
    try:
        for delay in (0.0, 0.01, 0.15):  # at once, within the kernel's limit, after it (then in poll)
            wire.send(b"mg k v\r\n", time.monotonic() + 2)
            assert server.recv(100) == b"mg k v\r\n"
            threading.Timer(delay, server.sendall, [b"VA 3\r\nabc\r\n"]).start()
            reply = read_memcached(wire, time.monotonic() + 2, 100)
            assert (reply.code, reply.data) == ("VA", b"abc")
    finally:
        wire.close()
        server.close()


@pytest.mark.parametrize(("block_limit", "deadline"), [(0.1, 0.3), (1.0, 0.2)])
def test_a_silent_server_is_cut_off_at_the_deadline_however_long_the_kernel_may_wait(
    block_limit: float, deadline: float
) -> None:
    """The kernel's limit is used only while that much of the deadline remains: a deadline shorter than it is
    kept (poll), and one longer is kept past it (poll for the rest)."""
    wire, server = blocking_pair(block_limit)
    try:
        started = time.monotonic()
        wire.send(b"mg k v\r\n", started + deadline)
        with pytest.raises(WireFailure) as caught:
            read_memcached(wire, started + deadline, 100)
        took = time.monotonic() - started
        assert caught.value.timeout
        assert deadline - 0.01 <= took < deadline + 0.5
    finally:
        wire.close()
        server.close()


def test_a_server_closing_during_the_kernel_wait_is_a_failure() -> None:
    wire, server = blocking_pair(0.5)
    try:
        wire.send(b"mg k v\r\n", time.monotonic() + 2)
        assert server.recv(100) == b"mg k v\r\n"
        threading.Timer(0.05, server.close).start()
        with pytest.raises(WireFailure, match="closed"):
            read_memcached(wire, time.monotonic() + 2, 100)
    finally:
        wire.close()


def test_a_whole_reply_is_bounded_framing_included(pair: tuple[Wire, socket.socket]) -> None:
    """Spec/STORES.md §2 "Whole reply": every line and CRLF counts, so a reply of no value at all (statuses of
    8 KiB in an array the command may get) is refused once it passes its values' bound plus 64 KiB."""
    wire, server = pair
    limits = Limits(max_bulk=10, max_bytes=10, max_elements=100_000)
    status = b"+" + b"x" * (MAX_LINE - 1) + b"\r\n"
    assert resp(pair, b"*7\r\n" + status * 7, limits) == [b"x" * (MAX_LINE - 1)] * 7  # 57 KiB
    sender = threading.Thread(target=lambda: server.sendall(b"*100000\r\n" + status * 9))
    sender.start()
    with pytest.raises(WireFailure, match="whole reply's bound"):
        read_reply(wire, time.monotonic() + 2, limits)
    sender.join()
    wire.buf.clear()
    wire.pos = 0
    # A value counts with its length line and CRLF: 10 bytes of value, then 64 KiB of framing at most.
    assert resp(pair, b"*2\r\n$10\r\n0123456789\r\n:1\r\n", limits) == [b"0123456789", 1]
    with pytest.raises(WireFailure, match="whole reply's bound"):
        resp(pair, b"*9\r\n$10\r\n0123456789\r\n" + status * 8, limits)


def test_a_memcached_reply_is_bounded_by_the_room_left(pair: tuple[Wire, socket.socket]) -> None:
    """What is left of a request's whole bound: a value that fits max_item but not the room is refused when its
    length is announced, a line when it is read."""
    wire, _ = pair
    assert memcached_room(pair, b"VA 3\r\nabc\r\n", 11).size == 11
    with pytest.raises(WireFailure, match="whole reply's bound"):
        memcached_room(pair, b"VA 3\r\n", 10)  # nothing follows: refused without waiting for it
    wire.buf.clear()
    wire.pos = 0
    assert memcached_room(pair, b"HD\r\n", 4).code == "HD"
    with pytest.raises(WireFailure, match="whole reply's bound"):
        memcached_room(pair, b"HD\r\n", 3)


def memcached_room(pair: tuple[Wire, socket.socket], data: bytes, room: int) -> Any:
    wire, server = pair
    server.sendall(data)
    return read_memcached(wire, time.monotonic() + 1.0, 100, room)
