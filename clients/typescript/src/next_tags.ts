// What larder's two Next.js handlers (next.ts for `cacheHandler`, next_use_cache.ts for `'use cache'`) share: the
// process's stores, Next's BUILD_ID, one total deadline per call, and tag revalidation across instances:
// - a per-tag record `{stale, expired}` (ms since the epoch, a larder entry under a hashed key of the namespace)
//   that every read checks for its tags and Next's soft tags;
// - the store's own purge of the tag when it expires now, which hides every entry carrying it (the pages
//   `larder serve` holds with that Surrogate-Key too) and is what `larder store purge --tag` does from elsewhere.

import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Compressor } from "./compressors.js";
import { decodePayload, encode } from "./entry.js";
import { InvalidEntry } from "./errors.js";
import { safeKey } from "./keys.js";
import { deserialize } from "./serializers.js";
import type { Store } from "./stores/base.js";
import { StoreTimeout } from "./stores/errors.js";
import { openStore } from "./stores/index.js";
import { isPlainObject } from "./value.js";

/** What both handlers take. */
export interface NextStoreOptions {
  /** A Store or store URL; default the environment's LARDER_NEXT_STORE. */
  store?: Store | string;
  /** The keys' namespace (default "next", or LARDER_NEXT_NAMESPACE); tag records are shared by the namespace. */
  namespace?: string;
  /** The total time one call may take in the store, every round trip included (default 1000 ms). */
  timeoutMs?: number;
  /** Entries larger than this (encoded) are not stored (default 8 MiB, and never more than the store takes). */
  maxEntryBytes?: number;
  compressor?: Compressor;
}

/** What both handlers count. */
export interface NextCacheStats {
  hits: number;
  misses: number;
  /** Hits a tag record made stale (Next serves them and renders again in the background). */
  staleByTag: number;
  /** Misses because a tag record expired the entry. */
  expiredByTag: number;
  sets: number;
  /** Values not stored, by reason. */
  notStored: Record<string, number>;
  /** Entries that were not what the handler writes (corrupt, another kind, hostile). */
  rejected: number;
  /** Store failures and timeouts, absorbed as misses or skipped writes. */
  storeErrors: number;
}

export const emptyStats = (): NextCacheStats => ({
  hits: 0,
  misses: 0,
  staleByTag: 0,
  expiredByTag: 0,
  sets: 0,
  notStored: {},
  rejected: 0,
  storeErrors: 0,
});

export const ONE_YEAR_SECS = 31_536_000;
/** Next's own limits are 128 tags of 256 characters (NEXT_CACHE_TAG_MAX_ITEMS/LENGTH); an entry's implicit tags
 * come on top of its explicit ones, and soft tags at read time. */
export const MAX_TAGS = 512;
const MAX_TAG_BYTES = 1024;
const MAX_SECS = 10 * ONE_YEAR_SECS;
export const DEFAULT_MAX_ENTRY = 8 << 20;

/** Seconds as Next gives them, clamped to 0..10 years. */
export const secs = (x: number) => Math.min(Math.max(x, 0), MAX_SECS);

/** The stores of this process by URL: Next makes a handler per request, and they must share one connection pool. */
const storesByUrl = new Map<string, Store>();

export function sharedStore(url: string): Store {
  let store = storesByUrl.get(url);
  if (store === undefined) {
    store = openStore(url);
    storesByUrl.set(url, store);
  }
  return store;
}

/** The store a handler is given, else LARDER_NEXT_STORE's; a clear error when there is neither. */
export function handlerStore(store: Store | string | undefined): Store {
  const chosen = store ?? process.env.LARDER_NEXT_STORE;
  if (chosen === undefined || chosen === "")
    throw new Error(
      "larder's Next.js cache handler needs a store: set LARDER_NEXT_STORE (e.g. memcached://host:11211)",
    );
  return typeof chosen === "string" ? sharedStore(chosen) : chosen;
}

const buildIds = new Map<string, string | undefined>();

/** The BUILD_ID next to Next's server output, or undefined when it cannot be read or is not an id. */
export function buildId(serverDistDir: string | undefined): string | undefined {
  if (serverDistDir === undefined) return undefined;
  if (buildIds.has(serverDistDir)) return buildIds.get(serverDistDir);
  let id: string | undefined;
  try {
    const text = readFileSync(join(serverDistDir, "..", "BUILD_ID"), "latin1").trim();
    id = /^[A-Za-z0-9_-]{1,64}$/.test(text) ? text : undefined;
  } catch {
    id = undefined;
  }
  buildIds.set(serverDistDir, id);
  return id;
}

