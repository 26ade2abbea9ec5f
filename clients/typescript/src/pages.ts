// Page caching for larder's front: an app writes the pages it renders into the shared store, under exactly the key
// `larder serve --store URL` looks them up under, so the front answers later requests without the app.
// - Which responses: those larder's own storage rules store (spec/HTTP.md §1, http/storageRules.ts): a page opts
//   in with `Surrogate-Control: max-age=N` (frontHeaders), which larder honours and never passes on.
// - Under which key: FORMAT.md §5.3 from the request as the app received it (GET, its scheme, its authority, target
//   as sent, the front's namespace and dropped parameters); with Vary, a variant key behind a marker (§5.4). The
//   authority is the configured `site`, else the request's Host, and forwarded fields count only from
//   `trustedProxies` (page_origin.ts): a request that names no plain authority, or another than the site's, is not
//   stored (reason `host`), so nobody who reaches the app directly writes a page for another site.
// - What: the entry the front would have made (end-to-end headers without Content-Length and the fields meant for
//   larder, the body's coding, Age and Date; freshness and stale window from the rules; tags from Surrogate-Key
//   and Cache-Tag), uncompressed as the front stores its own.
// A failed store write is counted, never thrown: the app's response goes out whatever the store does.

import { randomBytes } from "node:crypto";
import { utf8 } from "./bytes.js";
import { decode, type Entry, encode, encodeResponse } from "./entry.js";
import { InvalidEntry } from "./errors.js";
import { hardExpiry } from "./header.js";
import { formatHttpDate } from "./http/httpDate.js";
import {
  DEFAULT_RULES,
  type HeaderLines,
  type NotStored,
  type Rules,
  type StorePlan,
  storage,
} from "./http/storageRules.js";
import { DEFAULT_DROP, httpKey, type RequestHeaders, urlKey, urlKeys, variantKey } from "./keys.js";
import { type PageOrigin, pageOrigin, TrustedProxies, validAuthority } from "./page_origin.js";
import { CONTENT_ENCODINGS, type ContentEncoding, HttpResponse } from "./response.js";
import type { Store } from "./stores/base.js";
import { StoreError } from "./stores/errors.js";
import { openStore } from "./stores/index.js";

/** `larder serve`'s --max-body: larger bodies are not stored. */
export const DEFAULT_MAX_BODY = 8 << 20;
const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authenticate",
  "proxy-authentication-info",
  "proxy-authorization",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
]);
/** Fields that steer larder and are neither passed on nor stored. */
const CONSUMED = new Set(["surrogate-control", "surrogate-key", "cache-tag"]);

/** A request as the app received it: `authority` is its Host, `target` the request target as sent (not decoded:
 * a path and query, or an absolute URL), `peer` the address it came from (forwarding fields are read only from a
 * trusted proxy). */
export interface PageRequest {
  method: string;
  scheme: string;
  authority: string;
  target: string;
  headers: RequestHeaders;
  peer?: string | undefined;
}

/** Headers that opt a response in to larder's front for `ttlSecs`, tagged `tags`, whatever its Cache-Control tells
 * browsers: Surrogate-Control (honoured by larder, never passed on) and Surrogate-Key. */
export function frontHeaders(
  ttlSecs: number,
  o: { tags?: readonly string[]; staleWhileRevalidate?: number; staleIfError?: number } = {},
): Array<[string, string]> {
  if (!Number.isSafeInteger(ttlSecs) || ttlSecs <= 0) throw new RangeError("ttl must be positive whole seconds");
  const directives = [`max-age=${ttlSecs}`];
  if (o.staleWhileRevalidate !== undefined) directives.push(`stale-while-revalidate=${o.staleWhileRevalidate}`);
  if (o.staleIfError !== undefined) directives.push(`stale-if-error=${o.staleIfError}`);
  const headers: Array<[string, string]> = [["Surrogate-Control", directives.join(", ")]];
  const tags = o.tags ?? [];
  for (const tag of tags)
    if (!tag || /\s/.test(tag)) throw new RangeError(`a tag is non-empty without spaces, not ${JSON.stringify(tag)}`);
  if (tags.length > 0) headers.push(["Surrogate-Key", tags.join(" ")]);
  return headers;
}

