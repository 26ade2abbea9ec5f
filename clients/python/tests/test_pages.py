"""Page caching for the front, in process: the proxy's storage rules (larder.http_rules, the cases of the proxy's
own tests; every case of spec/vectors/storage.json runs in tests/test_vectors.py), what PageCache writes, and the
WSGI, ASGI and Django middlewares over a memory store. That the Rust front serves what these write is
tests/test_pages_e2e.py.
"""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import Iterator
from typing import Any

import pytest

import larder
from larder.keys import variant_key
from larder.pages import PageCache, PageRequest, front_headers

NOW = 1_700_000_000_000


# --- PageCache over a memory store ----------------------------------------------------------------------------------


def request(target: str = "/p", headers: tuple[tuple[str, str], ...] = ()) -> PageRequest:
    return PageRequest("GET", "http", "Shop.Example:80", target, headers)


def test_a_saved_page_is_the_entry_the_proxy_would_store() -> None:
    pages = PageCache("memory://", namespace="www")
    headers = [
        ("Content-Type", "text/html"),
        ("Content-Length", "999"),
        ("Connection", "x-private"),
        ("X-Private", "1"),
        ("Surrogate-Key", "a  b"),
        ("Cache-Tag", "b, c"),
        ("Surrogate-Control", "max-age=60"),
        ("Cache-Control", "private"),
        ("Content-Encoding", "gzip"),
        ("Set-Cookie", "x=1"),
    ]
    assert pages.save(request("/p?b=2&a=1&utm_source=x"), 200, headers, gzip.compress(b"hi")) is None
    assert pages.stats.not_stored["set-cookie"] == 1
    key = pages.save(request("/p?b=2&a=1&utm_source=x"), 200, headers[:-1], gzip.compress(b"hi"))
    assert key == "www:GET:http://shop.example/p?a=1&b=2"
    found = pages.find(request("/p?a=1&b=2"))
    assert found is not None
    assert found[0] == key
    entry = found[1]
    assert entry.kind == "response"
    assert entry.compressor == "none"
    assert entry.tags == ("a", "b", "c")
    assert entry.expires_at - entry.created_at == 60_000
    assert entry.stale_ms == 300_000
    response = entry.value
    assert response.content_encoding == "gzip"
    assert gzip.decompress(response.body) == b"hi"
    names = [n for n, _ in response.headers]
    assert names == [b"content-type", b"cache-control", b"age", b"date"]
    assert response.header("age") == b"0"


def test_varying_pages_get_a_marker_and_keep_its_generation() -> None:
    pages = PageCache("memory://")
    headers = [("Cache-Control", "max-age=60"), ("Vary", "Accept-Language")]
    en = request(headers=(("accept-language", "en"),))
    de = request(headers=(("accept-language", " de , fr"),))
    en_key = pages.save(en, 200, headers, b"hello")
    de_key = pages.save(de, 200, headers, b"hallo")
    assert en_key != de_key
    marker = larder.decode(pages.store.get("GET:http://shop.example/p") or b"")
    assert marker.kind == "value"
    assert marker.value["vary"] == ["accept-language"]
    generation = marker.value["generation"]
    assert len(generation) == 16
    assert int(generation, 16) >= 0
    assert de_key == variant_key("GET:http://shop.example/p", marker.value, [("Accept-Language", "de,fr")])
    found_en, found_de = pages.find(en), pages.find(de)
    assert found_en is not None
    assert found_de is not None
    assert (found_en[1].value.body, found_de[1].value.body) == (b"hello", b"hallo")
    assert pages.find(request()) is None  # no Accept-Language: another variant, not stored
    # Other names: a new marker with a new generation (the old variants become unreachable).
    pages.save(en, 200, [("Cache-Control", "max-age=60"), ("Vary", "Cookie")], b"c")
    assert larder.decode(pages.store.get("GET:http://shop.example/p") or b"").value["generation"] != generation
    found = pages.find(de)  # selected by its (absent) Cookie now: the new variant, never the old "hallo"
    assert found is not None
    assert found[1].value.body == b"c"


