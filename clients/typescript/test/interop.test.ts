// Entries cross between TypeScript, Rust, Python and Ruby through a shared memcached pool (two servers, so the ring
// must agree too): each language reads what the others wrote, byte for byte where the spec promises it, and a tag
// purged by one is gone for the others. Python runs from the repository's .venv, Ruby as `ruby -I clients/ruby/lib`;
// a missing one is a failure that says how to install it, never a skip.

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { decode, encode, encodeResponse } from "../src/entry.js";
import { HttpResponse } from "../src/response.js";
import { openStore, type Store } from "../src/stores/index.js";
import { LARDER_BIN, REPO } from "./support/paths.js";
import { RedisCluster, startMemcached, startPostgres, startRedis } from "./support/servers.js";

const PYTHON = join(REPO, ".venv", "bin", "python");

// Prints {key: decoded value or null} for the keys in argv[2:], then writes "from-python" with tag "py".
const PY = `
import json, sys, larder
from larder.stores import open_store
store = open_store(sys.argv[1])
out = {}
for key in sys.argv[2:]:
    data = store.get(key)
    out[key] = None if data is None else larder.decode(data).value
store.set("from-python", larder.encode({"lang": "python", "n": [1, -2, 3.5, None, False]}, tags=["py"], ttl_ms=60000))
print(json.dumps(out))
`;
const RB = `
require "larder"
require "larder/stores"
require "json"
store = Larder::Stores.open(ARGV[0])
out = ARGV[1..].to_h { |key| data = store.get(key); [key, data && Larder.decode(data).value] }
store.set("from-ruby", Larder.encode({ "lang" => "ruby", "text" => "é" * 700 }, tags: ["rb"], ttl_ms: 60_000))
puts JSON.generate(out)
`;

function runJson(command: string, args: string[]): Record<string, unknown> {
  const r = spawnSync(command, args, { encoding: "utf8", timeout: 60_000 });
  assert.equal(r.status, 0, `${command}: ${r.stderr}`);
  return JSON.parse(r.stdout);
}
function python(url: string, ...keys: string[]): Record<string, unknown> {
  assert.ok(existsSync(PYTHON), `${PYTHON} is missing: run \`make venv\` at the repository root`);
  return runJson(PYTHON, ["-c", PY, url, ...keys]);
}
function ruby(url: string, ...keys: string[]): Record<string, unknown> {
  return runJson("ruby", ["-I", join(REPO, "clients", "ruby", "lib"), "-e", RB, url, ...keys]);
}
function rust(url: string, ...args: string[]): { status: number; stdout: Buffer } {
  const r = spawnSync(LARDER_BIN, ["store", ...args, "--store", url], { timeout: 60_000 });
  return { status: r.status ?? -1, stdout: r.stdout };
}

function crossing(name: string, start: () => Promise<[Array<{ stop(): Promise<void> }>, string]>): void {
  describe(`entries cross languages through ${name}`, () => {
    let servers: Array<{ stop(): Promise<void> }>;
    let url: string;
    let store: Store;
    before(async () => {
      [servers, url] = await start();
      store = openStore(url);
    });
    after(async () => {
      await store?.close();
      for (const s of servers ?? []) await s.stop();
    });

    const small = { lang: "typescript", n: [1, -2, 3.5, null, false], text: "ü" };
    const big = { rows: Array.from({ length: 200 }, (_, i) => ({ i, name: `row ${i}` })) };

    test("TypeScript writes; Rust reads the same bytes, Python and Ruby the same values", async () => {
      const entries: Record<string, Uint8Array> = {
        "ts-small": encode(small, { ttlMs: 60_000 }),
        "ts-big": encode(big, { ttlMs: 60_000, tags: ["ts"] }),
        "ts-page": encodeResponse(new HttpResponse(200, [["content-type", "text/html"]], "<p>hi</p>"), {
          ttlMs: 60_000,
        }),
      };
      assert.equal(decode(entries["ts-big"] as Uint8Array).compressor, "lz4");
      for (const [key, data] of Object.entries(entries)) await store.set(key, data);
      for (const [key, data] of Object.entries(entries)) {
        const r = rust(url, "get", key);
        assert.equal(r.status, 0, key);
        assert.deepEqual(new Uint8Array(r.stdout), data, key);
      }
      const fromPython = python(url, "ts-small", "ts-big", "missing");
      assert.deepEqual(fromPython, { "ts-small": small, "ts-big": big, missing: null });
      assert.deepEqual(ruby(url, "ts-small", "ts-big"), { "ts-small": small, "ts-big": big });
    });

    test("Rust, Python and Ruby write; TypeScript reads", async () => {
      python(url);
      ruby(url);
      const rustEntry = spawnSync(LARDER_BIN, ["encode", "--ttl", "60", "--tag", "rs"], {
        input: '{"lang":"rust","x":[1.0,2]}',
      }).stdout;
      assert.equal(
        spawnSync(LARDER_BIN, ["store", "set", "from-rust", "--store", url], { input: rustEntry }).status,
        0,
      );
      assert.deepEqual(decode((await store.get("from-python")) as Uint8Array).value, {
        lang: "python",
        n: [1, -2, 3.5, null, false],
      });
      assert.deepEqual(decode((await store.get("from-ruby")) as Uint8Array).value, {
        lang: "ruby",
        text: "é".repeat(700),
      });
      assert.deepEqual(decode((await store.get("from-rust")) as Uint8Array).value, { lang: "rust", x: [1, 2] });
    });

    test("a tag purged by one language is gone for the others", async () => {
      await store.set("ts-tagged", encode("x", { tags: ["cross"], createdAt: Date.now() - 5000 }));
      assert.equal(rust(url, "get", "ts-tagged").status, 0);
      await store.purgeTag("cross");
      assert.equal(rust(url, "get", "ts-tagged").status, 1, "Rust still reads a purged entry");
      assert.deepEqual(python(url, "ts-tagged"), { "ts-tagged": null });
      assert.deepEqual(ruby(url, "ts-tagged"), { "ts-tagged": null });
      python(url);
      assert.notEqual(await store.get("from-python"), undefined);
      assert.equal(rust(url, "purge", "--tag", "py").status, 0);
      assert.equal(await store.get("from-python"), undefined, "TypeScript still reads what Rust purged");
    });
  });
}

crossing("a two-server memcached pool", async () => {
  const servers = [await startMemcached(), await startMemcached()];
  return [servers, `memcached://${servers.map((s) => s.address).join(",")}?timeout=2s`];
});
crossing("redis", async () => {
  const server = await startRedis();
  return [[server], `redis://${server.address}/1?timeout=2s`];
});
crossing("a three-node Redis Cluster", async () => {
  const cluster = await RedisCluster.start();
  return [[cluster], `${cluster.url}?timeout=2s`];
});
crossing("postgres", async () => {
  const server = await startPostgres();
  return [[server], `${server.url}?timeout=5s&connect_timeout=5s&table=interop`];
});
crossing("a file directory", async () => {
  const dir = mkdtempSync(join(tmpdir(), "larder-ts-interop-"));
  return [[{ stop: async () => rmSync(dir, { recursive: true, force: true }) }], `file://${dir}`];
});
crossing("an SQLite file", async () => {
  const dir = mkdtempSync(join(tmpdir(), "larder-ts-interop-"));
  return [[{ stop: async () => rmSync(dir, { recursive: true, force: true }) }], `sqlite://${dir}/cache.db`];
});
