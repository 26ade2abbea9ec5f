// The `'use cache'` handler (Next 16's cacheHandlers interface) against memory:// and a memcached started here,
// called as Next calls it: a pending entry's stream stored whole, every get a new stream of the same bytes, a get
// during a set waits for it, tags revalidate (now, and stale-first as revalidate -1) through the records the ISR
// handler shares and through `larder store purge --tag` from the Rust binary; a failed, oversized or hostile value
// is a miss or a skipped write, counted.

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { decode, encode } from "../src/entry.js";
import { larderCacheHandler } from "../src/next.js";
import { larderUseCacheHandler, type UseCacheEntry, type UseCacheHandler } from "../src/next_use_cache.js";
import type { Store } from "../src/stores/base.js";
import { openStore } from "../src/stores/index.js";
import { LARDER_BIN } from "./support/paths.js";
import { type ServerProcess, startMemcached } from "./support/servers.js";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function streamOf(...chunks: Uint8Array[]): ReadableStream<Uint8Array> {
  return new ReadableStream({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(chunk);
      controller.close();
    },
  });
}

async function bytesOf(stream: ReadableStream<Uint8Array>): Promise<Buffer> {
  const chunks: Uint8Array[] = [];
  for await (const chunk of stream as unknown as AsyncIterable<Uint8Array>) chunks.push(chunk);
  return Buffer.concat(chunks);
}

function entry(value: ReadableStream<Uint8Array>, tags: string[], timestamp = Date.now()): UseCacheEntry {
  return { value, tags, stale: 30, timestamp, expire: 3600, revalidate: 60 };
}

