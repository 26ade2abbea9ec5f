// Replies read out of the socket's reads (received.ts with resp.ts's and memcached.ts's readers), without a socket:
// the same replies whatever the reads' boundaries (every split point, byte drips), values as views of the reads
// (no copy when a value lies in one read, one copy of just the value when it straddles two), and every bound of
// spec/STORES.md §2 enforced when the bytes announce it, not after buffering them.

import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { type MetaLimits, MetaReader, metaLimits, type Reply } from "../src/stores/memcached.js";
import { Received, type ReplyReader } from "../src/stores/received.js";
import { type Limits, pack, RespReader, type RespValue } from "../src/stores/resp.js";
import { WireFailure } from "../src/stores/wire.js";

const WIDE: Limits = { maxBulk: 1 << 20, maxBytes: 1 << 22, maxElements: 1000 };

/** Feeds `reads` in turn and returns the replies read (each request gets one reply, under `limits`). */
function readAll<R, L>(reader: ReplyReader<R, L>, reads: Buffer[], limits: L, expected = Infinity): R[] {
  const replies: R[] = [];
  const received = new Received(reader);
  const sink = {
    nextLimits: (): L => {
      if (replies.length >= expected) throw new WireFailure("malformed reply: bytes nobody asked for");
      return limits;
    },
    take: (reply: R): void => {
      replies.push(reply);
    },
  };
  for (const read of reads) received.push(read, sink);
  return replies;
}

const resp = (reads: Buffer[], limits: Limits = WIDE, expected?: number): RespValue[] =>
  readAll(new RespReader(), reads, limits, expected);

/** A copy of `bytes` in a fresh buffer of its own (as a socket read is). */
const read = (bytes: Uint8Array): Buffer => Buffer.from(new Uint8Array(bytes));

function bulk(value: Uint8Array | null): Buffer {
  if (value === null) return Buffer.from("$-1\r\n");
  return Buffer.concat([Buffer.from(`$${value.length}\r\n`), value, Buffer.from("\r\n")]);
}

const filled = (n: number, seed: number): Uint8Array => new Uint8Array(n).map((_, i) => (i * 7 + seed) & 0xff);

const MGET_VALUES: Array<Uint8Array | null> = [filled(10, 1), null, filled(0, 2), filled(300, 3), filled(70_000, 4)];
const MGET = Buffer.concat([Buffer.from(`*${MGET_VALUES.length}\r\n`), ...MGET_VALUES.map(bulk)]);

function sameValues(got: RespValue, want: Array<Uint8Array | null>): void {
  assert.ok(Array.isArray(got), "an array");
  assert.equal(got.length, want.length);
  want.forEach((w, i) => {
    const g = got[i];
    if (w === null) assert.equal(g, null);
    else {
      assert.ok(g instanceof Uint8Array && !Buffer.isBuffer(g), `value ${i} is a plain Uint8Array`);
      assert.deepEqual(Buffer.from(g), Buffer.from(w));
    }
  });
}

test("an MGET reply split in two at every byte reads the same values", () => {
  for (let cut = 1; cut < MGET.length; cut += cut < 400 ? 1 : 997) {
    const got = resp([read(MGET.subarray(0, cut)), read(MGET.subarray(cut))]);
    assert.equal(got.length, 1, `cut at ${cut}`);
    sameValues(got[0] as RespValue, MGET_VALUES);
  }
});

test("replies dripped a byte at a time, and pipelined replies sharing reads, read in order", () => {
  const stream = Buffer.concat([Buffer.from("+OK\r\n:42\r\n-ERR no\r\n"), bulk(filled(40, 5)), MGET.subarray(0, 400)]);
  const tail = MGET.subarray(400);
  const dripped = resp([...[...stream].map((b) => Buffer.from([b])), read(tail)]);
  const whole = resp([read(Buffer.concat([stream, tail]))]);
  for (const got of [dripped, whole]) {
    assert.equal(got.length, 5);
    assert.equal(got[0], "OK");
    assert.equal(got[1], 42);
    assert.equal((got[2] as { message: string }).message, "ERR no");
    assert.deepEqual(Buffer.from(got[3] as Uint8Array), Buffer.from(filled(40, 5)));
    sameValues(got[4] as RespValue, MGET_VALUES);
  }
});

