// `memory://?capacity=256M&max_entries=N`: the process's own store (spec/STORES.md §8). Bounded by bytes (keys +
// values + a fixed per-entry overhead) and optionally by a number of entries; the least recently used entry goes
// first. Recency is recency.ts's list of slot numbers in typed arrays (a read relinks one number: a few typed-array
// writes, where deleting and re-inserting a Map key cost ~170 ns a hit, and relinking the slot objects themselves
// ~10 ns). Purges are exact. The largest value is 1/16 of capacity.

import { utf8 } from "../bytes.js";
import {
  type Counter,
  checkKey,
  checkKeys,
  checkPrefix,
  checkTag,
  checkTtl,
  counterValue,
  emptyStats,
  entryTags,
  expiresAtMs,
  parseCounter,
  type Store,
  type StoreStats,
  saturate,
} from "./base.js";
import { NotACounter, TooLarge } from "./errors.js";
import { Recency } from "./recency.js";
import type { StoreUrl } from "./url.js";

export const DEFAULT_CAPACITY = 256 * 1024 * 1024;
export const ENTRY_OVERHEAD = 96;

/** One entry and its number in the recency list (recency.ts). */
interface Slot extends Held {
  key: string;
  expiresAt: number | undefined;
  weight: number;
  readonly number: number;
}

/** An entry as the store holds it, with a note its reader may keep beside it (a `Cache` keeps what it decoded from
 * these bytes: no lookup elsewhere on the next hit, and the note goes when the entry is replaced or dropped). */
export interface Held {
  readonly value: Uint8Array;
  note: unknown;
  /** A reader's answer for a hit, kept in the slot itself (one object read per hit): the value, until when it is
   * fresh (0: never expires; -1: none kept), and the version it carries. */
  hitValue: unknown;
  hitUntil: number;
  hitVersion: string | undefined;
}

export interface MemoryOptions {
  capacity?: number;
  maxEntries?: number;
}

export class MemoryStore implements Store {
  readonly backend = "memory";
  readonly capacity: number;
  readonly maxEntries: number;
  private readonly maxWeight: number;
  private readonly slots = new Map<string, Slot>();
  /** The slots' order of use, by number, and each number's slot. */
  private readonly recency = new Recency();
  private readonly numbered: Array<Slot | undefined> = [undefined];
  private weight = 0;
  private readonly counters: StoreStats;

  constructor(options: MemoryOptions = {}) {
    this.capacity = options.capacity ?? DEFAULT_CAPACITY;
    if (!(this.capacity > 0)) throw new RangeError("capacity must be positive");
    this.maxEntries = options.maxEntries ?? 0;
    this.maxWeight = Math.max(Math.floor(this.capacity / 16), 1);
    this.counters = { ...emptyStats(), capacityBytes: this.capacity };
  }

  static fromUrl(url: StoreUrl): MemoryStore {
    url.noHosts();
    const capacity = url.takeSize("capacity", DEFAULT_CAPACITY);
    const maxEntries = url.takeNumber("max_entries", 0, 0, 2 ** 32 - 1);
    url.finish();
    if (capacity <= 0) throw url.error("capacity must be positive");
    return new MemoryStore({ capacity, maxEntries });
  }

  maxValueBytes(): number {
    return this.maxWeight - ENTRY_OVERHEAD;
  }

  private live(key: string, now: number): Slot | undefined {
    const slot = this.slots.get(key);
    if (slot === undefined) return undefined;
    if (slot.expiresAt !== undefined && slot.expiresAt <= now) {
      this.remove(key, slot);
      this.counters.expirations++;
      return undefined;
    }
    return slot;
  }

  private remove(key: string, slot: Slot): void {
    this.slots.delete(key);
    this.recency.remove(slot.number);
    this.numbered[slot.number] = undefined;
    this.weight -= slot.weight;
  }

  /** The value at key if live, refreshing its recency; synchronous (the Cache's hot path uses it). */
  getNow(key: string): Uint8Array | undefined {
    return this.heldNow(key)?.value;
  }

