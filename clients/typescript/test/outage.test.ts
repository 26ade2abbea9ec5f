// When the store fails (spec/STORES.md §3): the outage memory (kept on a failed write with the store's expiry,
// answering the reads the store fails, emptied by a good answer from the store once no failure has been seen for a
// second and kept by one within that second, nothing written back, deletes and purges applied, bounded, off at 0), fetch's coalescing in the process while the store fails, and a server's
// probation: one probe at a time (§1), in Health and in the memcached and Redis stores.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { Cache } from "../src/cache.js";
import { DEFAULT_OUTAGE_MEMORY, OutageMemory, outageMemorySize, QUIET_MS } from "../src/outage.js";
import { type Counter, Health, type Store, type StoreStats } from "../src/stores/base.js";
import { InvalidKey, ServerError, type StoreError, StoreTimeout, TooLarge } from "../src/stores/errors.js";
import { openStore } from "../src/stores/index.js";
import { MemoryStore } from "../src/stores/memory.js";
import { Hostile } from "./support/servers.js";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A store over a memory store that fails every call while `down` (a ServerError, or a StoreTimeout after
 * `failAfterMs`), or refuses every call with `refuse` (an error of the caller's request, not a failure); counts its
 * reads. */
class FlakyStore implements Store {
  readonly backend = "flaky";
  readonly inner = new MemoryStore();
  down = false;
  failAfterMs = 0;
  refuse: (() => StoreError) | undefined;
  reads = 0;

  private async gate(): Promise<void> {
    if (this.refuse) throw this.refuse();
    if (!this.down) return;
    if (this.failAfterMs > 0) {
      await sleep(this.failAfterMs);
      throw new StoreTimeout(this.backend, "127.0.0.1:1", this.failAfterMs);
    }
    throw new ServerError(this.backend, "the connection closed", "127.0.0.1:1");
  }

  async get(key: string): Promise<Uint8Array | undefined> {
    this.reads++;
    await this.gate();
    return this.inner.get(key);
  }
  async getMany(keys: readonly string[]): Promise<Array<Uint8Array | undefined>> {
    this.reads++;
    await this.gate();
    return this.inner.getMany(keys);
  }
  async set(key: string, value: Uint8Array, ttlMs?: number): Promise<void> {
    await this.gate();
    return this.inner.set(key, value, ttlMs);
  }
  async setMany(items: ReadonlyArray<readonly [string, Uint8Array]>, ttlMs?: number): Promise<void> {
    await this.gate();
    return this.inner.setMany(items, ttlMs);
  }
  async add(key: string, value: Uint8Array, ttlMs?: number): Promise<boolean> {
    await this.gate();
    return this.inner.add(key, value, ttlMs);
  }
  async incr(key: string, delta: number | bigint, ttlMs?: number, create?: boolean): Promise<Counter | undefined> {
    await this.gate();
    return this.inner.incr(key, delta, ttlMs, create);
  }
  async deleteIf(key: string, expected: Uint8Array): Promise<boolean> {
    await this.gate();
    return this.inner.deleteIf(key, expected);
  }
  async delete(key: string): Promise<boolean> {
    await this.gate();
    return this.inner.delete(key);
  }
  async deleteMany(keys: readonly string[]): Promise<number> {
    await this.gate();
    return this.inner.deleteMany(keys);
  }
  async clear(): Promise<void> {
    await this.gate();
    return this.inner.clear();
  }
  async purgePrefix(prefix: string): Promise<number | null> {
    await this.gate();
    return this.inner.purgePrefix(prefix);
  }
  async purgeTag(tag: string): Promise<number | null> {
    await this.gate();
    return this.inner.purgeTag(tag);
  }
  async stats(): Promise<StoreStats> {
    return this.inner.stats();
  }
  maxValueBytes(): number {
    return this.inner.maxValueBytes();
  }
  async close(): Promise<void> {}
}

function counting<T>(value: T, ms = 0): { load: () => Promise<T>; calls: () => number } {
  let calls = 0;
  return {
    load: async () => {
      calls++;
      if (ms > 0) await sleep(ms);
      return value;
    },
    calls: () => calls,
  };
}

const entries = async (cache: Cache): Promise<number> => (await (cache.outageMemory as OutageMemory).size()).entries;

describe("the outage memory (spec/STORES.md §3, 'When the store fails')", () => {
  test("a fetch while the store fails keeps the loaded value, with its TTL and stale window, for the failed reads", async () => {
    const store = new FlakyStore();
    const cache = new Cache(store, { namespace: "app" });
    store.down = true;
    const loader = counting("v1");
    assert.equal(await cache.fetch("k", loader.load, { ttlMs: 1000, staleMs: 1000 }), "v1");
    assert.equal(await cache.fetch("k", loader.load, { ttlMs: 1000, staleMs: 1000 }), "v1");
    assert.equal(loader.calls(), 1, "the second fetch is answered from the outage memory");
    assert.equal(await cache.get("k"), "v1", "a read the store fails is answered from it");
    assert.equal(await cache.has("k"), true);
    assert.deepEqual([...(await cache.getMany(["k", "other"]))], [["k", "v1"]]);
    assert.ok(cache.outageMemory?.held(cache.storeKey("k")) !== undefined, "kept under the store key");
    await sleep(1200);
    assert.equal(await cache.get("k"), undefined, "past its TTL it is not fresh");
    assert.ok(cache.outageMemory?.held(cache.storeKey("k")) !== undefined, "but kept for its stale window");
    await sleep(1000);
    assert.equal(cache.outageMemory?.held(cache.storeKey("k")), undefined, "gone with the store's expiry");
    assert.equal(await store.inner.get(cache.storeKey("k")), undefined, "the store got nothing");
  });

  test("a plain set the store fails rejects, and its value is kept", async () => {
    const store = new FlakyStore();
    const cache = new Cache(store);
    store.down = true;
    await assert.rejects(cache.set("k", "v", { ttlMs: 60_000 }), ServerError);
    await assert.rejects(cache.setMany({ a: 1, b: 2 }, { ttlMs: 60_000 }), ServerError);
    assert.equal(await cache.get("k"), "v");
    assert.deepEqual(
      [...(await cache.getMany(["a", "b", "c"]))],
      [
        ["a", 1],
        ["b", 2],
      ],
    );
  });

  test("the store answers first: its good answer, even a miss, once no failure for a second, empties the outage memory, nothing written back", async () => {
    const store = new FlakyStore();
    const cache = new Cache(store);
    store.down = true;
    await cache.fetch("a", async () => "outage-a", { ttlMs: 60_000 });
    await cache.fetch("b", async () => "outage-b", { ttlMs: 60_000 });
    assert.equal(await entries(cache), 2);
    store.down = false;
    await store.inner.set(cache.storeKey("b"), cache.encode("newer-b")[0]);
    assert.equal(await cache.get("a"), undefined, "the store's miss, not the outage memory's copy");
    assert.equal(await entries(cache), 2, "kept: a failure was seen less than a second ago");
    assert.equal(cache.outageMemory?.failing, true);
    await sleep(QUIET_MS + 50);
    assert.equal(await cache.get("b"), "newer-b", "the store's newer value");
    assert.equal(await entries(cache), 0, "emptied by the good answer once no failure for a second");
    assert.equal(await store.inner.get(cache.storeKey("a")), undefined, "nothing written back");
    const loader = counting("reloaded");
    assert.equal(await cache.fetch("a", loader.load), "reloaded");
    assert.equal(loader.calls(), 1, "loaded again once after recovery");
    assert.equal(cache.outageMemory?.failing, false);
  });

  test("any good answer empties it once no failure for a second: a write, a lock", async () => {
    const store = new FlakyStore();
    const cache = new Cache(store);
    store.down = true;
    await cache.fetch("a", async () => "x");
    store.down = false;
    await sleep(QUIET_MS + 50);
    await cache.set("other", 1);
    assert.equal(await entries(cache), 0);
    assert.equal(cache.outageMemory?.failing, false);
  });

  test("a good answer within a second of a failure keeps it (another server may still be failing)", async () => {
    const store = new FlakyStore();
    const cache = new Cache(store);
    store.down = true;
    const loader = counting("v1");
    assert.equal(await cache.fetch("a", loader.load, { ttlMs: 60_000 }), "v1");
    assert.equal(loader.calls(), 1);
    store.down = false;
    await cache.set("other", 1);
    assert.equal(await cache.get("other"), 1, "good answers from the store");
    assert.equal(await entries(cache), 1, "kept");
    assert.equal(cache.outageMemory?.failing, true);
    store.down = true;
    assert.equal(await cache.fetch("a", loader.load, { ttlMs: 60_000 }), "v1");
    assert.equal(loader.calls(), 1, "the store fails again: answered from the outage memory, not loaded");
  });

  test("the quiet second on the outage memory's clock: counted from the last failure, emptied at 1 s exactly", () => {
    let now = 5_000;
    const outage = new OutageMemory(1024 * 1024, () => now);
    assert.equal(outage.answered(), false, "healthy: nothing to empty");
    outage.failed();
    outage.keep("k", new Uint8Array([1]), 60_000);
    now += QUIET_MS - 1;
    assert.equal(outage.answered(), false, "within the second");
    assert.ok(outage.held("k") !== undefined);
    outage.failed(); // another server fails: the second starts again
    now += QUIET_MS - 1;
    assert.equal(outage.answered(), false, "within the second of the last failure");
    assert.ok(outage.held("k") !== undefined);
    assert.equal(outage.failing, true);
    now += 1;
    assert.equal(outage.answered(), true, "a second without a failure");
    assert.equal(outage.held("k"), undefined);
    assert.equal(outage.failing, false);
    assert.equal(outage.answered(), false);
  });

  test("deletes and purges apply to it, even when the store fails them", async () => {
    const store = new FlakyStore();
    const cache = new Cache(store, { namespace: "ns" });
    store.down = true;
    for (const k of ["d1", "d2", "d3", "p:1", "p:2", "q"])
      await cache.fetch(k, async () => k, { ttlMs: 60_000, tags: k === "q" ? ["t"] : [] });
    assert.equal(await entries(cache), 6);
    await assert.rejects(cache.delete("d1"), ServerError);
    assert.equal(await cache.get("d1"), undefined);
    await assert.rejects(cache.deleteMany(["d2"]), ServerError);
    assert.equal(await cache.get("d2"), undefined);
    await assert.rejects(cache.purge({ prefix: "p:" }), ServerError);
    assert.equal(await cache.get("p:1"), undefined);
    assert.equal(await cache.get("p:2"), undefined);
    await assert.rejects(cache.purge({ tag: "t" }), ServerError);
    assert.equal(await cache.get("q"), undefined);
    assert.equal(await cache.get("d3"), "d3");
    await assert.rejects(cache.clear(), ServerError);
    assert.equal(await cache.get("d3"), undefined);
    assert.equal(await entries(cache), 0);
  });

  test("its size bounds it, and a value larger than its largest entry is not kept", async () => {
    const store = new FlakyStore();
    const cache = new Cache(store, { outageMemory: "64K", compressor: "none" });
    assert.equal(cache.outageMemory?.capacity, 64 * 1024);
    store.down = true;
    for (let i = 0; i < 200; i++) await cache.fetch(`k${i}`, async () => "x".repeat(1000));
    const { entries: n, bytes } = await (cache.outageMemory as OutageMemory).size();
    assert.ok(bytes <= 64 * 1024, `${bytes} bytes`);
    assert.ok(n > 10 && n < 200, `${n} entries`);
    assert.equal(await cache.get("k199"), "x".repeat(1000), "the most recent are kept");
    assert.equal(await cache.get("k0"), undefined, "the oldest went first");
    await cache.fetch("big", async () => "y".repeat(8 * 1024));
    assert.equal(await cache.get("big"), undefined, "over 1/16 of the size: not kept");
  });

  test("0 turns it off; memory:// has none; sizes read as store URLs write them", async () => {
    const store = new FlakyStore();
    const cache = new Cache(store, { outageMemory: 0 });
    assert.equal(cache.outageMemory, undefined);
    store.down = true;
    const loader = counting("v");
    await cache.fetch("k", loader.load);
    await cache.fetch("k", loader.load);
    assert.equal(loader.calls(), 2, "without it, each fetch loads");
    assert.equal(await cache.get("k"), undefined);
    assert.equal(new Cache("memory://").outageMemory, undefined);
    assert.equal(new Cache(new FlakyStore()).outageMemory?.capacity, DEFAULT_OUTAGE_MEMORY);
    assert.equal(DEFAULT_OUTAGE_MEMORY, 16 * 1024 * 1024);
    assert.equal(outageMemorySize("16M"), 16 * 1024 * 1024);
    assert.equal(outageMemorySize("1.5K"), 1536);
    assert.equal(outageMemorySize("0"), 0);
    assert.throws(() => outageMemorySize("-1"), RangeError);
    assert.throws(() => outageMemorySize("lots"), RangeError);
    assert.throws(() => outageMemorySize(-5), RangeError);
    assert.throws(() => new Cache(new FlakyStore(), { outageMemory: 1.5 }), RangeError);
    // a namespace shares its parent's
    const parent = new Cache(new FlakyStore());
    assert.equal(parent.withNamespace("x").outageMemory, parent.outageMemory);
  });

  test("an error of the request (invalid key, too large, not a counter) is not an outage", async () => {
    const store = new FlakyStore();
    const cache = new Cache(store);
    for (const refuse of [() => new TooLarge("flaky", "k", 10, 1), () => new InvalidKey("flaky", "k", "bad")]) {
      store.refuse = refuse;
      await cache.fetch("k", async () => "v");
      await assert.rejects(cache.set("k2", "v"));
      assert.equal(cache.outageMemory?.failing, false);
      assert.equal(await entries(cache), 0);
    }
  });
});

describe("fetch while the store fails: coalescing in the process", () => {
  test("callers of one key share one load; no waiter reads the store again or loads", async () => {
    const store = new FlakyStore();
    store.down = true;
    store.failAfterMs = 60; // a frozen server: every call times out
    const cache = new Cache(store, { outageMemory: 0 });
    const loader = counting("v", 50);
    const calls = Array.from({ length: 16 }, () => cache.fetch("k", loader.load));
    const got = await Promise.all(calls);
    assert.deepEqual(new Set(got), new Set(["v"]));
    assert.equal(loader.calls(), 1);
    assert.equal(store.reads, 16, "one read each, none after the leader's lock and write failed");
    assert.equal(cache.stats().coalescedWaits, 15);
  });

  test("the leader's error reaches every waiter; nothing is kept", async () => {
    const store = new FlakyStore();
    store.down = true;
    const cache = new Cache(store);
    let calls = 0;
    const failing = async (): Promise<string> => {
      calls++;
      await sleep(30);
      throw new Error("loader failed");
    };
    const all = await Promise.allSettled(Array.from({ length: 8 }, () => cache.fetch("k", failing)));
    assert.ok(all.every((r) => r.status === "rejected"));
    assert.equal(calls, 1);
    assert.equal(await entries(cache), 0);
  });
});

describe("probation: one probe at a time (spec/STORES.md §1)", () => {
  const policy = { failures: 2, retryAfterMs: 100 };

  test("Health admits one probe after retry_after, refuses the rest until its outcome", () => {
    const h = new Health();
    assert.equal(h.admits(0), true);
    assert.equal(h.record(false, policy, 0), false);
    assert.equal(h.record(false, policy, 0), true, "ejected after `failures`");
    assert.equal(h.admits(50), false);
    assert.equal(h.admits(100), true, "the probe");
    assert.equal(h.onProbation(), true);
    assert.equal(h.admits(101), false, "while the probe is out");
    assert.equal(h.admits(150), false);
    h.record(true, policy, 160);
    assert.equal(h.admits(161), true, "the probe answered: back");
    assert.equal(h.admits(161), true);
    assert.equal(h.onProbation(), false);
  });

  test("a probe that fails ejects again; one whose outcome never comes is given up after retry_after", () => {
    const h = new Health();
    h.record(false, policy, 0);
    h.record(false, policy, 0);
    assert.equal(h.admits(100), true);
    assert.equal(h.record(false, policy, 120), true, "one failure on probation ejects");
    assert.equal(h.admits(150), false);
    assert.equal(h.admits(220), true, "the next probe");
    assert.equal(h.admits(250), false);
    assert.equal(h.admits(320), true, "a probe lost for retry_after: another one goes");
    assert.equal(h.admits(321), false);
  });

  test("admitsNow: the hot path admits a healthy server; after an ejection, one probe", async () => {
    const h = new Health();
    assert.equal(h.admitsNow(), true);
    const now = Date.now();
    h.record(false, { failures: 1, retryAfterMs: 300 }, now);
    assert.equal(h.admitsNow(), false);
    await sleep(350);
    assert.equal(h.admitsNow(), true);
    assert.equal(h.admitsNow(), false);
    h.record(true, policy, Date.now());
    assert.equal(h.admitsNow(), true);
  });

  for (const protocol of ["memcached", "redis"] as const) {
    test(`${protocol}: while the probe waits on a silent server, the other requests fail at once`, async () => {
      const server = await Hostile.start(protocol, "silent");
      const store = openStore(`${protocol}://${server.address}?timeout=1s&failures=1&retry_after=200ms`);
      try {
        await assert.rejects(store.get("k"));
        await sleep(250);
        const started = Date.now();
        const settled: number[] = [];
        const calls = Array.from({ length: 4 }, () =>
          store.get("k").then(
            () => assert.fail("a silent server answered"),
            () => settled.push(Date.now() - started),
          ),
        );
        await Promise.all(calls);
        settled.sort((a, b) => a - b);
        assert.ok((settled[2] as number) < 500, `three failed at once: ${settled}`);
        assert.ok((settled[3] as number) >= 900, `the probe waited for the timeout: ${settled}`);
      } finally {
        await store.close();
        await server.stop();
      }
    });
  }
});
