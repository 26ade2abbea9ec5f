// Next.js's `'use cache'` in a larder store: the handler next.config's `cacheHandlers` names (`{ default:
// import.meta.resolve("larder-cache/next/use-cache") }`), Next 16's interface for cached functions and components
// (get, set, refreshTags, getExpiration, updateTags). Its entries are larder value entries `{value, tags, stale,
// timestamp, expire, revalidate}` (the value as the bytes Next streamed), created at Next's timestamp, fresh for its
// revalidate time and stale until its expire time, tagged with its tags; tags revalidate as the ISR handler's do
// (next_tags.ts), so `larder store purge --tag`, `revalidateTag` and `updateTag` reach both kinds of entry.
// Bounded like the ISR handler: one deadline per store call, the streamed value's size and time; a store error, a
// hostile entry or a failed stream is a miss or a skipped write (counted), never a failed render.

import { DEFAULT_MAX_SIZE } from "./compressors.js";
import { decodePayload, encode } from "./entry.js";
import { InvalidEntry } from "./errors.js";
import { safeKey } from "./keys.js";
import {
  DEFAULT_MAX_ENTRY,
  Deadline,
  emptyStats,
  handlerStore,
  MAX_TAGS,
  type NextCacheStats,
  type NextStoreOptions,
  revalidateTags,
  tagProblem,
  tagVerdict,
} from "./next_tags.js";
import { deserialize } from "./serializers.js";
import type { Store } from "./stores/base.js";
import { StoreError } from "./stores/errors.js";
import { isPlainObject } from "./value.js";

/** Next's CacheEntry for `'use cache'`: durations in seconds, timestamp in ms. */
export interface UseCacheEntry {
  value: ReadableStream<Uint8Array>;
  tags: string[];
  stale: number;
  timestamp: number;
  expire: number;
  revalidate: number;
}

export interface UseCacheOptions extends NextStoreOptions {
  /** How long `set` reads the value's stream before it gives up on it (default 60 s). */
  streamTimeoutMs?: number;
}

/** Values not stored are counted by reason: too-large, stream-failed, bad-entry. */
export type UseCacheStats = NextCacheStats;

export interface UseCacheHandler {
  readonly stats: UseCacheStats;
  get(cacheKey: string, softTags: string[]): Promise<UseCacheEntry | undefined>;
  set(cacheKey: string, pendingEntry: Promise<UseCacheEntry>): Promise<void>;
  refreshTags(): Promise<void>;
  getExpiration(tags: string[]): Promise<number>;
  updateTags(tags: string[], durations?: { expire?: number }): Promise<void>;
}

interface Stored {
  value: Uint8Array;
  tags: string[];
  stale: number;
  timestamp: number;
  expire: number;
  revalidate: number;
}

const isSeconds = (x: unknown): x is number => typeof x === "number" && Number.isFinite(x) && x >= -1;
const isTags = (x: unknown): x is string[] =>
  Array.isArray(x) && x.length <= MAX_TAGS && x.every((t) => tagProblem(t) === undefined);

/** The fields of a stored (or given) entry, checked; undefined if it is not one. */
function checked(x: Record<string, unknown>, value: unknown): Stored | undefined {
  const { tags, stale, timestamp, expire, revalidate } = x;
  if (!(value instanceof Uint8Array) || !isTags(tags) || !isSeconds(stale) || !isSeconds(expire)) return undefined;
  if (!isSeconds(revalidate) || !Number.isSafeInteger(timestamp) || (timestamp as number) < 0) return undefined;
  return { value, tags, stale, timestamp: timestamp as number, expire, revalidate };
}

/** All of `stream`, or undefined when it fails, passes `limit` bytes or takes longer than `ms`. */
async function readAll(
  stream: ReadableStream<Uint8Array>,
  limit: number,
  ms: number,
): Promise<Uint8Array | "too-large" | undefined> {
  const reader = stream.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  let late = false;
  const timer = setTimeout(() => {
    late = true; // the pending read then ends as if the stream had: what was read is not the whole value
    reader.cancel(new Error("too slow")).catch(() => undefined);
  }, ms);
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (!(value instanceof Uint8Array)) return undefined;
      size += value.length;
      if (size > limit) {
        await reader.cancel().catch(() => undefined);
        return "too-large";
      }
      chunks.push(value);
    }
    return late ? undefined : Buffer.concat(chunks);
  } catch {
    return undefined;
  } finally {
    clearTimeout(timer);
    reader.releaseLock();
  }
}

/** A `'use cache'` handler over `options.store`: `export default larderUseCacheHandler({ … })` in a file that
 * `cacheHandlers` names. The store is opened at the first call. */
