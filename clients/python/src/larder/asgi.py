"""`larder.asgi.PageCacheMiddleware`: page caching for larder's front in any ASGI app (FastAPI, Starlette,
Django's ASGI handler…).

    from larder.asgi import PageCacheMiddleware
    app = PageCacheMiddleware(app, "redis://127.0.0.1:6379/0")

Every GET response that larder's rules let a shared cache store (larder.pages) is written into the store, under the
key `larder serve --store` (the same URL) looks it up under, before it is sent; the store write runs in a worker
thread, never on the event loop. Other responses pass through untouched and unbuffered; a storable one is buffered
(up to `max_body`, past which it streams on unstored).
"""

from __future__ import annotations

import asyncio
import urllib.parse
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from .entry import now_ms
from .http_rules import NotStored, StorePlan
from .page_site import target_authority
from .pages import PageCache, PageRequest
from .wsgi import origin_form

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
AsgiApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_PATH_SAFE = "/:@!$&'()*+,;=-._~"


def asgi_request(scope: Scope) -> PageRequest:
    """The request as the app received it: `raw_path` when the server gives it (else `root_path` + `path`
    re-encoded) and `query_string`, the Host header (never `server` in its place: spec/HTTP.md §2), the peer
    (`client`) and the connection's scheme."""
    headers = tuple((bytes(n).decode("latin-1").lower(), bytes(v).decode("latin-1")) for n, v in scope["headers"])
    raw_path = scope.get("raw_path")
    if raw_path:
        path = bytes(raw_path).decode("latin-1")
    else:
        full = (scope.get("root_path", "") + scope.get("path", "")).encode("utf-8")
        path = urllib.parse.quote(full, safe=_PATH_SAFE) or "/"
    query = bytes(scope.get("query_string", b"")).decode("latin-1")
    raw_target = path + ("?" + query if query else "")
    # Every Host line, joined as WSGI and Django join a field that repeats: two Hosts are not a plain authority, so
    # such a request stores nothing (spec/HTTP.md §2), where the first alone would key it on a site of its choosing.
    host = ",".join(v for n, v in headers if n == "host")
    client = scope.get("client")
    return PageRequest(
        method=str(scope.get("method", "GET")),
        scheme=str(scope.get("scheme", "http")),
        authority=host,
        target=origin_form(raw_target),
        headers=headers,
        peer=str(client[0]) if client else None,
        target_authority=target_authority(raw_target),
    )


class PageCacheMiddleware:
    """Wraps an ASGI app; `store` is the front's store URL, an open `Store`, or a `PageCache` (then the other
    arguments are its own). `namespace`, `drop`, `scheme`, `site`, `trusted_proxies`, `rules`, `max_body` as for
    `larder.pages.PageCache`."""

    def __init__(self, app: AsgiApp, store: Any, **options: Any) -> None:
        self.app = app
        self.pages: PageCache = store if isinstance(store, PageCache) else PageCache(store, **options)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "GET":
            await self.app(scope, receive, send)
            return
        request = asgi_request(scope)
        pages = self.pages
        request_time = now_ms()
        start: Message | None = None
        plan: StorePlan | NotStored | None = None
        chunks: list[bytes] = []
        size = 0
        passing = False

        async def buffered_send(message: Message) -> None:
            nonlocal start, plan, size, passing
            if passing:
                await send(message)
                return
            kind = message["type"]
            if kind == "http.response.start" and plan is None:
                headers = [(bytes(n).decode("latin-1"), bytes(v).decode("latin-1")) for n, v in message["headers"]]
                plan = pages.plan(request, int(message["status"]), headers, request_time)
                if isinstance(plan, NotStored) or message.get("trailers"):
                    pages._count(not_stored=plan.reason if isinstance(plan, NotStored) else "trailers")
                    passing = True
                    await send(message)
                    return
                start = message
                return
            if kind != "http.response.body" or start is None:
                await send(message)
                return
            chunks.append(bytes(message.get("body", b"")))
            size += len(chunks[-1])
            more = bool(message.get("more_body", False))
            if size > pages.max_body:
                pages._count(not_stored="too-large")
                passing = True
                await send(start)
                await send({"type": "http.response.body", "body": b"".join(chunks), "more_body": more})
                return
            if more:
                return
            body = b"".join(chunks)
            status = int(start["status"])
            headers = [(bytes(n).decode("latin-1"), bytes(v).decode("latin-1")) for n, v in start["headers"]]
            await asyncio.to_thread(pages.save, request, status, headers, body, request_time_ms=request_time, plan=plan)
            passing = True
            await send(start)
            await send({"type": "http.response.body", "body": body, "more_body": False})

        await self.app(scope, receive, buffered_send)
