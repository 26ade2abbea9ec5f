"""The views: each counts what it renders (`/_count` reports the counts, as JSON)."""

from __future__ import annotations

import json
import threading
from collections import Counter

from django.http import HttpRequest, HttpResponse
from django.urls import path

from larder.django import cache_in_front

_rendered: Counter[str] = Counter()
_lock = threading.Lock()


def _count(request: HttpRequest) -> int:
    with _lock:
        _rendered[request.path] += 1
        return _rendered[request.path]


def article(request: HttpRequest, n: int) -> HttpResponse:
    """Public for 60 s, tagged: larder would store it itself too."""
    count = _count(request)
    response = HttpResponse(f"article {n}, rendered #{count}, query {request.GET.urlencode()}")
    response["Cache-Control"] = "public, max-age=60"
    response["Surrogate-Key"] = f"articles article-{n}"
    return response


@cache_in_front(60, tags=["opt-in"])
def opt_in(request: HttpRequest) -> HttpResponse:
    """Private for browsers, kept 60 s by the front (the decorator's Surrogate-Control)."""
    response = HttpResponse(f"opted in, rendered #{_count(request)}")
    response["Cache-Control"] = "private, no-cache"
    return response


def lang(request: HttpRequest) -> HttpResponse:
    """Varies on Accept-Language."""
    count = _count(request)
    language = request.headers.get("Accept-Language", "none")
    response = HttpResponse(f"language {language}, rendered #{count}")
    response["Cache-Control"] = "max-age=60"
    response["Vary"] = "Accept-Language"
    response["Surrogate-Key"] = "lang"
    return response


def private(request: HttpRequest) -> HttpResponse:
    response = HttpResponse(f"private, rendered #{_count(request)}")
    response["Cache-Control"] = "private, max-age=60"
    return response


def cookie(request: HttpRequest) -> HttpResponse:
    response = HttpResponse(f"cookie, rendered #{_count(request)}")
    response["Cache-Control"] = "public, max-age=60"
    response.set_cookie("session", "per-user")
    return response


def counts(request: HttpRequest) -> HttpResponse:
    with _lock:
        body = json.dumps(dict(_rendered))
    response = HttpResponse(body, content_type="application/json")
    response["Cache-Control"] = "no-store"
    return response


urlpatterns = [
    path("article/<int:n>", article),
    path("opt-in", opt_in),
    path("lang", lang),
    path("private", private),
    path("cookie", cookie),
    path("_count", counts),
]