  /** getNow's entry with its note (see Held). */
  heldNow(key: string): Held | undefined {
    const held = this.heldIfStored(key);
    // A key found was checked when it was stored; only a miss needs the check (and its InvalidKey).
    if (held === undefined) {
      checkKey(this.backend, key);
      this.counters.misses++;
    }
    return held;
  }

  /** heldNow's hit: the live entry at `key`, made the most recent and counted; undefined, not checked and not
   * counted as a miss, when the store holds none. Any string may be asked: every key held passed checkKey when it
   * was stored, so one that would not pass is simply not found (a Cache asks with its namespaced key before making it
   * safe, keys.ts's safeKey leaving every key this store accepts unchanged; with the memo kept once, as the note,
   * an awaited Cache.fetch hit over 1,000 keys went from 1,157 to 1,046 instructions, callgrind, node 20). */
  heldIfStored(key: string): Held | undefined {
    const slot = this.slots.get(key);
    if (slot === undefined) return undefined;
    if (slot.expiresAt !== undefined && slot.expiresAt <= Date.now()) {
      this.remove(key, slot);
      this.counters.expirations++;
      return undefined;
    }
    this.recency.touch(slot.number);
    this.counters.hits++;
    return slot;
  }

  /** heldNow for each key, every key checked first (one bad key refuses the whole read, as getMany does). */
  heldMany(keys: readonly string[]): Array<Held | undefined> {
    checkKeys(this.backend, keys);
    return keys.map((k) => this.heldNow(k));
  }

  async get(key: string): Promise<Uint8Array | undefined> {
    return this.getNow(key);
  }

  async getMany(keys: readonly string[]): Promise<Array<Uint8Array | undefined>> {
    return this.heldMany(keys).map((held) => held?.value);
  }

  /** setNow for a caller that hands `value` over and never touches it again (larder's Cache, with the entry it has
   * just encoded): kept as it is, not copied, when it is an array of its own (issue 34: the copy of a 64 KiB entry
   * was a third of a write); one that shares its buffer (Node's pool of small allocations) is still copied, so
   * that the entry does not hold on to the rest of that buffer. */
  setOwnedNow(key: string, value: Uint8Array, ttlMs?: number): void {
    checkKey(this.backend, key);
    checkTtl(ttlMs);
    this.put(key, value, ttlMs, Date.now(), value.byteOffset === 0 && value.byteLength === value.buffer.byteLength);
  }

  private put(key: string, value: Uint8Array, ttlMs: number | undefined, now: number, owned = false): void {
    const weight = utf8(key).length + value.length + ENTRY_OVERHEAD;
    if (weight > this.maxWeight) throw new TooLarge(this.backend, key, value.length, this.maxValueBytes());
    const expiresAt = expiresAtMs(value, ttlMs, now);
    const old = this.slots.get(key);
    if (old !== undefined) this.remove(key, old);
    if (expiresAt !== undefined && expiresAt <= now) return;
    this.insert(key, owned ? value : value.slice(), expiresAt, weight);
    this.counters.inserts++;
    this.evict();
  }

  private insert(key: string, value: Uint8Array, expiresAt: number | undefined, weight: number): void {
    const slot: Slot = {
      key,
      value,
      note: undefined,
      hitValue: undefined,
      hitUntil: -1,
      hitVersion: undefined,
      expiresAt,
      weight,
      number: this.recency.add(),
    };
    this.slots.set(key, slot);
    this.numbered[slot.number] = slot;
    this.weight += weight;
  }

  private evict(): void {
    for (;;) {
      const slot = this.numbered[this.recency.oldest];
      if (slot === undefined) break;
      if (this.weight <= this.capacity && (this.maxEntries === 0 || this.slots.size <= this.maxEntries)) break;
      this.remove(slot.key, slot);
      this.counters.evictions++;
    }
  }

  async set(key: string, value: Uint8Array, ttlMs?: number): Promise<void> {
    this.setNow(key, value, ttlMs);
  }

  /** set, synchronous: throws (InvalidKey, TooLarge) rather than rejecting. */
  setNow(key: string, value: Uint8Array, ttlMs?: number): void {
    checkKey(this.backend, key);
    checkTtl(ttlMs);
    this.put(key, value, ttlMs, Date.now());
  }

