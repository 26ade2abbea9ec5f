// The store contract (spec/STORES.md §2, §3) on every store this client has, against real servers: keys refused
// before anything is sent, expiry (ttl and the entry's own), add, counters, delete_if, purges, sizes.

import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { encode } from "../src/entry.js";
import { openStore, type Store, type StoreError } from "../src/stores/index.js";
import type { MemcachedStore } from "../src/stores/memcached.js";
import { RedisCluster, type ServerProcess, startMemcached, startPostgres, startRedis } from "./support/servers.js";

const bytes = (s: string): Uint8Array => new Uint8Array(Buffer.from(s));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
let counter = 0;
const fresh = (name: string): string => `t${process.pid}-${++counter}-${name}`;

function contract(name: string, open: () => Store, exactPurges: boolean): void {
  describe(`${name} store`, () => {
    let store: Store;
    before(() => {
      store = open();
    });
    after(async () => {
      await store.close();
    });

    test("set, get, getMany, delete", async () => {
      const [a, b] = [fresh("a"), fresh("b")];
      await store.set(a, bytes("1"));
      await store.setMany([[b, bytes("2")]]);
      assert.deepEqual(await store.get(a), bytes("1"));
      assert.deepEqual(await store.getMany([a, fresh("missing"), b]), [bytes("1"), undefined, bytes("2")]);
      assert.deepEqual(await store.getMany([b, a, b]), [bytes("2"), bytes("1"), bytes("2")], "a key asked twice");
      assert.equal(await store.delete(a), true);
      assert.equal(await store.delete(a), false);
      assert.equal(await store.get(a), undefined);
      assert.equal(await store.deleteMany([b, fresh("none")]), 1);
    });
    test("values on either side of the size written in parts (16 KiB) come back whole, in order with others", async () => {
      const sizes = [16 * 1024 - 1, 16 * 1024, 200 * 1024];
      const keys = sizes.map((n) => fresh(`big${n}`));
      const values = sizes.map((n) => new Uint8Array(n).map((_, i) => (i * 31 + n) & 0xff));
      await Promise.all(keys.map((k, i) => store.set(k, values[i] as Uint8Array)));
      assert.deepEqual(await store.getMany(keys), values);
      const expiring = fresh("big-ttl");
      await store.set(expiring, values[2] as Uint8Array, 60_000);
      assert.deepEqual(await store.get(expiring), values[2], "a large value with a ttl");
    });
    test("unsafe keys are refused with invalid_key before anything is sent", async () => {
      for (const key of ["", "a b", "a\r\nflush_all", "x".repeat(251), "tab\t", "\u007f"]) {
        await assert.rejects(store.get(key), (e: StoreError) => e.kind === "invalid_key");
        await assert.rejects(store.set(key, bytes("v")), (e: StoreError) => e.kind === "invalid_key");
        await assert.rejects(store.add(key, bytes("v")), (e: StoreError) => e.kind === "invalid_key");
        await assert.rejects(store.incr(key, 1), (e: StoreError) => e.kind === "invalid_key");
        await assert.rejects(store.deleteIf(key, bytes("v")), (e: StoreError) => e.kind === "invalid_key");
      }
      await assert.rejects(store.purgePrefix("a\nb"), (e: StoreError) => e.kind === "invalid_key");
    });
    test("a key is stored under its UTF-8 alone; strings without a UTF-8 form are refused (issue 32)", async () => {
      // U+010D U+010A are CR LF under latin1: a store that wrote them so would run a flush_all here
      const key = `${fresh("smuggle")}\u010d\u010aflush_all\u010d\u010amn`;
      const other = fresh("other");
      await store.set(other, bytes("safe"));
      await store.set(key, bytes("v"));
      assert.deepEqual(await store.getMany([key, other]), [bytes("v"), bytes("safe")]);
      assert.equal(await store.delete(key), true);
      const refused = (e: StoreError) => e.kind === "invalid_key";
      for (const bad of ["\ud800", `${fresh("s")}\udc00`, "\u0120".repeat(126)]) {
        await assert.rejects(store.get(bad), refused);
        await assert.rejects(store.set(bad, bytes("v")), refused);
        await assert.rejects(store.incr(bad, 1), refused);
      }
      await assert.rejects(store.purgePrefix(`${fresh("p")}\ud800`), refused);
      await assert.rejects(store.purgeTag(`${fresh("t")}\udbff`), refused);
      assert.deepEqual(await store.get(other), bytes("safe"));
    });
    test("an entry leaves once past its hard expiry, without a ttl", async () => {
      const key = fresh("exp");
      const started = Date.now();
      await store.set(key, encode("v", { createdAt: started, expiresAt: started + 2000 }));
      const found = await store.get(key);
      // memcached rounds up to whole seconds and ticks once a second, so 2 s keep it at least one full second;
      // only a machine so loaded that the write and read took that long may miss it.
      if (Date.now() - started < 1000) assert.notEqual(found, undefined);
      await sleep(3600);
      assert.equal(await store.get(key), undefined);
    });
    test("a write already past its expiry stores nothing and removes the old value", async () => {
      const key = fresh("past");
      await store.set(key, bytes("old"));
      await store.set(key, encode("v", { createdAt: 1, expiresAt: 2 }));
      assert.equal(await store.get(key), undefined);
      assert.equal(await store.add(key, encode("v", { createdAt: 1, expiresAt: 2 })), false);
    });
    test("add only when absent", async () => {
      const key = fresh("add");
      assert.equal(await store.add(key, bytes("1"), 10_000), true);
      assert.equal(await store.add(key, bytes("2"), 10_000), false);
      assert.deepEqual(await store.get(key), bytes("1"));
    });
    test("counters", async () => {
      const key = fresh("n");
      assert.equal(await store.incr(key, 5, undefined, false), undefined);
      assert.equal(await store.incr(key, 5), 5);
      assert.equal(await store.incr(key, 10), 15);
      assert.equal(await store.incr(key, -1), 14);
      assert.deepEqual(await store.get(key), bytes("14"));
      const text = fresh("text");
      await store.set(text, bytes("hello"));
      await assert.rejects(store.incr(text, 1), (e: StoreError) => e.kind === "not_a_counter");
      assert.deepEqual(await store.get(text), bytes("hello"));
    });
    test("deleteIf deletes only the expected value", async () => {
      const key = fresh("lock");
      await store.set(key, bytes("token-a"));
      assert.equal(await store.deleteIf(key, bytes("token-b")), false);
      assert.equal(await store.deleteIf(key, bytes("token-a")), true);
      assert.equal(await store.get(key), undefined);
    });
    test("purge by tag and by prefix", async () => {
      const base = fresh("purge");
      const tagged = encode({ id: 1 }, { tags: ["t:1", `tag-${base}`], createdAt: Date.now() - 5000 });
      await store.set(`${base}:a`, tagged);
      await store.set(`${base}:b`, encode(2, { createdAt: Date.now() - 5000 }));
      await store.set(`other-${base}`, encode(3, { createdAt: Date.now() - 5000 }));
      const byTag = await store.purgeTag(`tag-${base}`);
      assert.equal(byTag, exactPurges ? 1 : null);
      assert.equal(await store.get(`${base}:a`), undefined);
      assert.notEqual(await store.get(`${base}:b`), undefined);
      const byPrefix = await store.purgePrefix(`${base}:`);
      assert.equal(byPrefix, exactPurges ? 1 : null);
      assert.equal(await store.get(`${base}:b`), undefined);
      assert.notEqual(await store.get(`other-${base}`), undefined);
    });
    test("a value too large for the store is refused naming the key", async () => {
      const big = new Uint8Array(store.maxValueBytes() + 300);
      await assert.rejects(store.set(fresh("big"), big), (e: StoreError) => e.kind === "too_large");
    });
  });
}

