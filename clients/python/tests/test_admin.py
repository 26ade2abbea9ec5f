"""larder.admin without a larder: the keys it derives, the arguments it refuses before sending anything, exactly
what it sends (checked against a recording stand-in for the admin API), and how it reports what comes back."""

from __future__ import annotations

import http.server
import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

import pytest

import larder

# --- proxy_key -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "kwargs", "key"),
    [
        ("http://127.0.0.1:8080/page", {}, "GET:http://127.0.0.1:8080/page"),
        ("http://Shop.Example:80/p?b=2&a=1&utm_source=x#top", {}, "GET:http://shop.example/p?a=1&b=2"),
        # larder keys every request with the scheme http: an https URL (behind a TLS terminator) keys the same.
        ("https://Shop.Example/p", {}, "GET:http://shop.example/p"),
        ("https://shop.example:443/p", {}, "GET:http://shop.example/p"),
        ("HTTPS://shop.example:8443", {}, "GET:http://shop.example:8443/"),
        ("http://user:pw@shop.example/p", {}, "GET:http://shop.example/p"),
        ("http://shop.example/p?ref=1&a=1", {"namespace": "www", "drop": ["ref"]}, "www:GET:http://shop.example/p?a=1"),
    ],
)
def test_proxy_key(url: str, kwargs: dict[str, Any], key: str) -> None:
    assert larder.proxy_key(url, **kwargs) == key


def test_proxy_key_matches_the_rust_proxys_key_for_long_urls() -> None:
    long_url = "http://shop.example/" + "x" * 300
    assert larder.proxy_key(long_url) == larder.http_key("GET", "http", "shop.example", "/" + "x" * 300)
    assert len(larder.proxy_key(long_url)) <= 250


@pytest.mark.parametrize("url", ["/page", "shop.example/page", "ftp://shop.example/x", "http:///path", "http://"])
def test_proxy_key_refuses_what_is_not_an_http_url(url: str) -> None:
    with pytest.raises(ValueError, match="URL"):
        larder.proxy_key(url)


# --- a recording stand-in for the admin API ------------------------------------------------------------------------


@dataclass
class Recorder:
    """Records each request (method, raw path, headers, body) and answers with the next of `replies`."""

    url: str = ""
    requests: list[tuple[str, str, dict[str, str], bytes]] = field(default_factory=list)
    replies: list[tuple[int, bytes]] = field(default_factory=list)

    def reply(self, status: int, body: bytes | dict[str, Any]) -> None:
        self.replies.append((status, json.dumps(body).encode() if isinstance(body, dict) else body))


