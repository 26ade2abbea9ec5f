// The outage memory (spec/STORES.md §3, "When the store fails"): what this process loaded while its store failed,
// kept in a bounded memory store (memory.ts's, capacity `outageMemory`) so that a frozen, killed or refusing store
// does not send every request to the loader. Only a *failure* counts (no connection, a timeout, a broken or
// malformed reply, a server refused at once while ejected or while its one probe is out: kinds `server` and
// `timeout`); a key that is invalid, a value too large or not a counter is the caller's error, not an outage.
// - A write the store fails is kept here, under the same store key, with the expiry the store would have given it
//   (the stale window included); a read the store fails is answered from here. Deletes and purges apply here too.
// - A good answer from the store once no failure has been seen for a second (QUIET_MS, on a monotonic clock) empties
//   it: nothing is written back, since other processes may have written newer values meanwhile, and a purge sent
//   during the outage may have been lost. "Once no failure for a second": with several servers (a memcached pool
//   losing one, a Redis Cluster failing a master over) the others answer while one fails, and their answers must not
//   drop what the failing one's keys need.
// - Healthy, it costs a store call one field read (`failing`).

import { StoreError } from "./stores/errors.js";
import { type Held, MemoryStore } from "./stores/memory.js";
import { parseSize } from "./stores/url.js";

/** How long the store must go without a failure before a good answer empties the outage memory (STORES.md §3
 * rule 4). */
export const QUIET_MS = 1000;

/** The libraries' default size (spec/STORES.md §3): 16 MiB. */
export const DEFAULT_OUTAGE_MEMORY = 16 * 1024 * 1024;

/** Whether `e` is the store failing, rather than the store refusing the caller's request. */
export function isStoreFailure(e: StoreError): boolean {
  return e.kind === "server" || e.kind === "timeout";
}

/** The size in bytes an `outageMemory` option names: a number of bytes, or a size as store URLs write them
 * ("16M", "512K", "1.5G"); 0 turns the outage memory off. */
export function outageMemorySize(option: number | string | undefined): number {
  if (option === undefined) return DEFAULT_OUTAGE_MEMORY;
  const bytes = typeof option === "string" ? parseSize(option) : option;
  if (!Number.isSafeInteger(bytes) || bytes < 0)
    throw new RangeError(`outageMemory is a size in bytes >= 0 (or such as "16M"), not ${String(option)}`);
  return bytes;
}

/** Milliseconds on a monotonic clock (not the wall clock, which may step). */
const monotonicMs = (): number => performance.now();

export class OutageMemory {
  /** A failure is on record and the outage memory has not been emptied since (what every good answer reads). */
  failing = false;
  /** When the last failure was seen, on `now`'s clock. */
  private lastFailureMs = 0;
  private readonly memory: MemoryStore;

  /** `now`: the monotonic clock in milliseconds (injectable for tests). */
  constructor(
    readonly capacity: number,
    private readonly now: () => number = monotonicMs,
  ) {
    this.memory = new MemoryStore({ capacity });
  }

  /** The store failed a request. */
  failed(): void {
    this.lastFailureMs = this.now();
    this.failing = true;
  }

  /** The store gave a good answer while `failing`: once no failure has been seen for QUIET_MS, everything kept is
   * dropped, nothing written back; within that second it is kept (another server may still be failing). True when
   * it was emptied. Callers check `failing` first, so a healthy store costs one field read. */
  answered(): boolean {
    if (!this.failing || this.now() - this.lastFailureMs < QUIET_MS) return false;
    this.recover();
    return true;
  }

  /** Everything kept is dropped, nothing written back, and the failure forgotten. */
  recover(): void {
    this.failing = false;
    this.memory.clearNow();
  }

  /** What is kept for `storeKey` (its entry, with the note a Cache keeps of what it decoded). */
  held(storeKey: string): Held | undefined {
    return this.memory.heldIfStored(storeKey);
  }

  /** Keeps a value whose write the store failed; false when it is not kept (larger than the memory's largest). */
  keep(storeKey: string, value: Uint8Array, ttlMs: number | undefined): boolean {
    return this.quietly(() => {
      this.memory.setNow(storeKey, value, ttlMs);
      return true;
    }, false);
  }

  forget(storeKeys: readonly string[]): void {
    this.quietly(() => this.memory.deleteManyNow(storeKeys), 0);
  }

  forgetPrefix(prefix: string): void {
    this.quietly(() => this.memory.purgePrefixNow(prefix), 0);
  }

  forgetTag(tag: string): void {
    this.quietly(() => this.memory.purgeTagNow(tag), 0);
  }

  clear(): void {
    this.memory.clearNow();
  }

  /** How many entries and bytes it holds now. */
  async size(): Promise<{ entries: number; bytes: number }> {
    const { entries, bytes } = await this.memory.stats();
    return { entries, bytes };
  }

  /** `work`, or `otherwise` when the memory store refuses it (a key it does not take, a value too large): the store
   * itself reports such a request to the caller. */
  private quietly<T>(work: () => T, otherwise: T): T {
    try {
      return work();
    } catch (e) {
      if (e instanceof StoreError) return otherwise;
      throw e;
    }
  }
}