  async setMany(items: ReadonlyArray<readonly [string, Uint8Array]>, ttlMs?: number): Promise<void> {
    checkKeys(
      this.backend,
      items.map(([k]) => k),
    );
    checkTtl(ttlMs);
    const now = Date.now();
    for (const [k, v] of items) this.put(k, v, ttlMs, now);
  }

  async add(key: string, value: Uint8Array, ttlMs?: number): Promise<boolean> {
    checkKey(this.backend, key);
    checkTtl(ttlMs);
    const now = Date.now();
    if (this.live(key, now) !== undefined) return false;
    const expiresAt = expiresAtMs(value, ttlMs, now);
    if (expiresAt !== undefined && expiresAt <= now) return false;
    this.put(key, value, ttlMs, now);
    return true;
  }

  async incr(key: string, delta: number | bigint, ttlMs?: number, create = true): Promise<Counter | undefined> {
    checkKey(this.backend, key);
    checkTtl(ttlMs);
    const now = Date.now();
    const slot = this.live(key, now);
    const d = BigInt(delta);
    if (slot === undefined) {
      if (!create) return undefined;
      const n = saturate(d);
      this.put(key, utf8(n.toString()), ttlMs, now);
      return counterValue(n);
    }
    const current = parseCounter(slot.value);
    if (current === undefined) throw new NotACounter(this.backend, key);
    const n = saturate(current + d);
    const value = utf8(n.toString());
    this.remove(key, slot);
    const weight = utf8(key).length + value.length + ENTRY_OVERHEAD;
    this.insert(key, value, slot.expiresAt, weight);
    return counterValue(n);
  }

  async deleteIf(key: string, expected: Uint8Array): Promise<boolean> {
    checkKey(this.backend, key);
    const slot = this.live(key, Date.now());
    if (slot === undefined || !Buffer.from(slot.value).equals(Buffer.from(expected))) return false;
    this.remove(key, slot);
    return true;
  }

  async delete(key: string): Promise<boolean> {
    return (await this.deleteMany([key])) === 1;
  }

  async deleteMany(keys: readonly string[]): Promise<number> {
    return this.deleteManyNow(keys);
  }

  /** deleteMany, synchronous: throws InvalidKey rather than rejecting. */
  deleteManyNow(keys: readonly string[]): number {
    checkKeys(this.backend, keys);
    const now = Date.now();
    let n = 0;
    for (const key of keys) {
      const slot = this.live(key, now);
      if (slot !== undefined) {
        this.remove(key, slot);
        n++;
      }
    }
    return n;
  }

  async clear(): Promise<void> {
    this.clearNow();
  }

  /** clear, synchronous. */
  clearNow(): void {
    this.slots.clear();
    this.recency.clear();
    this.numbered.length = 1;
    this.weight = 0;
  }

  async purgePrefix(prefix: string): Promise<number> {
    return this.purgePrefixNow(prefix);
  }

  /** purgePrefix, synchronous: throws InvalidKey rather than rejecting. */
  purgePrefixNow(prefix: string): number {
    checkPrefix(this.backend, prefix);
    let n = 0;
    for (const [key, slot] of [...this.slots]) {
      if (key.startsWith(prefix)) {
        this.remove(key, slot);
        n++;
      }
    }
    return n;
  }

  async purgeTag(tag: string): Promise<number> {
    return this.purgeTagNow(tag);
  }

  /** purgeTag, synchronous: throws InvalidKey rather than rejecting. */
  purgeTagNow(tag: string): number {
    checkTag(this.backend, tag);
    let n = 0;
    for (const [key, slot] of [...this.slots]) {
      if (entryTags(slot.value).includes(tag)) {
        this.remove(key, slot);
        n++;
      }
    }
    return n;
  }

  /** The live keys starting with `prefix`. */
  async *keys(prefix = ""): AsyncGenerator<string, void, unknown> {
    const now = Date.now();
    for (const key of [...this.slots.keys()])
      if (key.startsWith(prefix) && this.live(key, now) !== undefined) yield key;
  }

  async stats(): Promise<StoreStats> {
    return { ...this.counters, entries: this.slots.size, bytes: this.weight };
  }

  async close(): Promise<void> {}
}