/** One call's total time, every round trip included. */
export class Deadline {
  private readonly until: number;
  constructor(readonly ms: number) {
    this.until = Date.now() + ms;
  }
  /** `work`, or a StoreTimeout once the call's total time is spent. */
  run<T>(work: Promise<T>): Promise<T> {
    const left = this.until - Date.now();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new StoreTimeout("next", "cache handler", this.ms)), Math.max(left, 0));
    });
    work.catch(() => undefined); // a late failure after the deadline is not an unhandled rejection
    return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
  }
}

/** A tag as Next and every store take it: a non-empty string of at most MAX_TAG_BYTES bytes. */
export function tagProblem(tag: unknown): string | undefined {
  if (typeof tag !== "string" || tag.length === 0) return "a tag is a non-empty string";
  if (Buffer.byteLength(tag) > MAX_TAG_BYTES) return `a tag is at most ${MAX_TAG_BYTES} bytes`;
  return undefined;
}

/** The key of a tag's record (the NUL makes safe_key hash it: never equal to a cache key's). */
export function tagKey(namespace: string, tag: string): string {
  return safeKey(`${namespace}\u0000next-tag:${tag}`);
}

interface TagRecord {
  stale?: number;
  expired?: number;
}

function readTagRecord(raw: Uint8Array | undefined): TagRecord {
  if (raw === undefined) return {};
  try {
    const [header, payload] = decodePayload(raw, 4096);
    if (header.kind !== "value" || header.serializer !== "msgpack") return {};
    const v = deserialize("msgpack", payload);
    if (!isPlainObject(v)) return {};
    const ms = (x: unknown) => (typeof x === "number" && Number.isSafeInteger(x) && x >= 0 ? x : undefined);
    const record: TagRecord = {};
    const stale = ms(v.stale);
    const expired = ms(v.expired);
    if (stale !== undefined) record.stale = stale;
    if (expired !== undefined) record.expired = expired;
    return record;
  } catch (e) {
    if (e instanceof InvalidEntry) return {};
    throw e;
  }
}

/** What the tags' records say of an entry created at `createdAt`: expired (a record expired it, and that time has
 * come), stale (a record marked the tag stale after it was made) or fresh. Too many tags to check is expired. */
export async function tagVerdict(
  store: Store,
  namespace: string,
  tags: Iterable<string>,
  createdAt: number,
  deadline: Deadline,
): Promise<"expired" | "stale" | "fresh"> {
  const usable = [...new Set(tags)].filter((t) => tagProblem(t) === undefined);
  if (usable.length > MAX_TAGS) return "expired";
  if (usable.length === 0) return "fresh";
  const records = await deadline.run(store.getMany(usable.map((t) => tagKey(namespace, t))));
  const now = Date.now();
  let stale = false;
  for (const record of records.map(readTagRecord)) {
    if (record.expired !== undefined && record.expired > createdAt && record.expired <= now) return "expired";
    if (record.stale !== undefined && record.stale > createdAt) stale = true;
  }
  return stale ? "stale" : "fresh";
}

/** Revalidates `tags` in every instance sharing the store. With no durations (or expire 0) the tags expire now:
 * the store purges what carries them and their records expire what only Next relates to them (soft tags); with
 * `{expire}` they are stale now (served while Next renders again) and expire after `expire` seconds. Rejects with
 * the StoreError when the store does not take it, and with a RangeError for a bad tag, before anything is sent. */
export async function revalidateTags(
  store: Store,
  namespace: string,
  tags: readonly string[],
  durations: { expire?: number } | undefined,
  timeoutMs: number,
): Promise<void> {
  const list = [...new Set(tags)];
  if (list.length > MAX_TAGS) throw new RangeError(`at most ${MAX_TAGS} tags at once`);
  for (const tag of list) {
    const problem = tagProblem(tag);
    if (problem !== undefined) throw new RangeError(`${problem}, not ${JSON.stringify(tag)}`);
  }
  if (list.length === 0) return;
  const expire = durations?.expire;
  if (expire !== undefined && (typeof expire !== "number" || !Number.isFinite(expire) || expire < 0))
    throw new RangeError("expire is a non-negative number of seconds");
  const deadline = new Deadline(timeoutMs);
  const now = Date.now();
  const keys = list.map((t) => tagKey(namespace, t));
  const previous = await deadline.run(store.getMany(keys));
  const records: Array<readonly [string, Uint8Array]> = keys.map((key, i) => {
    const record = readTagRecord(previous[i]);
    if (durations === undefined) record.expired = now;
    else {
      record.stale = now;
      if (expire !== undefined) record.expired = now + Math.ceil(secs(expire) * 1000);
    }
    return [key, encode({ ...record }, { compressor: "none" })] as const;
  });
  await deadline.run(store.setMany(records));
  if (durations === undefined || expire === 0) await deadline.run(Promise.all(list.map((tag) => store.purgeTag(tag))));
}