@pytest.fixture(autouse=True)
def no_token_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """What is sent must not depend on the caller's $LARDER_ADMIN_TOKEN."""
    monkeypatch.delenv("LARDER_ADMIN_TOKEN", raising=False)


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    rec = Recorder()

    class Handler(http.server.BaseHTTPRequestHandler):
        def _record(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(length)
            rec.requests.append((self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            status, answer = rec.replies.pop(0) if rec.replies else (201, b'{"stored":true}')
            self.send_response(status)
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        do_PUT = do_POST = do_GET = _record

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    rec.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield rec
    finally:
        server.shutdown()
        server.server_close()


def test_push_response_sends_the_entry_under_the_percent_encoded_key(recorder: Recorder) -> None:
    before = larder.now_ms()
    sent: dict[str, str | bytes] = {"Content-Type": "text/plain", "X-Custom": b"\xc3\xa9"}
    key = larder.push_response(
        recorder.url + "/",
        "http://shop.example/p?b=2&a=1",
        200,
        sent,
        "héllo",
        ttl=1.5,
        tags=["a", "b"],
        stale=2,
        token="t0k",
    )
    assert key == "GET:http://shop.example/p?a=1&b=2"
    [(method, path, headers, body)] = recorder.requests
    assert (method, path) == ("PUT", "/entries/GET%3Ahttp%3A%2F%2Fshop.example%2Fp%3Fa%3D1%26b%3D2")
    assert headers["authorization"] == "Bearer t0k"
    assert headers["content-type"] == "application/octet-stream"
    entry = larder.decode(body)
    assert entry.compressor == "none"  # as larder stores responses: a hit reads the body without decompressing
    assert before <= entry.created_at <= larder.now_ms()
    assert (entry.expires_at - entry.created_at, entry.stale_ms, entry.tags) == (1500, 2000, ("a", "b"))
    assert entry.value == larder.HttpResponse(
        200, [(b"content-type", b"text/plain"), (b"x-custom", b"\xc3\xa9")], "héllo".encode()
    )


def test_push_response_without_ttl_never_expires_and_a_bare_admin_address_means_http(recorder: Recorder) -> None:
    larder.push_response(recorder.url.removeprefix("http://"), "http://shop.example/", 204, ttl=None)
    [(_, _, headers, body)] = recorder.requests
    assert "authorization" not in headers
    entry = larder.decode(body)
    assert (entry.expires_at, entry.stale_ms, entry.tags, entry.value.status) == (0, 0, (), 204)


def test_push_response_leaves_out_the_fields_larder_derives(recorder: Recorder) -> None:
    headers = [
        ("Content-Length", "99"),
        ("Connection", "keep-alive, X-Hop"),
        ("X-Hop", "1"),
        ("Keep-Alive", "timeout=5"),
        ("Transfer-Encoding", "chunked"),
        ("TE", "trailers"),
        ("Trailer", "X-Sum"),
        ("Upgrade", "h2c"),
        ("Proxy-Connection", "close"),
        ("Content-Encoding", "br"),
        ("Set-Cookie", "a=1"),
        ("X-End", " padded\t"),
        ("Set-Cookie", "b=2"),
    ]
    larder.push_response(recorder.url, "http://shop.example/", 200, headers, b"\x00br", content_encoding="br")
    response = larder.decode(recorder.requests[0][3]).value
    assert response.headers == ((b"set-cookie", b"a=1"), (b"x-end", b"padded"), (b"set-cookie", b"b=2"))
    assert response.content_encoding == "br"


def test_an_unknown_content_coding_stays_a_header(recorder: Recorder) -> None:
    larder.push_response(recorder.url, "http://shop.example/", 200, [("Content-Encoding", "x-custom")], b"..")
    response = larder.decode(recorder.requests[0][3]).value
    assert (response.headers, response.content_encoding) == (((b"content-encoding", b"x-custom"),), "identity")


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"status": 99}, ValueError, "status"),
        ({"status": 1000}, ValueError, "status"),
        ({"headers": [("Content-Encoding", "gzip")]}, ValueError, "content_encoding="),
        ({"headers": [("Content-Encoding", "gzip")], "content_encoding": "br"}, ValueError, "content_encoding="),
        ({"headers": [("Content-Encoding", "x-custom")], "content_encoding": "br"}, ValueError, "content_encoding="),
        ({"headers": [("Bad Name", "x")]}, ValueError, "header name"),
        ({"headers": [("", "x")]}, ValueError, "header name"),
        ({"headers": [("X-Split", "a\r\nX-Injected: 1")]}, ValueError, "CR, LF or NUL"),
        ({"headers": [("X-Number", 1)]}, TypeError, "header value"),
        ({"headers": "content-type: text/plain"}, TypeError, "single string"),
        ({"body": 12}, TypeError, "body"),
        ({"content_encoding": "deflate"}, ValueError, "content_encoding"),
        ({"ttl": 0}, ValueError, "ttl"),
        ({"ttl": -1}, ValueError, "ttl"),
        ({"ttl": float("inf")}, ValueError, "ttl"),
        ({"ttl": float("nan")}, ValueError, "ttl"),
        ({"ttl": True}, TypeError, "ttl"),
        ({"ttl": "60"}, TypeError, "ttl"),
        ({"stale": -1}, ValueError, "stale"),
        ({"tags": ["x" * 70_000]}, ValueError, "65535"),
        ({"url": "/relative"}, ValueError, "URL"),
        ({"admin_url": ""}, ValueError, "admin_url"),
        ({"admin_url": "ftp://127.0.0.1:8081"}, ValueError, "admin_url"),
    ],
)
def test_push_response_refuses_bad_arguments_before_sending(
    recorder: Recorder, kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    arguments: dict[str, Any] = {"admin_url": recorder.url, "url": "http://shop.example/", "status": 200}
    arguments.update(kwargs)
    with pytest.raises(error, match=match):
        larder.push_response(**arguments)
    assert recorder.requests == []


def test_a_tiny_ttl_still_expires(recorder: Recorder) -> None:
    larder.push_response(recorder.url, "http://shop.example/", 200, ttl=0.0001)
    entry = larder.decode(recorder.requests[0][3])
    assert entry.expires_at == entry.created_at + 1  # not 0, which would mean "never"


def test_purge_sends_exactly_one_criterion(recorder: Recorder) -> None:
    recorder.reply(200, {"purged": 3})
    assert larder.purge(recorder.url, prefix="GET:http://shop.example/", token="t") == 3
    [(method, path, headers, body)] = recorder.requests
    assert (method, path, headers["authorization"]) == ("POST", "/purge", "Bearer t")
    assert headers["content-type"] == "application/json"
    assert json.loads(body) == {"prefix": "GET:http://shop.example/"}

    nothing: dict[str, Any] = {}
    for criteria in (nothing, {"url": "http://a/", "tag": "x"}, {"tags": ["a"], "url_prefix": "http://a/"}):
        with pytest.raises(ValueError, match="exactly one"):
            larder.purge(recorder.url, **criteria)
    with pytest.raises(TypeError, match="tag"):
        larder.purge(recorder.url, tag=7)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="single string"):
        larder.purge(recorder.url, tags="x")
    with pytest.raises(ValueError, match="empty"):
        larder.purge(recorder.url, tags=[])
    assert len(recorder.requests) == 1