export interface PageStats {
  stored: number;
  notStored: Record<string, number>;
  errors: number;
}

export interface PageCacheOptions {
  /** The front's --namespace and --drop-query-params, which its keys depend on. */
  namespace?: string;
  drop?: readonly string[];
  /** The scheme to key with; undefined takes the request's (the front keys with http unless told otherwise). */
  scheme?: "http" | "https";
  /** The site's authority (`shop.example`, `shop.example:8443`): pages are keyed on it, and a request whose Host (or
   * trusted forwarded host) names another is not stored (reason `host`). Without it, the request's Host, when it is
   * a plain `host[:port]`. */
  site?: string;
  /** Addresses and CIDRs of the proxies (the front, a load balancer) whose X-Forwarded-Host, X-Forwarded-Proto and
   * Forwarded are read, as `larder serve --trusted-proxies`; none by default, so those fields from anyone else are
   * ignored. */
  trustedProxies?: readonly string[];
  /** The front's caching settings. */
  rules?: Partial<Rules>;
  maxBody?: number;
}

interface Meta {
  createdAt: number;
  expiresAt: number;
  staleMs: number;
}

export class PageCache {
  readonly store: Store;
  readonly namespace: string;
  readonly drop: readonly string[];
  readonly scheme: "http" | "https" | undefined;
  readonly rules: Rules;
  readonly maxBody: number;
  readonly site: string | undefined;
  readonly trustedProxies: TrustedProxies;
  readonly stats: PageStats = { stored: 0, notStored: {}, errors: 0 };

  /** Throws RangeError for a `site` that is not a plain `host[:port]` or a trusted proxy that is not an address or
   * CIDR. */
  constructor(store: Store | string, o: PageCacheOptions = {}) {
    if (o.site !== undefined && !validAuthority(o.site))
      throw new RangeError(`site ${JSON.stringify(o.site)} is not a plain host[:port]`);
    this.trustedProxies = new TrustedProxies(o.trustedProxies ?? []);
    this.store = typeof store === "string" ? openStore(store) : store;
    this.namespace = o.namespace ?? "";
    this.drop = o.drop ?? DEFAULT_DROP;
    this.scheme = o.scheme;
    this.site = o.site;
    this.rules = { ...DEFAULT_RULES, ...(o.rules ?? {}) };
    this.maxBody = o.maxBody ?? DEFAULT_MAX_BODY;
  }

  /** The scheme, authority and target `request`'s page is keyed on, or undefined when it names no page this cache
   * may write (page_origin.ts). */
  origin(request: PageRequest): PageOrigin | undefined {
    return pageOrigin(request, { scheme: this.scheme, site: this.site, trusted: this.trustedProxies });
  }

  /** The key the front looks `request` up under (a varying page's marker's), or undefined when the request names no
   * page this cache may write (reason `host`). */
  key(request: PageRequest): string | undefined {
    const origin = this.origin(request);
    if (origin === undefined) return undefined;
    return httpKey("GET", origin.scheme, origin.authority, origin.target, {
      namespace: this.namespace,
      drop: this.drop,
    });
  }

  /** The key of `GET url` as clients request it through the front. */
  urlKey(url: string): string {
    const u =
      this.scheme !== undefined && url.includes("://") ? `${this.scheme}://${url.slice(url.indexOf("://") + 3)}` : url;
    return urlKey("GET", u, { namespace: this.namespace, drop: this.drop });
  }