def test_purges() -> None:
    pages = PageCache("memory://")
    for path in ("/a", "/b"):
        pages.save(request(path), 200, [("Cache-Control", "max-age=60"), ("Surrogate-Key", f"all {path[1:]}")], b"x")
    assert pages.purge(tag="a") == 1
    assert pages.find(request("/a")) is None
    assert pages.find(request("/b")) is not None
    assert pages.purge(url="http://shop.example/b") >= 1
    assert pages.find(request("/b")) is None
    with pytest.raises(ValueError, match="exactly one"):
        pages.purge()
    with pytest.raises(ValueError, match="exactly one"):
        pages.purge(tag="a", url="http://x/")
    # larder.purge with a store instead of the admin API.
    pages.save(request("/c"), 200, [("Cache-Control", "max-age=60"), ("Surrogate-Key", "c")], b"x")
    assert larder.purge(pages.store, tag="c") == 1
    assert pages.find(request("/c")) is None
    pages.save(request("/d"), 200, [("Cache-Control", "max-age=60")], b"x")
    assert larder.purge(pages.store, url="http://Shop.Example/d") >= 1
    assert pages.find(request("/d")) is None
    with pytest.raises(ValueError, match="url_prefix"):
        larder.purge(pages.store, url_prefix="http://shop.example/")


def test_front_headers() -> None:
    assert front_headers(60, tags=["a", "b"], stale_while_revalidate=5) == [
        ("Surrogate-Control", "max-age=60, stale-while-revalidate=5"),
        ("Surrogate-Key", "a b"),
    ]
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="ttl"):
            front_headers(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="tag"):
        front_headers(1, tags=["a b"])


def test_a_store_failure_is_logged_and_counted_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    pages = PageCache("memcached://127.0.0.1:1?timeout=50ms&connect_timeout=50ms")
    assert pages.save(request(), 200, [("Cache-Control", "max-age=60")], b"x") is None
    assert pages.stats.errors == 1
    assert "not stored" in caplog.text
    assert "127.0.0.1:1" in caplog.text


# --- WSGI --------------------------------------------------------------------------------------------------------


def wsgi_environ(path: str = "/w", query: str = "", **extra: Any) -> dict[str, Any]:
    environ: dict[str, Any] = {
        "REQUEST_METHOD": "GET",
        "SCRIPT_NAME": "",
        "PATH_INFO": path,
        "QUERY_STRING": query,
        "SERVER_NAME": "shop.example",
        "SERVER_PORT": "80",
        "HTTP_HOST": "shop.example",
        "wsgi.url_scheme": "http",
    }
    environ.update(extra)
    return environ


def run_wsgi(app: Any, environ: dict[str, Any]) -> tuple[str, list[tuple[str, str]], bytes]:
    started: list[Any] = []

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        started.append((status, headers))
        return lambda data: None

    result = app(environ, start_response)
    try:
        body = b"".join(result)
    finally:
        getattr(result, "close", lambda: None)()
    assert len(started) == 1
    return started[0][0], started[0][1], body


