// Next.js's cache in a larder store: the `cacheHandler` of next.config (the ISR and data cache: `get`, `set`,
// `revalidateTag`, `resetRequestCache`), so every Next instance that names the same store shares one cache, and a
// `larder purge --tag` (Rust, Python, Ruby, TypeScript) or a `revalidateTag` in any instance reaches all of them.
// - Entries are larder value entries (MessagePack, LZ4 past 1 KiB) that every language reads: `{value, cacheControl}`
//   with Next's value as it is (bytes as bin, Maps as maps); the header's `created_at` is Next's `lastModified`,
//   its expiry the route's revalidate time, its stale window the rest of its expire time, its tags the page's
//   `x-next-cache-tags` (explicit and implicit) or the fetch's tags.
// - Tag revalidation: the store's purge (which hides every entry carrying the tag, the front's pages too) when the
//   tag expires now; and a per-tag record `{stale, expired}` (ms) that `get` checks for the entry's tags and Next's
//   soft tags (a fetch's page path), which is how "stale" revalidation (`revalidateTag(tag, "max")`) and tags an
//   entry does not carry reach every instance.
// - Everything is bounded: one total deadline per call, entry and tag sizes; a store error or a hostile entry is a
//   miss (counted), never a failed render. Only revalidateTag rejects: a revalidation that did not happen must show.

import { DEFAULT_MAX_SIZE } from "./compressors.js";
import { decodePayload, encode } from "./entry.js";
import { InvalidEntry } from "./errors.js";
import { safeKey } from "./keys.js";
import {
  buildId,
  DEFAULT_MAX_ENTRY,
  Deadline,
  emptyStats,
  handlerStore,
  MAX_TAGS,
  type NextCacheStats,
  type NextStoreOptions,
  ONE_YEAR_SECS,
  revalidateTags,
  secs,
  tagProblem,
  tagVerdict,
} from "./next_tags.js";
import { deserialize } from "./serializers.js";
import type { Store } from "./stores/base.js";
import { StoreError } from "./stores/errors.js";
import { isPlainObject, type Value } from "./value.js";

/** Next's `CacheHandlerContext` (the fields this handler reads). */
export interface NextHandlerContext {
  serverDistDir?: string;
  revalidatedTags?: readonly string[];
  [other: string]: unknown;
}

/** What Next passes to `get`: the kind of entry it expects, and for a fetch its tags and soft (implicit) tags. */
export interface NextGetContext {
  kind: string;
  revalidate?: number | false;
  tags?: string[];
  softTags?: string[];
  [other: string]: unknown;
}

/** What Next passes to `set`: a fetch's tags, or a route's cache lifetime. */
export interface NextSetContext {
  fetchCache?: boolean;
  tags?: string[];
  cacheControl?: NextCacheControl;
  [other: string]: unknown;
}

export interface NextCacheControl {
  revalidate: number | false;
  expire?: number;
}

/** Next's IncrementalCacheValue: `kind` and the fields of that kind (Buffers, a Map of segments, headers). */
export type NextValue = { kind: string; [field: string]: unknown };

/** Next's CacheHandlerValue. */
export interface NextCacheEntry {
  lastModified: number;
  value: NextValue | null;
  cacheControl?: NextCacheControl;
}

export interface LarderNextOptions extends NextStoreOptions {
  /** Key entries by the build's BUILD_ID (read from Next's serverDistDir), so deploys do not read each other's
   * pages (default true): keys are `namespace:BUILD_ID:key`. */
  perBuild?: boolean;
  /** The expire time (s) of an entry Next gives none (Next's own default: a year). */
  defaultExpireSecs?: number;
}

/** Values not stored are counted by reason: too-large, unserializable, too-many-tags, not-cacheable. */
export type LarderNextStats = NextCacheStats;

