"""What another writer of the shared store can put under an application's keys, read back through `larder.Cache` and
the Django backend on real memcached and Redis: the pickle gadget attack (an unsigned, or wrongly signed, pickle
whose `__reduce__` creates a file) is a miss and the file never appears; corrupt entries, a response entry at a
value key and bad ext values are misses too (FORMAT.md §7: a reader never fails on an entry, it misses)."""

from __future__ import annotations

import pickle
import uuid
from collections.abc import Iterator
from pathlib import Path

import msgpack
import pytest

import larder
from larder import Cache
from larder.signing import PICKLE_EXT, Signer
from servers import Memcached, Redis
from support import DJANGO_SECRET_KEY, configure_django


class Gadget:
    """Unpickling it opens (creates) the file `path`: the shape of a pickle attack, harmless here."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return open, (str(self.path), "w")


def ext(data: bytes, code: int = PICKLE_EXT) -> bytes:
    return larder.encode(msgpack.ExtType(code, data))


@pytest.fixture(params=["memcached", "redis"])
def url(request: pytest.FixtureRequest) -> str:
    if request.param == "memcached":
        server: Memcached = request.getfixturevalue("memcached_server")
        return f"memcached://{server.address}"
    redis: Redis = request.getfixturevalue("redis_server")
    return redis.url


@pytest.fixture
def django_backend(url: str) -> Iterator[object]:
    configure_django()
    from larder.django import LarderCache

    backend = LarderCache(url, {"KEY_PREFIX": f"untrusted-{uuid.uuid4().hex}"})
    yield backend
    backend.larder.close()


def test_the_pickle_gadget_never_runs(django_backend: object, tmp_path: Path) -> None:
    from larder.django import LarderCache

    assert isinstance(django_backend, LarderCache)
    store = django_backend.larder.store
    target = tmp_path / "pwned"
    gadget = pickle.dumps(Gadget(target))
    key = django_backend.larder.store_key(django_backend.make_and_validate_key("victim"))
    attacks = {
        "unsigned": gadget,
        "signed by another secret": Signer("attacker's guess").sign(PICKLE_EXT, gadget),
        "a signed pickle moved to the Marshal type": Signer(DJANGO_SECRET_KEY).sign(101, gadget),
    }
    for name, data in attacks.items():
        store.set(key, ext(data, 101 if "Marshal" in name else PICKLE_EXT))
        assert django_backend.get("victim", "default") in ("default", msgpack.ExtType(101, data)), name
        assert django_backend.get_many(["victim"]) in ({}, {"victim": msgpack.ExtType(101, data)}), name
        assert not target.exists(), f"{name}: the pickle ran"
    # The same bytes signed with the application's own secret do run: the refusal above is what stopped them.
    store.set(key, ext(Signer(DJANGO_SECRET_KEY).sign(PICKLE_EXT, gadget)))
    django_backend.get("victim")
    assert target.exists()


def test_django_round_trips_pickles_with_its_secret(django_backend: object) -> None:
    from larder.django import LarderCache

    assert isinstance(django_backend, LarderCache)
    django_backend.set("t", (1, {2, 3}))
    assert django_backend.get("t") == (1, {2, 3})
    raw = django_backend.larder.store.get(django_backend.larder.store_key(django_backend.make_and_validate_key("t")))
    data = larder.decode(raw or b"").value.data
    assert Signer(DJANGO_SECRET_KEY).verify(PICKLE_EXT, data) == pickle.dumps((1, {2, 3}), pickle.HIGHEST_PROTOCOL)


def test_django_rotates_secrets_with_fallbacks(url: str) -> None:
    configure_django()
    from django.test import override_settings

    from larder.django import LarderCache

    prefix = f"rotate-{uuid.uuid4().hex}"
    with override_settings(SECRET_KEY="old-secret"):
        old = LarderCache(url, {"KEY_PREFIX": prefix})
        old.set("t", (1, 2))
    with override_settings(SECRET_KEY="new-secret", SECRET_KEY_FALLBACKS=["old-secret"]):
        rotated = LarderCache(url, {"KEY_PREFIX": prefix})
        assert rotated.get("t") == (1, 2), "SECRET_KEY_FALLBACKS are accepted when reading"
    with override_settings(SECRET_KEY="new-secret", SECRET_KEY_FALLBACKS=[]):
        assert LarderCache(url, {"KEY_PREFIX": prefix}).get("t", "miss") == "miss"
    explicit = LarderCache(url, {"KEY_PREFIX": prefix, "OPTIONS": {"signing_secret": "old-secret"}})
    assert explicit.get("t") == (1, 2), "OPTIONS signing_secret instead of SECRET_KEY"


def test_django_without_a_secret_does_not_pickle(url: str) -> None:
    configure_django()
    from django.test import override_settings

    from larder.django import LarderCache

    with override_settings(SECRET_KEY=""):
        backend = LarderCache(url, {"KEY_PREFIX": f"nosecret-{uuid.uuid4().hex}"})
        backend.set("plain", {"a": [1, "x"]})
        assert backend.get("plain") == {"a": [1, "x"]}
        with pytest.raises(TypeError, match="SECRET_KEY"):
            backend.set("t", (1, 2))
        assert backend.get("t", "miss") == "miss"


def bad_entries() -> dict[str, bytes]:
    page = larder.encode_response(larder.HttpResponse(200, [("content-type", "text/html")], b"<h1>page</h1>"))
    good = larder.encode({"fine": True})
    return {
        "random bytes": b"\x93\x01\x02\x03 not an entry",
        "truncated": good[:-3],
        "bad magic": b"\x00" + good[1:],
        "a response entry at a value key": page,
        "garbage in a signed pickle": ext(Signer(DJANGO_SECRET_KEY).sign(PICKLE_EXT, b"\x80\x05garbage")),
        "an empty ext 80": ext(b""),
        "a malformed timestamp (ext -1)": larder.encode(b"")[:23] + b"\xc7\x03\xff\x00\x00\x00",
        "a lying lz4 size": larder.encode("x" * 5000)[:23] + (1 << 30).to_bytes(4, "little") + b"\x00" * 8,
    }


@pytest.mark.parametrize("name", sorted(bad_entries()))
def test_entries_that_cannot_be_used_are_misses(url: str, django_backend: object, name: str) -> None:
    from larder.django import LarderCache

    assert isinstance(django_backend, LarderCache)
    data = bad_entries()[name]
    cache = Cache(url, namespace=f"bad-{name.replace(' ', '-')}", pickle=True, signing_secret=DJANGO_SECRET_KEY)
    cache.store.set(cache.store_key("k"), data)
    assert cache.get("k", "miss") == "miss"
    assert cache.get_many(["k"]) == {}
    assert cache.fetch("k", lambda: "computed") == "computed"
    stats = cache.stats()
    assert stats.corrupt_entries + stats.refused_pickles >= 1
    django_backend.larder.store.set(django_backend.larder.store_key(django_backend.make_and_validate_key("k")), data)
    assert django_backend.get("k", "default") == "default"
    assert django_backend.get_many(["k"]) == {}
    assert django_backend.has_key("k") is False
    cache.close()
