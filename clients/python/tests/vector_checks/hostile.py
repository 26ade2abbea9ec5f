"""The four hostile_*.json files (spec/vectors/README.md, "hostile_*.json: the attacks every language must hold
against"; issue 32): keys on the wire, which site a page is for, a hostile directory under the file store, and every
command against a hostile server. Each runs larder's real code paths: stores opened from their URLs
(`open_store`), the page cache's WSGI and ASGI middlewares; the raw probes of what reached a server or a directory are
raw.py's, which never see a key as a string.

hostile_keys.json and hostile_replies.json need servers, named by the environment when a case runs (not when it is
listed): `LARDER_CONFORMANCE_MEMCACHED`, `LARDER_CONFORMANCE_REDIS` (`host:port` of servers the runner may flush) and
`LARDER_HOSTILE` (the larder-hostile binary). A case that lacks one fails, saying which.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from larder.stores import InvalidKey, Store, StoreError, UrlError, open_store

from . import Case, header_pairs, raw, section

REPO_ROOT = Path(__file__).resolve().parents[4]
HOSTILE_TREE = REPO_ROOT / "spec" / "vectors" / "hostile_tree.py"
#: The longest any file store operation of hostile_files.json may take (a FIFO must not block a read).
FILE_OPERATION_SECONDS = 5.0


def _env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise AssertionError(f"${name} is not set: the case needs it (spec/vectors/README.md, hostile_*.json)")
    return value


def _entry(document: dict[str, Any]) -> bytes:
    return bytes.fromhex(str(document["entry_hex"]))


# ------------------------------------------------------------------------------------------------ hostile_keys.json


def python_key(case: dict[str, Any]) -> str:
    """The key as a Python `str`: from `key_utf16`'s code units (surrogatepass, so a lone surrogate stays one), or,
    without them, from `key_hex` with surrogateescape (bytes that are not UTF-8 become U+DC80 to U+DCFF)."""
    units = case.get("key_utf16")
    if units is not None:
        data = b"".join(int(u).to_bytes(2, "little") for u in units)
        return data.decode("utf-16-le", "surrogatepass")
    return bytes.fromhex(str(case["key_hex"])).decode("utf-8", "surrogateescape")


def keys_cases(document: dict[str, Any]) -> list[Case]:
    entry = _entry(document)
    sentinel = document["sentinel"]
    sentinel_key, sentinel_value = str(sentinel["key"]), str(sentinel["value"]).encode("utf-8")
    cases = section(document, "cases")
    for case in cases:
        if case["outcome"] not in ("stored", "refused"):
            raise ValueError(f"{case['name']}: unknown outcome {case['outcome']!r}")
    return [Case(str(case["name"]), _bind_key(case, entry, sentinel_key, sentinel_value)) for case in cases]


def _bind_key(case: dict[str, Any], entry: bytes, sentinel_key: str, sentinel_value: bytes) -> Callable[[], None]:
    return lambda: check_key(case, entry, sentinel_key, sentinel_value)


def check_key(case: dict[str, Any], entry: bytes, sentinel_key: str, sentinel_value: bytes) -> None:
    memcached = _env("LARDER_CONFORMANCE_MEMCACHED")
    redis = _env("LARDER_CONFORMANCE_REDIS")
    key = python_key(case)
    with tempfile.TemporaryDirectory(prefix="larder-hostile-keys-") as tmp:
        root = Path(tmp) / "files"
        stores = {
            "memory": "memory://",
            "file": f"file://{root}",
            "sqlite": f"sqlite://{Path(tmp) / 'keys.db'}",
            "memcached": f"memcached://{memcached}?timeout=5s",
            "redis": f"redis://{redis}?timeout=5s",
        }
        for name, url in stores.items():
            store = open_store(url)
            try:
                if name == "memcached":
                    raw.memcached_flush(memcached)
                elif name == "redis":
                    raw.redis_flush(redis)
                if name in ("memcached", "redis"):
                    store.set(sentinel_key, sentinel_value)
                if case["outcome"] == "refused":
                    _refused(name, store, key)
                else:
                    _stored(name, store, key, bytes.fromhex(str(case["wire_hex"])), entry, root)
                if name == "memcached":
                    got = raw.memcached_get(memcached, sentinel_key.encode("ascii"))
                    assert got == sentinel_value, f"memcached: the sentinel reads {got!r}"
                elif name == "redis":
                    got = raw.redis_get(redis, sentinel_key.encode("ascii"))
                    assert got == sentinel_value, f"redis: the sentinel reads {got!r}"
            except AssertionError as e:
                raise AssertionError(f"{name}: {e}") from None
            except Exception as e:
                raise AssertionError(f"{name}: {type(e).__name__}: {e}") from None
            finally:
                store.close()


def _refused(name: str, store: Store, key: str) -> None:
    operations: dict[str, Callable[[], object]] = {
        "get": lambda: store.get(key),
        "get_many": lambda: store.get_many([key]),
        "set": lambda: store.set(key, b"v"),
        "add": lambda: store.add(key, b"v"),
        "delete": lambda: store.delete(key),
    }
    if key != "":
        operations["purge_prefix"] = lambda: store.purge_prefix(key)
    for operation, call in operations.items():
        try:
            result = call()
        except InvalidKey as e:
            refused: InvalidKey | None = e
        else:
            refused = None
        if refused is None:
            raise AssertionError(f"{operation} was not refused: it answered {result!r}")
        assert refused.kind == "invalid_key", f"{operation}: kind {refused.kind}"
    if name == "redis":
        size = raw.redis_dbsize(_env("LARDER_CONFORMANCE_REDIS"))
        assert size == 1, f"DBSIZE is {size}, not 1 (the sentinel alone)"


def _stored(name: str, store: Store, key: str, wire: bytes, entry: bytes, root: Path) -> None:
    store.set(key, entry)
    got = store.get(key)
    assert got == entry, f"get answered {got!r}"
    if name == "memcached":
        found = raw.memcached_get(_env("LARDER_CONFORMANCE_MEMCACHED"), wire)
        assert found == entry, f"mg of the wire bytes {wire.hex()} answered {found!r}"
    elif name == "redis":
        redis = _env("LARDER_CONFORMANCE_REDIS")
        found = raw.redis_get(redis, wire)
        assert found == entry, f"GET of the wire bytes {wire.hex()} answered {found!r}"
        size = raw.redis_dbsize(redis)
        assert size == 2, f"DBSIZE is {size}, not 2 (the sentinel and the key)"
    elif name == "file":
        file = raw.file_entry(root, wire)
        assert file is not None, f"no file at {raw.file_path(root, wire)} (the SHA-256 of the wire bytes)"
        assert file[0] == wire, f"the file's header holds the key {file[0].hex()}, not {wire.hex()}"
    deleted = store.delete(key)
    assert deleted is True, f"delete answered {deleted!r}"
    if name == "memcached":
        assert raw.memcached_get(_env("LARDER_CONFORMANCE_MEMCACHED"), wire) is None, "still there after delete"
    elif name == "redis":
        assert raw.redis_get(_env("LARDER_CONFORMANCE_REDIS"), wire) is None, "still there after delete"
    elif name == "file":
        assert not raw.file_path(root, wire).exists(), "the file is still there after delete"
    assert store.get(key) is None, "a hit after delete"


# ----------------------------------------------------------------------------------------------- hostile_pages.json

PAGE_HEADERS = [("Content-Type", "text/plain"), ("Cache-Control", "public, max-age=60")]


def pages_cases(document: dict[str, Any]) -> list[Case]:
    cases = section(document, "cases")
    for case in cases:
        if set(case["expected"]) not in ({"key"}, {"not_stored"}):
            raise ValueError(f"{case['name']}: expected is a key or not_stored, not {case['expected']!r}")
        header_pairs(case["request"]["headers"])
    return [
        Case(f"{case['name']}/{kind}", _bind_page(case, kind)) for case in cases for kind in ("wsgi", "asgi", "django")
    ]


def _bind_page(case: dict[str, Any], kind: str) -> Callable[[], None]:
    return lambda: check_page(case, kind)


def _page_cache(options: dict[str, Any]) -> Any:
    from larder.pages import PageCache

    return PageCache(
        "memory://",
        site=options.get("site"),
        trusted_proxies=list(options.get("trusted_proxies", [])),
        scheme=options.get("scheme"),
    )


def check_page(case: dict[str, Any], kind: str) -> None:
    pages = _page_cache(case.get("options", {}))
    request = case["request"]
    headers = header_pairs(request["headers"])
    if kind == "wsgi":
        _wsgi_get(pages, request, headers)
    elif kind == "django":
        _django_get(pages, request, headers)
    else:
        _asgi_get(pages, request, headers)
    expected = case["expected"]
    entries = pages.store.stats().entries
    if "key" in expected:
        assert pages.stats.stored == 1, f"not stored: {dict(pages.stats.not_stored)}"
        assert pages.store.get(expected["key"]) is not None, f"nothing under {expected['key']!r}"
        assert entries == 1, f"{entries} entries, not 1"
    else:
        assert entries == 0, f"stored {entries} entries; expected not_stored {expected['not_stored']}"
        assert dict(pages.stats.not_stored) == {expected["not_stored"]: 1}, dict(pages.stats.not_stored)


def _split_target(target: str) -> tuple[str, str]:
    """(path, query) of a request target as a server splits it (an absolute-form target keeps its authority)."""
    path, _, query = target.partition("?")
    return path, query


def _origin_path(path: str) -> str:
    if path.startswith("/"):
        return path
    rest = path.partition("://")[2]
    slash = rest.find("/")
    return rest[slash:] if slash >= 0 else "/"


def _wsgi_environ(request: dict[str, Any], headers: list[tuple[str, str]]) -> dict[str, Any]:
    """The request's environ as a WSGI server makes it (PEP 3333: fields that repeat are joined with commas;
    RAW_URI the target as sent, as gunicorn gives it)."""
    target = str(request["target"])
    path, query = _split_target(target)
    environ: dict[str, Any] = {
        "REQUEST_METHOD": "GET",
        "SCRIPT_NAME": "",
        "PATH_INFO": urllib.parse.unquote(_origin_path(path), "latin-1"),
        "QUERY_STRING": query,
        "RAW_URI": target,
        "SERVER_NAME": "app.internal",
        "SERVER_PORT": "8000",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": str(request["peer"]),
        "wsgi.url_scheme": str(request["scheme"]),
    }
    for name, value in headers:
        field = "HTTP_" + name.upper().replace("-", "_")
        environ[field] = f"{environ[field]},{value}" if field in environ else value
    return environ


def _wsgi_get(pages: Any, request: dict[str, Any], headers: list[tuple[str, str]]) -> None:
    """The request through larder.wsgi.PageCacheMiddleware."""
    from larder.wsgi import PageCacheMiddleware

    environ = _wsgi_environ(request, headers)

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        start_response("200 OK", PAGE_HEADERS)
        return [b"a page"]

    result = PageCacheMiddleware(app, pages)(environ, lambda status, headers, exc_info=None: lambda data: None)
    b"".join(result)


def _django_get(pages: Any, request: dict[str, Any], headers: list[tuple[str, str]]) -> None:
    """The request through larder.django.PageCacheMiddleware, as Django's WSGI handler makes it from the environ,
    with the settings that would make Django itself believe X-Forwarded-Host and X-Forwarded-Proto from anyone."""
    import io

    from django.conf import settings

    if not settings.configured:
        settings.configure(ALLOWED_HOSTS=["*"], SECRET_KEY="conformance")
        import django

        django.setup()
    from django.core.handlers.wsgi import WSGIRequest
    from django.http import HttpResponse
    from django.test import override_settings

    from larder.django import PageCacheMiddleware

    def view(request: Any) -> HttpResponse:
        response = HttpResponse(b"a page")
        for name, value in PAGE_HEADERS:
            response[name] = value
        return response

    environ = _wsgi_environ(request, headers)
    environ.update({"wsgi.input": io.BytesIO(b""), "wsgi.errors": io.StringIO()})
    believing = {
        "USE_X_FORWARDED_HOST": True,
        "SECURE_PROXY_SSL_HEADER": ("HTTP_X_FORWARDED_PROTO", "https"),
        "LARDER_PAGES": {"STORE": "memory://"},
    }
    with override_settings(**believing):
        middleware = PageCacheMiddleware(view)
        middleware.pages = pages
        middleware(WSGIRequest(environ))


def _asgi_get(pages: Any, request: dict[str, Any], headers: list[tuple[str, str]]) -> None:
    """The request through larder.asgi.PageCacheMiddleware, its scope as uvicorn makes it (every header line in
    order, names lowercase; raw_path the target before its query, absolute-form included)."""
    from larder.asgi import PageCacheMiddleware

    target = str(request["target"])
    path, query = _split_target(target)
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": str(request["scheme"]),
        "path": urllib.parse.unquote(_origin_path(path)),
        "raw_path": path.encode("latin-1"),
        "query_string": query.encode("latin-1"),
        "root_path": "",
        "headers": [(n.lower().encode("latin-1"), v.encode("latin-1")) for n, v in headers],
        "client": (str(request["peer"]), 50000),
        "server": ("app.internal", 8000),
    }

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        start = [(n.lower().encode(), v.encode()) for n, v in PAGE_HEADERS]
        await send({"type": "http.response.start", "status": 200, "headers": start})
        await send({"type": "http.response.body", "body": b"a page"})

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        pass

    asyncio.run(PageCacheMiddleware(app, pages)(scope, receive, send))


# ----------------------------------------------------------------------------------------------- hostile_files.json

_FILE_OPERATIONS = {"open", "get", "get_many", "set", "add", "delete", "delete_if", "purge_prefix", "purge_tag"}


def files_cases(document: dict[str, Any]) -> list[Case]:
    entry = _entry(document)
    cases = section(document, "cases")
    for case in cases:
        for operation in case["operations"]:
            if operation["op"] not in _FILE_OPERATIONS:
                raise ValueError(f"{case['name']}: unknown operation {operation['op']!r}")
    return [Case(str(case["name"]), _bind_files(case, entry)) for case in cases]


def _bind_files(case: dict[str, Any], entry: bytes) -> Callable[[], None]:
    return lambda: check_files(case, entry)


def _tree(action: str, case: str, root: Path, outside: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(HOSTILE_TREE), action, case, str(root), str(outside)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _within(seconds: float, call: Callable[[], Any]) -> Any:
    """`call()`'s result, or its exception; an AssertionError when it has not returned after `seconds` (it is left
    running in a daemon thread: a read blocked on a FIFO cannot be interrupted)."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(("value", call()))
        except BaseException as e:  # handed to the caller
            outcome.append(("error", e))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if not outcome:
        raise AssertionError(f"it had not returned after {seconds:.0f} s")
    kind, value = outcome[0]
    if kind == "error":
        raise value
    return value


