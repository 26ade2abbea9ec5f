// Whole replies are bounded on every command, not only gets (spec/STORES.md §2, "whole reply"; issue 32): each
// command's reply is refused at the first byte or element past what the command can legitimately get, announced or
// counted, with the store's own error (a malformed reply is a server failure, never a timeout spent reading it),
// and the connection it came on is dropped. These reply shapes are ones larder-hostile does not make (a value
// answering a write or a counter, a stats reply of too many lines or bytes, a SCAN page of too many keys, lines
// filling an array), so a scripted server here answers one command with each.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { openStore, type StoreError } from "../src/stores/index.js";
import { type Answer, bulk, FakeServer, politeAnswer } from "./support/fake_server.js";

/** Long enough that reading to the end of a reply the store should refuse at once would end in a timeout instead. */
const TIMEOUT_MS = 5000;
const bytes = (s: string): Uint8Array => new Uint8Array(Buffer.from(s));

/** `answer` for the command named `name`, the polite answer for the rest. */
function on(protocol: "memcached" | "redis", name: string, answer: Answer): Answer {
  const polite = politeAnswer(protocol);
  return (command, connection) =>
    command.parts[0]?.toString().toLowerCase() === name ? answer(command, connection) : polite(command, connection);
}

/** Runs `operation` against a server answering with `answer`, and checks it fails as malformed, not by timing out,
 * and that the store dropped the connection the reply came on. */
