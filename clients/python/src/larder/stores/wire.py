"""Bounded socket I/O for the remote stores (memcached, Redis): every byte a server sends is hostile (spec/STORES.md
§2 "Replies are hostile too"), so nothing here waits past the operation's deadline or holds more than its caller
allows.

- `Wire` is one connection: `send` and every read take an absolute deadline (`time.monotonic()`), so a server that
  drips one byte at a time is cut off at the deadline like a silent one; `line` refuses a line longer than `max_line`
  without its CRLF; `exact` reads a value whose length the caller has already checked against its bound. The socket
  stays non-blocking: a send is tried at once, the first read after it waits in `poll` for what remains of the
  deadline, and reads after that are tried at once and wait only when nothing is there. (A socket timeout would cost
  an `ioctl` for each `settimeout` and a `poll` before every call: six system calls for a request and its reply,
  where this makes three.) With a `block_limit`, the first read after a request waits in the kernel instead of in
  `poll` (two system calls, as a blocking client makes): the socket is left blocking with `SO_RCVTIMEO` =
  `block_limit`, every other call says `MSG_DONTWAIT`, and that read blocks only while at least `block_limit` of the
  deadline remains; when the kernel's limit passes first (EAGAIN), the wait goes on in `poll` for the rest of the
  deadline. A signal handled during that read restarts it (PEP 475) with the kernel's limit anew: only then can a
  wait run past the deadline, by `block_limit` per signal.
- `Pool` keeps up to `size` idle connections to one server, opens new ones within the deadline (and within
  `connect_timeout`), and hands a connection to one caller at a time. A connection that failed is closed by its
  caller (`Pool.discard`), never reused: after a failure it is out of step with the server.

Both stores' protocol readers (memcached.py, resp.py) are built on these two classes.
"""

from __future__ import annotations

import contextlib
import math
import select
import socket
import struct
import threading
from collections.abc import Callable
from time import monotonic
from typing import Final

#: The longest reply line (status, error, header of a value) read before the reply is refused.
MAX_LINE: Final = 8 * 1024
#: Bytes asked of the socket per read.
READ_SIZE: Final = 64 * 1024
#: Values shorter than this that are not all buffered yet are read on into the buffer; longer ones into their own.
_DIRECT_VALUE: Final = 8 * 1024
#: A request of at most this many parts goes out in one `sendmsg`, its parts not joined first.
_MAX_PARTS: Final = 64
_CRLF: Final = b"\r\n"
#: The flag that makes one call on a blocking socket non-blocking (none where the platform lacks it: no block_limit).
_NOWAIT: Final = getattr(socket, "MSG_DONTWAIT", 0)


class WireFailure(Exception):
    """A failure of the connection or of the server's reply (counts against the server's health, spec/STORES.md
    §1); `timeout` when the deadline passed; `server` (`host:port`) once the caller knows which server failed."""

    def __init__(self, message: str, timeout: bool = False) -> None:
        super().__init__(message)
        self.timeout = timeout
        self.server: str | None = None


def _remaining(deadline: float) -> float:
    remaining = deadline - monotonic()
    if remaining <= 0:
        raise WireFailure("deadline passed", timeout=True)
    return remaining