let memcached: ServerProcess;
let redis: ServerProcess;
let postgres: ServerProcess & { url: string };
let cluster: RedisCluster;
before(async () => {
  [memcached, redis, postgres, cluster] = await Promise.all([
    startMemcached(),
    startRedis(),
    startPostgres(),
    RedisCluster.start(),
  ]);
});
after(async () => {
  await Promise.all([memcached?.stop(), redis?.stop(), postgres?.stop(), cluster?.stop()]);
});

contract("memory", () => openStore("memory://?capacity=64M"), true);
contract("memcached", () => openStore(`memcached://${memcached.address}?timeout=1s`), false);
contract("redis", () => openStore(`redis://${redis.address}/2?timeout=1s`), true);
contract("redis with a prefix", () => openStore(`redis://${redis.address}/3?timeout=1s&prefix=app1:`), true);
contract("redis cluster", () => openStore(`${cluster.url}?timeout=1s`), true);
contract("redis cluster with a prefix", () => openStore(`${cluster.url}?timeout=1s&prefix=app1:`), true);
contract("postgres", () => openStore(`${postgres.url}?timeout=2s&connect_timeout=2s`), true);
contract(
  "postgres with a prefix and a table",
  () => openStore(`${postgres.url}?timeout=2s&connect_timeout=2s&prefix=app1:&table=other`),
  true,
);
contract("memcached with a prefix", () => openStore(`memcached://${memcached.address}?timeout=1s&prefix=app1:`), false);
const tempDirs: string[] = [];
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "larder-ts-file-"));
  tempDirs.push(dir);
  return dir;
}
after(() => {
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
});
contract("sqlite", () => openStore(`sqlite://${tempDir()}/cache.db`), true);
contract(
  "sqlite with a prefix and a table",
  () => openStore(`sqlite://${tempDir()}/cache.db?prefix=app1:&table=other`),
  true,
);
contract("file", () => openStore(`file://${tempDir()}`), true);
contract("file with a prefix and a capacity", () => openStore(`file://${tempDir()}?prefix=app1:&capacity=256M`), true);

