// The Next.js cacheHandler against real stores (memory://, and memcached started here), called as Next calls it:
// Next's values come back as Next reads them (Buffers, a Map of segments, the cache lifetime), lastModified is the
// entry's created_at, tags revalidate (immediately and stale-first) through the entry's own tags and Next's soft
// tags, `larder store purge --tag` from the Rust binary reaches it, and whatever the store holds or does, a read
// is a value of the kind Next asked for or a miss within the deadline: never a thrown render.

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { decode, encode } from "../src/entry.js";
import { LarderCacheHandler, larderCacheHandler, type NextValue } from "../src/next.js";
import { StoreError } from "../src/stores/errors.js";
import { openStore } from "../src/stores/index.js";
import { LARDER_BIN } from "./support/paths.js";
import { freePort, type ServerProcess, startMemcached } from "./support/servers.js";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function appPage(html: string, tags: string[]): NextValue {
  return {
    kind: "APP_PAGE",
    html,
    rscData: Buffer.from([0, 1, 2, 255]),
    headers: { "x-next-cache-tags": tags.join(","), vary: ["rsc", "accept-encoding"] },
    postponed: undefined,
    status: 200,
    segmentData: new Map([["/_tree", Buffer.from("tree")]]),
  };
}

function fetched(body: string): NextValue {
  return {
    kind: "FETCH",
    data: { headers: { "content-type": "text/plain" }, body, url: "http://data/x", status: 200 },
    revalidate: 60,
    tags: ["data"],
  };
}

/** A field of the value a get returned (undefined on a miss). */
const field = (got: { value: unknown } | null, name: string): unknown =>
  (got?.value as Record<string, unknown> | undefined)?.[name];

const PAGE = { kind: "APP_PAGE", isFallback: false } as const;
const CONTROL = { revalidate: 60, expire: 3600 };

