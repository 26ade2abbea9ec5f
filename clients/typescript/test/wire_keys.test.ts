// Keys go on the wire as exactly the bytes their check read (spec/STORES.md §2, "wire bytes are the checked bytes";
// issue 32, finding 1). memcached commands were written as latin1, which turned U+010A, U+010D and U+0120 of a key
// that passed the check on its UTF-8 into LF, CR and a space: a 135-byte key smuggled an `ms` for another site's
// page, or a `flush_all`. Here: those keys against a real memcached and Redis (stored as one harmless key under
// their UTF-8 bytes, nothing else written or flushed, the connection still in step), keys without a UTF-8 form
// refused, and a property over random strings that whatever a store accepts is sent as exactly its UTF-8 bytes and
// whatever it refuses sends nothing.

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import fc from "fast-check";
import { FileStore } from "../src/stores/file.js";
import { InvalidKey, openStore, type Store, type StoreError } from "../src/stores/index.js";
import type { MemcachedStore } from "../src/stores/memcached.js";
import type { RedisStore } from "../src/stores/redis.js";
import { keyHash } from "../src/stores/sql.js";
import type { SqliteStore } from "../src/stores/sqlite.js";
import { FakeServer, politeAnswer } from "./support/fake_server.js";
import { type ServerProcess, startMemcached, startRedis } from "./support/servers.js";

const bytes = (s: string): Uint8Array => new Uint8Array(Buffer.from(s));
const utf8 = (s: string): Buffer => Buffer.from(s, "utf8");

/** The victim's page key the smuggled `ms` writes, and the two keys: U+010D U+010A are CR LF under latin1,
 * U+0120 a space. Each passes the safe-key rule on its UTF-8 (bytes C4 8D, C4 8A, C4 A0). */
const VICTIM = "GET:http://victim.example/";
const SMUGGLE_MS = `GET:http://shop.example/article/\u010d\u010ams\u0120${VICTIM}\u01205\u0120T0\u0120F0\u010d\u010aPWNED\u010d\u010amn`;
const SMUGGLE_FLUSH = `GET:http://shop.example/a\u010d\u010aflush_all\u010d\u010amn`;

/** The safe-key rule on a string's UTF-8 (STORES.md §2), written independently of keys.ts: the oracle. */
function acceptable(key: string): boolean {
  if (!key.isWellFormed()) return false;
  const raw = utf8(key);
  return raw.length >= 1 && raw.length <= 250 && raw.every((b) => b > 0x20 && b !== 0x7f);
}

/** The reply memcached gives to one raw request (its bytes written as they are), read to its end. */
function rawMemcached(port: number, request: Buffer): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: "127.0.0.1", port }, () => socket.write(request));
    let got = Buffer.alloc(0);
    socket.setTimeout(5000, () => socket.destroy(new Error("no reply from memcached")));
    socket.on("data", (chunk: Buffer) => {
      got = Buffer.concat([got, chunk]);
      const eol = got.indexOf("\r\n");
      if (eol === -1) return;
      const m = /^VA ([0-9]+)/.exec(got.toString("latin1", 0, eol));
      if (m === null || got.length >= eol + 2 + Number(m[1]) + 2) {
        socket.end();
        resolve(got);
      }
    });
    socket.on("error", reject);
  });
}

/** Redis's answer (one line, or a bulk string) to a command of exactly these bytes, over a raw connection. */
function rawRedis(port: number, ...parts: Buffer[]): Promise<Buffer> {
  const request = Buffer.concat([
    Buffer.from(`*${parts.length}\r\n`),
    ...parts.flatMap((p) => [Buffer.from(`$${p.length}\r\n`), p, Buffer.from("\r\n")]),
  ]);
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: "127.0.0.1", port }, () => socket.write(request));
    let got = Buffer.alloc(0);
    socket.setTimeout(5000, () => socket.destroy(new Error("no reply from redis")));
    socket.on("data", (chunk: Buffer) => {
      got = Buffer.concat([got, chunk]);
      const eol = got.indexOf("\r\n");
      if (eol === -1) return;
      const n = got[0] === 0x24 ? Number(got.toString("latin1", 1, eol)) : -1;
      if (n < 0 || got.length >= eol + 2 + n + 2) {
        socket.end();
        resolve(got);
      }
    });
    socket.on("error", reject);
  });
}