// STORES.md §4.3: a batch whose failure ejects its server is retried once, each key on its own new server. The keys
// of one ejected server move to several servers, so sending the whole batch to the first key's new server would
// read false misses and leave writes and deletes where no reader looks. Each check reads one key at a time, which
// routes by that key alone.
test("a memcached batch that ejects its server is retried on each key's new server", async () => {
  const servers = [await startMemcached(), await startMemcached(), await startMemcached()];
  const url = `memcached://${servers.map((s) => s.address).join(",")}?timeout=300ms&failures=1&retry_after=60s`;
  const [writer, reader, deleter] = [openStore(url), openStore(url), openStore(url)] as MemcachedStore[];
  try {
    const dead = (servers[1] as ServerProcess).address;
    const moved = Array.from({ length: 300 }, (_, i) => `batch:${i}`).filter((k) => writer?.serverOf(k) === dead);
    assert.ok(moved.length >= 10, `${moved.length} keys on the server that will fail`);
    (servers[1] as ServerProcess).kill();
    await writer?.setMany(moved.map((k) => [k, bytes("written")] as [string, Uint8Array]));
    const owners = new Set(moved.map((k) => writer?.serverOf(k)));
    assert.ok(!owners.has(dead) && owners.size === 2, `the moved keys live on both survivors: ${[...owners]}`);
    for (const key of moved) assert.deepEqual(await writer?.get(key), bytes("written"), `${key} where readers look`);

    for (const key of moved) await writer?.set(key, bytes("one by one"));
    assert.deepEqual(
      await reader?.getMany(moved),
      moved.map(() => bytes("one by one")),
    );

    assert.equal(await deleter?.deleteMany(moved), moved.length);
    for (const key of moved) assert.equal(await writer?.get(key), undefined, `${key} deleted where readers look`);
  } finally {
    await Promise.all([writer, reader, deleter].map((s) => s?.close()));
    await Promise.all(servers.map((s) => s.stop()));
  }
});
