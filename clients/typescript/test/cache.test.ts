// Cache over memory, memcached and Redis: the verbs, namespaces, versions, tags, counters; fetch coalescing in the
// process, the stale window, loader failures; and the lock policy across independent clients of one shared store
// (spec/STORES.md §3): a burst of misses and a burst of stale reads run the loader once.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Cache } from "../src/cache.js";
import { decode } from "../src/entry.js";
import { readHeader } from "../src/header.js";
import { openStore, type Store } from "../src/stores/index.js";
import { MemoryStore } from "../src/stores/memory.js";
import { type ServerProcess, startMemcached, startPostgres, startRedis } from "./support/servers.js";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
let n = 0;
const fresh = (name: string): string => `c${process.pid}-${++n}-${name}`;

let memcached: ServerProcess;
let redis: ServerProcess;
let postgres: ServerProcess & { url: string };
before(async () => {
  [memcached, redis, postgres] = await Promise.all([startMemcached(), startRedis(), startPostgres()]);
});
after(async () => {
  await Promise.all([memcached?.stop(), redis?.stop(), postgres?.stop()]);
});

const URLS: Array<[string, () => string]> = [
  ["memory", () => "memory://"],
  ["memcached", () => `memcached://${memcached.address}?timeout=1s`],
  ["redis", () => `redis://${redis.address}/4?timeout=1s`],
  ["postgres", () => `${postgres.url}?timeout=2s&connect_timeout=2s&table=cache_test`],
];

