"""The values the Python benchmarks cache: what a Django view caches, not only strings (issue 34). A query result as
`.values()` gives it (a dict holding a list of small dicts of ints, strs, floats, None and bools) at about 1 KiB and
64 KiB, a nested document, a rendered page (a str), and random text. Made from a fixed seed: every run and every
backend caches the same values."""

from __future__ import annotations

import random
import string
from typing import Any

#: name -> the value's size class, for the tables: text and query results at 1 KiB and 64 KiB (their MessagePack).
TEXT_SIZES = {"text 1 KiB": 1 << 10, "text 64 KiB": 64 << 10}
QUERY_ROWS = {"query 1 KiB": 13, "query 64 KiB": 830}


def text(rng: random.Random, n: int) -> str:
    return "".join(rng.choices(string.ascii_letters + string.digits + " ", k=n))


def query_result(rng: random.Random, rows: int) -> dict[str, Any]:
    """A page of a product list: `Product.objects.values(...)` rows and their count."""
    words = ["red", "blue", "large", "small", "steel", "cotton", "classic", "pro", "mini", "set", "pack", "kit"]
    return {
        "count": rows,
        "page": 1,
        "rows": [
            {
                "id": 10_000 + i,
                "name": rng.choice(words),
                "price": round(rng.uniform(1, 500), 2),
                "stock": rng.randrange(0, 1000),
                "rating": round(rng.uniform(1, 5), 1) if i % 4 else None,
                "is_active": rng.random() < 0.9,
                "category_id": rng.randrange(1, 40),
            }
            for i in range(rows)
        ],
    }


def document(rng: random.Random) -> dict[str, Any]:
    """An article with its author, tags, metadata and threaded comments (about 8 KiB): nesting four levels deep."""

    def comment(depth: int) -> dict[str, Any]:
        return {
            "id": rng.randrange(10**6),
            "author": {"id": rng.randrange(10**4), "name": text(rng, 12), "avatar": None},
            "body": text(rng, rng.randrange(40, 200)),
            "score": rng.randrange(-5, 50),
            "replies": [comment(depth + 1) for _ in range(rng.randrange(0, 3))] if depth < 2 else [],
        }

    return {
        "id": 4321,
        "slug": "how-we-cache",
        "title": text(rng, 60),
        "published": True,
        "author": {"id": 7, "name": "A. Writer", "bio": text(rng, 200), "links": {"site": "https://example.org"}},
        "tags": ["cache", "django", "performance", "python"],
        "meta": {"reading_minutes": 6, "words": 1450, "score": 4.6, "related": [101, 202, 303]},
        "sections": [{"heading": text(rng, 30), "paragraphs": [text(rng, 300) for _ in range(2)]} for _ in range(3)],
        "comments": [comment(0) for _ in range(8)],
    }


def page(rng: random.Random) -> str:
    """A rendered HTML page (about 24 KiB): what a view's template gives."""
    items = "".join(
        f'<li class="item"><a href="/p/{i}/">{text(rng, 40)}</a><span class="price">{rng.uniform(1, 500):.2f}</span>'
        f"<p>{text(rng, 120)}</p></li>\n"
        for i in range(120)
    )
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Products</title>'
        '<link rel="stylesheet" href="/static/site.css"></head><body><header><nav><a href="/">Home</a></nav></header>'
        f'<main><h1>Products</h1><ul class="items">\n{items}</ul></main><footer>© larder</footer></body></html>'
    )


def shapes() -> dict[str, Any]:
    """Every benchmarked value by name, in the order the tables show them."""
    rng = random.Random(7)
    values: dict[str, Any] = {name: text(rng, n) for name, n in TEXT_SIZES.items()}
    values.update({name: query_result(rng, rows) for name, rows in QUERY_ROWS.items()})
    values["document"] = document(rng)
    values["page"] = page(rng)
    return values