export function larderUseCacheHandler(options: UseCacheOptions = {}): UseCacheHandler {
  const timeoutMs = options.timeoutMs ?? 1000;
  const streamTimeoutMs = options.streamTimeoutMs ?? 60_000;
  if (!(timeoutMs > 0) || !(streamTimeoutMs > 0)) throw new RangeError("timeouts are positive numbers of ms");
  const stats = emptyStats();
  /** Sets of this process still reading their value: a get of the key waits for them, as Next asks. */
  const pending = new Map<string, Promise<void>>();
  let opened: Store | undefined;
  const store = () => {
    opened ??= handlerStore(options.store);
    return opened;
  };
  const namespace = () => options.namespace ?? process.env.LARDER_NEXT_NAMESPACE ?? "next";
  const keyOf = (cacheKey: string) => safeKey(`${namespace()}:use-cache:${cacheKey}`);
  const maxBytes = () =>
    Math.min(options.maxEntryBytes ?? DEFAULT_MAX_ENTRY, store().maxValueBytes(), DEFAULT_MAX_SIZE);
  const notStored = (why: string) => {
    stats.notStored[why] = (stats.notStored[why] ?? 0) + 1;
  };

  async function read(cacheKey: string, softTags: string[]): Promise<UseCacheEntry | undefined> {
    const deadline = new Deadline(timeoutMs);
    const raw = await deadline.run(store().get(keyOf(cacheKey)));
    if (raw === undefined) return undefined;
    let entry: Stored | undefined;
    try {
      const [header, payload] = decodePayload(raw, maxBytes() + 4096);
      const stored =
        header.kind === "value" && header.serializer === "msgpack" ? deserialize("msgpack", payload) : null;
      entry = isPlainObject(stored) ? checked(stored, stored.value) : undefined;
    } catch (e) {
      if (!(e instanceof InvalidEntry)) throw e;
    }
    if (entry === undefined) {
      stats.rejected++;
      return undefined;
    }
    const verdict = await tagVerdict(store(), namespace(), [...entry.tags, ...softTags], entry.timestamp, deadline);
    if (verdict === "expired") {
      stats.expiredByTag++;
      return undefined;
    }
    if (verdict === "stale") stats.staleByTag++;
    const bytes = entry.value;
    return {
      value: new ReadableStream<Uint8Array>({
        start(controller) {
          controller.enqueue(bytes.slice());
          controller.close();
        },
      }),
      tags: entry.tags,
      stale: entry.stale,
      timestamp: entry.timestamp,
      expire: entry.expire,
      // Next serves an entry past its revalidate time once more and refreshes it: how a stale tag is told.
      revalidate: verdict === "stale" ? -1 : entry.revalidate,
    };
  }

  async function write(cacheKey: string, pendingEntry: Promise<UseCacheEntry>): Promise<void> {
    let given: UseCacheEntry;
    try {
      given = await pendingEntry;
    } catch {
      notStored("stream-failed");
      return;
    }
    if (typeof given !== "object" || given === null) return notStored("bad-entry");
    const value =
      given.value instanceof ReadableStream ? await readAll(given.value, maxBytes(), streamTimeoutMs) : undefined;
    if (value === "too-large") return notStored("too-large");
    if (value === undefined) return notStored("stream-failed");
    const entry = checked(given as unknown as Record<string, unknown>, value);
    if (entry === undefined) return notStored("bad-entry");
    const revalidate = Math.max(0, Math.min(entry.revalidate, entry.expire));
    const bytes = encode(
      { ...entry },
      {
        compressor: options.compressor ?? "lz4",
        createdAt: entry.timestamp,
        ttlMs: Math.max(1, Math.ceil(revalidate * 1000)),
        staleMs: Math.max(0, Math.ceil((entry.expire - revalidate) * 1000)),
        tags: entry.tags,
      },
    );
    if (bytes.length > maxBytes()) return notStored("too-large");
    await new Deadline(timeoutMs).run(store().set(keyOf(cacheKey), bytes)); // gone at the entry's own expiry
    stats.sets++;
  }

  return {
    stats,
    async get(cacheKey, softTags) {
      await pending.get(cacheKey);
      try {
        const found = await read(cacheKey, Array.isArray(softTags) ? softTags : []);
        if (found === undefined) stats.misses++;
        else stats.hits++;
        return found;
      } catch (e) {
        if (!(e instanceof StoreError)) throw e;
        stats.storeErrors++;
        stats.misses++;
        return undefined;
      }
    },
    async set(cacheKey, pendingEntry) {
      const done = write(cacheKey, pendingEntry).catch((e: unknown) => {
        if (!(e instanceof StoreError)) throw e;
        stats.storeErrors++;
      });
      const waited = done.catch(() => undefined);
      pending.set(cacheKey, waited);
      try {
        await done;
      } finally {
        if (pending.get(cacheKey) === waited) pending.delete(cacheKey);
      }
    },
    /** Records are read at every get: nothing to refresh. */
    async refreshTags() {},
    /** Infinity: Next passes the soft tags to get, which checks them against their records. */
    async getExpiration() {
      return Number.POSITIVE_INFINITY;
    },
    async updateTags(tags, durations) {
      await revalidateTags(store(), namespace(), tags, durations, timeoutMs);
    },
  };
}

/** The handler `cacheHandlers` loads by path: its store is LARDER_NEXT_STORE, its namespace LARDER_NEXT_NAMESPACE. */
const fromEnvironment = larderUseCacheHandler();
export default fromEnvironment;