async function refused(
  protocol: "memcached" | "redis",
  answer: Answer,
  operation: (url: string) => Promise<unknown>,
  message = /malformed/,
): Promise<void> {
  const server = await FakeServer.start(protocol, answer);
  try {
    const url = `${protocol}://${server.address}?timeout=${TIMEOUT_MS}ms&failures=1000`;
    const started = Date.now();
    await assert.rejects(operation(url), (e: StoreError) => {
      assert.equal(e.kind, "server", `${e.kind}: ${e.message}`);
      assert.match(e.message, message);
      return true;
    });
    assert.ok(Date.now() - started < TIMEOUT_MS, "refused when announced, not after waiting for the bytes");
    const deadline = Date.now() + 2000;
    while (server.closed < server.opened && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    assert.equal(server.closed, server.opened, "the connection the reply came on was dropped");
  } finally {
    await server.stop();
  }
}

/** Opens a store at `url`, runs `run` on it, closes it. */
function withStore(run: (store: ReturnType<typeof openStore>) => Promise<unknown>): (url: string) => Promise<unknown> {
  return async (url) => {
    const store = openStore(url);
    try {
      return await run(store);
    } finally {
      await store.close();
    }
  };
}

describe("memcached: every command's reply is bounded", () => {
  test("a value answering a write (ms) is refused at its line", () =>
    refused(
      "memcached",
      on("memcached", "ms", () => "VA 1000000\r\n"),
      withStore((s) => s.set("k", bytes("v"))),
      /1000000 bytes/,
    ));

  test("a value answering a delete (md) is refused at its line", () =>
    refused(
      "memcached",
      on("memcached", "md", () => "VA 500000\r\n"),
      withStore((s) => s.delete("k")),
      /500000 bytes/,
    ));

  test("a counter (ma) longer than 20 digits is refused at its line", () =>
    refused(
      "memcached",
      on("memcached", "ma", () => `VA 1000\r\n${"9".repeat(1000)}\r\n`),
      withStore((s) => s.incr("k", 1)),
      /1000 bytes/,
    ));

  test("stats of more than 1,024 lines is refused", () =>
    refused(
      "memcached",
      on("memcached", "stats", () => `${"STAT curr_items 1\r\n".repeat(2000)}END\r\n`),
      withStore((s) => s.stats()),
      /more than 1024 lines/,
    ));

  test("stats of more than 64 KiB is refused", () =>
    refused(
      "memcached",
      on("memcached", "stats", () => `${`STAT x ${"y".repeat(8000)}\r\n`.repeat(100)}END\r\n`),
      withStore((s) => s.stats()),
      /more bytes than/,
    ));

  // hostile_replies.json's memcached_wide (10,000 values of 512 KiB to one mg): each value is within max_item and the
  // first is a well-formed answer, so a store that read only the replies it asked for returned it as the get's value
  // and left the rest on the connection, to be read as the next request's. Every write of requests now ends with
  // `mn`, whose MN must come right after the replies they can get, and they are answered only then.
  test("a second value answering one get is refused where MN ends the replies", () =>
    refused(
      "memcached",
      on("memcached", "mg", () => "VA 1\r\na\r\nVA 1\r\nb\r\n"),
      withStore((s) => s.get("k")),
      /malformed reply/,
    ));

  test("a multi-get answered with one value more than it asked for is refused", () =>
    refused(
      "memcached",
      on("memcached", "mg", (command) => (command.parts[1]?.toString() === "c" ? "VA 1\r\nc\r\nEN\r\n" : "EN\r\n")),
      withStore((s) => s.getMany(["a", "b", "c"])),
      /malformed reply/,
    ));

  test("a write answered twice is refused, and the extra answer is not the next request's", async () => {
    const server = await FakeServer.start(
      "memcached",
      on("memcached", "ms", () => "HD\r\nHD\r\n"),
    );
    const store = openStore(`memcached://${server.address}?timeout=${TIMEOUT_MS}ms&failures=1000&prefix_purge=false`);
    try {
      await assert.rejects(store.set("k", bytes("v")), /where MN ends the replies/);
      assert.equal(await store.get("other"), undefined, "the extra VA was read as the next get's value");
    } finally {
      await store.close();
      await server.stop();
    }
  });

  test("gets written together end with one mn, and a surplus value to the first is not the second's answer", async () => {
    const server = await FakeServer.start(
      "memcached",
      on("memcached", "mg", (command) =>
        command.parts[1]?.toString() === "a" ? "VA 1\r\na\r\nVA 4\r\nevil\r\n" : "VA 1\r\nb\r\n",
      ),
    );
    const store = openStore(`memcached://${server.address}?timeout=${TIMEOUT_MS}ms&failures=1000&prefix_purge=false`);
    try {
      const [a, b] = await Promise.allSettled([store.get("a"), store.get("b")]);
      assert.equal(a.status, "rejected");
      assert.equal(b.status, "rejected", `the second get answered ${b.status === "fulfilled" ? String(b.value) : ""}`);
      assert.deepEqual(
        server.commands.map((c) => c.line.toString()),
        ["mg a v", "mg b v", "mn"],
      );
    } finally {
      await store.close();
      await server.stop();
    }
  });

  test("a multi-get's replies are bounded by the batch: one value of max_item per key", () =>
    refused(
      "memcached",
      on("memcached", "mg", () => "VA 2000000\r\n"),
      withStore((s) => s.getMany(["a", "b"])),
      /2000000 bytes/,
    ));
});

describe("Redis: every command's reply is bounded", () => {
  test("a SCAN page of more keys than COUNT + 1,024 is refused", () =>
    refused(
      "redis",
      on("redis", "scan", () => {
        const keys = Array.from({ length: 3000 }, (_, i) => bulk(`k${i}`));
        return Buffer.concat([Buffer.from("*2\r\n"), bulk("0"), Buffer.from("*3000\r\n"), ...keys]);
      }),
      withStore((s) => s.purgePrefix("k")),
      /more than 2026 elements/,
    ));

  test("an SSCAN page of more members than COUNT + 1,024 is refused", () =>
    refused(
      "redis",
      on("redis", "sscan", () => {
        const keys = Array.from({ length: 3000 }, (_, i) => bulk(`k${i}`));
        return Buffer.concat([Buffer.from("*2\r\n"), bulk("0"), Buffer.from("*3000\r\n"), ...keys]);
      }),
      withStore((s) => s.purgeTag("t")),
      /more than 2026 elements/,
    ));

  test("a counter script answered by 1,000 arrays of 64 MiB is refused at its first line", async () => {
    const before = process.memoryUsage().rss;
    await refused(
      "redis",
      on("redis", "evalsha", () => Buffer.concat([Buffer.from("*1000\r\n$67108864\r\n"), Buffer.alloc(1 << 20, 0x78)])),
      withStore((s) => s.incr("k", 1)),
      /more than 0 elements/,
    );
    assert.ok(process.memoryUsage().rss - before < 64 << 20, "memory stayed within the bound");
  });

  test("lines filling an MGET's array count against its bytes", () =>
    refused(
      "redis",
      on("redis", "mget", () => `*3\r\n${`+${"y".repeat(8000)}\r\n`.repeat(3)}`),
      (url) => withStore((s) => s.getMany(["a", "b", "c"]))(`${url}&max_value=1K`),
      /more bytes than/,
    ));

  test("INFO longer than 1 MiB is refused when announced", () =>
    refused(
      "redis",
      on("redis", "info", () => "$2000000\r\n"),
      withStore((s) => s.stats()),
      /2000000 bytes/,
    ));
});
