"""Python pushes, the Rust proxy serves: `larder.push_response` and `larder.purge` against a real `larder serve`.

A small origin counts the requests it gets per path; `larder serve` (the Rust binary, $LARDER_BIN as for the
cross-language tests: without it these tests fail, they do not skip) fronts it. A pushed page must then be served by
larder as a hit, byte for byte, without the origin ever seeing a request for it, until it is purged.
"""

from __future__ import annotations

import collections
import gzip
import http.client
import http.server
import os
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from email.message import Message
from pathlib import Path

import msgpack
import pytest

import larder
from support import larder_bin

STARTUP_TIMEOUT = 15.0


# --- the origin ----------------------------------------------------------------------------------------------------


@dataclass
class Origin:
    """A running origin: its URL and how many requests it got per path (query left out)."""

    url: str
    server: http.server.ThreadingHTTPServer
    hits: collections.Counter[str] = field(default_factory=collections.Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self, path: str) -> int:
        with self.lock:
            return self.hits[path]


def _origin_handler(origin_ref: list[Origin]) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            origin = origin_ref[0]
            path = urllib.parse.urlsplit(self.path).path
            with origin.lock:
                origin.hits[path] += 1
            body = f"from the origin: {path}".encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Cache-Control", "no-store")  # so every request for it reaches the origin
            self.send_header("X-Origin", "yes")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler


@pytest.fixture(scope="module")
def origin() -> Iterator[Origin]:
    ref: list[Origin] = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _origin_handler(ref))
    server.daemon_threads = True
    ref.append(Origin(f"http://127.0.0.1:{server.server_address[1]}", server))
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), name="origin", daemon=True)
    thread.start()
    try:
        yield ref[0]
    finally:
        server.shutdown()
        server.server_close()


# --- larder serve --------------------------------------------------------------------------------------------------

#: The admin token the tests' `larder serve` runs with (it refuses to start without one, or --admin-no-token).
ADMIN_TOKEN = "e2e-admin-token"


@pytest.fixture(autouse=True)
def admin_token(monkeypatch: pytest.MonkeyPatch) -> None:
    """larder.push_response, push_entry and purge send $LARDER_ADMIN_TOKEN when given no token: the tests rely on
    it, as an app deployed beside `larder serve --admin-token` would."""
    monkeypatch.setenv("LARDER_ADMIN_TOKEN", ADMIN_TOKEN)