def check_files(case: dict[str, Any], entry: bytes) -> None:
    name = str(case["name"])
    base = Path(tempfile.mkdtemp(prefix="larder-hostile-files-"))
    try:
        root, outside = base / "root", base / "outside"
        root.mkdir()
        outside.mkdir()
        planted = _tree("plant", name, root, outside)
        assert planted.returncode == 0, f"hostile_tree.py plant failed: {planted.stderr.strip()}"
        query = str(case.get("url_query", ""))
        url = f"file://{root}" + (f"?{query}" if query else "")
        operations = list(case["operations"])
        if not operations or operations[0]["op"] != "open":
            operations.insert(0, {"op": "open", "expect": "ok"})
        store: Store | None = None
        try:
            for step, operation in enumerate(operations):
                label = f"operation {step} ({operation['op']} {operation.get('key', operation.get('prefix', ''))})"
                if operation["op"] == "open":
                    store = _open(url, str(operation["expect"]), label)
                    if store is None:
                        break
                    continue
                assert store is not None, f"{label}: the store was not opened"
                _file_operation(store, operation, entry, label)
        finally:
            if store is not None:
                store.close()
        checked = _tree("check", name, root, outside)
        assert checked.returncode == 0, f"hostile_tree.py check: {checked.stderr.strip() or checked.stdout.strip()}"
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _open(url: str, expect: str, label: str) -> Store | None:
    try:
        store = open_store(url)
    except UrlError as e:
        if expect != "url_error":
            raise AssertionError(f"{label}: the URL was refused ({e}); the case expects {expect}") from None
        return None
    assert expect == "ok", f"{label}: the URL was accepted; the case expects {expect}"
    return store