for (const [name, url] of URLS) {
  describe(`Cache on ${name}`, () => {
    let cache: Cache;
    before(() => {
      cache = new Cache(url(), { namespace: "app" });
    });
    after(async () => {
      await cache.close();
    });

    test("a value read again is the one decoded before until another client rewrites it; objects are not shared", async () => {
      const k = fresh("memo");
      // Another Cache over the same store: its own memo of decoded values, as another process would have.
      const other = new Cache(cache.store, { namespace: "app" });
      await cache.set(k, "first");
      assert.equal(await cache.get(k), "first");
      assert.equal(await cache.get(k), "first");
      await other.set(k, "second");
      assert.equal(await cache.get(k), "second");
      assert.equal(await cache.fetch(k, () => "never"), "second");
      assert.deepEqual(await cache.getMany([k]), new Map([[k, "second"]]));
      await other.set(k, "versioned", { version: "v2" });
      assert.equal(await cache.get(k, { version: "v1" }), undefined);
      assert.equal(await cache.get(k, { version: "v2" }), "versioned");
      await other.set(k, { n: 1 });
      const [x, y] = [await cache.get(k), await cache.get(k)];
      assert.deepEqual(x, { n: 1 });
      assert.notEqual(x, y, "each reader gets its own object");
    });

    test("set, get, getMany, add, delete, has", async () => {
      const [a, b] = [fresh("a"), fresh("b")];
      await cache.set(a, { id: 7, name: "Ada", tags: ["x"], score: 1.5 });
      await cache.setMany({ [b]: [1, 2, 3] });
      assert.deepEqual(await cache.get(a), { id: 7, name: "Ada", tags: ["x"], score: 1.5 });
      assert.deepEqual(
        await cache.getMany([a, b, fresh("none")]),
        new Map<string, unknown>([
          [a, { id: 7, name: "Ada", tags: ["x"], score: 1.5 }],
          [b, [1, 2, 3]],
        ]),
      );
      assert.equal(await cache.add(a, 2), false);
      assert.equal(await cache.has(a), true);
      assert.equal(await cache.delete(a), true);
      assert.equal(await cache.get(a), undefined);
      assert.equal(cache.storeKey("k"), "app:k");
      const raw = await cache.store.get(cache.storeKey(b));
      assert.deepEqual(decode(raw as Uint8Array).value, [1, 2, 3]);
    });
    test("any key works: unsafe keys are hashed by safeKey", async () => {
      const key = `spaces and\nnewlines ${"é".repeat(300)}`;
      await cache.set(key, "v");
      assert.equal(await cache.get(key), "v");
    });
    test("versions, ttl, tags and purge", async () => {
      const k = fresh("v");
      await cache.set(k, "one", { version: "v1", tags: ["t1"], ttlMs: 60_000 });
      assert.equal(await cache.get(k, { version: "v1" }), "one");
      assert.equal(await cache.get(k, { version: "v2" }), undefined);
      const short = fresh("short");
      await cache.set(short, "x", { ttlMs: 1 });
      await sleep(20);
      assert.equal(await cache.get(short), undefined);
      const tagged = fresh("tagged");
      await cache.set(tagged, "t", { tags: ["purge-me"] });
      await sleep(1100); // written before the purge by more than memcached's purge_skew
      await cache.purge({ tag: "purge-me" });
      assert.equal(await cache.get(tagged), undefined);
    });
    test("counters", async () => {
      const k = fresh("n");
      assert.equal(await cache.incr(k), 1);
      assert.equal(await cache.incr(k, 5), 6);
      assert.equal(await cache.decr(k, 2), 4);
      assert.equal(await cache.get(k), 4);
    });
    test("fetch runs the loader once for concurrent callers and caches the result", async () => {
      const k = fresh("f");
      let loads = 0;
      const loader = async () => {
        loads++;
        await sleep(30);
        return { loaded: loads };
      };
      const results = await Promise.all(Array.from({ length: 20 }, () => cache.fetch(k, loader, { ttlMs: 60_000 })));
      assert.equal(loads, 1);
      for (const r of results) assert.deepEqual(r, { loaded: 1 });
      assert.deepEqual(await cache.fetch(k, loader), { loaded: 1 });
      assert.equal(loads, 1);
    });
    test("a loader's rejection reaches every waiting caller and nothing is cached", async () => {
      const k = fresh("fail");
      let calls = 0;
      const failing = async (): Promise<number> => {
        calls++;
        // Callers join a computation once their own store read has answered: the loader outlasts a slow read on
        // a loaded machine, so all five are waiting callers.
        await sleep(300);
        throw new Error("boom");
      };
      const all = await Promise.allSettled(Array.from({ length: 5 }, () => cache.fetch(k, failing)));
      assert.ok(all.every((r) => r.status === "rejected" && /boom/.test(String(r.reason))));
      assert.equal(calls, 1);
      assert.equal(await cache.get(k), undefined);
      assert.equal(await cache.fetch(k, () => 5), 5);
    });
    test("stale values are served while one caller recomputes", async () => {
      const k = fresh("stale");
      await cache.fetch(k, () => "old", { ttlMs: 1000, staleMs: 60_000 });
      await sleep(2100);
      let loads = 0;
      const slow = async () => {
        loads++;
        await sleep(100);
        return "new";
      };
      const first = await Promise.all(
        Array.from({ length: 10 }, () => cache.fetch(k, slow, { ttlMs: 60_000, staleMs: 60_000 })),
      );
      assert.equal(loads, 1);
      assert.ok(first.includes("old"), String(first));
      assert.equal(await cache.fetch(k, slow), "new");
    });
  });
}