const TAGS_HEADER = "x-next-cache-tags";
const VALUE_KINDS = new Set(["APP_PAGE", "APP_ROUTE", "PAGES", "FETCH", "REDIRECT", "IMAGE"]);
/** Which stored kinds answer which kind Next asks for (a PAGES route may have stored a redirect). */
const ANSWERS: Record<string, readonly string[]> = {
  APP_PAGE: ["APP_PAGE"],
  APP_ROUTE: ["APP_ROUTE"],
  PAGES: ["PAGES", "REDIRECT"],
  FETCH: ["FETCH"],
  IMAGE: ["IMAGE"],
};

/** Next's value as a larder Value: Buffers as bytes, Maps kept, undefined fields left out; undefined for anything
 * else (a function, a class instance), which is then not stored. */
function toStored(x: unknown, depth = 0): Value | undefined {
  if (depth > 64) return undefined;
  if (x === null || typeof x === "string" || typeof x === "boolean") return x;
  if (typeof x === "number") return Number.isFinite(x) ? x : undefined;
  if (x instanceof Uint8Array) return x;
  if (Array.isArray(x)) {
    const out: Value[] = [];
    for (const item of x) {
      const v = toStored(item, depth + 1);
      if (v === undefined) return undefined;
      out.push(v);
    }
    return out;
  }
  if (x instanceof Map) {
    const out = new Map<Value, Value>();
    for (const [k, item] of x) {
      const v = toStored(item, depth + 1);
      if (typeof k !== "string" || v === undefined) return undefined;
      out.set(k, v);
    }
    return out;
  }
  if (isPlainObject(x)) {
    const out: { [key: string]: Value } = {};
    for (const [k, item] of Object.entries(x)) {
      if (item === undefined) continue;
      const v = toStored(item, depth + 1);
      if (v === undefined) return undefined;
      Object.defineProperty(out, k, { value: v, enumerable: true, writable: true, configurable: true });
    }
    return out;
  }
  return undefined;
}

/** Stored bytes back as the Buffers Next reads (a view, not a copy). */
function restoreBytes(x: unknown): unknown {
  if (x instanceof Uint8Array) return Buffer.from(x.buffer, x.byteOffset, x.byteLength);
  if (Array.isArray(x)) return x.map(restoreBytes);
  if (x instanceof Map) return new Map([...x].map(([k, v]) => [k, restoreBytes(v)]));
  if (isPlainObject(x)) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(x))
      Object.defineProperty(out, k, { value: restoreBytes(v), enumerable: true, writable: true, configurable: true });
    return out;
  }
  return x;
}

const isObject = (x: unknown): x is Record<string, unknown> => isPlainObject(x);
const optional = (x: unknown, check: (y: unknown) => boolean) => x === undefined || x === null || check(x);
const isString = (x: unknown) => typeof x === "string";
const isStatus = (x: unknown) => Number.isInteger(x) && (x as number) >= 100 && (x as number) <= 999;
const isBytes = (x: unknown) => Buffer.isBuffer(x);
const isHeaders = (x: unknown) =>
  isObject(x) &&
  Object.values(x).every(
    (v) => typeof v === "string" || typeof v === "number" || (Array.isArray(v) && v.every(isString)),
  );