def _file_operation(store: Store, operation: dict[str, Any], entry: bytes, label: str) -> None:
    op, expect = str(operation["op"]), str(operation["expect"])
    key = str(operation.get("key", ""))
    calls: dict[str, Callable[[], Any]] = {
        "get": lambda: store.get(key),
        "get_many": lambda: store.get_many([key]),
        "set": lambda: store.set(key, entry),
        "add": lambda: store.add(key, entry),
        "delete": lambda: store.delete(key),
        "delete_if": lambda: store.delete_if(key, entry),
        "purge_prefix": lambda: store.purge_prefix(str(operation.get("prefix", ""))),
        "purge_tag": lambda: store.purge_tag(str(operation.get("tag", ""))),
    }
    try:
        result = _within(FILE_OPERATION_SECONDS, calls[op])
    except InvalidKey as e:
        raise AssertionError(f"{label}: invalid_key ({e}); the case expects {expect}") from None
    except StoreError as e:
        if expect != "error":
            raise AssertionError(f"{label}: {type(e).__name__}: {e}; the case expects {expect}") from None
        return
    if op == "get_many":
        assert isinstance(result, list), f"{label}: answered {result!r}"
        assert len(result) == 1, f"{label}: answered {result!r}"
        result = result[0]
    wanted: dict[str, Callable[[Any], bool]] = {
        "miss": lambda r: r is None,
        "hit": lambda r: r == entry,
        "ok": lambda r: op != "add" or r is True,
        "deleted": lambda r: r is True,
        "noop": lambda r: r is False or r is None or r == 0,
    }
    assert expect in wanted, f"{label}: unknown expectation {expect!r}"
    assert wanted[expect](result), f"{label}: answered {result!r}; the case expects {expect}"


