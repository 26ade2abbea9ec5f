// The memory store's own bounds (spec/STORES.md §8): the least recently *used* entry is evicted first (a read
// refreshes recency, through the store and through Cache.fetch's synchronous hit path), by bytes and by
// max_entries, and counters/expiry go through relinking intact.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
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
});