for (const which of ["memory", "memcached"] as const) {
  describe(`'use cache' handler on ${which}://`, () => {
    let memcached: ServerProcess | undefined;
    let storeUrl: string;
    let store: Store;
    let handler: UseCacheHandler;
    const namespace = `u${process.pid}`;
    const skew = which === "memcached" ? 1100 : 5;

    before(async () => {
      if (which === "memcached") {
        memcached = await startMemcached();
        storeUrl = `memcached://${memcached.address}`;
      } else storeUrl = "memory://";
      store = openStore(storeUrl);
      handler = larderUseCacheHandler({ store, namespace });
    });
    after(async () => {
      await store?.close();
      await memcached?.stop();
    });

    test("a streamed value comes back whole, as a new stream each time, with Next's times and tags", async () => {
      const timestamp = Date.now();
      await handler.set(
        "k1",
        Promise.resolve(entry(streamOf(Buffer.from("ab"), Buffer.from("cd")), ["t1"], timestamp)),
      );
      for (let i = 0; i < 2; i++) {
        const got = await handler.get("k1", []);
        assert.ok(got !== undefined);
        assert.equal((await bytesOf(got.value)).toString(), "abcd");
        assert.deepEqual(
          {
            tags: got.tags,
            stale: got.stale,
            timestamp: got.timestamp,
            expire: got.expire,
            revalidate: got.revalidate,
          },
          { tags: ["t1"], stale: 30, timestamp, expire: 3600, revalidate: 60 },
        );
      }
      const stored = decode((await store.get(`${namespace}:use-cache:k1`)) as Uint8Array);
      assert.deepEqual(stored.tags, ["t1"]);
      assert.equal(Number(stored.createdAt), timestamp);
      assert.equal(Number(stored.expiresAt), timestamp + 60_000);
      assert.equal(Number(stored.staleMs), 3_540_000);
    });

    test("a get while the set still streams waits for it", async () => {
      let finish: (e: UseCacheEntry) => void = () => undefined;
      const pending = new Promise<UseCacheEntry>((resolve) => {
        finish = resolve;
      });
      const setting = handler.set("k2", pending);
      const getting = handler.get("k2", []);
      await sleep(20);
      finish(entry(streamOf(Buffer.from("late")), []));
      await setting;
      const got = await getting;
      assert.equal((await bytesOf((got as UseCacheEntry).value)).toString(), "late");
    });

    test("tags revalidate: now (also a soft tag, and through the ISR handler), and stale-first as revalidate -1", async () => {
      await handler.set("k3", Promise.resolve(entry(streamOf(Buffer.from("3")), ["now"])));
      await handler.set("k4", Promise.resolve(entry(streamOf(Buffer.from("4")), [])));
      await handler.set("k5", Promise.resolve(entry(streamOf(Buffer.from("5")), ["later"])));
      await handler.set("k6", Promise.resolve(entry(streamOf(Buffer.from("6")), ["isr"])));
      await sleep(skew);
      await handler.updateTags(["now", "_N_T_/soft"]);
      await handler.updateTags(["later"], { expire: 3600 });
      const isr = new (larderCacheHandler({ store, namespace }))({});
      await isr.revalidateTag("isr");
      assert.equal(await handler.get("k3", []), undefined);
      assert.equal(await handler.get("k4", ["_N_T_/soft"]), undefined);
      assert.equal((await handler.get("k4", ["_N_T_/other"]))?.revalidate, 60);
      assert.equal((await handler.get("k5", []))?.revalidate, -1);
      assert.equal(await handler.get("k6", []), undefined);
      assert.equal(await handler.getExpiration(["now"]), Number.POSITIVE_INFINITY);
    });

    test("a failed, oversized or unfinished value is not stored; a hostile entry is a miss", async () => {
      const small = larderUseCacheHandler({ store, namespace, maxEntryBytes: 1000, streamTimeoutMs: 100 });
      const failing = new ReadableStream<Uint8Array>({
        start(controller) {
          controller.enqueue(Buffer.from("partial"));
          controller.error(new Error("render failed"));
        },
      });
      await small.set("f1", Promise.resolve(entry(failing, [])));
      await small.set("f2", Promise.resolve(entry(streamOf(randomBytes(800), randomBytes(800)), [])));
      await small.set("f3", Promise.reject(new Error("no entry")));
      await small.set("f4", Promise.resolve(entry(new ReadableStream({ start() {} }), []))); // never ends
      await small.set("f5", Promise.resolve({ ...entry(streamOf(Buffer.from("x")), []), timestamp: -5 }));
      assert.deepEqual(small.stats.notStored, { "stream-failed": 3, "too-large": 1, "bad-entry": 1 });
      for (const key of ["f1", "f2", "f3", "f4", "f5"]) assert.equal(await small.get(key, []), undefined);
      const hostile = [
        Buffer.from("junk"),
        encode({ value: "not bytes", tags: [], stale: 0, timestamp: 1, expire: 1, revalidate: 1 }),
        encode({ value: new Uint8Array(1), tags: [""], stale: 0, timestamp: 1, expire: 1, revalidate: 1 }),
        encode({ value: new Uint8Array(1), tags: [], stale: 0, timestamp: 1.5, expire: 1, revalidate: 1 }),
      ];
      for (const bytes of hostile) {
        await store.set(`${namespace}:use-cache:h`, bytes);
        assert.equal(await small.get("h", []), undefined);
      }
      assert.equal(small.stats.rejected, hostile.length);
    });

    if (which === "memcached")
      test("`larder store purge --tag` from the Rust binary reaches it", async () => {
        await handler.set("k9", Promise.resolve(entry(streamOf(Buffer.from("9")), ["rust-tag"])));
        await sleep(skew);
        const r = spawnSync(LARDER_BIN, ["store", "purge", "--store", storeUrl, "--tag", "rust-tag"], {
          encoding: "utf8",
        });
        assert.equal(r.status, 0, r.stderr);
        assert.equal(await handler.get("k9", []), undefined);
      });
  });
}

test("the package exports both handlers by the names next.config gives them", async () => {
  const isr = (await import("larder-cache/next" as string)) as { default: unknown; larderCacheHandler: unknown };
  assert.equal(typeof isr.default, "function");
  assert.equal(typeof isr.larderCacheHandler, "function");
  const useCache = (await import("larder-cache/next/use-cache" as string)) as { default: Record<string, unknown> };
  for (const method of ["get", "set", "refreshTags", "getExpiration", "updateTags"])
    assert.equal(typeof useCache.default[method], "function", method);
});