# --------------------------------------------------------------------------------------------- hostile_replies.json

_REPLY_OPERATIONS: dict[str, Callable[[Store, bytes], object]] = {
    "get": lambda s, e: s.get("k1"),
    "get_many": lambda s, e: s.get_many(["k1", "k2", "k3"]),
    "set": lambda s, e: s.set("k1", e),
    "add": lambda s, e: s.add("k1", e),
    "incr": lambda s, e: s.incr("k1", 1),
    "delete": lambda s, e: s.delete("k1"),
    "delete_if": lambda s, e: s.delete_if("k1", e),
    "purge_tag": lambda s, e: s.purge_tag("t"),
    "purge_prefix": lambda s, e: s.purge_prefix("k"),
}


def replies_cases(document: dict[str, Any]) -> list[Case]:
    entry = _entry(document)
    cases = section(document, "cases")
    for case in cases:
        if case["protocol"] not in ("memcached", "redis"):
            raise ValueError(f"{case['name']}: unknown protocol {case['protocol']!r}")
        for operation in case["operations"]:
            if operation not in _REPLY_OPERATIONS:
                raise ValueError(f"{case['name']}: unknown operation {operation!r}")
    return [Case(str(case["name"]), _bind_replies(case, entry)) for case in cases]


def _bind_replies(case: dict[str, Any], entry: bytes) -> Callable[[], None]:
    return lambda: check_replies(case, entry)