/** The stored value as Next's, checked field by field (the store is not trusted); undefined if it is not one. */
function nextValue(stored: unknown): NextValue | undefined {
  if (!isObject(stored)) return undefined;
  const v = restoreBytes(stored) as Record<string, unknown>;
  if (typeof v.kind !== "string" || !VALUE_KINDS.has(v.kind)) return undefined;
  const nullToUndefined = (name: string) => {
    if (v[name] === null) v[name] = undefined;
  };
  switch (v.kind) {
    case "APP_PAGE": {
      for (const f of ["rscData", "status", "headers", "postponed", "segmentData"]) nullToUndefined(f);
      if (isObject(v.segmentData)) v.segmentData = new Map(Object.entries(v.segmentData));
      const segmentsOk =
        v.segmentData === undefined || (v.segmentData instanceof Map && [...v.segmentData.values()].every(isBytes));
      const ok =
        isString(v.html) &&
        optional(v.rscData, isBytes) &&
        optional(v.status, isStatus) &&
        optional(v.headers, isHeaders) &&
        optional(v.postponed, isString) &&
        segmentsOk;
      return ok ? (v as NextValue) : undefined;
    }
    case "PAGES":
      for (const f of ["status", "headers"]) nullToUndefined(f);
      return isString(v.html) && isObject(v.pageData) && optional(v.status, isStatus) && optional(v.headers, isHeaders)
        ? (v as NextValue)
        : undefined;
    case "APP_ROUTE":
      return isBytes(v.body) && isStatus(v.status) && isHeaders(v.headers) ? (v as NextValue) : undefined;
    case "FETCH": {
      const d = v.data;
      const ok =
        isObject(d) &&
        isHeaders(d.headers) &&
        isString(d.body) &&
        isString(d.url) &&
        optional(d.status, isStatus) &&
        typeof v.revalidate === "number" &&
        optional(v.tags, (t) => Array.isArray(t) && t.every(isString));
      return ok ? (v as NextValue) : undefined;
    }
    case "REDIRECT":
      return isObject(v.props) ? (v as NextValue) : undefined;
    case "IMAGE":
      return isString(v.etag) && isString(v.upstreamEtag) && isBytes(v.buffer) && isString(v.extension)
        ? (v as NextValue)
        : undefined;
    default:
      return undefined;
  }
}

function cacheControlOf(x: unknown): NextCacheControl | undefined {
  if (!isObject(x)) return undefined;
  const revalidate = x.revalidate;
  if (revalidate !== false && !(typeof revalidate === "number" && Number.isFinite(revalidate) && revalidate >= 0))
    return undefined;
  if (x.expire === undefined || x.expire === null) return { revalidate };
  if (typeof x.expire !== "number" || !Number.isFinite(x.expire) || x.expire < 0) return undefined;
  return { revalidate, expire: x.expire };
}

/** The tags an entry carries: a page's x-next-cache-tags (comma-separated), a fetch's own. */
function entryTags(value: NextValue, ctx: NextSetContext): string[] | undefined {
  const tags = new Set<string>();
  const headers = value.headers;
  if (isObject(headers)) {
    const header = headers[TAGS_HEADER];
    if (typeof header === "string") for (const t of header.split(",")) if (t) tags.add(t);
  }
  if (value.kind === "FETCH") {
    for (const t of ctx.tags ?? []) tags.add(t);
    if (Array.isArray(value.tags)) for (const t of value.tags) if (typeof t === "string") tags.add(t);
  }
  if (tags.size > MAX_TAGS) return undefined;
  for (const t of tags) if (tagProblem(t) !== undefined) return undefined;
  return [...tags];
}

interface Config {
  options: LarderNextOptions;
  stats: LarderNextStats;
  timeoutMs: number;
  defaultExpire: number;
}

function config(options: LarderNextOptions): Config {
  const timeoutMs = options.timeoutMs ?? 1000;
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) throw new RangeError("timeoutMs is a positive number of ms");
  const stats = emptyStats();
  return { options, stats, timeoutMs, defaultExpire: secs(options.defaultExpireSecs ?? ONE_YEAR_SECS) };
}

const fromEnvironment = config({});

/** The handler next.config's `cacheHandler` loads by path (this module's default export): its store is
 * LARDER_NEXT_STORE, its namespace LARDER_NEXT_NAMESPACE (default "next"). Next makes one per request; they share
 * the process's store connections and counters. */
export class LarderCacheHandler {
  /** The counters of every handler made with the environment's settings. */
  static readonly stats: LarderNextStats = fromEnvironment.stats;
  readonly store: Store;
  readonly namespace: string;
  readonly stats: LarderNextStats;
  private readonly config: Config;
  private readonly keyspace: string;
  private readonly revalidatedTags: readonly string[];