@dataclass
class Larder:
    """A running `larder serve`: where clients connect (`host` as they send it in Host) and its admin API."""

    process: subprocess.Popen[bytes]
    port: int
    admin: str
    log: Path
    token: str | None = ADMIN_TOKEN

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        """The URL of `path` as clients request it through larder (what push_response keys on)."""
        return f"http://{self.host}{path}"

    def get(self, path: str, headers: dict[str, str] | None = None) -> tuple[int, Message, bytes]:
        """GET `path` through larder's main port: status, headers, body."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
        try:
            connection.request("GET", path, headers=headers or {})
            response = connection.getresponse()
            return response.status, response.msg, response.read()
        finally:
            connection.close()

    def stored(self, key: str) -> bytes:
        """The entry bytes under `key`, read back through the admin API."""
        url = f"{self.admin}/entries/{urllib.parse.quote(key, safe='')}"
        request = urllib.request.Request(url, headers={"Authorization": f"Bearer {self.token}"} if self.token else {})
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=5) as response:
            return bytes(response.read())


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_larder(upstream: str, log: Path, *extra: str, token: str | None = ADMIN_TOKEN) -> Larder:
    """Starts `larder serve` on free loopback ports and waits until its admin API answers /health. Its admin API
    takes the bearer `token` (`--admin-token`; None: `--admin-no-token`, which larder allows on loopback only).

    Fails (never skips) when the binary is missing or does not come up; a port taken between choosing and binding
    it is retried with new ports.
    """
    binary = larder_bin()
    env = {name: value for name, value in os.environ.items() if not name.startswith("LARDER_")}
    for _attempt in range(3):
        port, admin_port = free_port(), free_port()
        args = [str(binary), "serve", "--upstream", upstream, "--listen", f"127.0.0.1:{port}"]
        args += ["--admin", f"127.0.0.1:{admin_port}", *extra]
        args += ["--admin-token", token] if token is not None else ["--admin-no-token"]
        with log.open("wb") as out:
            process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env)
        running = Larder(process, port, f"http://127.0.0.1:{admin_port}", log, token)
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while time.monotonic() < deadline and process.poll() is None:
            if _healthy(running.admin) and _listening(port):
                return running
            time.sleep(0.02)
        exited = process.poll()
        stop_larder(running)
        output = log.read_text(errors="replace")
        if "in use" not in output.lower():
            break
    what = f"exited with status {exited}" if exited is not None else f"did not answer /health in {STARTUP_TIMEOUT} s"
    pytest.fail(f"`{' '.join(args)}` {what}; its output:\n{output}", pytrace=False)


def stop_larder(running: Larder) -> None:
    """Stops the process, politely first; kills it if it does not stop within 5 s."""
    if running.process.poll() is None:
        running.process.terminate()
        try:
            running.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            running.process.kill()
            running.process.wait(timeout=5)


def _healthy(admin: str) -> bool:
    try:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(f"{admin}/health", timeout=1) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def proxy(origin: Origin, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Larder]:
    running = start_larder(origin.url, tmp_path_factory.mktemp("larder") / "larder.log")
    try:
        yield running
    finally:
        stop_larder(running)
    assert "panicked" not in running.log.read_text(errors="replace"), running.log.read_text(errors="replace")


# --- the tests -----------------------------------------------------------------------------------------------------

PAGE_BODY = "<h1>Grüße aus der Speisekammer — 食料庫 🥫</h1>\n"


def test_a_pushed_page_is_served_as_a_hit_without_asking_the_origin(proxy: Larder, origin: Origin) -> None:
    headers = [
        ("Content-Type", "text/html; charset=utf-8"),
        ("X-Pushed-By", "larder-python"),
        ("Set-Cookie", "first=1; Path=/"),
        ("Link", "</style.css>; rel=preload; as=style"),
        ("Set-Cookie", "second=2; Path=/"),
        ("Link", "</app.js>; rel=preload; as=script"),
        ("Content-Length", "3"),  # wrong, and left out: larder derives it
        ("Connection", "close"),  # hop-by-hop: left out
    ]
    key = larder.push_response(
        proxy.admin,
        proxy.url("/e2e/page?b=2&a=1&utm_source=news"),
        200,
        headers,
        PAGE_BODY,
        ttl=60,
        tags=["e2e", "page:home"],
    )
    assert key == f"GET:http://{proxy.host}/e2e/page?a=1&b=2"

    # The query in another order, with another tracking parameter: the same key.
    status, got, body = proxy.get("/e2e/page?a=1&gclid=xyz&b=2")
    assert status == 200
    assert body.decode("utf-8") == PAGE_BODY
    assert got["Content-Type"] == "text/html; charset=utf-8"
    assert got["X-Pushed-By"] == "larder-python"
    assert got.get_all("Set-Cookie") == ["first=1; Path=/", "second=2; Path=/"]
    assert got.get_all("Link") == ["</style.css>; rel=preload; as=style", "</app.js>; rel=preload; as=script"]
    assert got["Content-Length"] == str(len(PAGE_BODY.encode("utf-8")))
    assert got["X-Cache"] == "HIT"
    assert got["Age"] is not None
    assert 0 <= int(got["Age"]) <= 2
    assert got["X-Origin"] is None
    assert origin.count("/e2e/page") == 0

    # What larder holds is what was pushed: names lowercased, derived fields left out, tags and expiry recorded.
    entry = larder.decode(proxy.stored(key))
    assert entry.kind == "response"
    assert entry.tags == ("e2e", "page:home")
    assert entry.expires_at - entry.created_at == 60_000
    assert entry.value == larder.HttpResponse(200, [(n.lower(), v) for n, v in headers[:6]], PAGE_BODY)
    assert origin.count("/e2e/page") == 0


def test_a_pushed_redirect_is_served_as_a_redirect(proxy: Larder, origin: Origin) -> None:
    larder.push_response(proxy.admin, proxy.url("/e2e/old"), 301, {"Location": "/e2e/new"}, b"", ttl=60)
    status, got, body = proxy.get("/e2e/old")  # http.client does not follow redirects
    assert (status, got["Location"], got["X-Cache"], body) == (301, "/e2e/new", "HIT", b"")
    assert origin.count("/e2e/old") == 0


def test_purge_by_tag_sends_the_next_request_to_the_origin(proxy: Larder, origin: Origin) -> None:
    larder.push_response(proxy.admin, proxy.url("/e2e/tagged"), 200, [], "pushed", tags=["purge-me"])
    assert proxy.get("/e2e/tagged")[2] == b"pushed"
    assert origin.count("/e2e/tagged") == 0

    assert larder.purge(proxy.admin, tag="purge-me") == 1
    status, got, body = proxy.get("/e2e/tagged")
    assert (status, body, got["X-Cache"], got["X-Origin"]) == (200, b"from the origin: /e2e/tagged", "MISS", "yes")
    assert origin.count("/e2e/tagged") == 1
    assert larder.purge(proxy.admin, tag="purge-me") == 0


def test_purge_by_url_and_by_prefix(proxy: Larder, origin: Origin) -> None:
    for path in ("/e2e/shop/1", "/e2e/shop/2", "/e2e/shop/3?x=1"):
        larder.push_response(proxy.admin, proxy.url(path), 200, [], f"pushed {path}")
    assert larder.purge(proxy.admin, url=proxy.url("/e2e/shop/1?utm_campaign=x")) == 1
    assert larder.purge(proxy.admin, url=proxy.url("/e2e/shop/1")) == 0
    assert larder.purge(proxy.admin, prefix=f"GET:http://{proxy.host}/e2e/shop/") == 2
    for path in ("/e2e/shop/1", "/e2e/shop/2", "/e2e/shop/3"):
        assert proxy.get(path)[2] == f"from the origin: {path}".encode()
        assert origin.count(path) == 1


def test_purge_by_url_prefix_and_tags_and_a_warning_for_a_path_given_as_a_key_prefix(
    proxy: Larder, origin: Origin
) -> None:
    for path, tag in (("/e2e/cat/1", "a"), ("/e2e/cat/2", "b"), ("/e2e/dog/1", "c")):
        larder.push_response(proxy.admin, proxy.url(path), 200, [], f"pushed {path}", tags=[tag])
    assert larder.purge(proxy.admin, url_prefix=proxy.url("/e2e/cat/")) == 2
    assert larder.purge(proxy.admin, tags=["c", "nothing-has-this"]) == 1
    with pytest.warns(larder.AdminWarning, match="url_prefix"):
        assert larder.purge(proxy.admin, prefix="/e2e/") == 0
    with pytest.warns(larder.AdminWarning, match="never serve"):
        larder.push_entry(proxy.admin, "not-a-url-key", larder.encode_response(larder.HttpResponse(200, [], b"x")))
    assert proxy.get("/e2e/cat/1")[2] == b"from the origin: /e2e/cat/1"


def test_a_gzip_body_is_served_as_is_or_decoded_as_the_client_accepts(proxy: Larder, origin: Origin) -> None:
    text = ("plain text, stored gzip-encoded; " * 100).encode()
    packed = gzip.compress(text)
    larder.push_response(
        proxy.admin,
        proxy.url("/e2e/zipped"),
        200,
        [("Content-Type", "text/plain"), ("Content-Encoding", "gzip")],  # the same as content_encoding: left out
        packed,
        content_encoding="gzip",
    )
    status, got, body = proxy.get("/e2e/zipped", {"Accept-Encoding": "gzip"})
    assert (status, got["Content-Encoding"], got["X-Cache"]) == (200, "gzip", "HIT")
    assert body == packed
    assert gzip.decompress(body) == text
    assert "accept-encoding" in (got["Vary"] or "").lower()

    status, got, body = proxy.get("/e2e/zipped", {"Accept-Encoding": "identity"})
    assert (status, got["Content-Encoding"], got["X-Cache"], body) == (200, None, "HIT", text)
    assert got["Content-Length"] == str(len(text))
    assert origin.count("/e2e/zipped") == 0


def test_an_expired_push_is_fetched_from_the_origin(proxy: Larder, origin: Origin) -> None:
    larder.push_response(proxy.admin, proxy.url("/e2e/brief"), 200, [], "pushed", ttl=0.3)
    assert proxy.get("/e2e/brief")[2] == b"pushed"
    time.sleep(0.4)
    assert proxy.get("/e2e/brief")[2] == b"from the origin: /e2e/brief"
    assert origin.count("/e2e/brief") == 1


def test_garbage_is_refused_with_the_servers_message(proxy: Larder) -> None:
    key = larder.proxy_key(proxy.url("/e2e/garbage"))
    with pytest.raises(larder.PushError) as refused:
        larder.push_entry(proxy.admin, key, b"this is not an entry")
    assert refused.value.status == 400
    assert refused.value.message.startswith("invalid entry: bad_magic: ")
    assert "HTTP 400: invalid entry: bad_magic" in str(refused.value)

    whole = larder.encode_response(larder.HttpResponse(200, [], b"x"))
    with pytest.raises(larder.PushError, match=r"invalid entry: truncated: ") as truncated:
        larder.push_entry(proxy.admin, key, whole[:10])
    assert truncated.value.status == 400


def test_an_unreachable_admin_api_raises_promptly() -> None:
    closed = f"http://127.0.0.1:{free_port()}"
    started = time.monotonic()
    with pytest.raises(larder.PushError, match="cannot reach the admin API") as unreachable:
        larder.push_response(closed, "http://127.0.0.1:8080/x", 200, [], "x", timeout=2)
    assert unreachable.value.status is None
    with pytest.raises(larder.PurgeError, match="cannot reach the admin API"):
        larder.purge(closed, tag="x", timeout=2)
    assert time.monotonic() - started < 2


def test_a_token_and_a_namespace(origin: Origin, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    running = start_larder(origin.url, tmp_path / "larder.log", "--namespace", "www", token="s3cret")
    try:
        url = running.url("/e2e/private")
        monkeypatch.delenv("LARDER_ADMIN_TOKEN")
        with pytest.raises(larder.PushError, match="a bearer token is required") as refused:
            larder.push_response(running.admin, url, 200, [], "pushed", namespace="www")
        assert refused.value.status == 401
        with pytest.raises(larder.PushError) as wrong:
            larder.push_response(running.admin, url, 200, [], "pushed", namespace="www", token="guess")
        assert wrong.value.status == 401

        key = larder.push_response(running.admin, url, 200, [], "pushed", namespace="www", token="s3cret")
        assert key.startswith("www:GET:http://")
        status, got, body = running.get("/e2e/private")
        assert (status, body, got["X-Cache"]) == (200, b"pushed", "HIT")

        with pytest.raises(larder.PurgeError) as purge_refused:
            larder.purge(running.admin, url=url)
        assert purge_refused.value.status == 401
        assert larder.purge(running.admin, url=url, token="s3cret") == 1  # larder applies its namespace itself
        assert running.get("/e2e/private")[2] == b"from the origin: /e2e/private"

        monkeypatch.setenv("LARDER_ADMIN_TOKEN", "s3cret")  # the token from the environment, when none is passed
        larder.push_response(running.admin, url, 200, [], "pushed again", namespace="www")
        assert running.get("/e2e/private")[2] == b"pushed again"
        with pytest.raises(larder.PurgeError):
            larder.purge(running.admin, url=url, token="guess")  # an explicit token wins over the environment
        assert larder.purge(running.admin, url=url) == 1
    finally:
        stop_larder(running)


def test_a_loopback_admin_api_without_a_token(origin: Origin, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LARDER_ADMIN_TOKEN")
    running = start_larder(origin.url, tmp_path / "larder.log", token=None)
    try:
        larder.push_response(running.admin, running.url("/e2e/open"), 200, [], "pushed")
        assert running.get("/e2e/open")[2] == b"pushed"
    finally:
        stop_larder(running)


def test_pushed_values_that_hold_pickles_or_marshal_dumps_are_refused(proxy: Larder) -> None:
    key = larder.proxy_key(proxy.url("/e2e/pickle"))
    for code in (80, 101):
        with pytest.raises(larder.PushError) as refused:
            larder.push_entry(proxy.admin, key, larder.encode({"nested": [msgpack.ExtType(code, b"\x01" + b"0" * 40)]}))
        assert refused.value.status == 400, refused.value
