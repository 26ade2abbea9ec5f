// hostile_pages.json (spec/vectors/README.md; spec/HTTP.md §2; issue 32 finding 7): which site a page written by
// an app is for. Each request goes the way a request the middleware saw goes: its parts as Node hands them over
// (rawHeaders, the target as sent, the connection's scheme, the peer's address) through pageRequestOf (express.ts,
// which larderPages and larderFastify call), then PageCache.save with a response the storage rules store, on a
// memory store: the page is stored under the expected key, or not stored with the reason `host`.

import { pageRequestOf } from "../../src/express.js";
import { PageCache, type PageCacheOptions } from "../../src/pages.js";
import { MemoryStore } from "../../src/stores/memory.js";
import type { Value } from "../../src/value.js";
import { assert, type Case, each, get, list, str } from "./common.js";

/** A response the front's rules store (spec/HTTP.md §1): only the site decides. */
const STORABLE: Array<[string, string]> = [
  ["Content-Type", "text/plain"],
  ["Cache-Control", "max-age=60"],
];

function options(o: Value): PageCacheOptions {
  const out: PageCacheOptions = {};
  const site = get(o, "site");
  if (site !== undefined) out.site = str(site, "site");
  const trusted = get(o, "trusted_proxies");
  if (trusted !== undefined) out.trustedProxies = list(trusted, "trusted_proxies").map((t) => str(t, "proxy"));
  const scheme = get(o, "scheme");
  if (scheme !== undefined) {
    if (scheme !== "http" && scheme !== "https") throw new TypeError(`scheme ${String(scheme)}`);
    out.scheme = scheme;
  }
  return out;
}

async function check(c: Value): Promise<void> {
  const request = get(c, "request");
  const scheme = str(get(request, "scheme"), "scheme");
  if (scheme !== "http" && scheme !== "https") throw new TypeError(`request scheme ${scheme}`);
  // Node hands header values over as the bytes received read as latin-1.
  const rawHeaders = list(get(request, "headers"), "headers").flatMap((line) => {
    const [name, value] = list(line, "header line");
    return [str(name, "name"), Buffer.from(str(value, "value"), "utf8").toString("latin1")];
  });
  const pages = new PageCache(new MemoryStore(), options(get(c, "options")));
  const page = pageRequestOf({
    method: "GET",
    scheme,
    target: str(get(request, "target"), "target"),
    rawHeaders,
    peer: str(get(request, "peer"), "peer"),
  });
  const saved = await pages.save(page, 200, STORABLE, new TextEncoder().encode("page"));
  const expected = get(c, "expected");
  const key = get(expected, "key");
  if (key !== undefined) {
    assert(saved === key, `stored under ${saved ?? `nothing (${JSON.stringify(pages.stats.notStored)})`}, not ${key}`);
    assert((await pages.store.get(key)) !== undefined, `${key} is not in the store`);
  } else {
    const reason = str(get(expected, "not_stored"), "not_stored");
    assert(saved === undefined, `stored under ${saved}, expected not stored (${reason})`);
    assert(
      pages.stats.notStored[reason] === 1 && pages.stats.stored === 0,
      `not stored, but counted as ${JSON.stringify(pages.stats.notStored)}`,
    );
  }
}

export function hostilePageCases(document: Value): Case[] {
  return each(list(get(document, "cases"), "cases"), (c) => check(c));
}