  constructor(ctx: NextHandlerContext = {}, bound: Config = fromEnvironment) {
    this.config = bound;
    this.stats = bound.stats;
    this.store = handlerStore(bound.options.store);
    this.namespace = bound.options.namespace ?? process.env.LARDER_NEXT_NAMESPACE ?? "next";
    const id = bound.options.perBuild === false ? undefined : buildId(ctx.serverDistDir);
    this.keyspace = id === undefined ? this.namespace : `${this.namespace}:${id}`;
    this.revalidatedTags = Array.isArray(ctx.revalidatedTags) ? ctx.revalidatedTags : [];
  }

  /** The store key of Next's cache key (FORMAT.md §5.1: hashed when long or unsafe). */
  storeKey(cacheKey: string): string {
    return safeKey(`${this.keyspace}:${cacheKey}`);
  }

  private maxEntryBytes(): number {
    return Math.min(
      this.config.options.maxEntryBytes ?? DEFAULT_MAX_ENTRY,
      this.store.maxValueBytes(),
      DEFAULT_MAX_SIZE,
    );
  }

  private notStored(why: string): void {
    this.stats.notStored[why] = (this.stats.notStored[why] ?? 0) + 1;
  }

  async get(cacheKey: string, ctx: NextGetContext): Promise<NextCacheEntry | null> {
    const deadline = new Deadline(this.config.timeoutMs);
    try {
      const found = await this.read(cacheKey, ctx, deadline);
      if (found === null) this.stats.misses++;
      else this.stats.hits++;
      return found;
    } catch (e) {
      if (!(e instanceof StoreError)) throw e;
      this.stats.storeErrors++;
      this.stats.misses++;
      return null;
    }
  }

  private async read(cacheKey: string, ctx: NextGetContext, deadline: Deadline): Promise<NextCacheEntry | null> {
    const raw = await deadline.run(this.store.get(this.storeKey(cacheKey)));
    if (raw === undefined) return null;
    let createdAt = 0;
    let entryTagList: string[] = [];
    let value: NextValue | undefined;
    let cacheControl: NextCacheControl | undefined;
    try {
      const [header, payload] = decodePayload(raw, this.maxEntryBytes());
      if (header.kind !== "value" || header.serializer !== "msgpack")
        throw new InvalidEntry("bad_value", "not a value");
      const stored = deserialize("msgpack", payload);
      createdAt = Number(header.createdAt);
      entryTagList = header.tags;
      if (!isObject(stored)) throw new InvalidEntry("bad_value", "not a map");
      value = nextValue(stored.value);
      if (stored.cacheControl !== undefined && stored.cacheControl !== null) {
        cacheControl = cacheControlOf(stored.cacheControl);
        if (cacheControl === undefined) value = undefined;
      }
    } catch (e) {
      if (!(e instanceof InvalidEntry)) throw e;
      value = undefined;
    }
    if (value === undefined || !Number.isSafeInteger(createdAt) || !(ANSWERS[ctx.kind] ?? []).includes(value.kind)) {
      this.stats.rejected++;
      return null;
    }
    const tags = new Set(entryTagList);
    if (ctx.kind === "FETCH") for (const t of [...(ctx.tags ?? []), ...(ctx.softTags ?? [])]) tags.add(t);
    if ([...tags].some((t) => this.revalidatedTags.includes(t))) return null;
    const verdict = await tagVerdict(this.store, this.namespace, tags, createdAt, deadline);
    if (verdict === "expired") {
      this.stats.expiredByTag++;
      return null;
    }
    const now = Date.now();
    const stale = verdict === "stale";
    let lastModified = createdAt;
    if (stale) {
      this.stats.staleByTag++;
      // Next judges staleness from lastModified and the revalidate time: report the entry as just past it (or, with
      // no revalidate time, -1: Next's "render again before answering").
      const revalidate =
        value.kind === "FETCH"
          ? typeof ctx.revalidate === "number" && ctx.revalidate > 0
            ? ctx.revalidate
            : (value.revalidate as number)
          : cacheControl?.revalidate;
      lastModified = typeof revalidate === "number" ? Math.min(createdAt, now - revalidate * 1000 - 1) : -1;
    }
    const entry: NextCacheEntry = { lastModified, value };
    if (cacheControl !== undefined) entry.cacheControl = cacheControl;
    return entry;
  }