for (const which of ["memory", "memcached"] as const) {
  describe(`Next.js cacheHandler on ${which}://`, () => {
    let memcached: ServerProcess | undefined;
    let storeUrl: string;
    let Handler: typeof LarderCacheHandler;
    let handler: LarderCacheHandler;
    const skew = which === "memcached" ? 1100 : 5; // memcached's purge records hide what is written within 1 s after

    before(async () => {
      if (which === "memcached") {
        memcached = await startMemcached();
        storeUrl = `memcached://${memcached.address}`;
      } else storeUrl = "memory://";
      Handler = larderCacheHandler({ store: openStore(storeUrl), namespace: `t${process.pid}` });
      handler = new Handler({ revalidatedTags: [] });
    });
    after(async () => {
      await handler?.store.close();
      await memcached?.stop();
    });

    test("a page comes back as Next stored it, with its lifetime, as a larder entry tagged as Next tagged it", async () => {
      const before = Date.now();
      await handler.set("/article/1", appPage("<p>one</p>", ["articles", "_N_T_/article/1"]), {
        cacheControl: CONTROL,
      });
      const got = await handler.get("/article/1", PAGE);
      assert.ok(got !== null);
      assert.ok(got.lastModified >= before && got.lastModified <= Date.now());
      assert.deepEqual(got.cacheControl, CONTROL);
      const value = got.value as Record<string, unknown>;
      assert.equal(value.html, "<p>one</p>");
      assert.ok(Buffer.isBuffer(value.rscData));
      assert.deepEqual([...(value.rscData as Buffer)], [0, 1, 2, 255]);
      assert.ok(value.segmentData instanceof Map);
      assert.equal((value.segmentData as Map<string, Buffer>).get("/_tree")?.toString(), "tree");
      assert.deepEqual((value.headers as Record<string, unknown>).vary, ["rsc", "accept-encoding"]);
      const entry = decode((await handler.store.get(handler.storeKey("/article/1"))) as Uint8Array);
      assert.deepEqual(entry.tags, ["articles", "_N_T_/article/1"]);
      assert.equal(Number(entry.createdAt), got.lastModified);
      assert.equal(Number(entry.expiresAt), got.lastModified + 60_000);
      assert.equal(Number(entry.staleMs), 3_540_000);
    });

    test("Next's kinds do not cross: a page key asked for as a fetch (and back) is a miss, not Next's invariant error", async () => {
      await handler.set("fetch-1", fetched("{}"), { fetchCache: true, tags: ["data"] });
      assert.equal(await handler.get("fetch-1", PAGE), null);
      assert.equal(await handler.get("/article/1", { kind: "FETCH", tags: [], softTags: [] }), null);
      const got = await handler.get("fetch-1", { kind: "FETCH", tags: ["data"], softTags: [] });
      assert.equal((field(got, "data") as { body: string }).body, "{}");
    });

    test("revalidateTag expires what carries the tag, and a fetch through its page's soft tag, in another instance", async () => {
      const other = new Handler({});
      await handler.set("/article/2", appPage("<p>two</p>", ["articles", "_N_T_/article/2"]), {
        cacheControl: CONTROL,
      });
      await handler.set("/other", appPage("<p>other</p>", ["others"]), { cacheControl: CONTROL });
      await handler.set("fetch-2", fetched("two"), { fetchCache: true, tags: ["data"] });
      await sleep(skew);
      await other.revalidateTag(["articles", "_N_T_/article/2"]);
      assert.equal(await handler.get("/article/2", PAGE), null);
      assert.equal(
        await handler.get("fetch-2", { kind: "FETCH", tags: ["data"], softTags: ["_N_T_/article/2"] }),
        null,
      );
      assert.ok((await handler.get("fetch-2", { kind: "FETCH", tags: ["data"], softTags: ["_N_T_/x"] })) !== null);
      assert.ok((await handler.get("/other", PAGE)) !== null);
      await sleep(skew);
      await handler.set("/article/2", appPage("<p>two again</p>", ["articles"]), { cacheControl: CONTROL });
      assert.equal(field(await other.get("/article/2", PAGE), "html"), "<p>two again</p>");
    });

    test("revalidateTag with an expire time makes the entry stale at once (Next serves it and renders again), then expired", async () => {
      await handler.set("/article/3", appPage("<p>three</p>", ["stale-tag"]), { cacheControl: CONTROL });
      await handler.set("fetch-3", fetched("three"), { fetchCache: true, tags: ["stale-tag"] });
      await sleep(5);
      await handler.revalidateTag("stale-tag", { expire: 0.4 });
      const page = await handler.get("/article/3", PAGE);
      assert.equal(field(page, "html"), "<p>three</p>");
      assert.ok(Date.now() - (page?.lastModified ?? 0) > 60_000, "past its revalidate time for Next");
      const data = await handler.get("fetch-3", { kind: "FETCH", tags: ["stale-tag"], softTags: [] });
      assert.ok(Date.now() - (data?.lastModified ?? 0) > 60_000);
      await sleep(450);
      assert.equal(await handler.get("/article/3", PAGE), null);
    });

    test("null deletes; what cannot be stored is counted, not stored, not thrown", async () => {
      await handler.set("/gone", appPage("x", []), { cacheControl: CONTROL });
      await handler.set("/gone", null, {});
      assert.equal(await handler.get("/gone", PAGE), null);
      const small = new (larderCacheHandler({ store: handler.store, namespace: "small", maxEntryBytes: 2000 }))({});
      await small.set("/big", { ...appPage("x", []), rscData: randomBytes(4000) }, { cacheControl: CONTROL });
      await small.set("/fn", { kind: "APP_PAGE", html: "x", headers: { f: (() => 1) as unknown as string } }, {});
      await small.set("/dynamic", appPage("x", []), { cacheControl: { revalidate: 0 } });
      await small.set(
        "/tags",
        appPage(
          "x",
          Array.from({ length: 600 }, (_, i) => `t${i}`),
        ),
        { cacheControl: CONTROL },
      );
      assert.deepEqual(small.stats.notStored, {
        "too-large": 1,
        unserializable: 1,
        "not-cacheable": 1,
        "too-many-tags": 1,
      });
      for (const key of ["/big", "/fn", "/dynamic", "/tags"]) assert.equal(await small.get(key, PAGE), null);
    });

    test("whatever the store holds under a key, a read is a miss, counted", async () => {
      const key = handler.storeKey("/hostile");
      const hostile: Uint8Array[] = [
        Buffer.from("not an entry"),
        encode("a string"),
        encode({ value: { kind: "APP_PAGE", html: 5 } }),
        encode({ value: { kind: "APP_PAGE", html: "x", segmentData: { a: "not bytes" } } }),
        encode({ value: { kind: "APP_ROUTE", body: new Uint8Array(1), status: 99_999, headers: {} } }),
        encode({ value: { kind: "PAGES", html: "x", pageData: {} }, cacheControl: { revalidate: -1 } }),
        encode({ value: { kind: "EVIL", html: "x" } }),
      ];
      const rejected = handler.stats.rejected;
      for (const bytes of hostile) {
        await handler.store.set(key, bytes);
        assert.equal(await handler.get("/hostile", PAGE), null);
      }
      assert.equal(handler.stats.rejected - rejected, hostile.length);
      // A "__proto__" key stays an own field of the value: no prototype changes, here or in Next.
      await handler.store.set(
        key,
        encode(JSON.parse('{"value": {"kind": "APP_PAGE", "html": "x", "__proto__": {"polluted": true}}}')),
      );
      const got = await handler.get("/hostile", PAGE);
      assert.equal(Object.getPrototypeOf(got?.value), Object.prototype);
      assert.equal(({} as Record<string, unknown>).polluted, undefined);
    });

    test("entries of another build are not read (BUILD_ID beside Next's serverDistDir)", async () => {
      const dir = mkdtempSync(join(tmpdir(), "larder-next-"));
      try {
        for (const id of ["build-a", "build-b"]) {
          mkdirSync(join(dir, id, "server"), { recursive: true });
          writeFileSync(join(dir, id, "BUILD_ID"), id);
        }
        const a = new Handler({ serverDistDir: join(dir, "build-a", "server") });
        const b = new Handler({ serverDistDir: join(dir, "build-b", "server") });
        await a.set("/built", appPage("a's", []), { cacheControl: CONTROL });
        assert.equal(await b.get("/built", PAGE), null);
        assert.ok((await a.get("/built", PAGE)) !== null);
        assert.match(a.storeKey("/built"), /:build-a:\/built$/);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });

    if (which === "memcached")
      test("`larder store purge --tag` from the Rust binary reaches the handler's entries", async () => {
        await handler.set("/article/9", appPage("<p>nine</p>", ["rust-purged"]), { cacheControl: CONTROL });
        await handler.set("fetch-9", fetched("nine"), { fetchCache: true, tags: ["rust-purged"] });
        await sleep(skew);
        const r = spawnSync(LARDER_BIN, ["store", "purge", "--store", storeUrl, "--tag", "rust-purged"], {
          encoding: "utf8",
        });
        assert.equal(r.status, 0, r.stderr);
        assert.equal(await handler.get("/article/9", PAGE), null);
        assert.equal(await handler.get("fetch-9", { kind: "FETCH", tags: ["rust-purged"], softTags: [] }), null);
        await handler.set("/inspected", appPage("<p>inspected</p>", []), { cacheControl: CONTROL });
        const inspect = spawnSync(LARDER_BIN, ["inspect"], {
          input: (await handler.store.get(handler.storeKey("/inspected"))) as Uint8Array,
          encoding: "utf8",
        });
        assert.equal(inspect.status, 0, inspect.stderr);
        assert.match(inspect.stdout, /<p>inspected<\/p>/);
      });
  });
}

describe("Next.js cacheHandler when the store fails", () => {
  let silent: net.Server;
  let silentPort: number;
  let deadPort: number;
  const sockets: net.Socket[] = [];
  before(async () => {
    deadPort = await freePort();
    silentPort = await freePort();
    silent = net.createServer((socket) => sockets.push(socket)); // accepts and never answers
    await new Promise<void>((r) => silent.listen(silentPort, "127.0.0.1", r));
  });
  after(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise((r) => silent.close(r));
  });

  for (const [what, url] of [
    ["a server that never answers", () => `memcached://127.0.0.1:${silentPort}?timeout=30s`],
    ["no server", () => `memcached://127.0.0.1:${deadPort}?timeout=30s`],
  ] as const) {
    test(`${what}: get misses and set skips within the deadline; revalidateTag rejects`, async () => {
      const Handler = larderCacheHandler({ store: openStore(url()), timeoutMs: 300 });
      const handler = new Handler({});
      const started = Date.now();
      assert.equal(await handler.get("/x", PAGE), null);
      await handler.set("/x", appPage("x", ["t"]), { cacheControl: CONTROL });
      assert.ok(Date.now() - started < 1500, `took ${Date.now() - started} ms`);
      assert.equal(handler.stats.storeErrors, 2);
      await assert.rejects(handler.revalidateTag("t"), StoreError);
      await handler.store.close();
    });
  }

  test("without a store the handler says which variable to set", () => {
    const saved = process.env.LARDER_NEXT_STORE;
    delete process.env.LARDER_NEXT_STORE;
    try {
      assert.throws(() => new LarderCacheHandler({}), /LARDER_NEXT_STORE/);
    } finally {
      if (saved !== undefined) process.env.LARDER_NEXT_STORE = saved;
    }
  });

  test("bad tags are refused before anything is sent", async () => {
    const handler = new (larderCacheHandler({ store: "memory://" }))({});
    await assert.rejects(handler.revalidateTag(""), RangeError);
    await assert.rejects(handler.revalidateTag("x".repeat(2000)), RangeError);
    await assert.rejects(handler.revalidateTag("t", { expire: -1 }), RangeError);
  });
});
