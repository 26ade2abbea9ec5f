"""Python writes pages, the Rust front serves them: `larder serve --store memcached://…` in front, the page
middlewares (larder.wsgi, larder.asgi, larder.django) writing into the same memcached.

- `dead_front`: larder's upstream is a closed port, so anything it answers with 200 came from the store, written by
  Python under the key larder computes itself (FORMAT.md §5.3), through a `Vary` marker where the page varies
  (§5.4); after `larder.purge(store_url, tag=…)` it has nothing to serve.
- `django_front`: a real Django site (tests/pages_site) under gunicorn behind larder. The site counts what it
  renders: after the first request, the page comes from larder without reaching Django; a page Django rendered
  for a request that never went through larder is served by larder too; after a purge from Python, Django renders
  it again.

Without the Rust binary, memcached or gunicorn these tests fail (run `make services`), they never skip.
"""

from __future__ import annotations

import asyncio
import gzip
import http.client
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from email.message import Message
from pathlib import Path
from typing import Any

import pytest

import larder
from larder.pages import PageCache
from servers import Memcached, free_port, wait_for_port
from test_push_e2e import ADMIN_TOKEN, Larder, start_larder, stop_larder

NAMESPACE = "pages-e2e"
TESTS = Path(__file__).resolve().parent


def get(port: int, path: str, headers: dict[str, str] | None = None) -> tuple[int, Message, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", path, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.msg, response.read()
    finally:
        connection.close()


@pytest.fixture(autouse=True)
def admin_token(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fronts' admin API takes ADMIN_TOKEN; larder.purge sends $LARDER_ADMIN_TOKEN when given no token."""
    monkeypatch.setenv("LARDER_ADMIN_TOKEN", ADMIN_TOKEN)


# --- a front with nothing behind it --------------------------------------------------------------------------------


@dataclass
class DeadFront:
    larder: Larder
    store_url: str
    pages: PageCache


@pytest.fixture(scope="module")
def dead_front(memcached_server: Memcached, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DeadFront]:
    store_url = f"memcached://{memcached_server.address}"
    log = tmp_path_factory.mktemp("dead-front") / "larder.log"
    dead_upstream = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    running = start_larder(dead_upstream, log, "--store", store_url, "--namespace", NAMESPACE + "-dead")
    try:
        yield DeadFront(running, store_url, PageCache(store_url, namespace=NAMESPACE + "-dead"))
    finally:
        stop_larder(running)
    assert "panicked" not in log.read_text(errors="replace")


def wsgi_environ(front: DeadFront, path: str, query: str = "", **headers: str) -> dict[str, Any]:
    environ: dict[str, Any] = {
        "REQUEST_METHOD": "GET",
        "SCRIPT_NAME": "",
        "PATH_INFO": path,
        "QUERY_STRING": query,
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": str(front.larder.port),
        "HTTP_HOST": front.larder.host,  # as larder sends it upstream: the Host clients gave it
        "wsgi.url_scheme": "http",
    }
    environ.update({"HTTP_" + name.upper(): value for name, value in headers.items()})
    return environ


def run_wsgi(app: Any, environ: dict[str, Any]) -> bytes:
    result = app(environ, lambda status, headers, exc_info=None: lambda data: None)
    return b"".join(result)


def test_the_front_serves_what_the_wsgi_middleware_wrote(dead_front: DeadFront) -> None:
    from larder.wsgi import PageCacheMiddleware

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        language = environ.get("HTTP_ACCEPT_LANGUAGE", "none")
        body = f"{environ['PATH_INFO']} in {language}".encode()
        headers = [("Content-Type", "text/plain; charset=utf-8"), ("Cache-Control", "max-age=60")]
        headers += [("Surrogate-Key", "wsgi-e2e"), ("X-App", "wsgi"), ("Link", "</a>"), ("Link", "</b>")]
        if environ["PATH_INFO"] == "/vary":
            headers.append(("Vary", "Accept-Language"))
        if environ["PATH_INFO"] == "/gzip":
            body = gzip.compress(body * 100)
            headers.append(("Content-Encoding", "gzip"))
        start_response("200 OK", headers)
        return [body]

    front = dead_front.larder
    wrapped = PageCacheMiddleware(app, dead_front.pages)
    assert run_wsgi(wrapped, wsgi_environ(dead_front, "/plain", "b=2&a=1&utm_source=x")) == b"/plain in none"
    status, headers, body = get(front.port, "/plain?a=1&fbclid=y&b=2")
    assert (status, body) == (200, b"/plain in none")
    assert headers["X-App"] == "wsgi"
    assert headers.get_all("Link") == ["</a>", "</b>"]
    assert "Surrogate-Key" not in headers
    assert headers["x-cache"].startswith("HIT")

    for language in ("en", "de"):
        run_wsgi(wrapped, wsgi_environ(dead_front, "/vary", ACCEPT_LANGUAGE=language))
    for language in ("en", "de"):
        status, _, body = get(front.port, "/vary", {"Accept-Language": language})
        assert (status, body) == (200, f"/vary in {language}".encode())
    status, _, _ = get(front.port, "/vary", {"Accept-Language": "fr"})
    assert status == 502  # no variant for fr, and nothing behind larder

    run_wsgi(wrapped, wsgi_environ(dead_front, "/gzip"))
    status, headers, body = get(front.port, "/gzip")  # no Accept-Encoding: larder decodes it
    assert (status, body) == (200, b"/gzip in none" * 100)
    assert "Content-Encoding" not in headers
    status, headers, body = get(front.port, "/gzip", {"Accept-Encoding": "gzip"})
    assert (status, headers["Content-Encoding"], gzip.decompress(body)) == (200, "gzip", b"/gzip in none" * 100)

    # Purged from Python, in the store: the front has nothing left to serve for any of them. memcached records
    # purges and cannot count them: the answer is None, never a 0 that would read as "nothing matched".
    assert larder.purge(dead_front.store_url, tag="wsgi-e2e") is None
    for path, extra in (("/plain?a=1&b=2", {}), ("/vary", {"Accept-Language": "en"}), ("/gzip", {})):
        assert get(front.port, path, extra)[0] == 502, path
    # The same answer through the admin API of a front on memcached: {"purged": null, "recorded": true}.
    assert larder.purge(dead_front.larder.admin, tag="wsgi-e2e") is None


def test_the_front_selects_variants_on_header_bytes_as_the_app_did(dead_front: DeadFront) -> None:
    """FORMAT.md §5.4: header values are bytes, UTF-8 or not (invalid sequences read as U+FFFD), so a variant the app
    wrote for a non-ASCII header value is the one the front selects for the same bytes."""
    from larder.wsgi import PageCacheMiddleware

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        start_response("200 OK", [("Cache-Control", "max-age=60"), ("Vary", "X-Name")])
        return [environ["HTTP_X_NAME"].encode("latin-1")]

    wrapped = PageCacheMiddleware(app, dead_front.pages)
    for sent in ("Grüße".encode(), b"\xff\xfe"):
        # A WSGI server hands the bytes over as latin-1 code points.
        run_wsgi(wrapped, wsgi_environ(dead_front, "/bytes", X_NAME=sent.decode("latin-1")))
        status, _, body = get(dead_front.larder.port, "/bytes", {"X-Name": sent})  # type: ignore[dict-item]
        assert (status, body) == (200, sent)


def test_the_front_serves_what_the_asgi_middleware_wrote(dead_front: DeadFront) -> None:
    from larder.asgi import PageCacheMiddleware

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        headers = [(b"content-type", b"text/html"), (b"cdn-cache-control", b"max-age=60"), (b"cache-tag", b"asgi-e2e")]
        await send({"type": "http.response.start", "status": 404, "headers": headers})
        await send({"type": "http.response.body", "body": b"<h1>not here</h1>"})

    async def call() -> None:
        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            pass

        scope = {"type": "http", "method": "GET", "scheme": "http", "path": "/missing", "raw_path": b"/missing",
                 "query_string": b"x=1", "headers": [(b"host", dead_front.larder.host.encode())]}  # fmt: skip
        await PageCacheMiddleware(app, dead_front.pages)(scope, receive, send)

    asyncio.run(call())
    status, headers, body = get(dead_front.larder.port, "/missing?x=1")
    assert (status, body, headers["Content-Type"]) == (404, b"<h1>not here</h1>", "text/html")
    assert dead_front.pages.purge(tag="asgi-e2e") is None, "memcached records purges; it cannot count them"
    assert get(dead_front.larder.port, "/missing?x=1")[0] == 502


def test_the_front_serves_what_the_django_middleware_wrote(dead_front: DeadFront, memcached_server: Memcached) -> None:
    from django.http import HttpResponse
    from django.test import RequestFactory, override_settings

    from larder.django import PageCacheMiddleware, cache_in_front
    from support import configure_django

    configure_django(dead_front.store_url)

    @cache_in_front(60, tags=["django-e2e"])
    def view(request: Any) -> HttpResponse:
        response = HttpResponse("from Django ✓", content_type="text/plain; charset=utf-8")
        response["Cache-Control"] = "private"
        return response

    with override_settings(LARDER_PAGES={"STORE": dead_front.store_url, "NAMESPACE": NAMESPACE + "-dead"}):
        middleware = PageCacheMiddleware(view)
    middleware(RequestFactory().get("/django", HTTP_HOST=dead_front.larder.host))
    status, headers, body = get(dead_front.larder.port, "/django")
    assert (status, body.decode()) == (200, "from Django ✓")
    assert headers["Cache-Control"] == "private"  # what browsers are told; larder went by Surrogate-Control
    assert "Surrogate-Control" not in headers
    larder.purge(dead_front.store_url, url=f"http://{dead_front.larder.host}/django", namespace=NAMESPACE + "-dead")
    assert get(dead_front.larder.port, "/django")[0] == 502


# --- Django under gunicorn behind larder ---------------------------------------------------------------------------


@dataclass
class Site:
    larder: Larder
    gunicorn_port: int
    store_url: str

    def counts(self) -> dict[str, int]:
        status, _, body = get(self.gunicorn_port, "/_count")
        assert status == 200
        counted: dict[str, int] = json.loads(body)
        return counted

    def rendered(self, path: str) -> int:
        return self.counts().get(path, 0)


@pytest.fixture(scope="module")
def django_front(memcached_server: Memcached, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    store_url = f"memcached://{memcached_server.address}"
    logs = tmp_path_factory.mktemp("django-front")
    port = free_port()
    env = dict(os.environ, LARDER_PAGES_STORE=store_url, LARDER_PAGES_NAMESPACE=NAMESPACE)
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    command = [sys.executable, "-m", "gunicorn", "pages_site.wsgi:application", "--bind", f"127.0.0.1:{port}"]
    command += ["--workers", "1", "--threads", "4", "--worker-class", "gthread", "--log-level", "warning"]
    with (logs / "gunicorn.log").open("wb") as out:
        gunicorn = subprocess.Popen(command, cwd=TESTS, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        try:
            wait_for_port(port, gunicorn, "gunicorn")  # type: ignore[arg-type]
        except RuntimeError as e:
            output = (logs / "gunicorn.log").read_text(errors="replace")
            pytest.fail(f"gunicorn did not start ({e}); is it installed (requirements-dev.txt)? {output}")
        running = start_larder(f"http://127.0.0.1:{port}", logs / "larder.log", "--store", store_url,
                               "--namespace", NAMESPACE)  # fmt: skip
        try:
            yield Site(running, port, store_url)
        finally:
            stop_larder(running)
    finally:
        gunicorn.terminate()
        gunicorn.wait(timeout=10)


def test_django_renders_once_and_larder_serves_the_rest(django_front: Site) -> None:
    front = django_front.larder
    status, headers, first = get(front.port, "/article/1")
    assert status == 200
    assert first.startswith(b"article 1, rendered #1")
    for _ in range(5):
        status, headers, body = get(front.port, "/article/1")
        assert (status, body) == (200, first)
        assert headers["x-cache"].startswith("HIT")
    assert django_front.rendered("/article/1") == 1

    # Purged from Python through the store: the next request reaches Django again.
    larder.purge(django_front.store_url, tag="article-1")
    status, _, body = get(front.port, "/article/1")
    assert body.startswith(b"article 1, rendered #2")
    assert django_front.rendered("/article/1") == 2


def test_a_page_django_rendered_without_larder_is_served_by_larder(django_front: Site) -> None:
    front = django_front.larder
    # Straight to gunicorn, as a request larder never saw: only Django's middleware can have stored it.
    status, _, body = get(django_front.gunicorn_port, "/article/2?b=2&a=1&utm_source=mail", {"Host": front.host})
    assert status == 200
    assert django_front.rendered("/article/2") == 1
    status, headers, served = get(front.port, "/article/2?a=1&b=2&gclid=x")
    assert (status, served) == (200, body)
    assert headers["x-cache"].startswith("HIT")
    assert django_front.rendered("/article/2") == 1


def test_varying_pages_and_opt_in(django_front: Site) -> None:
    front = django_front.larder
    for language in ("en", "de"):
        get(django_front.gunicorn_port, "/lang", {"Host": front.host, "Accept-Language": language})
    assert django_front.rendered("/lang") == 2
    for language in ("en", "de", "en"):
        status, _, body = get(front.port, "/lang", {"Accept-Language": language})
        assert (status, body) == (200, f"language {language}, rendered #{1 if language == 'en' else 2}".encode())
    assert django_front.rendered("/lang") == 2
    get(front.port, "/lang", {"Accept-Language": "fr"})
    assert django_front.rendered("/lang") == 3

    status, headers, first = get(front.port, "/opt-in")
    for _ in range(3):
        status, headers, body = get(front.port, "/opt-in")
        assert (status, body) == (200, first)
    assert headers["Cache-Control"] == "private, no-cache"
    assert "Surrogate-Key" not in headers
    assert "Surrogate-Control" not in headers
    assert django_front.rendered("/opt-in") == 1


def test_pages_that_must_not_be_shared_always_reach_django(django_front: Site) -> None:
    front = django_front.larder
    for path in ("/private", "/cookie"):
        for _ in range(3):
            status, headers, _ = get(front.port, path)
            assert status == 200
        assert django_front.rendered(path) == 3, path
    assert "Set-Cookie" in headers
    pages = PageCache(django_front.store_url, namespace=NAMESPACE)
    for path in ("/private", "/cookie"):
        found = pages.find(larder.pages.PageRequest("GET", "http", front.host, path))
        assert found is None, path