  /** Whether the front's rules store this response. */
  plan(request: PageRequest, status: number, headers: HeaderLines, requestTimeMs?: number): StorePlan | NotStored {
    const now = Date.now();
    const lines = headers.map(([n, v]) => [n.toLowerCase(), v] as const);
    const requestLines = request.headers.map(
      ([n, v]) => [n, typeof v === "string" ? v : Buffer.from(v).toString("latin1")] as const,
    );
    return storage(this.rules, request.method, requestLines, status, lines, requestTimeMs ?? now, now);
  }

  /** Stores the response if the front's rules allow it; the key it went under, or undefined (stats say why). */
  async save(
    request: PageRequest,
    status: number,
    headers: HeaderLines,
    body: Uint8Array,
    requestTimeMs?: number,
  ): Promise<string | undefined> {
    const base = this.key(request);
    if (base === undefined) {
      this.stats.notStored.host = (this.stats.notStored.host ?? 0) + 1;
      return undefined;
    }
    const plan = this.plan(request, status, headers, requestTimeMs);
    if (!plan.stored) {
      this.stats.notStored[plan.reason] = (this.stats.notStored[plan.reason] ?? 0) + 1;
      return undefined;
    }
    if (body.length > this.maxBody) {
      this.stats.notStored["too-large"] = (this.stats.notStored["too-large"] ?? 0) + 1;
      return undefined;
    }
    try {
      const key = await this.write(base, request, status, headers, body, plan);
      this.stats.stored++;
      return key;
    } catch (e) {
      if (!(e instanceof StoreError || e instanceof InvalidEntry || e instanceof RangeError || e instanceof TypeError))
        throw e;
      this.stats.errors++;
      return undefined;
    }
  }

  private async write(
    base: string,
    request: PageRequest,
    status: number,
    headers: HeaderLines,
    body: Uint8Array,
    plan: StorePlan,
  ): Promise<string> {
    const responseTime = Date.now();
    const [response, tags] = prepare(status, headers, body, plan, responseTime);
    const meta: Meta = {
      createdAt: responseTime,
      expiresAt: Math.max(responseTime + plan.freshMs, 1),
      staleMs: plan.keepStaleMs,
    };
    const entry = encodeResponse(response, {
      compressor: "none",
      createdAt: meta.createdAt,
      expiresAt: meta.expiresAt,
      staleMs: meta.staleMs,
      tags,
    });
    if (plan.vary.length === 0) {
      await this.store.set(base, entry);
      return base;
    }
    const existing = await this.marker(base);
    let generation: string | undefined;
    let markerMeta = meta;
    if (existing !== undefined && existing.vary.join("\n") === plan.vary.join("\n")) {
      generation = existing.generation;
      markerMeta = hard(existing.meta) > hard(meta) ? existing.meta : meta;
    } else generation = randomBytes(8).toString("hex");
    const marker = new Map<string, string | string[]>([["vary", plan.vary]]);
    if (generation !== undefined) marker.set("generation", generation);
    const markerBytes = encode(marker, {
      compressor: "none",
      createdAt: markerMeta.createdAt,
      expiresAt: markerMeta.expiresAt,
      staleMs: markerMeta.staleMs,
    });
    const key = variantKey(base, marker, request.headers);
    await this.store.set(key, entry);
    await this.store.set(base, markerBytes);
    return key;
  }

  private async marker(
    base: string,
  ): Promise<{ vary: string[]; generation: string | undefined; meta: Meta } | undefined> {
    const entry = decodeOrUndefined(await this.store.get(base));
    return entry === undefined ? undefined : markerOf(entry);
  }

  /** The stored response the front would find for `request` (fresh or stale), and its key. */
  async find(request: PageRequest): Promise<[string, Entry] | undefined> {
    const base = this.key(request);
    if (base === undefined) return undefined;
    const entry = decodeOrUndefined(await this.store.get(base));
    if (entry === undefined) return undefined;
    if (entry.kind === "response") return [base, entry];
    const marker = markerOf(entry);
    if (marker === undefined) return undefined;
    const key = variantKey(base, { vary: marker.vary, generation: marker.generation }, request.headers);
    const variant = decodeOrUndefined(await this.store.get(key));
    return variant?.kind === "response" ? [key, variant] : undefined;
  }