class Wire:
    """One connection to a server, with a read buffer (`buf[pos:]` is what was received and not yet consumed)."""

    __slots__ = ("block_limit", "buf", "poller", "pos", "sent", "sock")

    def __init__(self, sock: socket.socket, block_limit: float = 0.0) -> None:
        if block_limit >= 0.001 and _NOWAIT:
            sock.setblocking(True)
            seconds = int(block_limit)
            timeval = struct.pack("@ll", seconds, int((block_limit - seconds) * 1_000_000))
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, timeval)
        else:
            block_limit = 0.0
            sock.setblocking(False)
        #: How long the first read after a request may wait in the kernel (0: it waits in `poll`).
        self.block_limit = block_limit
        self.sock = sock
        self.buf = bytearray()
        self.pos = 0
        self.poller = select.poll()
        self.poller.register(sock, select.POLLIN)
        #: A request went out since the last read: the reply takes the server a moment, so the next read waits first.
        self.sent = False

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()

    def _wait(self, events: int, deadline: float, doing: str) -> None:
        """Waits until the socket is ready for `events` (POLLIN or POLLOUT), or raises at the deadline."""
        poller = self.poller
        poller.modify(self.sock, events)
        while True:
            remaining = deadline - monotonic()
            if remaining <= 0:
                raise WireFailure(f"deadline passed while {doing}", timeout=True)
            try:
                ready = poller.poll(math.ceil(remaining * 1000))
            except OSError as e:
                raise WireFailure(f"{doing} failed: {e}") from None
            if ready:
                return

    def send(self, data: bytes | list[bytes], deadline: float) -> None:
        """Sends all of `data` (bytes, or a list of parts, sent as if joined) before `deadline`."""
        _remaining(deadline)
        sock = self.sock
        if isinstance(data, list):
            if len(data) <= _MAX_PARTS:  # gathered by the kernel: a large value is not copied into a request
                try:
                    done = sock.sendmsg(data, (), _NOWAIT)
                except BlockingIOError:
                    done = 0
                except OSError as e:
                    raise WireFailure(f"send failed: {e}") from None
                if done == sum(map(len, data)):
                    self.sent = True
                    return
                rest = b"".join(data)[done:]  # (the socket's buffer filled up: the rest as below)
            else:
                rest = b"".join(data)
        else:
            rest = data
        view: memoryview | None = None
        sent = 0
        total = len(rest)
        while True:
            try:
                sent += sock.send(rest if view is None else view[sent:], _NOWAIT)
            except BlockingIOError:
                pass  # the socket's buffer is full: wait until it takes more
            except OSError as e:
                raise WireFailure(f"send failed: {e}") from None
            if sent >= total:
                self.sent = True
                return
            if view is None:
                view = memoryview(rest)
            self._wait(select.POLLOUT, deadline, "sending")

    def _recv(self, size: int, deadline: float) -> bytes:
        if self.sent:  # the first read of a reply: wait for it rather than ask for it too soon
            self.sent = False
            if self.block_limit and deadline - monotonic() >= self.block_limit:
                try:
                    chunk = self.sock.recv(size)  # waits in the kernel, at most block_limit (SO_RCVTIMEO)
                except BlockingIOError:
                    pass  # the kernel's limit passed: poll for the rest of the deadline
                except OSError as e:
                    raise WireFailure(f"read failed: {e}") from None
                else:
                    if not chunk:
                        raise WireFailure("the server closed the connection")
                    return chunk
            self._wait(select.POLLIN, deadline, "reading")
        else:
            _remaining(deadline)
        while True:
            try:
                chunk = self.sock.recv(size, _NOWAIT)
            except BlockingIOError:
                self._wait(select.POLLIN, deadline, "reading")
                continue
            except OSError as e:
                raise WireFailure(f"read failed: {e}") from None
            if not chunk:
                raise WireFailure("the server closed the connection")
            return chunk

    def _fill(self, deadline: float) -> None:
        """Appends one read to the buffer, dropping what was consumed first."""
        chunk = self._recv(READ_SIZE, deadline)
        if self.pos:
            del self.buf[: self.pos]
            self.pos = 0
        self.buf += chunk

    def line(self, deadline: float, max_line: int = MAX_LINE) -> bytes:
        """The next line, without its CRLF. A line of more than `max_line` bytes is a failure."""
        buf = self.buf
        at = buf.find(_CRLF, self.pos)
        while at == -1:
            pending = len(buf) - self.pos
            if pending > max_line:
                raise WireFailure(f"malformed reply: a line longer than {max_line} bytes")
            self._fill(deadline)
            buf = self.buf
            at = buf.find(_CRLF, self.pos + max(pending - 1, 0))
        if at - self.pos > max_line:
            raise WireFailure(f"malformed reply: a line longer than {max_line} bytes")
        line = bytes(buf[self.pos : at])
        self.pos = at + 2
        if self.pos == len(buf):
            buf.clear()
            self.pos = 0
        return line

    def exact(self, size: int, deadline: float) -> bytes:
        """The next `size` bytes, which must be followed by CRLF (consumed too). The caller has checked `size`
        against its bound: at most `size` + 2 bytes are held for it."""
        need = size + 2
        buf, pos = self.buf, self.pos
        have = len(buf) - pos
        if have >= need:
            if buf[pos + size : pos + need] != _CRLF:
                raise WireFailure("malformed reply: a value not followed by CRLF")
            with memoryview(buf) as view:
                data = view[pos : pos + size].tobytes()  # one copy (a slice of a bytearray would be two)
            self.pos = pos + need
            if self.pos == len(buf):
                buf.clear()
                self.pos = 0
            return data
        if size < _DIRECT_VALUE:
            while len(buf) - pos < need:  # a small value: read on into the buffer, then copy it out
                chunk = self._recv(max(READ_SIZE, need - (len(buf) - pos)), deadline)
                buf += chunk
            if buf[pos + size : pos + need] != _CRLF:
                raise WireFailure("malformed reply: a value not followed by CRLF")
            with memoryview(buf) as view:
                data = view[pos : pos + size].tobytes()
            del buf[: pos + need]
            self.pos = 0
            return data
        value = bytearray(need)  # a larger value: read straight into its own buffer (no copy through `buf`)
        view = memoryview(value)
        view[:have] = buf[pos:]
        buf.clear()
        self.pos = 0
        got = have
        sock = self.sock
        try:
            while got < need:
                if self.sent:
                    self.sent = False
                    self._wait(select.POLLIN, deadline, "reading a value")
                else:
                    _remaining(deadline)
                try:
                    n = sock.recv_into(view[got:], min(need - got, 1 << 20), _NOWAIT)
                except BlockingIOError:
                    self._wait(select.POLLIN, deadline, "reading a value")
                    continue
                except OSError as e:
                    raise WireFailure(f"read failed: {e}") from None
                if n == 0:
                    raise WireFailure("the server closed the connection")
                got += n
            if value[size:need] != _CRLF:
                raise WireFailure("malformed reply: a value not followed by CRLF")
            return view[:size].tobytes()
        finally:
            view.release()