def test_purge_sends_url_prefixes_and_several_tags(recorder: Recorder) -> None:
    recorder.reply(200, {"purged": 2})
    assert larder.purge(recorder.url, url_prefix="http://shop.example/products/") == 2
    recorder.reply(200, {"purged": 5})
    assert larder.purge(recorder.url, tags=("a", "b")) == 5
    assert [json.loads(body) for (_, _, _, body) in recorder.requests] == [
        {"url_prefix": "http://shop.example/products/"},
        {"tags": ["a", "b"]},
    ]


def test_a_warning_from_larder_is_issued(recorder: Recorder) -> None:
    recorder.reply(200, {"purged": 0, "warning": "prefix is matched against store keys"})
    with pytest.warns(larder.AdminWarning, match="store keys"):
        assert larder.purge(recorder.url, prefix="/products/") == 0
    recorder.reply(201, {"stored": True, "warning": "the proxy will never serve this one"})
    with pytest.warns(larder.AdminWarning, match="never serve"):
        larder.push_entry(recorder.url, "k", b"entry")


@pytest.mark.parametrize(
    ("status", "body", "message"),
    [
        (400, {"error": "invalid entry: bad_magic: no"}, "invalid entry: bad_magic: no"),
        (401, {"error": "a bearer token is required"}, "a bearer token is required"),
        (413, {"error": "entry too large"}, "entry too large"),
        (502, b"<html>Bad Gateway</html>", "<html>Bad Gateway</html>"),
        (503, b"", HTTPStatus.SERVICE_UNAVAILABLE.phrase),  # the reason phrase http.server sends, at this Python
    ],
)
def test_error_statuses_carry_the_servers_message(
    recorder: Recorder, status: int, body: bytes | dict[str, Any], message: str
) -> None:
    recorder.reply(status, body)
    with pytest.raises(larder.PushError) as failed:
        larder.push_entry(recorder.url, "k", b"entry")
    assert (failed.value.status, failed.value.message) == (status, message)
    assert str(failed.value) == f"{recorder.url}/entries/k: HTTP {status}: {message}"
    assert isinstance(failed.value, larder.AdminError)

    recorder.reply(status, body)
    with pytest.raises(larder.PurgeError) as purge_failed:
        larder.purge(recorder.url, tag="x")
    assert (purge_failed.value.status, purge_failed.value.message) == (status, message)


@pytest.mark.parametrize("answer", [b"{}", b'{"stored":"yes"}', b"[]", b"not json", b""])
def test_an_unexpected_push_answer_is_an_error(recorder: Recorder, answer: bytes) -> None:
    recorder.reply(201, answer)
    with pytest.raises(larder.PushError) as failed:
        larder.push_entry(recorder.url, "k", b"entry")
    assert failed.value.status == 201


def test_a_recorded_purge_answers_none(recorder: Recorder) -> None:
    recorder.reply(200, {"purged": None, "recorded": True})
    assert larder.purge(recorder.url, tag="t") is None, "memcached records purges: no count, and never a 0"


def test_the_token_comes_from_the_environment_when_none_is_passed(
    recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LARDER_ADMIN_TOKEN", "from-env")
    recorder.reply(200, {"purged": 1})
    larder.purge(recorder.url, tag="t")
    assert recorder.requests[-1][2]["authorization"] == "Bearer from-env"
    recorder.reply(200, {"purged": 1})
    larder.purge(recorder.url, tag="t", token="explicit")
    assert recorder.requests[-1][2]["authorization"] == "Bearer explicit"
    monkeypatch.delenv("LARDER_ADMIN_TOKEN")
    recorder.reply(200, {"purged": 1})
    larder.purge(recorder.url, tag="t")
    assert "authorization" not in recorder.requests[-1][2]


@pytest.mark.parametrize(
    "answer",
    [b"{}", b'{"purged":true}', b'{"purged":"1"}', b"nope", b'{"purged":null}', b'{"purged":null,"recorded":1}'],
)
def test_an_unexpected_purge_answer_is_an_error(recorder: Recorder, answer: bytes) -> None:
    recorder.reply(200, answer)
    with pytest.raises(larder.PurgeError):
        larder.purge(recorder.url, tag="x")


def test_an_admin_api_that_does_not_answer_times_out() -> None:
    with socket.socket() as silent:  # accepts connections (the backlog) but never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        started = time.monotonic()
        with pytest.raises(larder.PushError, match="cannot reach the admin API") as failed:
            larder.push_entry(f"http://127.0.0.1:{silent.getsockname()[1]}", "k", b"entry", timeout=0.3)
        assert failed.value.status is None
        assert time.monotonic() - started < 2