def test_wsgi_middleware_stores_storable_pages_and_passes_the_rest_through() -> None:
    from larder.wsgi import PageCacheMiddleware

    closed: list[str] = []

    class Body:
        def __init__(self, chunks: list[bytes]) -> None:
            self.chunks = chunks

        def __iter__(self) -> Iterator[bytes]:
            return iter(self.chunks)

        def close(self) -> None:
            closed.append("closed")

    def app(environ: dict[str, Any], start_response: Any) -> Any:
        path = environ["PATH_INFO"]
        cc = "no-store" if path == "/nostore" else "max-age=60"
        start_response("200 OK", [("Content-Type", "text/plain"), ("Cache-Control", cc), ("Surrogate-Key", "w")])
        return Body([b"page ", path.encode()])

    def generator_app(environ: dict[str, Any], start_response: Any) -> Iterator[bytes]:
        start_response("200 OK", [("Cache-Control", "max-age=60")])
        yield b"gen"
        yield b"erated"

    def write_app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        write = start_response("200 OK", [("Cache-Control", "max-age=60")])
        write(b"written ")
        return [b"then returned"]

    pages = PageCache("memory://")
    wrapped = PageCacheMiddleware(app, pages)
    status, headers, body = run_wsgi(wrapped, wsgi_environ("/w", "b=2&a=1"))
    assert (status, body) == ("200 OK", b"page /w")
    assert ("Surrogate-Key", "w") in headers  # the app's response itself is unchanged
    assert closed == ["closed"]
    found = pages.find(request_for("/w?a=1&b=2"))
    assert found is not None
    assert found[1].value.body == b"page /w"
    assert found[1].tags == ("w",)

    status, _, body = run_wsgi(wrapped, wsgi_environ("/nostore"))
    assert body == b"page /nostore"
    assert pages.find(request_for("/nostore")) is None
    assert pages.stats.not_stored["no-store"] == 1

    # RAW_URI (gunicorn) is the target as sent: kept byte for byte.
    run_wsgi(wrapped, wsgi_environ("/a b", RAW_URI="/a%20b?x=1"))
    assert pages.find(request_for("/a%20b?x=1")) is not None
    run_wsgi(wrapped, wsgi_environ("/ü/x y"))  # rebuilt from PATH_INFO (latin-1 code points of the UTF-8 bytes)
    assert pages.find(request_for("/%C3%BC/x%20y")) is None  # PATH_INFO here holds U+00FC itself, not UTF-8
    assert pages.find(request_for("/%FC/x%20y")) is not None

    run_wsgi(PageCacheMiddleware(generator_app, pages), wsgi_environ("/gen"))
    run_wsgi(PageCacheMiddleware(write_app, pages), wsgi_environ("/write"))
    gen, written = pages.find(request_for("/gen")), pages.find(request_for("/write"))
    assert gen is not None
    assert written is not None
    assert (gen[1].value.body, written[1].value.body) == (b"generated", b"written then returned")

    small = PageCache(pages.store, max_body=4)
    status, _, body = run_wsgi(PageCacheMiddleware(app, small), wsgi_environ("/big"))
    assert body == b"page /big"
    assert small.stats.not_stored["too-large"] == 1
    assert pages.find(request_for("/big")) is None

    environ = wsgi_environ("/post")
    environ["REQUEST_METHOD"] = "POST"
    run_wsgi(wrapped, environ)
    assert pages.find(request_for("/post")) is None


def request_for(target: str) -> PageRequest:
    return PageRequest("GET", "http", "shop.example", target)


# --- ASGI --------------------------------------------------------------------------------------------------------


def test_asgi_middleware_stores_storable_pages_and_passes_the_rest_through() -> None:
    from larder.asgi import PageCacheMiddleware

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = scope["path"]
        cc = b"private" if path == "/private" else b"max-age=60"
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"cache-control", cc), (b"vary", b"X-Lang")]}
        )
        await send({"type": "http.response.body", "body": b"a ", "more_body": True})
        await send(
            {"type": "http.response.body", "body": path.encode() + b" " + dict(scope["headers"]).get(b"x-lang", b"-")}
        )

    pages = PageCache("memory://")
    wrapped = PageCacheMiddleware(app, pages)

    def call(path: str, lang: bytes) -> list[dict[str, Any]]:
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        scope = {"type": "http", "method": "GET", "scheme": "http", "path": path, "raw_path": path.encode(),
                 "query_string": b"", "headers": [(b"host", b"shop.example"), (b"x-lang", lang)]}  # fmt: skip
        asyncio.run(wrapped(scope, receive, send))
        return sent

    sent = call("/a", b"en")
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]
    assert sent[1]["body"] == b"a /a en"
    found = pages.find(PageRequest("GET", "http", "shop.example", "/a", (("x-lang", "en"),)))
    assert found is not None
    assert found[1].value.body == b"a /a en"
    assert pages.find(PageRequest("GET", "http", "shop.example", "/a", (("x-lang", "de"),))) is None

    sent = call("/private", b"en")
    assert [m.get("more_body", False) for m in sent[1:]] == [True, False]  # streamed through as the app sent it
    assert pages.stats.not_stored["private"] == 1