class Pool:
    """Up to `size` idle connections to one server, each used by one caller at a time. A caller finding none idle
    opens one (so threads never queue behind each other, and a busy pool is never mistaken for a failing server);
    one given back to a full pool is closed. Thread-safe."""

    def __init__(self, connect: Callable[[float], Wire], size: int) -> None:
        self._connect = connect
        self._size = size
        self._idle: list[Wire] = []
        self._lock = threading.Lock()

    def take(self, deadline: float) -> Wire:
        """An idle connection, or a new one opened by `connect(deadline)`."""
        with self._lock:
            if self._idle:
                return self._idle.pop()
        return self._connect(deadline)

    def give_back(self, wire: Wire) -> None:
        if wire.pos != len(wire.buf):  # bytes the protocol did not expect: the connection is out of step
            wire.close()
            return
        with self._lock:
            if len(self._idle) < self._size:
                self._idle.append(wire)
                return
        wire.close()

    def discard(self, wire: Wire) -> None:
        wire.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for wire in idle:
            wire.close()


def connect_tcp(host: str, port: int, deadline: float, connect_timeout: float) -> socket.socket:
    """A TCP connection (TCP_NODELAY) opened within `connect_timeout` and before `deadline`."""
    limit = min(connect_timeout, _remaining(deadline))
    try:
        sock = socket.create_connection((host, port), timeout=limit)
    except TimeoutError:
        raise WireFailure(f"could not connect within {round(limit * 1000)} ms", timeout=True) from None
    except OSError as e:
        raise WireFailure(f"could not connect: {e}") from None
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock
