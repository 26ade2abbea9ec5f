// `Cache`: what a program calls. Values in the shared entry format (spec/FORMAT.md) over any store, with `fetch`:
// - a miss is computed once per process: concurrent callers of one key share the leader's promise;
// - across processes the leader follows the one lock policy (spec/STORES.md §3): it takes the store lock (`add` of
//   a random token under internal_key("lock", key)), reads the key once more, loads, stores, releases with
//   deleteIf; a cold miss that finds the lock held polls (5 ms doubling to 50 ms) for the holder's value, takes the
//   lock itself when it goes without one, and loads without it after lockTtl; within an entry's stale window the
//   stale value is served at once while one caller recomputes.
// - Reads absorb store failures (a miss, counted): a cache that is down must not take the program down; fetch also
//   absorbs failed writes. Plain writes (set, add, delete, incr, purges) reject with the store's StoreError.
// - When the store fails (spec/STORES.md §3, "When the store fails"), a value whose write it failed is kept in the
//   outage memory (outage.ts), which answers the reads it fails until a good answer, once no failure has been seen
//   for a second, empties it.

import { randomBytes } from "node:crypto";
import { utf8 } from "./bytes.js";
import { BytesMemo } from "./bytes_memo.js";
import { type Compressor, DEFAULT_MAX_SIZE } from "./compressors.js";
import { DEFAULT_THRESHOLD, decodePayload, encode } from "./entry.js";
import { InvalidEntry } from "./errors.js";
import type { Serializer } from "./header.js";
import { lockKey, safeKey } from "./keys.js";
import { isStoreFailure, OutageMemory, outageMemorySize } from "./outage.js";
import { deserialize } from "./serializers.js";
import { type Counter, counterValue, parseCounter, type Store } from "./stores/base.js";
import { StoreError } from "./stores/errors.js";
import { openStore } from "./stores/index.js";
import { type Held, MemoryStore } from "./stores/memory.js";
import type { Value } from "./value.js";

export const DEFAULT_LOCK_TTL_MS = 10_000;
const LOCK_POLL_FIRST_MS = 5;
const LOCK_POLL_MOST_MS = 50;

export interface CacheStats {
  hits: number;
  misses: number;
  loads: number;
  coalescedWaits: number;
  coalescedAcrossProcesses: number;
  staleServed: number;
  storeErrors: number;
  corruptEntries: number;
}

export interface CacheOptions {
  namespace?: string;
  serializer?: Serializer;
  compressor?: Compressor;
  compressThreshold?: number;
  maxValueSize?: number;
  /** Used when a write gives no ttlMs; undefined = never expires. */
  defaultTtlMs?: number;
  defaultStaleMs?: number;
  /** How long a recompute lock lives if its holder dies; the longest a waiter waits for another process. */
  lockTtlMs?: number;
  /** The outage memory's size (spec/STORES.md §3, "When the store fails"): bytes, or a size as store URLs write
   * it ("16M", "512K"); 0 turns it off. Default 16M. None over memory://, which cannot fail. */
  outageMemory?: number | string;
}

export interface WriteOptions {
  /** Time to live in ms; 0 = never expires; undefined = the cache's defaultTtlMs. */
  ttlMs?: number;
  /** How long past expiry the value may be served while one caller recomputes it. */
  staleMs?: number;
  version?: string;
  tags?: readonly string[];
}

export interface ReadOptions {
  version?: string;
}

type Lookup = ["fresh" | "stale", Value] | ["miss"];

/** What a read decoded from an entry's bytes: its header's verdict fields and, for an immutable value, the value
 * itself. Over the memory store it is the entry's own note (Held.note: it goes when the key is rewritten), so a hit
 * skips the header and, for a string, number, boolean or null, the payload too; over other stores, bytes_memo.ts.
 * For such an immutable value, fetch's hit reads a copy of its three verdict fields in the slot itself (Held.hitValue,
 * hitUntil, hitVersion: one object read per hit, not two), written beside the note here in decodeRead. */
interface Decoded {
  value: Value;
  immutable: boolean;
  expiresAt: number;
  staleMs: number;
  version: string | undefined;
  serializer: Serializer;
  payloadStart: number;
  compressed: boolean;
}
const MISS: Lookup = ["miss"];
/** The options of a call that gave none (one object, not one per call). */
const NO_OPTIONS: WriteOptions = Object.freeze({});

interface Shared {
  store: Store;
  inflight: Map<string, Promise<Value>>;
  stats: CacheStats;
  /** Over a store that returns new bytes on every read: immutable values decoded before, by store key and bytes. */
  decoded: BytesMemo<Decoded>;
  /** What was loaded while the store failed (outage.ts); undefined when off. */
  outage: OutageMemory | undefined;
}

/** What the memo of decoded values holds at most over one store, and the largest entry it keeps (bytes_memo.ts). */
const DECODED_MEMO_BUDGET = 4 * 1024 * 1024;
const DECODED_MEMO_MAX_BYTES = 16 * 1024;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export class Cache {
  readonly namespace: string;
  readonly serializer: Serializer;
  readonly compressor: Compressor;
  readonly compressThreshold: number;
  readonly maxValueSize: number;
  readonly defaultTtlMs: number | undefined;
  readonly defaultStaleMs: number;
  readonly lockTtlMs: number;
  private readonly shared: Shared;
  /** Over larder's memory store, whose reads hand back the stored entry itself: decodes are kept as its note, and
   * reads are synchronous (a fetch hit resolves without awaiting the store). */
  private readonly memory: MemoryStore | undefined;

  /** A cache over `store` (a Store or a store URL such as "memcached://127.0.0.1:11211"; default memory://). */
  constructor(store: Store | string = "memory://", options: CacheOptions = {}, shared?: Shared) {
    const opened = shared?.store ?? (typeof store === "string" ? openStore(store) : store);
    const outageBytes = shared === undefined ? outageMemorySize(options.outageMemory) : 0;
    this.shared = shared ?? {
      store: opened,
      outage: outageBytes > 0 && !(opened instanceof MemoryStore) ? new OutageMemory(outageBytes) : undefined,
      inflight: new Map(),
      decoded: new BytesMemo<Decoded>(DECODED_MEMO_BUDGET, DECODED_MEMO_MAX_BYTES),
      stats: {
        hits: 0,
        misses: 0,
        loads: 0,
        coalescedWaits: 0,
        coalescedAcrossProcesses: 0,
        staleServed: 0,
        storeErrors: 0,
        corruptEntries: 0,
      },
    };
    this.namespace = options.namespace ?? "";
    this.serializer = options.serializer ?? "msgpack";
    this.compressThreshold = options.compressThreshold ?? DEFAULT_THRESHOLD;
    this.maxValueSize = options.maxValueSize ?? DEFAULT_MAX_SIZE;
    this.defaultTtlMs = options.defaultTtlMs;
    this.defaultStaleMs = options.defaultStaleMs ?? 0;
    this.lockTtlMs = options.lockTtlMs ?? DEFAULT_LOCK_TTL_MS;
    this.memory = this.shared.store instanceof MemoryStore ? this.shared.store : undefined;
    // memory:// bytes never leave the process: no compression attempt unless one is named (spec/STORES.md §8).
    this.compressor = options.compressor ?? (this.memory === undefined ? "lz4" : "none");
  }

  get store(): Store {
    return this.shared.store;
  }

  /** The outage memory (spec/STORES.md §3), shared by every namespace of this cache; undefined when off. */
  get outageMemory(): OutageMemory | undefined {
    return this.shared.outage;
  }

  /** The same cache (store, coalescing, counters) under a nested namespace `outer:inner`. */
  withNamespace(namespace: string): Cache {
    const full = this.namespace ? `${this.namespace}:${namespace}` : namespace;
    return new Cache(this.store, { ...this.options(), namespace: full }, this.shared);
  }

  private options(): CacheOptions {
    return {
      serializer: this.serializer,
      compressor: this.compressor,
      compressThreshold: this.compressThreshold,
      maxValueSize: this.maxValueSize,
      ...(this.defaultTtlMs === undefined ? {} : { defaultTtlMs: this.defaultTtlMs }),
      defaultStaleMs: this.defaultStaleMs,
      lockTtlMs: this.lockTtlMs,
    };
  }

  stats(): CacheStats {
    return { ...this.shared.stats };
  }

  /** How many keys this process is computing right now. */
  computing(): number {
    return this.shared.inflight.size;
  }

  /** The key the store sees for `key` in this cache's namespace (FORMAT.md §5.1, §5.2). */
  storeKey(key: string): string {
    return safeKey(this.namespacedKey(key));
  }

  /** `key` in this cache's namespace, not yet made safe (FORMAT.md §5.2). */
  private namespacedKey(key: string): string {
    return this.namespace ? `${this.namespace}:${key}` : key;
  }

  async close(): Promise<void> {
    await this.store.close();
  }

  // ----------------------------------------------------------------------------------------- encoding

  /** The entry bytes for `value`, and the store-side TTL matching its hard expiry. */
  encode(value: Value, o: WriteOptions = {}): [Uint8Array, number | undefined] {
    let ttl = o.ttlMs ?? this.defaultTtlMs;
    if (ttl !== undefined && ttl <= 0) ttl = undefined;
    const stale = ttl === undefined ? 0 : Math.round(o.staleMs ?? this.defaultStaleMs);
    const ttlMs = ttl === undefined ? 0 : Math.max(Math.round(ttl), 1);
    const data = encode(value, {
      serializer: this.serializer,
      compressor: this.compressor,
      threshold: this.compressThreshold,
      createdAt: Date.now(),
      ttlMs,
      staleMs: stale,
      version: o.version,
      tags: o.tags ?? [],
    });
    return [data, ttl === undefined ? undefined : ttlMs + stale];
  }

  /** What a read makes of the bytes a store returned: a miss for a corrupt entry (counted), another version, a
   * response (not a value) or past its hard expiry; else fresh or stale. Counters read as numbers. What it decoded
   * is kept as `held`'s note when the bytes are the memory store's entry, else by `storeKey` in bytes_memo.ts. */
  private decodeRead(data: Uint8Array, version: string | undefined, storeKey?: string, held?: Held): Lookup {
    let value: Value;
    let expiresAt: number;
    let staleMs: number;
    let entryVersion: string | undefined;
    const memo = held
      ? (held.note as Decoded | undefined)
      : storeKey === undefined
        ? undefined
        : this.shared.decoded.get(storeKey, data);
    if (memo !== undefined) {
      value = memo.immutable
        ? memo.value
        : deserialize(
            memo.serializer,
            memo.compressed ? decodePayload(data, this.maxValueSize)[1] : data.subarray(memo.payloadStart),
          );
      return this.judge(value, memo.expiresAt, memo.staleMs, memo.version, version);
    }
    try {
      const [header, payload] = decodePayload(data, this.maxValueSize);
      if (header.kind !== "value") {
        this.shared.stats.corruptEntries++;
        return MISS;
      }
      value = deserialize(header.serializer, payload);
      expiresAt = Number(header.expiresAt);
      staleMs = Number(header.staleMs);
      entryVersion = header.version;
      const immutable = value === null || (typeof value !== "object" && typeof value !== "undefined");
      const decoded: Decoded = {
        value: immutable ? value : null,
        immutable,
        expiresAt,
        staleMs,
        version: entryVersion,
        serializer: header.serializer,
        payloadStart: header.size,
        compressed: header.compressor !== "none",
      };
      if (held) {
        held.note = decoded;
        if (immutable) {
          held.hitValue = value;
          held.hitUntil = expiresAt;
          held.hitVersion = entryVersion;
        }
      } else if (immutable && storeKey !== undefined)
        this.shared.decoded.set(storeKey, data, decoded, 96 + (typeof value === "string" ? 2 * value.length : 8));
    } catch (e) {
      if (!(e instanceof InvalidEntry)) throw e;
      const counter = parseCounter(data);
      if (counter !== undefined && version === undefined) return ["fresh", counterValue(counter)];
      this.shared.stats.corruptEntries++;
      return MISS;
    }
    return this.judge(value, expiresAt, staleMs, entryVersion, version);
  }

  private judge(
    value: Value,
    expiresAt: number,
    staleMs: number,
    entryVersion: string | undefined,
    version: string | undefined,
  ): Lookup {
    if (version !== undefined && entryVersion !== version) return MISS;
    if (expiresAt === 0) return ["fresh", value]; // never expires: no clock read (Date.now costs ~40 ns)
    const now = Date.now();
    const fresh = now < expiresAt;
    if (!fresh && now >= expiresAt + staleMs) return MISS;
    return [fresh ? "fresh" : "stale", value];
  }

  /** The bytes under storeKey: the store's answer, or, when the store fails, what the outage memory keeps. */
  private async getRaw(storeKey: string): Promise<Uint8Array | undefined> {
    let raw: Uint8Array | undefined;
    try {
      raw = await this.store.get(storeKey);
    } catch (e) {
      if (!(e instanceof StoreError)) throw e;
      this.shared.stats.storeErrors++;
      return this.storeFailed(e) ? this.shared.outage?.held(storeKey)?.value : undefined;
    }
    this.answered();
    return raw;
  }

  // ------------------------------------------------------------------------------------------ outage memory

  /** The store gave a good answer: after a failure, the outage memory is emptied once no failure has been seen for
   * a second (one field read while healthy). */
  private answered(): void {
    const outage = this.shared.outage;
    if (outage?.failing) outage.answered();
  }

  /** The store refused or failed a request: true when it failed (a failure, STORES.md §1), noted for the outage
   * memory. */
  private storeFailed(e: StoreError): boolean {
    if (!isStoreFailure(e)) return false;
    this.shared.outage?.failed();
    return true;
  }

  /** `call`'s outcome, noted for the outage memory as it is handed on. */
  private noted<T>(call: Promise<T>): Promise<T> {
    return this.shared.outage === undefined ? call : call.then(this.answeredWith, this.failedWith);
  }

  private readonly answeredWith = <T>(value: T): T => {
    this.answered();
    return value;
  };

  private readonly failedWith = (e: unknown): never => {
    if (e instanceof StoreError) this.storeFailed(e);
    throw e;
  };

  /** A write of `data` the store failed: kept in the outage memory, with the store's expiry. */
  private keepIfFailed(e: unknown, storeKey: string, data: Uint8Array, ttl: number | undefined): void {
    if (e instanceof StoreError && this.storeFailed(e)) this.shared.outage?.keep(storeKey, data, ttl);
  }

  /** What a read of `key` finds, counted. */
  private async lookup(key: string, version: string | undefined): Promise<Lookup> {
    if (this.memory) {
      const held = this.heldInMemory(this.memory, key);
      return this.counted(held?.value, version, undefined, held);
    }
    const storeKey = this.storeKey(key);
    return this.counted(await this.getRaw(storeKey), version, storeKey);
  }

  /** The memory store's live entry for `key`, asked first by the namespaced key as it is: a key the store holds
   * passed its key check when stored, and safeKey leaves every such key unchanged (test/properties.test.ts), so the
   * key is made safe (FORMAT.md §5.1) only when it is not found. Throws the store's InvalidKey as heldNow does. */
  private heldInMemory(memory: MemoryStore, key: string): Held | undefined {
    const namespaced = this.namespacedKey(key);
    return memory.heldIfStored(namespaced) ?? memory.heldNow(safeKey(namespaced));
  }

  /** What a read of `raw` (`held`'s bytes over the memory store) finds, counted as a hit or a miss. */
  private counted(raw: Uint8Array | undefined, version: string | undefined, storeKey?: string, held?: Held): Lookup {
    const found = raw === undefined ? MISS : this.decodeRead(raw, version, storeKey, held);
    if (found[0] === "fresh") this.shared.stats.hits++;
    else this.shared.stats.misses++;
    return found;
  }

  // ------------------------------------------------------------------------------------------- the verbs

  /** The fresh value for `key` (of `version`, if given), else undefined. A store failure reads as a miss. */
  async get(key: string, o: ReadOptions = {}): Promise<Value | undefined> {
    const found = await this.lookup(key, o.version);
    return found[0] === "fresh" ? found[1] : undefined;
  }

  /** The fresh values among `keys`, in one store request. */
  async getMany(keys: readonly string[], o: ReadOptions = {}): Promise<Map<string, Value>> {
    const found = new Map<string, Value>();
    if (keys.length === 0) return found;
    let raws: Array<Uint8Array | undefined>;
    let held: Array<Held | undefined> | undefined;
    let storeKeys: string[] | undefined;
    try {
      const memory = this.memory;
      if (memory) {
        // each key looked up as get's is: as it is first, made safe only when not found (heldInMemory)
        held = keys.map((k) => this.heldInMemory(memory, k));
        raws = held.map((h) => h?.value);
      } else {
        storeKeys = keys.map((k) => this.storeKey(k));
        raws = await this.store.getMany(storeKeys);
        this.answered();
      }
    } catch (e) {
      if (!(e instanceof StoreError)) throw e;
      this.shared.stats.storeErrors++;
      const outage = this.storeFailed(e) ? this.shared.outage : undefined;
      const kept = storeKeys;
      raws =
        outage === undefined || kept === undefined ? keys.map(() => undefined) : kept.map((k) => outage.held(k)?.value);
    }
    keys.forEach((key, i) => {
      const raw = raws[i];
      if (raw === undefined) return;
      const r = this.decodeRead(raw, o.version, storeKeys?.[i], held?.[i]);
      if (r[0] === "fresh") found.set(key, r[1]);
    });
    this.shared.stats.hits += found.size;
    this.shared.stats.misses += keys.length - found.size;
    return found;
  }

  async has(key: string, o: ReadOptions = {}): Promise<boolean> {
    return (await this.lookup(key, o.version))[0] === "fresh";
  }

  /** Stores `value`; rejects with StoreError (naming the server) if the store fails, the value then kept in the
   * outage memory. */
  async set(key: string, value: Value, o: WriteOptions = {}): Promise<void> {
    const [data, ttl] = this.encode(value, o);
    const storeKey = this.storeKey(key);
    if (this.memory) {
      // The entry was just encoded and is never touched again: the memory store keeps it without a copy.
      this.memory.setOwnedNow(storeKey, data, ttl);
      return;
    }
    try {
      await this.store.set(storeKey, data, ttl);
    } catch (e) {
      this.keepIfFailed(e, storeKey, data, ttl);
      throw e;
    }
    this.answered();
  }

  /** Stores several values with the same options, in as few store requests as the store allows. */
  async setMany(
    items: Iterable<readonly [string, Value]> | Record<string, Value>,
    o: WriteOptions = {},
  ): Promise<void> {
    const entries =
      Symbol.iterator in Object(items) ? [...(items as Iterable<readonly [string, Value]>)] : Object.entries(items);
    const batch: Array<[string, Uint8Array]> = [];
    let ttl: number | undefined;
    for (const [key, value] of entries) {
      const [data, t] = this.encode(value as Value, o);
      ttl = t;
      batch.push([this.storeKey(key), data]);
    }
    if (batch.length === 0) return;
    try {
      await this.store.setMany(batch, ttl);
    } catch (e) {
      for (const [storeKey, data] of batch) this.keepIfFailed(e, storeKey, data, ttl);
      throw e;
    }
    this.answered();
  }

  /** Stores `value` only if `key` holds nothing; true if it stored. */
  async add(key: string, value: Value, o: WriteOptions = {}): Promise<boolean> {
    const [data, ttl] = this.encode(value, o);
    return this.noted(this.store.add(this.storeKey(key), data, ttl));
  }

  async delete(key: string): Promise<boolean> {
    const storeKey = this.storeKey(key);
    this.shared.outage?.forget([storeKey]);
    return this.noted(this.store.delete(storeKey));
  }

  async deleteMany(keys: readonly string[]): Promise<number> {
    const storeKeys = keys.map((k) => this.storeKey(k));
    this.shared.outage?.forget(storeKeys);
    return this.noted(this.store.deleteMany(storeKeys));
  }

  /** Adds `delta` to the counter at `key` (created holding delta when missing and `create`). */
  async incr(
    key: string,
    delta: number | bigint = 1,
    o: { ttlMs?: number; create?: boolean } = {},
  ): Promise<Counter | undefined> {
    return this.noted(this.store.incr(this.storeKey(key), delta, o.ttlMs, o.create ?? true));
  }

  async decr(
    key: string,
    delta: number | bigint = 1,
    o: { ttlMs?: number; create?: boolean } = {},
  ): Promise<Counter | undefined> {
    return this.incr(key, -BigInt(delta), o);
  }

  /** Removes every entry tagged `tag`, or whose key (in this namespace) starts with `prefix`; how many, or null on
   * a store that records purges instead of counting (memcached). */
  async purge(what: { tag: string } | { prefix: string }): Promise<number | null> {
    const outage = this.shared.outage;
    if ("tag" in what) {
      outage?.forgetTag(what.tag);
      return this.noted(this.store.purgeTag(what.tag));
    }
    const prefix = this.namespace ? `${this.namespace}:${what.prefix}` : what.prefix;
    outage?.forgetPrefix(prefix);
    return this.noted(this.store.purgePrefix(prefix));
  }

  /** Removes everything in this namespace (the whole store without one). */
  async clear(): Promise<void> {
    const outage = this.shared.outage;
    if (this.namespace) {
      outage?.forgetPrefix(`${this.namespace}:`);
      await this.noted(this.store.purgePrefix(`${this.namespace}:`));
    } else {
      outage?.clear();
      await this.noted(this.store.clear());
    }
  }

  // ------------------------------------------------------------------------------------------------ fetch

  /** The value for `key`; on a miss `loader()` computes it (once per process, however many callers ask) and it
   * is stored. Within the stale window one caller recomputes while the others get the stale value. The loader's
   * rejection reaches every waiting caller and nothing is cached; store failures are absorbed. */
  fetch<T extends Value>(key: string, loader: () => T | Promise<T>, o?: WriteOptions): Promise<T> {
    return this.memory === undefined
      ? this.fetchFromStore(key, loader, o ?? NO_OPTIONS)
      : this.fetchFromMemory(this.memory, key, loader, o);
  }

  /** fetch over the memory store, which answers at once. An async function that returns without awaiting: its
   * Promise, awaited, cost ~10 ns less than a plain function's `Promise.resolve` (node 20, 66 against 76 ns a call
   * in an awaited loop over a Map), which was most of what lru-cache's `fetch` hit was ahead by. */
  private async fetchFromMemory<T extends Value>(
    memory: MemoryStore,
    key: string,
    loader: () => T | Promise<T>,
    o: WriteOptions | undefined,
  ): Promise<T> {
    const held = this.heldInMemory(memory, key);
    const version = o?.version;
    if (held !== undefined) {
      // The common hit, judged as judge() does, on what an earlier read of these bytes decoded: an immutable value,
      // kept in the store's slot itself (Held.hitValue), so nothing is read but the slot and nothing allocated.
      const until = held.hitUntil;
      if (until >= 0 && (version === undefined || held.hitVersion === version) && (until === 0 || Date.now() < until)) {
        this.shared.stats.hits++;
        return held.hitValue as T;
      }
    }
    const found = this.counted(held?.value, version, undefined, held);
    if (found[0] === "fresh") return found[1] as T;
    return this.afterLookup(this.storeKey(key), found, loader, o ?? NO_OPTIONS);
  }

  private async fetchFromStore<T extends Value>(
    key: string,
    loader: () => T | Promise<T>,
    o: WriteOptions,
  ): Promise<T> {
    const storeKey = this.storeKey(key);
    const found = this.counted(await this.getRaw(storeKey), o.version, storeKey);
    if (found[0] === "fresh") return found[1] as T;
    return this.afterLookup(storeKey, found, loader, o);
  }

  /** A fetch that did not find a fresh value: join this process's computation, serve stale, or lead. */
  private async afterLookup<T extends Value>(
    storeKey: string,
    found: Lookup,
    loader: () => T | Promise<T>,
    o: WriteOptions,
  ): Promise<T> {
    const inflight = this.shared.inflight;
    const running = inflight.get(storeKey);
    if (running !== undefined) {
      if (found[0] === "stale") {
        // another caller of this process refreshes it
        this.shared.stats.staleServed++;
        return found[1] as T;
      }
      this.shared.stats.coalescedWaits++;
      return (await running) as T;
    }
    const flight = this.lead(storeKey, found, loader, o);
    inflight.set(storeKey, flight);
    try {
      return (await flight) as T;
    } finally {
      if (inflight.get(storeKey) === flight) inflight.delete(storeKey);
    }
  }

  private async lead<T extends Value>(
    storeKey: string,
    found: Lookup,
    loader: () => T | Promise<T>,
    o: WriteOptions,
  ): Promise<Value> {
    let lock: [string, Uint8Array] | boolean = true;
    let waitedSince: number | undefined;
    try {
      for (;;) {
        lock = await this.tryLock(storeKey);
        if (Array.isArray(lock)) {
          const value = await this.peek(storeKey, o.version);
          if (value !== undefined) {
            this.shared.stats.coalescedAcrossProcesses++;
            return value[0];
          }
        }
        if (lock !== false) break;
        if (found[0] === "stale") {
          this.shared.stats.staleServed++;
          return found[1];
        }
        waitedSince ??= Date.now();
        const waited = await this.awaitOtherProcess(storeKey, o.version, waitedSince + this.lockTtlMs);
        if (waited === "waited-lock-ttl") break;
        if (waited !== "lock-gone") {
          this.shared.stats.coalescedAcrossProcesses++;
          return waited[0];
        }
      }
      this.shared.stats.loads++;
      const loaded = await loader();
      const [data, ttl] = this.encode(loaded, o);
      try {
        await this.store.set(storeKey, data, ttl);
        this.answered();
      } catch (e) {
        if (!(e instanceof StoreError)) throw e;
        this.shared.stats.storeErrors++;
        // kept while the store fails, so that this process does not load it again until the store answers
        this.keepIfFailed(e, storeKey, data, ttl);
      }
      return loaded;
    } finally {
      if (Array.isArray(lock)) await this.unlock(lock[0], lock[1]);
    }
  }

  /** [lock key, token] when taken; false when another process holds it; true when the store did not answer (go
   * ahead without a lock: a lock is an optimisation, never a reason to fail). */
  private async tryLock(storeKey: string): Promise<[string, Uint8Array] | boolean> {
    const key = lockKey("", storeKey);
    const token = utf8(randomBytes(8).toString("hex"));
    try {
      const taken = await this.store.add(key, token, this.lockTtlMs);
      this.answered();
      return taken ? [key, token] : false;
    } catch (e) {
      if (!(e instanceof StoreError)) throw e;
      this.shared.stats.storeErrors++;
      this.storeFailed(e);
      return true;
    }
  }

  /** [the fresh value] under storeKey, or undefined, without counting a hit or a miss. */
  private async peek(storeKey: string, version: string | undefined): Promise<[Value] | undefined> {
    const raw = await this.getRaw(storeKey);
    if (raw === undefined) return undefined;
    // The memory store's bytes are its entry's own: not copied into bytes_memo.ts (its reads keep a note instead).
    const found = this.decodeRead(raw, version, this.memory ? undefined : storeKey);
    return found[0] === "fresh" ? [found[1]] : undefined;
  }

  private async awaitOtherProcess(
    storeKey: string,
    version: string | undefined,
    deadline: number,
  ): Promise<[Value] | "lock-gone" | "waited-lock-ttl"> {
    let pause = LOCK_POLL_FIRST_MS;
    for (;;) {
      await sleep(pause);
      pause = Math.min(pause * 2, LOCK_POLL_MOST_MS);
      const value = await this.peek(storeKey, version);
      if (value !== undefined) return value;
      if (Date.now() >= deadline) return "waited-lock-ttl";
      if ((await this.getRaw(lockKey("", storeKey))) === undefined) return "lock-gone";
    }
  }

  private async unlock(key: string, token: Uint8Array): Promise<void> {
    try {
      await this.store.deleteIf(key, token);
      this.answered();
    } catch (e) {
      if (!(e instanceof StoreError)) throw e;
      this.shared.stats.storeErrors++;
      this.storeFailed(e);
    }
  }
}