test("values in one read are views of it; a value straddling two reads is one copy of about its own size", () => {
  const values = Array.from({ length: 100 }, (_, i) => filled(1024, i));
  const reply = Buffer.concat([Buffer.from("*100\r\n"), ...values.map(bulk)]);
  const whole = read(reply);
  const [one] = resp([whole]) as [Uint8Array[]];
  assert.ok(
    one.every((v) => v.buffer === whole.buffer),
    "no value copied out of a single read",
  );

  const cut = 50_000; // inside the 49th value
  const first = read(reply.subarray(0, cut));
  const second = read(reply.subarray(cut));
  const [split] = resp([first, second]) as [Uint8Array[]];
  sameValues(split, values);
  const copies = split.filter((v) => v.buffer !== first.buffer && v.buffer !== second.buffer);
  assert.equal(copies.length, 1, "only the straddling value is copied");
  assert.ok((copies[0] as Uint8Array).buffer.byteLength <= 8192, "its copy is its own size (or Node's small pool)");
  assert.ok(split.slice(0, 48).every((v) => v.buffer === first.buffer));
  assert.ok(split.slice(49).every((v) => v.buffer === second.buffer));
});

test("a large value straddling reads is joined once, into a buffer of its own size", () => {
  const value = filled(200_000, 9);
  const reply = bulk(value);
  const reads = [0, 65_536, 131_072, 196_608].map((at) => read(reply.subarray(at, at + 65_536)));
  const [got] = resp(reads) as [Uint8Array];
  assert.deepEqual(Buffer.from(got), Buffer.from(value));
  assert.ok(got.buffer.byteLength <= value.length + 16);
});

test("bounds are enforced when announced, before the bytes arrive", () => {
  const small: Limits = { maxBulk: 100, maxBytes: 150, maxElements: 3 };
  const cases: Array<[string, string, RegExp]> = [
    ["a value over max_value", "$101\r\n", /101 bytes/],
    ["values over the reply's bytes", `*2\r\n$100\r\n${"x".repeat(100)}\r\n$60\r\n`, /more bulk data/],
    ["more elements than asked", "*4\r\n", /more than 3 elements/],
    ["a length of 19 digits", "$1234567890123456789", /not a length/],
    ["a negative length", "$-2\r\n", /negative/],
    ["a type byte", "?x\r\n", /type byte/],
    ["a bulk without CRLF", "$2\r\nabXY", /CRLF/],
  ];
  for (const [what, bytes, message] of cases)
    assert.throws(() => resp([Buffer.from(bytes, "latin1")], small), message, what);
  assert.throws(() => resp([Buffer.from("*1\r\n".repeat(9))]), /nested more than 8/);
  assert.deepEqual(resp([Buffer.from(`${"*1\r\n".repeat(8)}:7\r\n`)]), [[[[[[[[[7]]]]]]]]]);
  // a line with no end fails once it is longer than 8 KiB, dripped or not
  const endless = Buffer.alloc(9000, 0x61);
  endless[0] = 0x2b;
  assert.throws(() => resp([endless]), /longer than 8192/);
  assert.throws(() => resp([...endless.subarray(0, 8300)].map((b) => Buffer.from([b]))), /longer than 8192/);
  // bytes after the replies asked for
  assert.throws(() => resp([Buffer.from("+OK\r\n+OK\r\n")], WIDE, 1), /nobody asked/);
  // lines inside an array count against the reply's bytes as bulk strings do (with one line, 8 KiB, of slack)
  const lines = (n: number) => Buffer.from(`*${n}\r\n${`+${"y".repeat(1000)}\r\n`.repeat(n)}`);
  const tight: Limits = { maxBulk: 1024, maxBytes: 1024, maxElements: 100 };
  assert.equal((resp([lines(9)], tight)[0] as RespValue[]).length, 9);
  assert.throws(() => resp([lines(10)], tight), /more bytes than/);
});