describe("the lock policy across independent clients of one shared store", () => {
  for (const [name, url] of URLS.slice(1)) {
    test(`${name}: a burst of misses from 5 clients runs the loader once`, async () => {
      const caches = Array.from({ length: 5 }, () => new Cache(url()));
      try {
        const k = fresh("burst");
        let loads = 0;
        const loader = async () => {
          loads++;
          await sleep(150);
          return "value";
        };
        const results = await Promise.all(
          caches.flatMap((c) => [c.fetch(k, loader, { ttlMs: 60_000 }), c.fetch(k, loader, { ttlMs: 60_000 })]),
        );
        assert.equal(loads, 1);
        assert.ok(results.every((r) => r === "value"));
      } finally {
        for (const c of caches) await c.close();
      }
    });
    test(`${name}: a stale entry read by 5 clients is refreshed once, the others served stale`, async () => {
      const caches = Array.from({ length: 5 }, () => new Cache(url()));
      try {
        const k = fresh("stale-burst");
        await (caches[0] as Cache).set(k, "old", { ttlMs: 1000, staleMs: 60_000 });
        // Every client connected (and, on PostgreSQL, checked the schema) before the burst: on a loaded machine a
        // first connection can outlast the leader's refresh, and that client would then read the new value.
        await Promise.all(caches.map((c) => c.get(`${k}-warm`)));
        await sleep(2100);
        let loads = 0;
        const loader = async () => {
          loads++;
          await sleep(400);
          return "new";
        };
        const results = await Promise.all(caches.map((c) => c.fetch(k, loader, { ttlMs: 60_000 })));
        assert.equal(loads, 1);
        assert.equal(results.filter((r) => r === "old").length, 4);
      } finally {
        for (const c of caches) await c.close();
      }
    });
  }
  test("a store that does not answer reads as a miss and fetch still loads", async () => {
    const store: Store = openStore("memcached://127.0.0.1:1?timeout=100ms&connect_timeout=100ms");
    const cache = new Cache(store);
    assert.equal(await cache.get("k"), undefined);
    assert.equal(await cache.fetch("k", () => 42), 42);
    assert.ok(cache.stats().storeErrors >= 2);
    await cache.close();
  });
});

describe("Cache on memory: a read looks the namespaced key up before making it safe", () => {
  test("safe and unsafe keys, namespaced or not, each read once from the store and counted once", async () => {
    const store = new MemoryStore();
    const plain = new Cache(store);
    const spaced = plain.withNamespace("ns");
    const unsafe = `a key with spaces ${"é".repeat(200)}`;
    for (const [cache, key] of [
      [plain, "k"],
      [spaced, "k"],
      [plain, unsafe],
      [spaced, unsafe],
    ] as const) {
      const before = await store.stats();
      assert.equal(await cache.fetch(key, () => `v ${cache.namespace}`), `v ${cache.namespace}`);
      assert.equal(await cache.fetch(key, () => "never"), `v ${cache.namespace}`);
      assert.equal(await cache.get(key), `v ${cache.namespace}`);
      assert.deepEqual(await cache.getMany([key]), new Map([[key, `v ${cache.namespace}`]]));
      assert.ok(store.getNow(cache.storeKey(key)), "stored under its safe key (FORMAT.md §5.1, §5.2)");
      const after = await store.stats();
      // The store is asked once per read: the first fetch's read and its read again under the lock miss; the
      // second fetch, get, getMany and getNow above hit.
      assert.equal(after.misses - before.misses, 2);
      assert.equal(after.hits - before.hits, 4);
    }
    assert.equal(spaced.storeKey(unsafe).startsWith("ns:a#"), true);
    assert.equal(await spaced.get(`${unsafe}!`), undefined);
    await assert.rejects(
      plain.fetch("\ud800", () => 1),
      /InvalidKey|lone surrogate/,
    );
  });
});

describe("compression by default (spec/STORES.md §8)", () => {
  const text = "larder ".repeat(1000); // 7,000 bytes that LZ4 shrinks a lot
  const compressorOf = (data: Uint8Array | undefined): string => {
    assert.ok(data !== undefined, "stored");
    return readHeader(data).compressor;
  };

  test("a Cache on memory:// stores uncompressed unless a compressor is named", async () => {
    const store = new MemoryStore();
    await new Cache(store).set("plain", text);
    assert.equal(compressorOf(store.getNow("plain")), "none");
    await new Cache(store, { compressor: "lz4" }).set("named", text);
    assert.equal(compressorOf(store.getNow("named")), "lz4");
    assert.equal(await new Cache(store).get("named"), text, "and reads what it did not write alike");
  });

  test("a Cache on a shared store compresses with lz4", async () => {
    const url = `memcached://${memcached.address}?timeout=1s`;
    const key = fresh("lz4");
    const cache = new Cache(url);
    await cache.set(key, text);
    const store = openStore(url);
    assert.equal(compressorOf(await store.get(key)), "lz4");
    await Promise.all([cache.close(), store.close()]);
  });
});