  async set(cacheKey: string, data: NextValue | null, ctx: NextSetContext = {}): Promise<void> {
    const deadline = new Deadline(this.config.timeoutMs);
    const key = this.storeKey(cacheKey);
    try {
      if (data === null) {
        await deadline.run(this.store.delete(key));
        return;
      }
      const encoded = this.encodeEntry(data, ctx);
      if (typeof encoded === "string") {
        this.notStored(encoded);
        return;
      }
      await deadline.run(this.store.set(key, encoded[0], encoded[1]));
      this.stats.sets++;
    } catch (e) {
      if (!(e instanceof StoreError)) throw e;
      this.stats.storeErrors++;
    }
  }

  /** The entry bytes and store TTL (ms) for Next's value, or why it is not stored. */
  private encodeEntry(data: NextValue, ctx: NextSetContext): [Uint8Array, number | undefined] | string {
    if (!isObject(data) || typeof data.kind !== "string" || !VALUE_KINDS.has(data.kind)) return "unserializable";
    const value = toStored(data);
    if (value === undefined) return "unserializable";
    const cacheControl = ctx.fetchCache ? undefined : cacheControlOf(ctx.cacheControl);
    const revalidate = data.kind === "FETCH" ? data.revalidate : cacheControl?.revalidate;
    if (revalidate === 0) return "not-cacheable";
    const expire = secs(cacheControl?.expire ?? this.config.defaultExpire);
    let ttlMs = 0;
    let staleMs = 0;
    if (typeof revalidate === "number" && Number.isFinite(revalidate) && revalidate > 0) {
      const fresh = secs(revalidate);
      ttlMs = Math.ceil(fresh * 1000);
      staleMs = Math.max(0, Math.ceil((expire - fresh) * 1000));
    } else if (cacheControl?.expire !== undefined) {
      ttlMs = Math.max(1, Math.ceil(expire * 1000)); // never stale by time, gone at its expire time
    }
    const tags = entryTags(data, ctx);
    if (tags === undefined) return "too-many-tags";
    const stored: { [key: string]: Value } = { value };
    if (cacheControl !== undefined) stored.cacheControl = { ...cacheControl };
    const bytes = encode(stored, {
      compressor: this.config.options.compressor ?? "lz4",
      createdAt: Date.now(),
      ttlMs,
      staleMs,
      tags,
    });
    if (bytes.length > this.maxEntryBytes()) return "too-large";
    return [bytes, ttlMs === 0 ? undefined : ttlMs + staleMs];
  }

  /** Revalidates `tags` in every instance sharing the store. With no durations (or expire 0) the tags expire now:
   * the store purges what carries them (the front's pages too) and their records expire what only Next relates to
   * them (a fetch's page path); with `{expire}` they are stale now (served while Next renders again) and expire
   * after `expire` seconds. Rejects with the StoreError when the store does not take it. */
  async revalidateTag(tags: string | string[], durations?: { expire?: number }): Promise<void> {
    await revalidateTags(
      this.store,
      this.namespace,
      typeof tags === "string" ? [tags] : tags,
      durations,
      this.config.timeoutMs,
    );
  }

  /** Next calls this at the start of each request; this handler keeps nothing per request. */
  resetRequestCache(): void {}
}

/** A handler class with its own settings: `export default larderCacheHandler({ store: "memcached://…" })` in a file
 * next.config's `cacheHandler` names. */
export function larderCacheHandler(options: LarderNextOptions = {}): typeof LarderCacheHandler {
  const bound = config(options);
  return class extends LarderCacheHandler {
    static override readonly stats = bound.stats;
    constructor(ctx: NextHandlerContext = {}) {
      super(ctx, bound);
    }
  };
}

export default LarderCacheHandler;
