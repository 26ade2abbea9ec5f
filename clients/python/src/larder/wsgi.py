"""`larder.wsgi.PageCacheMiddleware`: page caching for larder's front in any WSGI app (Flask, Bottle, Pyramid…).

    from larder.wsgi import PageCacheMiddleware
    app.wsgi_app = PageCacheMiddleware(app.wsgi_app, "memcached://127.0.0.1:11211")   # Flask

Every GET response that larder's rules let a shared cache store (larder.pages) is written into the store, under the
key `larder serve --store` (the same URL) looks it up under, before it is sent: the front serves it from then on.
Other responses pass through untouched and unbuffered; a storable one is buffered (up to `max_body`, past which it
streams on unstored).
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Sequence
from types import TracebackType
from typing import Any

from .entry import now_ms
from .http_rules import NotStored, StorePlan
from .page_site import target_authority
from .pages import PageCache, PageRequest

Environ = dict[str, Any]
ExcInfo = tuple[type[BaseException], BaseException, TracebackType | None] | tuple[None, None, None]
StartResponse = Callable[..., Callable[[bytes], object]]
WsgiApp = Callable[[Environ, StartResponse], Iterable[bytes]]

#: Characters a path keeps unencoded when it has to be rebuilt from PATH_INFO (RFC 3986 pchar and "/").
_PATH_SAFE = "/:@!$&'()*+,;=-._~"


def wsgi_request(environ: Environ) -> PageRequest:
    """The request as the app received it: the raw target from RAW_URI (gunicorn) or REQUEST_URI (uWSGI,
    mod_wsgi) when the server gives it, else rebuilt from SCRIPT_NAME, PATH_INFO and QUERY_STRING; its Host field
    (never SERVER_NAME in its place: spec/HTTP.md §2), peer (REMOTE_ADDR) and connection scheme."""
    headers = []
    for name, value in environ.items():
        if name.startswith("HTTP_"):
            headers.append((name[5:].replace("_", "-").lower(), str(value)))
        elif name in ("CONTENT_TYPE", "CONTENT_LENGTH") and value:
            headers.append((name.replace("_", "-").lower(), str(value)))
    authority = str(environ.get("HTTP_HOST") or "")
    target = environ.get("RAW_URI") or environ.get("REQUEST_URI")
    if not target:
        path = (environ.get("SCRIPT_NAME", "") + environ.get("PATH_INFO", "")).encode("latin-1")
        target = urllib.parse.quote(path, safe=_PATH_SAFE) or "/"
        if environ.get("QUERY_STRING"):
            target += "?" + environ["QUERY_STRING"]
    peer = environ.get("REMOTE_ADDR")
    return PageRequest(
        method=str(environ.get("REQUEST_METHOD", "GET")),
        scheme=str(environ.get("wsgi.url_scheme", "http")),
        authority=authority,
        target=origin_form(str(target)),
        headers=tuple(headers),
        peer=str(peer) if peer else None,
        target_authority=target_authority(str(target)),
    )


def origin_form(target: str) -> str:
    """The path and query of a request target (an absolute-form target loses its scheme and authority)."""
    if target.startswith("/"):
        return target
    _scheme, sep, rest = target.partition("://")
    if not sep:
        return target
    for i, c in enumerate(rest):
        if c in "/?#":
            return rest[i:] if c == "/" else "/" + rest[i:]
    return "/"


class PageCacheMiddleware:
    """Wraps a WSGI app; `store` is the front's store URL, an open `Store`, or a `PageCache` (then the other
    arguments are its own). `namespace`, `drop`, `scheme`, `site`, `trusted_proxies`, `rules`, `max_body` as for
    `larder.pages.PageCache`."""

    def __init__(self, app: WsgiApp, store: Any, **options: Any) -> None:
        self.app = app
        self.pages: PageCache = store if isinstance(store, PageCache) else PageCache(store, **options)

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD") != "GET":
            return self.app(environ, start_response)
        request = wsgi_request(environ)
        call = _Call(self.pages, request, start_response)
        result = self.app(environ, call.start_response)
        first: list[bytes] = []
        iterator = iter(result)
        if call.plan is None:
            # A generator app calls start_response when it is first iterated.
            try:
                first.append(next(iterator))
            except StopIteration:
                pass
            except BaseException:
                _close(result)
                raise
        if call.plan is None or isinstance(call.plan, NotStored):
            # Passed through: start_response went to the server already.
            return _Streaming(first, iterator, result) if first else result
        return call.finish(first, iterator, result)


class _Call:
    """One request: catches start_response, and buffers a storable response until it is whole."""

    def __init__(self, pages: PageCache, request: PageRequest, start_response: StartResponse) -> None:
        self.pages = pages
        self.request = request
        self.server_start = start_response
        self.request_time = now_ms()
        self.plan: StorePlan | NotStored | None = None
        self.status = ""
        self.headers: list[tuple[str, str]] = []
        self.exc_info: Any = None
        self.chunks: list[bytes] = []
        self.size = 0
        self.started = False

    def start_response(
        self, status: str, headers: list[tuple[str, str]], exc_info: Any = None
    ) -> Callable[[bytes], object]:
        code = _status_code(status)
        if exc_info is not None or code is None:
            self.plan = NotStored("error")
        else:
            self.plan = self.pages.plan(self.request, code, headers, self.request_time)
        if isinstance(self.plan, NotStored):
            self.pages._count(not_stored=self.plan.reason)
            return self.server_start(status, headers, exc_info) if exc_info else self.server_start(status, headers)
        self.status, self.headers = status, list(headers)
        return self._write

    def _write(self, data: bytes) -> None:
        # The legacy write() callable: buffered like the iterable's chunks (it comes before them).
        self.chunks.append(bytes(data))
        self.size += len(data)

    def finish(self, first: list[bytes], iterator: Iterator[bytes], result: Iterable[bytes]) -> Iterable[bytes]:
        self.chunks.extend(first)
        self.size += sum(len(chunk) for chunk in first)
        try:
            for chunk in iterator:
                self.chunks.append(chunk)
                self.size += len(chunk)
                if self.size > self.pages.max_body:
                    self.pages._count(not_stored="too-large")
                    return self._stream(iterator, result)
        except BaseException:
            _close(result)
            raise
        _close(result)
        body = b"".join(self.chunks)
        plan = self.plan
        assert isinstance(plan, StorePlan)
        code = _status_code(self.status)
        assert code is not None
        self.pages.save(self.request, code, self.headers, body, request_time_ms=self.request_time, plan=plan)
        self.server_start(self.status, self.headers)
        return [body]

    def _stream(self, iterator: Iterator[bytes], result: Iterable[bytes]) -> Iterable[bytes]:
        self.server_start(self.status, self.headers)
        return _Streaming(self.chunks, iterator, result)


class _Streaming:
    """What was buffered, then the rest of the app's iterable; closes it (PEP 3333)."""

    def __init__(self, buffered: Sequence[bytes], rest: Iterator[bytes], result: Iterable[bytes]) -> None:
        self.buffered = buffered
        self.rest = rest
        self.result = result

    def __iter__(self) -> Iterator[bytes]:
        yield from self.buffered
        yield from self.rest

    def close(self) -> None:
        _close(self.result)


def _close(result: Iterable[bytes]) -> None:
    close = getattr(result, "close", None)
    if close is not None:
        close()


def _status_code(status: str) -> int | None:
    head = status.split(" ", 1)[0]
    return int(head) if head.isascii() and head.isdigit() and len(head) == 3 else None