  /** Removes pages for every front reading the store: by tag, by URL (its response or marker and alternates), or
   * by key prefix. How many entries went, or null for a tag or prefix purge on memcached (recorded, not counted). */
  async purge(what: { tag: string } | { url: string } | { prefix: string }): Promise<number | null> {
    if ("tag" in what) return this.store.purgeTag(what.tag);
    if ("url" in what) return this.store.deleteMany(urlKeys(this.urlKey(what.url)));
    return this.store.purgePrefix(what.prefix);
  }
}

function hard(m: Meta): number {
  return hardExpiry(m.expiresAt, m.staleMs) ?? Number.MAX_SAFE_INTEGER;
}

function decodeOrUndefined(value: Uint8Array | undefined): Entry | undefined {
  if (value === undefined) return undefined;
  try {
    return decode(value);
  } catch (e) {
    if (e instanceof InvalidEntry) return undefined;
    throw e;
  }
}

function markerOf(entry: Entry): { vary: string[]; generation: string | undefined; meta: Meta } | undefined {
  const v = entry.value as Record<string, unknown> | null;
  if (entry.kind !== "value" || v === null || typeof v !== "object" || Array.isArray(v)) return undefined;
  const vary = v.vary;
  const generation = v.generation;
  if (!Array.isArray(vary) || !vary.every((n) => typeof n === "string")) return undefined;
  if (generation !== undefined && generation !== null && typeof generation !== "string") return undefined;
  return {
    vary: vary as string[],
    generation: (generation ?? undefined) as string | undefined,
    meta: { createdAt: Number(entry.createdAt), expiresAt: Number(entry.expiresAt), staleMs: Number(entry.staleMs) },
  };
}

/** The response as the front stores it, and its tags. */
function prepare(
  status: number,
  headers: HeaderLines,
  body: Uint8Array,
  plan: StorePlan,
  responseTimeMs: number,
): [HttpResponse, string[]] {
  let lines = headers.map(([n, v]) => [n.toLowerCase(), v] as [string, string]);
  const named = new Set(
    lines.filter(([n]) => n === "connection").flatMap(([, v]) => v.split(",").map((o) => o.trim().toLowerCase())),
  );
  lines = lines.filter(([n]) => !HOP_BY_HOP.has(n) && !named.has(n));
  const tags = tagsOf(lines);
  lines = lines.filter(([n]) => !CONSUMED.has(n) && n !== "content-length");
  let contentEncoding: ContentEncoding = "identity";
  const codings = lines.filter(([n]) => n === "content-encoding").map(([, v]) => v.trim().toLowerCase());
  if (codings.length === 1 && (CONTENT_ENCODINGS as readonly string[]).includes(codings[0] as string)) {
    contentEncoding = codings[0] as ContentEncoding;
    lines = lines.filter(([n]) => n !== "content-encoding");
  }
  lines = lines.filter(([n]) => n !== "age");
  lines.push(["age", String(Math.floor(plan.initialAgeMs / 1000))]);
  if (!lines.some(([n]) => n === "date")) lines.push(["date", formatHttpDate(responseTimeMs)]);
  return [
    new HttpResponse(
      status,
      lines.map(([n, v]) => [utf8(n), Buffer.from(v, "latin1")] as const),
      body,
      contentEncoding,
    ),
    tags,
  ];
}

/** Tags from Surrogate-Key (space-separated) and Cache-Tag (comma-separated), sorted and unique. */
function tagsOf(lines: ReadonlyArray<readonly [string, string]>): string[] {
  const tags = new Set<string>();
  for (const [n, v] of lines) {
    if (n === "surrogate-key") for (const t of v.split(/[\t\n\f\r ]+/)) if (t) tags.add(t);
    if (n === "cache-tag") for (const t of v.split(",")) if (t.trim()) tags.add(t.trim());
  }
  return [...tags].sort();
}