class HostileServer:
    """One larder-hostile server (`binary`); it serves until its standard input closes (`stop`). tests/hostile.py's
    `Hostile` is this with the suite's binary."""

    def __init__(self, binary: str, protocol: str, behaviour: str, args: list[str]) -> None:
        self.process = subprocess.Popen(
            [binary, protocol, behaviour, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert self.process.stdout is not None
        self.address = self.process.stdout.readline().decode().strip()
        if not self.address:
            self.stop()
            raise RuntimeError(f"{binary} {protocol} {behaviour} did not start")

    def stop(self) -> None:
        if self.process.stdin is not None and not self.process.stdin.closed:
            self.process.stdin.close()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


def check_replies(case: dict[str, Any], entry: bytes) -> None:
    binary = _env("LARDER_HOSTILE")
    if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
        raise AssertionError(f"$LARDER_HOSTILE ({binary}) is not an executable")
    within = int(case["within_ms"]) / 1000
    failures = []
    for operation in case["operations"]:
        server = HostileServer(
            binary, str(case["protocol"]), str(case["behaviour"]), [str(a) for a in case["server_args"]]
        )
        try:
            store = open_store(f"{case['protocol']}://{server.address}?{case['url_query']}")
            started = time.monotonic()
            try:
                result = _REPLY_OPERATIONS[operation](store, entry)
                outcome = f"succeeded ({result!r:.60})"
            except InvalidKey as e:
                outcome = f"invalid_key ({e})"
            except StoreError as e:
                outcome = ""
                elapsed = time.monotonic() - started
                if elapsed > within:
                    outcome = f"failed only after {elapsed * 1000:.0f} ms ({type(e).__name__}: {e})"
            except Exception as e:
                outcome = f"raised {type(e).__name__}: {e}"
            finally:
                store.close()
        finally:
            server.stop()
        if outcome:
            failures.append(f"{operation} {outcome}")
    assert not failures, "; ".join(failures)
