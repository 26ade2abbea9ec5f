// Replies are hostile too (spec/STORES.md §2): the memcached, Redis and Redis Cluster stores against larder-hostile, a server that answers
// every data command with one kind of bad reply, on every command the stores send. Each read fails within the timeout plus a small margin with the
// store's own error (never a parser's exception or a hang), within the size bound, and counts against the server.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { openStore, type Store, StoreError } from "../src/stores/index.js";
import { Hostile } from "./support/servers.js";

const TIMEOUT_MS = 300;
const MARGIN_MS = 1500; // a loaded 2-core machine (other suites run beside this one)

async function failsInTime(what: string, run: () => Promise<unknown>): Promise<StoreError> {
  const started = Date.now();
  let caught: unknown;
  try {
    await run();
  } catch (e) {
    caught = e;
  }
  const took = Date.now() - started;
  assert.ok(caught instanceof StoreError, `${what}: ${caught === undefined ? "succeeded" : String(caught)}`);
  assert.ok(took < TIMEOUT_MS + MARGIN_MS, `${what} took ${took} ms`);
  return caught;
}

const REDIS_BEHAVIOURS = ["drip", "huge", "nested", "endless-line", "garbage", "silent"];
const CASES: Array<["memcached" | "redis" | "redis+cluster", string]> = [
  ...["drip", "huge", "endless-line", "garbage", "silent"].map((b): ["memcached", string] => ["memcached", b]),
  ...REDIS_BEHAVIOURS.map((b): ["redis", string] => ["redis", b]),
  // a Cluster seed that is hostile: its CLUSTER SLOTS reply is bounded and checked like any other reply
  ...REDIS_BEHAVIOURS.map((b): ["redis+cluster", string] => ["redis+cluster", b]),
];

describe("stores against larder-hostile", () => {
  for (const [protocol, behaviour] of CASES) {
    test(`${protocol} ${behaviour}: every operation is the store's error within the timeout`, async () => {
      const server = await Hostile.start(protocol === "memcached" ? "memcached" : "redis", behaviour);
      const store: Store = openStore(`${protocol}://${server.address}?timeout=${TIMEOUT_MS}ms&failures=1000`);
      try {
        const before = process.memoryUsage().rss;
        const operations: Array<[string, () => Promise<unknown>]> = [
          ["get", () => store.get("k")],
          ["getMany", () => store.getMany(["a", "b", "c"])],
          ["set", () => store.set("k", new Uint8Array([1]))],
          ["add", () => store.add("k", new Uint8Array([1]))],
          ["incr", () => store.incr("k", 1)],
          ["deleteIf", () => store.deleteIf("k", new Uint8Array([1]))],
          // every other command's reply is bounded too (STORES.md §2, whole replies)
          ["delete", () => store.delete("k")],
          ["deleteMany", () => store.deleteMany(["a", "b"])],
          ["purgePrefix", () => store.purgePrefix("p")],
          ["purgeTag", () => store.purgeTag("t")],
          ["clear", () => store.clear()],
          ["stats", () => store.stats()],
        ];
        for (const [name, run] of operations) {
          const e = await failsInTime(`${behaviour} ${name}`, run);
          assert.ok(e.kind === "server" || e.kind === "timeout", e.message);
          assert.match(e.message, new RegExp(server.address.replace(/[.]/g, "\\.")));
        }
        assert.ok(process.memoryUsage().rss - before < 256 * 1024 * 1024, "memory stayed far below the bound");
      } finally {
        await store.close();
        await server.stop();
      }
    });
  }

  test("a dead server is ejected after `failures` and then fails at once", async () => {
    for (const protocol of ["memcached", "redis"] as const) {
      const server = await Hostile.start(protocol, "silent");
      const store = openStore(`${protocol}://${server.address}?timeout=200ms&failures=2&retry_after=10s`);
      try {
        await failsInTime("first", () => store.get("k"));
        await failsInTime("second", () => store.get("k"));
        const started = Date.now();
        await assert.rejects(store.get("k"), /ejected/);
        assert.ok(Date.now() - started < 150, "an ejected server fails fast");
      } finally {
        await store.close();
        await server.stop();
      }
    }
  });
});