# --- Django ------------------------------------------------------------------------------------------------------


@pytest.fixture
def django_pages(memcached_server: Any) -> Iterator[None]:
    from django.test import override_settings

    from support import configure_django

    configure_django(f"memcached://{memcached_server.address}")
    with override_settings(LARDER_PAGES={"CACHE": "default", "NAMESPACE": "dj"}):
        yield


def test_django_middleware_and_decorator(django_pages: None) -> None:
    from django.http import HttpResponse, StreamingHttpResponse
    from django.test import RequestFactory

    from larder.django import PageCacheMiddleware, cache_in_front

    @cache_in_front(30, tags=["dj-opt"])
    def opted(request: Any) -> HttpResponse:
        response = HttpResponse(b"opted in", content_type="text/plain")
        response["Cache-Control"] = "private"
        return response

    def plain(request: Any) -> HttpResponse:
        return HttpResponse(b"plain", content_type="text/plain")

    def cookie(request: Any) -> HttpResponse:
        response = opted(request)
        response.set_cookie("session", "secret")
        return response

    factory = RequestFactory()
    for view, path in ((opted, "/opted"), (plain, "/plain"), (cookie, "/cookie")):
        middleware = PageCacheMiddleware(view)
        response = middleware(factory.get(path, HTTP_HOST="shop.example"))
        assert response.status_code == 200
    pages = PageCacheMiddleware(plain).pages
    assert pages.find(PageRequest("GET", "http", "shop.example", "/plain")) is None
    assert pages.find(PageRequest("GET", "http", "shop.example", "/cookie")) is None
    found = pages.find(PageRequest("GET", "http", "shop.example", "/opted"))
    assert found is not None
    key, entry = found
    assert key == "dj:GET:http://shop.example/opted"
    assert entry.value.body == b"opted in"
    assert entry.value.header("cache-control") == b"private"
    assert entry.value.header("surrogate-control") is None
    assert entry.tags == ("dj-opt",)
    # The time Django took to answer counts in the response's age (RFC 9111 §4.2.3), as the front counts it.
    assert 29_000 <= entry.expires_at - entry.created_at <= 30_000

    def streaming(request: Any) -> StreamingHttpResponse:
        response = StreamingHttpResponse(iter([b"s"]))
        response["Cache-Control"] = "max-age=60"
        return response

    middleware = PageCacheMiddleware(streaming)
    middleware(factory.get("/streaming", HTTP_HOST="shop.example"))
    assert middleware.pages.stats.not_stored["streaming"] == 1

    async def async_view(request: Any) -> HttpResponse:
        return opted(request)

    middleware = PageCacheMiddleware(async_view)
    response = asyncio.run(middleware(factory.get("/async", HTTP_HOST="shop.example")))
    assert response.status_code == 200
    assert pages.find(PageRequest("GET", "http", "shop.example", "/async")) is not None


def test_variants_select_on_the_bytes_received_as_every_language_does() -> None:
    """WSGI, ASGI and Django give header values as the latin-1 code points of the bytes received: the variant key
    is computed from those bytes (UTF-8, invalid sequences as U+FFFD), as the front computes it."""
    pages = PageCache("memory://")
    headers = [("Cache-Control", "max-age=60"), ("Vary", "X-Name")]
    received = "é".encode().decode("latin-1")  # what a WSGI server hands over for the UTF-8 bytes of "é"
    key = pages.save(request(headers=(("x-name", received),)), 200, headers, b"utf-8")
    marker = larder.decode(pages.store.get("GET:http://shop.example/p") or b"").value
    assert key == variant_key("GET:http://shop.example/p", marker, [("X-Name", "é")])
    invalid = pages.save(request(headers=(("x-name", "\xff"),)), 200, headers, b"not utf-8")
    assert invalid == variant_key("GET:http://shop.example/p", marker, [("X-Name", "\ufffd")])
    found = pages.find(request(headers=(("x-name", received),)))
    assert found is not None
    assert found[1].value.body == b"utf-8"