describe("the issue's smuggling keys against real servers", () => {
  let memcached: ServerProcess;
  let redis: ServerProcess;
  before(async () => {
    [memcached, redis] = await Promise.all([startMemcached(), startRedis()]);
  });
  after(async () => {
    await Promise.all([memcached?.stop(), redis?.stop()]);
  });

  for (const backend of ["memcached", "redis"] as const) {
    test(`${backend}: a key smuggling \`ms\` or \`flush_all\` is one key under its UTF-8; nothing else is written`, async () => {
      assert.ok(acceptable(SMUGGLE_MS) && utf8(SMUGGLE_MS).length <= 250, "the key passes the rule");
      const url =
        backend === "memcached" ? `memcached://${memcached.address}?timeout=2s` : `redis://${redis.address}?timeout=2s`;
      const store = openStore(url) as MemcachedStore | RedisStore;
      try {
        await store.set("sentinel", bytes("safe"));
        for (const key of [SMUGGLE_MS, SMUGGLE_FLUSH]) {
          await store.set(key, bytes("page"));
          assert.deepEqual(await store.get(key), bytes("page"));
          assert.deepEqual(await store.getMany([key, "sentinel"]), [bytes("page"), bytes("safe")]);
          assert.equal(await store.add(key, bytes("other")), false);
          assert.equal(await store.deleteIf(key, bytes("other")), false);
          assert.equal(await store.delete(key), true);
          assert.equal(await store.incr(key, 2), 2);
          await store.set(key, bytes("page"));
          // stored under exactly the bytes its check read
          const raw =
            backend === "memcached"
              ? await rawMemcached(memcached.port, Buffer.concat([utf8("mg "), utf8(key), utf8(" v\r\n")]))
              : await rawRedis(redis.port, utf8("GET"), utf8(key));
          assert.match(raw.toString("latin1"), backend === "memcached" ? /^VA 4 ?\r\npage\r\n$/ : /^\$4\r\npage\r\n$/);
        }
        assert.equal(await store.get(VICTIM), undefined, "the smuggled ms wrote the victim's page");
        assert.deepEqual(await store.get("sentinel"), bytes("safe"), "the smuggled flush_all ran");
        // the connections stayed in step: no reply was out of place, no failure was counted
        assert.deepEqual(
          store.serverErrors().map(([, n]) => n),
          [0],
        );
      } finally {
        await store.close();
      }
    });

    test(`${backend}: keys, prefixes and tags without a UTF-8 form, or over 250 bytes in UTF-8, are refused`, async () => {
      const url =
        backend === "memcached" ? `memcached://${memcached.address}?timeout=2s` : `redis://${redis.address}?timeout=2s`;
      const store = openStore(url);
      const refused = (e: StoreError) => e.kind === "invalid_key";
      try {
        for (const key of [`${SMUGGLE_MS}\ud800`, "\udc00", "a\ud83d", "\u0120".repeat(126)]) {
          await assert.rejects(store.get(key), refused, JSON.stringify(key));
          await assert.rejects(store.set(key, bytes("v")), refused, JSON.stringify(key));
          await assert.rejects(store.delete(key), refused, JSON.stringify(key));
        }
        await assert.rejects(store.purgePrefix("page\ud800"), refused);
        await assert.rejects(store.purgeTag("tag\udfff"), refused);
      } finally {
        await store.close();
      }
    });
  }
});

test("redis: a prefix purge deletes the keys SCAN found by their exact bytes, UTF-8 or not", async () => {
  const redis = await startRedis();
  const store = openStore(`redis://${redis.address}?timeout=2s`);
  try {
    // another client's keys: one that is not UTF-8, and the one its lossy decoding (U+FFFD) would name instead
    const notUtf8 = Buffer.concat([utf8("raw:"), Buffer.from([0xff, 0xfe])]);
    const replacement = utf8("raw:\ufffd\ufffd");
    for (const key of [notUtf8, replacement])
      assert.equal((await rawRedis(redis.port, utf8("SET"), key, utf8("x"))).toString(), "+OK\r\n");
    await store.set("kept", bytes("v"));
    assert.equal(await store.purgePrefix("raw:"), 2);
    for (const key of [notUtf8, replacement])
      assert.equal((await rawRedis(redis.port, utf8("EXISTS"), key)).toString(), ":0\r\n");
    assert.deepEqual(await store.get("kept"), bytes("v"));
  } finally {
    await store.close();
    await redis.stop();
  }
});

