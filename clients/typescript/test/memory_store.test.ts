// The memory store's own bounds (spec/STORES.md §8): the least recently *used* entry is evicted first (a read
// refreshes recency, through the store and through Cache.fetch's synchronous hit path), by bytes and by
// max_entries, and counters/expiry go through relinking intact.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "fast-check";
import { Cache } from "../src/cache.js";
import { InvalidKey } from "../src/stores/errors.js";
import { ENTRY_OVERHEAD, MemoryStore } from "../src/stores/memory.js";

const bytes = (n: number): Uint8Array => new Uint8Array(n).fill(120);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("memory store recency", () => {
  test("max_entries evicts the least recently read, not the first written", async () => {
    const store = new MemoryStore({ maxEntries: 3 });
    for (const k of ["a", "b", "c"]) await store.set(k, bytes(1));
    assert.ok(store.getNow("a")); // a is now the most recent; b the least
    await store.set("d", bytes(1));
    assert.equal(store.getNow("b"), undefined);
    for (const k of ["a", "c", "d"]) assert.ok(store.getNow(k), k);
    // reads in the order a, c, d leave a the least recent
    await store.set("e", bytes(1));
    assert.equal(store.getNow("a"), undefined);
    assert.deepEqual((await store.stats()).entries, 3);
  });

  test("the byte bound evicts in recency order and keeps its weight exact", async () => {
    const one = 3 + 100 + ENTRY_OVERHEAD; // key + value + overhead (the largest value is 1/16 of capacity)
    const store = new MemoryStore({ capacity: one * 16 });
    const keys = Array.from({ length: 16 }, (_, i) => `k${String(i).padStart(2, "0")}`);
    for (const k of keys) await store.set(k, bytes(100));
    assert.equal((await store.stats()).bytes, one * 16);
    assert.ok(store.getNow("k00"));
    assert.ok(store.getNow("k01"));
    await store.set("n00", bytes(100));
    await store.set("n01", bytes(100));
    assert.equal(store.getNow("k02"), undefined);
    assert.equal(store.getNow("k03"), undefined);
    for (const k of ["k00", "k01", "k04", "n00", "n01"]) assert.ok(store.getNow(k), k);
    assert.equal((await store.stats()).bytes, one * 16);
    await store.delete("k00");
    await store.incr("n", 5);
    await store.clear();
    assert.deepEqual([(await store.stats()).entries, (await store.stats()).bytes], [0, 0]);
    await store.set("g", bytes(100));
    assert.ok(store.getNow("g"));
  });

  test("a rewritten key, a counter and an expired entry leave the list consistent", async () => {
    const store = new MemoryStore({ maxEntries: 2 });
    await store.set("a", bytes(1));
    await store.set("a", bytes(2));
    await store.incr("n", 1);
    await store.incr("n", 1); // relinks n as the newest
    await store.set("b", bytes(1)); // evicts a, the least recent
    assert.equal(store.getNow("a"), undefined);
    assert.equal(await store.incr("n", 0), 2);
    await store.set("t", bytes(1), 20);
    await sleep(40);
    assert.equal(store.getNow("t"), undefined);
    const stats = await store.stats();
    assert.equal(stats.expirations, 1);
    assert.equal(stats.entries, 1);
  });

  test("an invalid key read is refused even on the hit path's shortcut", () => {
    const store = new MemoryStore();
    assert.throws(() => store.getNow("has space"), InvalidKey);
    assert.throws(() => store.getNow(""), InvalidKey);
  });

  test("Cache.fetch hits refresh recency and count as hits; a long key is hashed and loads", async () => {
    const store = new MemoryStore({ maxEntries: 2 });
    const cache = new Cache(store);
    await cache.set("a", 1);
    await cache.set("b", 2);
    assert.equal(await cache.fetch("a", () => 0), 1);
    await cache.set("c", 3); // evicts b
    assert.equal(await cache.get("b"), undefined);
    assert.equal(await cache.fetch("a", () => 0), 1);
    const bad = cache.fetch("x".repeat(300), () => 7); // made safe by hashing: a miss that loads
    assert.equal(await bad, 7);
    const stats = cache.stats();
    assert.equal(stats.hits, 2);
    assert.equal(stats.loads, 1);
  });

  test("the recency list grows past its first arrays and reuses freed numbers in order", async () => {
    const store = new MemoryStore({ maxEntries: 150 });
    for (let i = 0; i < 300; i++) await store.set(`k${i}`, bytes(1)); // k0..k149 evicted
    for (let i = 150; i < 200; i++) assert.ok(store.getNow(`k${i}`), `k${i}`); // now the newest
    for (let i = 0; i < 50; i++) await store.set(`n${i}`, bytes(1)); // evicts k200..k249
    const present = (from: number, to: number, prefix = "k") =>
      Array.from({ length: to - from }, (_, i) => store.heldIfStored(`${prefix}${from + i}`) !== undefined);
    assert.ok(present(0, 150).every((p) => !p));
    assert.ok(present(150, 200).every((p) => p));
    assert.ok(present(200, 250).every((p) => !p));
    assert.ok(present(250, 300).every((p) => p));
    assert.ok(present(0, 50, "n").every((p) => p));
    assert.equal((await store.stats()).entries, 150);
  });

  test("any sequence of writes, reads, deletes, counters and clears evicts exactly as a plain LRU list would", async () => {
    // The model: keys from least to most recently used, an array searched and spliced (recency.ts must agree).
    const op = fc.oneof(
      fc.record({ kind: fc.constant("set" as const), key: fc.integer({ min: 0, max: 9 }) }),
      fc.record({ kind: fc.constant("get" as const), key: fc.integer({ min: 0, max: 9 }) }),
      fc.record({ kind: fc.constant("delete" as const), key: fc.integer({ min: 0, max: 9 }) }),
      fc.record({ kind: fc.constant("incr" as const), key: fc.integer({ min: 0, max: 9 }) }),
      fc.record({ kind: fc.constant("clear" as const), key: fc.constant(0) }),
    );
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 6 }), fc.array(op, { maxLength: 80 }), async (max, ops) => {
        const store = new MemoryStore({ maxEntries: max });
        let order: string[] = [];
        const use = (key: string) => {
          order = order.filter((k) => k !== key);
          order.push(key);
        };
        for (const { kind, key: n } of ops) {
          const key = `k${n}`;
          if (kind === "set") {
            await store.set(key, bytes(1));
            use(key);
          } else if (kind === "get") {
            assert.equal(store.getNow(key) !== undefined, order.includes(key), `get ${key}`);
            if (order.includes(key)) use(key);
          } else if (kind === "delete") {
            assert.equal(await store.delete(key), order.includes(key), `delete ${key}`);
            order = order.filter((k) => k !== key);
          } else if (kind === "incr") {
            // a counter over a 1-byte "x" value is refused; only a key holding a number or absent counts
            const held = store.getNow(key);
            if (held !== undefined) use(key);
            if (held === undefined || /^[0-9]+$/.test(Buffer.from(held).toString())) {
              await store.incr(key, 1);
              use(key);
            } else await assert.rejects(store.incr(key, 1));
          } else {
            await store.clear();
            order = [];
          }
          while (order.length > max) order.shift();
          const stats = await store.stats();
          assert.equal(stats.entries, order.length);
          const present = [];
          for (const k of ["k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9"])
            if (store.heldIfStored(k) !== undefined) present.push(k);
          // heldIfStored made each found key the newest, in name order: the model follows
          for (const k of present) use(k);
          assert.deepEqual(present.sort(), [...order].sort());
        }
      }),
      { numRuns: 300 },
    );
  });
});