test("a memcached value split at every byte, among pipelined replies, reads the same", () => {
  const value = filled(3000, 11);
  const stream = Buffer.concat([Buffer.from("HD\r\nVA 3000 c17\r\n"), value, Buffer.from("\r\nEN\r\nVA 0\r\n\r\n")]);
  for (let cut = 1; cut < stream.length; cut += cut < 40 ? 1 : 101) {
    const first = read(stream.subarray(0, cut));
    const second = read(stream.subarray(cut));
    const got = readAll<Reply, MetaLimits>(new MetaReader(), [first, second], metaLimits(1 << 20, 4));
    assert.deepEqual(
      got.map((r) => r.code),
      ["HD", "VA", "EN", "VA"],
      `cut at ${cut}`,
    );
    const hit = got[1] as Reply;
    assert.deepEqual(hit.flags, ["c17"]);
    assert.deepEqual(Buffer.from(hit.data as Uint8Array), Buffer.from(value));
    if (cut >= stream.length - 15) assert.equal(hit.data?.buffer, first.buffer, "a value in one read is a view of it");
    assert.equal((got[3] as Reply).data?.length, 0);
  }
  assert.throws(
    () => readAll<Reply, MetaLimits>(new MetaReader(), [Buffer.from("VA 1001\r\n")], metaLimits(1000)),
    /1001 bytes/,
  );
});

test("memcached replies are bounded per command when announced, and a request's replies in total", () => {
  const meta = (reads: string[], limits: MetaLimits): Reply[] =>
    readAll<Reply, MetaLimits>(
      new MetaReader(),
      reads.map((r) => Buffer.from(r)),
      limits,
    );
  // a write's reply carries no value: a VA to an ms is refused at its line, before any of its bytes
  assert.throws(() => meta(["VA 1000000\r\n"], metaLimits(0)), /1000000 bytes/);
  // a counter is at most 20 digits
  assert.throws(() => meta(["VA 21 t\r\n"], metaLimits(20)), /21 bytes/);
  assert.equal(meta(["VA 2\r\n17\r\n"], metaLimits(20))[0]?.code, "VA");
  // lines count against the request's bytes: lines of 100 bytes within 950 bytes fail at the tenth
  const line = `STAT ${"x".repeat(93)}\r\n`;
  assert.equal(meta([line.repeat(9)], { maxValue: 0, left: 950 }).length, 9);
  assert.throws(() => meta([line.repeat(10)], { maxValue: 0, left: 950 }), /more bytes than/);
  // values too: two replies' budget does not take three values
  const va = "VA 10\r\n0123456789\r\n";
  const two = { maxValue: 10, left: 2 * va.length };
  assert.equal(meta([va.repeat(2)], two).length, 2);
  assert.throws(() => meta([va.repeat(3)], { maxValue: 10, left: 2 * va.length }), /more bytes than/);
});

test("a packed command reads back as its parts (lengths across every digit count)", () => {
  const parts: Array<string | Uint8Array> = ["SET", "kéy", ""];
  for (const n of [0, 9, 10, 99, 100, 999, 1000, 9999, 10_000, 123_456]) parts.push(filled(n, n));
  const [got] = resp([read(pack(...parts, 1732500000000n))]) as [Uint8Array[]];
  assert.equal(got.length, parts.length + 1);
  parts.forEach((p, i) => {
    assert.deepEqual(Buffer.from(got[i] as Uint8Array), Buffer.from(p));
  });
  assert.equal(Buffer.from(got[parts.length] as Uint8Array).toString(), "1732500000000");
});

test("pack writes exactly RESP's bytes for any parts: ASCII up to and past 64 characters, any Unicode, numbers", () => {
  const reference = (parts: Array<string | number | bigint | Uint8Array>): Buffer => {
    const chunks = [Buffer.from(`*${parts.length}\r\n`)];
    for (const part of parts) {
      const bytes = part instanceof Uint8Array ? Buffer.from(part) : Buffer.from(String(part), "utf8");
      chunks.push(Buffer.from(`$${bytes.length}\r\n`), bytes, Buffer.from("\r\n"));
    }
    return Buffer.concat(chunks);
  };
  const part = fc.oneof(
    fc.string({ unit: "binary-ascii", minLength: 60, maxLength: 70 }),
    fc.string({ unit: "binary", maxLength: 80 }),
    fc.string({ unit: "grapheme", maxLength: 40 }),
    fc.integer(),
    fc.bigInt(),
    fc.uint8Array({ maxLength: 100 }),
  );
  fc.assert(
    fc.property(fc.array(part, { maxLength: 8 }), (parts) => {
      // a string without a UTF-8 form (an unpaired surrogate) is refused, never written as U+FFFD
      if (parts.some((p) => typeof p === "string" && !p.isWellFormed()))
        assert.throws(() => pack(...parts), /lone surrogate/);
      else assert.deepEqual(pack(...parts), reference(parts));
    }),
    { numRuns: 500 },
  );
});
