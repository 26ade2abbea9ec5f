// What every store shares (spec/STORES.md §2, §3): the Store interface, the key checks made before anything is
// sent, the expiry rule, counters and a remote server's health (failures, ejection, probation).

import { entryHardExpiry } from "../entry.js";
import { InvalidEntry } from "../errors.js";
import { fixedOnlyExpiresAt, type Header, MAGIC, readHeader } from "../header.js";
import { keyProblem, prefixProblem, tagProblem } from "../keys.js";
import { InvalidKey } from "./errors.js";

export interface StoreStats {
  hits: number;
  misses: number;
  inserts: number;
  evictions: number;
  expirations: number;
  entries: number;
  bytes: number;
  capacityBytes: number;
}

export const emptyStats = (): StoreStats => ({
  hits: 0,
  misses: 0,
  inserts: 0,
  evictions: 0,
  expirations: 0,
  entries: 0,
  bytes: 0,
  capacityBytes: 0,
});

/** A counter's value: a number within ±2^53, else a bigint (signed 64 bits). */
export type Counter = number | bigint;

/** Async operations on keys and entry bytes. `ttlMs` (undefined = only the entry's own expiry) is a store-side
 * expiry on top of the entry's own: a store never returns a value past expiry(value, ttl) (STORES.md §2). Keys
 * are safe keys (FORMAT.md §5.1), checked before anything is sent. */
export interface Store {
  readonly backend: string;
  get(key: string): Promise<Uint8Array | undefined>;
  /** One result per key, in order. */
  getMany(keys: readonly string[]): Promise<Array<Uint8Array | undefined>>;
  set(key: string, value: Uint8Array, ttlMs?: number): Promise<void>;
  setMany(items: ReadonlyArray<readonly [string, Uint8Array]>, ttlMs?: number): Promise<void>;
  /** Stores only if absent (or expired); true if it stored. */
  add(key: string, value: Uint8Array, ttlMs?: number): Promise<boolean>;
  /** Adds delta to the counter at key (STORES.md §3); undefined when missing and not `create`. */
  incr(key: string, delta: number | bigint, ttlMs?: number, create?: boolean): Promise<Counter | undefined>;
  /** Deletes key only while it holds exactly `expected`; true if it deleted. */
  deleteIf(key: string, expected: Uint8Array): Promise<boolean>;
  delete(key: string): Promise<boolean>;
  /** How many of the keys were present. */
  deleteMany(keys: readonly string[]): Promise<number>;
  clear(): Promise<void>;
  /** How many entries were removed, or null where the purge is recorded instead (memcached, §4.4). */
  purgePrefix(prefix: string): Promise<number | null>;
  purgeTag(tag: string): Promise<number | null>;
  stats(): Promise<StoreStats>;
  /** The largest value a write under a short key can store. */
  maxValueBytes(): number;
  close(): Promise<void>;
}

export function checkKey(backend: string, key: string): string {
  if (typeof key !== "string") throw new InvalidKey(backend, String(key), "a key is a string");
  const problem = keyProblem(key);
  if (problem !== undefined) throw new InvalidKey(backend, key, problem);
  return key;
}

export function checkKeys(backend: string, keys: readonly string[]): void {
  for (const key of keys) checkKey(backend, key);
}

export function checkPrefix(backend: string, prefix: string): string {
  const problem = prefixProblem(prefix);
  if (problem !== undefined) throw new InvalidKey(backend, String(prefix), problem);
  return prefix;
}

/** A purge_tag tag, refused (invalid_key) when it has no UTF-8 form: the tag reaches the store as UTF-8 (a hashed
 * internal key, an SQL parameter), and an encoder would make another tag of it. */
export function checkTag(backend: string, tag: string): string {
  const problem = tagProblem(tag);
  if (problem !== undefined) throw new InvalidKey(backend, String(tag), problem);
  return tag;
}

export function checkTtl(ttlMs: number | undefined): void {
  if (ttlMs !== undefined && (!Number.isFinite(ttlMs) || ttlMs < 0))
    throw new RangeError(`a ttl is >= 0 ms, not ${ttlMs}`);
}

/** Whether `value` starts with the entry magic (a value that does not is stored as raw bytes, never parsed). */
export function isEntry(value: Uint8Array): boolean {
  return value.length >= 2 && value[0] === MAGIC[0] && value[1] === MAGIC[1];
}

/** The header of `value`, or undefined for a value that is not an entry. A value without the magic bytes is told
 * apart before parsing: building an InvalidEntry (its stack) for every raw value cost more than the write. */
export function entryHeader(value: Uint8Array): Header | undefined {
  if (!isEntry(value)) return undefined;
  try {
    return readHeader(value);
  } catch (e) {
    if (e instanceof InvalidEntry) return undefined;
    throw e;
  }
}

/** What a store reads of a value it writes, each part once: the entry's hard expiry (ms; undefined for never or a
 * value that is not an entry) and, when its header has more than the fixed 23 bytes (a stale window, a version,
 * tags), that header. A fixed-only header is read without building a Header (fixedOnlyExpiresAt). */
export interface WriteFacts {
  hardExpiry: number | undefined;
  header: Header | undefined;
}

