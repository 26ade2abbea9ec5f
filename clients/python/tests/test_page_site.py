"""Issue 32, finding 7 (spec/HTTP.md §2): a request that reaches the app directly, not through larder's front, with a
hostile Host or forwarding field must not write a page the front then serves for another site. Each request here is
one of the issue's (or its relatives), sent through the WSGI, ASGI and Django middlewares with the page cache's
`site` and `trusted_proxies` options: it is keyed on the site the rules allow, or not stored (reason `host`)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from larder.page_site import SiteRule, normalise, plain_authority
from larder.pages import PageCache

STORABLE = [("Content-Type", "text/plain"), ("Cache-Control", "max-age=60")]
UNTRUSTED = "203.0.113.9"
PROXY = "10.0.0.7"


def keys_of(pages: PageCache) -> list[str]:
    """Every key the (memory) store holds."""
    store: Any = pages.store
    return sorted(store._items)


def wsgi(pages: PageCache, host: str | None, *, peer: str = UNTRUSTED, raw_uri: str = "/p", **headers: str) -> None:
    from larder.wsgi import PageCacheMiddleware

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        start_response("200 OK", STORABLE)
        return [b"page for " + environ.get("HTTP_HOST", "").encode("latin-1")]

    environ: dict[str, Any] = {
        "REQUEST_METHOD": "GET",
        "SCRIPT_NAME": "",
        "PATH_INFO": "/p",
        "QUERY_STRING": "",
        "RAW_URI": raw_uri,
        "SERVER_NAME": "victim.example",
        "SERVER_PORT": "80",
        "REMOTE_ADDR": peer,
        "wsgi.url_scheme": "http",
    }
    if host is not None:
        environ["HTTP_HOST"] = host
    environ.update({"HTTP_" + name.upper(): value for name, value in headers.items()})
    result = PageCacheMiddleware(app, pages)(environ, lambda status, headers, exc_info=None: lambda data: None)
    b"".join(result)


# The hostile Hosts, and their relatives: none is a plain authority, so none is stored.
NOT_PLAIN = [
    "victim.example/admin",
    "evil@victim.example",
    "evil.example/x@victim.example",
    "victim.example:99999",
    "victim.example:",
    "victim.example:+80",
    "victim.example%2fadmin",
    "victim.example\\admin",
    "victim.example?x",
    "victim.example#x",
    "victim .example",
    "victim.example,evil.example",
    "[::1",
    "[::1]x",
    "[]",
    "",
    "vïctim.example",
]


@pytest.mark.parametrize("host", NOT_PLAIN)
def test_a_host_that_is_not_a_plain_authority_stores_nothing(host: str) -> None:
    pages = PageCache("memory://")
    wsgi(pages, host)
    assert keys_of(pages) == [], f"{host!r} wrote a page"
    assert pages.stats.not_stored["host"] == 1
    assert not plain_authority(host)


def test_a_request_without_host_stores_nothing_even_with_a_server_name() -> None:
    pages = PageCache("memory://")
    wsgi(pages, None)
    assert keys_of(pages) == []
    assert pages.stats.not_stored["host"] == 1


def test_forwarding_fields_count_only_from_trusted_proxies() -> None:
    pages = PageCache("memory://", trusted_proxies=["10.0.0.0/8"])
    wsgi(pages, "victim.example", x_forwarded_host="evil.example", x_forwarded_proto="https")
    assert keys_of(pages) == ["GET:http://victim.example/p"], "an untrusted peer's X-Forwarded-* is ignored"
    wsgi(pages, "victim.example", forwarded="host=evil.example;proto=https")
    assert keys_of(pages) == ["GET:http://victim.example/p"], "and its Forwarded"
    wsgi(pages, "victim.example", peer=PROXY, x_forwarded_host="shop.example", x_forwarded_proto="https")
    assert "GET:https://shop.example/p" in keys_of(pages), "a trusted proxy's claims key the page, as at the front"
    wsgi(pages, "victim.example", peer="::ffff:10.0.0.7", x_forwarded_host="mapped.example")
    assert "GET:http://mapped.example/p" in keys_of(pages), "an IPv4-mapped peer is its IPv4 address"
    before = keys_of(pages)
    for claims in (
        {"x_forwarded_host": "a.example", "forwarded": "host=b.example"},  # they disagree
        {"x_forwarded_proto": "gopher"},
        {"x_forwarded_host": "evil@victim.example"},
        {"x_forwarded_host": "victim.example/admin"},
    ):
        wsgi(pages, "victim.example", peer=PROXY, **claims)
        assert keys_of(pages) == before, claims
    assert pages.stats.not_stored["host"] == 4


def test_a_configured_site_is_the_only_one_stored() -> None:
    pages = PageCache("memory://", site="Shop.Example")
    wsgi(pages, "other.example")
    wsgi(pages, "shop.example:8080")
    assert keys_of(pages) == []
    assert pages.stats.not_stored["host"] == 2
    wsgi(pages, "SHOP.example:80")
    assert keys_of(pages) == ["GET:http://shop.example/p"]
    ported = PageCache("memory://", site="shop.example:8443")
    wsgi(ported, "shop.example:8443")
    wsgi(ported, "shop.example")
    assert keys_of(ported) == ["GET:http://shop.example:8443/p"]
    with pytest.raises(ValueError, match="site"):
        PageCache("memory://", site="evil@shop.example")
    with pytest.raises(ValueError, match=r"10\.0\.0\.0/99"):
        PageCache("memory://", trusted_proxies=["10.0.0.0/99"])
    with pytest.raises(TypeError):
        PageCache("memory://", trusted_proxies="10.0.0.0/8")


def test_an_absolute_target_is_never_stored() -> None:
    """spec/HTTP.md §2 step 2: RFC 9112 §3.2.2 has the app ignore the Host of a request with an absolute-form
    target, whose authority a direct sender chooses; so it is not stored even when the two agree."""
    pages = PageCache("memory://")
    wsgi(pages, "victim.example", raw_uri="http://evil.example/p")
    wsgi(pages, "victim.example", raw_uri="http://user@victim.example/p")
    wsgi(pages, "victim.example", raw_uri="http://VICTIM.example:80/p")
    wsgi(pages, "victim.example", raw_uri="http://victim.example/p")
    assert keys_of(pages) == []
    assert pages.stats.not_stored["host"] == 4
    wsgi(pages, "victim.example", raw_uri="/p")
    assert keys_of(pages) == ["GET:http://victim.example/p"]


def test_asgi_reads_the_same_rules() -> None:
    from larder.asgi import PageCacheMiddleware

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": [(b"cache-control", b"max-age=60")]})
        await send({"type": "http.response.body", "body": b"page"})

    async def call(pages: PageCache, headers: list[tuple[bytes, bytes]], client: str = UNTRUSTED) -> None:
        scope = {
            "type": "http",
            "method": "GET",
            "scheme": "http",
            "path": "/p",
            "raw_path": b"/p",
            "query_string": b"",
            "headers": headers,
            "client": (client, 5000),
            "server": ("victim.example", 80),
        }

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b""}

        async def send(message: dict[str, Any]) -> None:
            pass

        await PageCacheMiddleware(app, pages)(scope, receive, send)

    pages = PageCache("memory://", trusted_proxies=[PROXY])
    asyncio.run(call(pages, [(b"host", b"evil@victim.example")]))
    asyncio.run(call(pages, [(b"host", b"victim.example/admin")]))
    asyncio.run(call(pages, []))
    # ASGI servers pass every header line: two Hosts name no one site (the first alone was believed).
    asyncio.run(call(pages, [(b"host", b"victim.example"), (b"host", b"evil.example")]))
    asyncio.run(call(pages, [(b"host", b"victim.example"), (b"host", b"victim.example")]))
    assert keys_of(pages) == []
    assert pages.stats.not_stored["host"] == 5
    asyncio.run(call(pages, [(b"host", b"victim.example"), (b"x-forwarded-host", b"evil.example")]))
    assert keys_of(pages) == ["GET:http://victim.example/p"]
    asyncio.run(call(pages, [(b"host", b"victim.example"), (b"x-forwarded-host", b"shop.example")], client=PROXY))
    assert keys_of(pages) == ["GET:http://shop.example/p", "GET:http://victim.example/p"]


def test_django_ignores_what_its_own_settings_would_believe_from_anyone() -> None:
    from django.http import HttpResponse
    from django.test import RequestFactory, override_settings

    from larder.django import PageCacheMiddleware
    from support import configure_django

    configure_django()

    def view(request: Any) -> HttpResponse:
        response = HttpResponse(b"page", content_type="text/plain")
        response["Cache-Control"] = "max-age=60"
        return response

    factory = RequestFactory()
    believing = {
        "USE_X_FORWARDED_HOST": True,
        "SECURE_PROXY_SSL_HEADER": ("HTTP_X_FORWARDED_PROTO", "https"),
        "LARDER_PAGES": {"STORE": "memory://", "TRUSTED_PROXIES": [PROXY]},
    }
    with override_settings(**believing):
        middleware = PageCacheMiddleware(view)
        hostile = {"HTTP_X_FORWARDED_HOST": "evil.example", "HTTP_X_FORWARDED_PROTO": "https"}
        middleware(factory.get("/p", HTTP_HOST="victim.example", REMOTE_ADDR=UNTRUSTED, **hostile))
        middleware(factory.get("/q", HTTP_HOST="evil@victim.example", REMOTE_ADDR=UNTRUSTED))
        assert keys_of(middleware.pages) == ["GET:http://victim.example/p"]
        assert middleware.pages.stats.not_stored["host"] == 1
        middleware(factory.get("/r", HTTP_HOST="victim.example", REMOTE_ADDR=PROXY, **hostile))
        assert "GET:https://evil.example/r" in keys_of(middleware.pages)
    with override_settings(LARDER_PAGES={"STORE": "memory://", "SITE": "shop.example"}):
        middleware = PageCacheMiddleware(view)
        middleware(factory.get("/p", HTTP_HOST="victim.example"))
        middleware(factory.get("/p", HTTP_HOST="shop.example"))
        assert keys_of(middleware.pages) == ["GET:http://shop.example/p"]


def test_the_rules_in_isolation() -> None:
    for good in ["shop.example", "shop.example:8080", "127.0.0.1", "[::1]", "[::1]:80", "a_b.example", "x:0"]:
        assert plain_authority(good), good
    assert normalise("Shop.Example:80", "http") == "shop.example"
    assert normalise("shop.example:443", "https") == "shop.example"
    assert normalise("shop.example:443", "http") == "shop.example:443"
    assert normalise("[::1]:80", "http") == "[::1]"
    rule = SiteRule.of(None, [])
    resolved = rule.resolve(peer=None, host="a.example", scheme="http", target_authority=None, headers=())
    assert resolved == ("http", "a.example")
    https = rule.resolve(peer=None, host="a.example:443", scheme="https", target_authority=None, headers=())
    assert https == ("https", "a.example")