describe("whatever a store accepts goes on the wire as exactly the UTF-8 bytes it checked", () => {
  /** Random strings near every edge: any UTF-16 unit (lone surrogates included), U+0080-U+FFFF and the U+01xx
   * family above, astral characters, controls, and lengths around 250 bytes. */
  const keys = fc.oneof(
    fc.string({ unit: "binary", maxLength: 260 }),
    fc.string({ unit: fc.integer({ min: 0x80, max: 0xffff }).map((c) => String.fromCharCode(c)), maxLength: 130 }),
    fc.string({ unit: fc.integer({ min: 0x100, max: 0x1ff }).map((c) => String.fromCharCode(c)), maxLength: 130 }),
    fc.string({
      unit: fc.constantFrom("a", "~", "é", "\u010a", "\u010d", "\u0120", "😀", " ", "\r", "\n", "\x7f", "\ud800"),
      maxLength: 130,
    }),
    fc
      .tuple(fc.integer({ min: 240, max: 250 }), fc.constantFrom("é", "\u0120", "😀", "\udc00"))
      .map(([n, c]) => "k".repeat(n) + c),
  );
  const RUNS = 300;
  let memcachedFake: FakeServer;
  let redisFake: FakeServer;
  const dirs: string[] = [];
  before(async () => {
    [memcachedFake, redisFake] = await Promise.all([
      FakeServer.start("memcached", politeAnswer("memcached")),
      FakeServer.start("redis", politeAnswer("redis")),
    ]);
  });
  after(async () => {
    await Promise.all([memcachedFake?.stop(), redisFake?.stop()]);
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  /** Runs `op` and returns whether the store accepted the key (InvalidKey: refused; anything else fails). */
  async function accepted(op: () => Promise<unknown>): Promise<boolean> {
    try {
      await op();
      return true;
    } catch (e) {
      if (e instanceof InvalidKey) return false;
      throw e;
    }
  }

  test("memcached: an accepted key is `mg`/`ms`/`md` with its UTF-8, a refused one sends nothing", async () => {
    const store = openStore(`memcached://${memcachedFake.address}?timeout=2s&prefix_purge=false`);
    try {
      await fc.assert(
        fc.asyncProperty(keys, async (key) => {
          const from = memcachedFake.commands.length;
          const ok = await accepted(() => store.get(key));
          assert.equal(ok, acceptable(key), JSON.stringify(key));
          assert.equal(await accepted(() => store.set(key, bytes("v"))), ok);
          assert.equal(await accepted(() => store.delete(key)), ok);
          const sent = memcachedFake.since(from).map((c) => c.line);
          if (!ok) return assert.deepEqual(sent, [], "a refused key sent something");
          const k = utf8(key);
          // each request ends with the meta no-op, whose MN ends its replies
          assert.deepEqual(sent, [
            Buffer.concat([utf8("mg "), k, utf8(" v")]),
            utf8("mn"),
            Buffer.concat([utf8("ms "), k, utf8(" 1 T0 F0")]),
            utf8("mn"),
            Buffer.concat([utf8("md "), k]),
            utf8("mn"),
          ]);
        }),
        { numRuns: RUNS },
      );
    } finally {
      await store.close();
    }
  });

  test("Redis: an accepted key is GET/SET/DEL's bulk string of its UTF-8, a refused one sends nothing", async () => {
    const store = openStore(`redis://${redisFake.address}?timeout=2s`);
    try {
      await fc.assert(
        fc.asyncProperty(keys, async (key) => {
          const from = redisFake.commands.length;
          const ok = await accepted(() => store.get(key));
          assert.equal(ok, acceptable(key), JSON.stringify(key));
          assert.equal(await accepted(() => store.set(key, bytes("v"))), ok);
          assert.equal(await accepted(() => store.delete(key)), ok);
          const sent = redisFake.since(from).map((c) => c.parts);
          if (!ok) return assert.deepEqual(sent, [], "a refused key sent something");
          const k = utf8(key);
          assert.deepEqual(sent, [
            [utf8("GET"), k],
            [utf8("SET"), k, utf8("v")],
            [utf8("DEL"), k],
          ]);
        }),
        { numRuns: RUNS },
      );
    } finally {
      await store.close();
    }
  });

  test("file and SQLite: an accepted key's file name and header, and SQL parameter, are its UTF-8", async () => {
    const fileRoot = mkdtempSync(join(tmpdir(), "larder-ts-wire-"));
    const sqliteDir = mkdtempSync(join(tmpdir(), "larder-ts-wire-"));
    dirs.push(fileRoot, sqliteDir);
    const file = new FileStore(fileRoot);
    const sqlite = openStore(`sqlite://${sqliteDir}/cache.db`) as SqliteStore;
    const memory = openStore("memory://");
    const sql = sqlite as unknown as {
      entries: string;
      withSession<T>(
        work: (s: { all(sql: string, params?: unknown[]): Promise<unknown[][]> }) => Promise<T>,
      ): Promise<T>;
    };
    const stores: Store[] = [file, sqlite, memory];
    try {
      await fc.assert(
        fc.asyncProperty(keys, async (key) => {
          for (const store of stores)
            assert.equal(await accepted(() => store.set(key, bytes("v"))), acceptable(key), `${store.backend}`);
          if (!acceptable(key)) return;
          const k = utf8(key);
          const name = createHash("sha256").update(k).digest("hex");
          const path = join(fileRoot, name.slice(0, 2), name.slice(2, 4), name);
          assert.ok(existsSync(path), "the file is named by the SHA-256 of the key's UTF-8");
          const data = readFileSync(path);
          assert.deepEqual(data.subarray(14, 14 + data.readUInt16LE(12)), k, "the file's key is the key's UTF-8");
          const rows = await sql.withSession((s) =>
            s.all(`SELECT hex(CAST(key AS BLOB)) FROM ${sql.entries} WHERE key_hash = $1`, [keyHash(key)]),
          );
          assert.deepEqual(rows, [[k.toString("hex").toUpperCase()]], "SQLite holds the key's UTF-8");
          for (const store of stores) assert.deepEqual(await store.get(key), bytes("v"), store.backend);
        }),
        { numRuns: RUNS },
      );
    } finally {
      await Promise.all(stores.map((s) => s.close()));
    }
  });
});

// hostile_keys.json's keys that are not UTF-8 (`FF`, `C0 AF`…) cannot be a JavaScript string; a JavaScript caller
// that hands a store their bytes anyway gets invalid_key from every operation, with nothing sent. purge_prefix read a
// Buffer as a string and threw a TypeError (`isWellFormed is not a function`) instead.
describe("bytes given where a key, prefix or tag goes are refused by every store", () => {
  let memcached: ServerProcess;
  let redis: ServerProcess;
  let dir: string;
  before(async () => {
    [memcached, redis] = await Promise.all([startMemcached(), startRedis()]);
    dir = mkdtempSync(join(tmpdir(), "larder-ts-bytes-key-"));
  });
  after(async () => {
    await Promise.all([memcached?.stop(), redis?.stop()]);
    rmSync(dir, { recursive: true, force: true });
  });

  test("get, getMany, set, add, delete, purgePrefix and purgeTag answer invalid_key", async () => {
    const urls = [
      "memory://",
      `file://${join(dir, "files")}`,
      `sqlite://${join(dir, "db.sqlite")}`,
      `memcached://${memcached.address}?timeout=2s`,
      `redis://${redis.address}?timeout=2s`,
    ];
    const refused = (e: StoreError) => e instanceof InvalidKey && e.kind === "invalid_key";
    for (const url of urls) {
      const store = openStore(url);
      try {
        await store.set("sentinel", bytes("safe"));
        for (const raw of ["ff", "c0af", "e9", "6162"]) {
          const key = Buffer.from(raw, "hex") as unknown as string; // what an untyped caller may pass
          const what = `${url} ${raw}`;
          await assert.rejects(store.get(key), refused, what);
          await assert.rejects(store.getMany([key]), refused, what);
          await assert.rejects(store.set(key, bytes("v")), refused, what);
          await assert.rejects(store.add(key, bytes("v")), refused, what);
          await assert.rejects(store.delete(key), refused, what);
          await assert.rejects(store.purgePrefix(key), refused, what);
          await assert.rejects(store.purgeTag(key), refused, what);
        }
        assert.deepEqual(await store.get("sentinel"), bytes("safe"), url);
      } finally {
        await store.close();
      }
    }
  });
});