export function writeFacts(value: Uint8Array): WriteFacts {
  const fixed = fixedOnlyExpiresAt(value);
  if (fixed !== null) return { hardExpiry: fixed === 0 ? undefined : Number(fixed), header: undefined };
  const header = entryHeader(value);
  return { hardExpiry: header === undefined ? undefined : entryHardExpiry(header), header };
}

/** The entry's tags; none for a value that is not an entry. */
export function entryTags(value: Uint8Array): string[] {
  return entryHeader(value)?.tags ?? [];
}

/** The moment (ms) past which `value` must not be returned: the earlier of now + ttl and the entry's hard expiry. */
export function expiresAtMs(value: Uint8Array, ttlMs: number | undefined, now: number): number | undefined {
  return earlierExpiry(writeFacts(value).hardExpiry, ttlMs, now);
}

/** The earlier of an entry's hard expiry (ms; undefined: never) and now + ttl (undefined: no ttl). */
export function earlierExpiry(hard: number | undefined, ttlMs: number | undefined, now: number): number | undefined {
  const fromTtl = ttlMs === undefined ? undefined : now + Math.ceil(ttlMs);
  if (fromTtl !== undefined && hard !== undefined) return Math.min(fromTtl, hard);
  return fromTtl ?? hard;
}

export const THIRTY_DAYS_SECS = 30 * 24 * 3600;

/** memcached's exptime: 0 = never; relative seconds up to 30 days, a Unix time beyond; -1 when already past. */
export function memcachedExptime(expiresAt: number | undefined, now: number): number {
  if (expiresAt === undefined) return 0;
  if (expiresAt <= now) return -1;
  const relative = Math.ceil((expiresAt - now) / 1000);
  if (relative <= THIRTY_DAYS_SECS) return relative;
  return Math.ceil(expiresAt / 1000);
}

export const I64_MIN = -(2n ** 63n);
export const I64_MAX = 2n ** 63n - 1n;

/** The counter a stored value holds: optional `-` and digits within signed 64 bits, trailing spaces allowed. */
export function parseCounter(value: Uint8Array): bigint | undefined {
  const text = Buffer.from(value).toString("latin1").replace(/ +$/, "");
  if (!/^-?[0-9]{1,20}$/.test(text)) return undefined;
  const n = BigInt(text);
  return n >= I64_MIN && n <= I64_MAX ? n : undefined;
}

export function saturate(n: bigint): bigint {
  return n < I64_MIN ? I64_MIN : n > I64_MAX ? I64_MAX : n;
}

export function counterValue(n: bigint): Counter {
  return n >= -BigInt(Number.MAX_SAFE_INTEGER) && n <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(n) : n;
}

/** `failures` consecutive failures eject a server for `retryAfterMs`. */
export interface FailurePolicy {
  failures: number;
  retryAfterMs: number;
}

/** A remote server's health (STORES.md §1): consecutive failures, ejection, probation (one probe at a time), errors
 * counted. */
export class Health {
  private consecutive = 0;
  private ejectedUntil = 0;
  /** Back after an ejection: the next request is the probe, until a request's outcome is recorded. */
  private probation = false;
  /** On probation, while the probe is out: the moment until which every other request is refused (0: no probe out).
   * Bounded by retry_after, so a probe whose outcome is never recorded cannot keep the server refused for good. */
  private probeUntil = 0;
  private retryAfterMs = 0;
  errors = 0;

  /** Records one request's outcome; true when this failure ejects the server. */
  record(ok: boolean, policy: FailurePolicy, now: number): boolean {
    if (ok) {
      this.consecutive = 0;
      this.probation = false;
      this.probeUntil = 0;
      return false;
    }
    this.errors++;
    this.consecutive++;
    if (this.consecutive >= policy.failures || this.probation) {
      this.ejectedUntil = now + policy.retryAfterMs;
      this.retryAfterMs = policy.retryAfterMs;
      this.consecutive = 0;
      this.probation = false;
      this.probeUntil = 0;
      return true;
    }
    return false;
  }

  /** Puts the server back (on probation) once its ejection is over; true if it changed. */
  readmitIfDue(now: number): boolean {
    if (this.ejectedUntil !== 0 && this.ejectedUntil <= now) {
      this.ejectedUntil = 0;
      this.probation = true;
      this.probeUntil = 0;
      return true;
    }
    return false;
  }

  /** Whether a request may be sent to the server now. On probation the first request admitted is the probe, and
   * every other one is refused until its outcome is recorded (spec/STORES.md §1: one probe at a time). A request
   * admitted here is sent: its outcome must be recorded. */
  admits(now: number): boolean {
    this.readmitIfDue(now);
    if (this.ejectedUntil !== 0) return false;
    if (!this.probation) return true;
    if (this.probeUntil > now) return false;
    this.probeUntil = now + Math.max(this.retryAfterMs, 1);
    return true;
  }

  /** admits() at this moment, reading the clock only for an ejected server or one on probation (a request's hot
   * path: two field reads). */
  admitsNow(): boolean {
    return (this.ejectedUntil === 0 && !this.probation) || this.admits(Date.now());
  }

  isEjected(): boolean {
    return this.ejectedUntil !== 0;
  }

  /** Back from an ejection, its probe not yet answered. */
  onProbation(): boolean {
    return this.probation;
  }
}
