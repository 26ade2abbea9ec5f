// Property tests of everything that reads untrusted bytes: whatever the input, decoders either give a value or
// throw InvalidEntry (never a RangeError, a stack overflow or a hang), and never allocate past max_size; and
// encode/decode round-trips for every serializer and compressor.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "fast-check";
import { COMPRESSORS, compress, decompress } from "../src/compressors.js";
import { decode, encode } from "../src/entry.js";
import { InvalidEntry } from "../src/errors.js";
import { packHeader, readHeader } from "../src/header.js";
import { parseJson } from "../src/json.js";
import { lz4Compress, lz4CompressJs, lz4Decompress, lz4Encoder } from "../src/lz4.js";
import { decodeMsgpack, encodeMsgpack, MsgpackError } from "../src/msgpack.js";
import { inspectText } from "../src/report.js";
import { Float, type Value } from "../src/value.js";

const RUNS = { numRuns: 300 };

function refusedOrDecoded(run: () => unknown): void {
  try {
    run();
  } catch (e) {
    if (!(e instanceof InvalidEntry)) throw e;
  }
}

/** JSON-like values in larder's canonical model: safe integers, Float, strings, arrays, Maps. */
const jsonValue: fc.Arbitrary<Value> = fc.letrec<{ value: Value }>((tie) => ({
  value: fc.oneof(
    { depthSize: "small" },
    fc.constant(null),
    fc.boolean(),
    fc.integer({ min: -(2 ** 40), max: 2 ** 40 }),
    fc.bigInt({ min: -(2n ** 63n), max: 2n ** 64n - 1n }).map((b) => (Number.isSafeInteger(Number(b)) ? Number(b) : b)),
    fc.double({ noNaN: true, noDefaultInfinity: true }).map((d) => new Float(d)), // JSON has no infinities (the json serializer refuses them; tested below)
    fc.string({ unit: "grapheme" }),
    fc.array(tie("value"), { maxLength: 5 }),
    fc.array(fc.tuple(fc.string(), tie("value")), { maxLength: 5 }).map((pairs) => new Map<Value, Value>(pairs)),
  ),
})).value;

describe("decoders of untrusted bytes", () => {
  test("decode: random bytes are a value or InvalidEntry", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), (data) => refusedOrDecoded(() => decode(data))),
      RUNS,
    );
  });
  test("decode and inspect: a valid header before random payload bytes, every codec and serializer", () => {
    const header = fc.record({
      kind: fc.constantFrom("value" as const, "response" as const),
      serializer: fc.constantFrom("raw" as const, "msgpack" as const, "json" as const, "text" as const),
      compressor: fc.constantFrom(...COMPRESSORS),
    });
    fc.assert(
      fc.property(header, fc.uint8Array({ maxLength: 300 }), (h, payload) => {
        const serializer = h.kind === "response" ? "msgpack" : h.serializer;
        const head = packHeader({
          ...h,
          serializer,
          createdAt: 0,
          expiresAt: 0,
          staleMs: 0,
          version: undefined,
          tags: [],
        });
        const data = new Uint8Array([...head, ...payload]);
        refusedOrDecoded(() => decode(data, { maxSize: 4096 }));
        refusedOrDecoded(() => inspectText(data, { maxSize: 4096 }));
      }),
      RUNS,
    );
  });
  test("header times: any u64, as a number or a bigint, is read back as written", () => {
    const time = fc.oneof(
      fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }),
      fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }).map((b) => (b <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(b) : b)),
      fc.integer({ min: 0, max: 2 ** 32 + 5 }),
    );
    const asBig = (t: number | bigint): bigint => BigInt(t);
    fc.assert(
      fc.property(time, time, time, (createdAt, expiresAt, staleMs) => {
        const head = packHeader({
          kind: "value",
          serializer: "raw",
          compressor: "none",
          createdAt,
          expiresAt,
          staleMs,
          version: "v",
          tags: ["a", "bc"],
        });
        const back = readHeader(head);
        assert.equal(asBig(back.createdAt), asBig(createdAt));
        assert.equal(asBig(back.expiresAt), asBig(expiresAt));
        assert.equal(asBig(back.staleMs), asBig(staleMs));
        assert.deepEqual([back.version, back.tags, back.size], ["v", ["a", "bc"], head.length]);
      }),
      RUNS,
    );
    for (const bad of [-1, 1.5, Number.NaN, 2n ** 64n, -1n])
      assert.throws(
        () =>
          packHeader({
            kind: "value",
            serializer: "raw",
            compressor: "none",
            createdAt: bad,
            expiresAt: 0,
            staleMs: bad,
            version: undefined,
            tags: [],
          }),
        RangeError,
      );
  });
  test("decompress: mutated compressed payloads never exceed max_size", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...COMPRESSORS),
        fc.uint8Array({ minLength: 1, maxLength: 2000 }),
        fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { maxLength: 4 }),
        (codec, data, flips) => {
          const packed = compress(codec, data).slice();
          for (const [at, byte] of flips) if (packed.length > 0) packed[at % packed.length] = byte;
          try {
            const out = decompress(codec, packed, 1000);
            assert.ok(out.length <= 1000);
          } catch (e) {
            if (!(e instanceof InvalidEntry)) throw e;
          }
        },
      ),
      RUNS,
    );
  });
  test("msgpack: random bytes decode or throw MsgpackError, however deep they claim to nest", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), (data) => {
        try {
          decodeMsgpack(data, "faithful");
        } catch (e) {
          if (!(e instanceof MsgpackError)) throw e;
        }
      }),
      RUNS,
    );
    assert.throws(() => decodeMsgpack(new Uint8Array(100_000).fill(0x91)), MsgpackError);
    assert.throws(() => decodeMsgpack(Uint8Array.of(0xdd, 0xff, 0xff, 0xff, 0xff)), MsgpackError);
  });
  test("json: random text parses or throws, nesting bounded", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 100 }), (text) => {
        try {
          parseJson(text);
        } catch (e) {
          if (!(e instanceof Error) || e.name !== "JsonError") throw e;
        }
      }),
      RUNS,
    );
    assert.throws(() => parseJson("[".repeat(100_000)), /nested/);
  });
});

describe("round trips", () => {
  test("msgpack: encode then decode faithfully gives the value back, and re-encodes to the same bytes", () => {
    fc.assert(
      fc.property(jsonValue, (value) => {
        const bytes = encodeMsgpack(value);
        const back = decodeMsgpack(bytes, "faithful");
        assert.deepEqual(encodeMsgpack(back), bytes);
      }),
      RUNS,
    );
  });
  test("every compressor and serializer: decode(encode(v)) is v", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...COMPRESSORS),
        fc.uint8Array({ maxLength: 5000 }),
        fc.nat(2000),
        (compressor, data, threshold) => {
          const entry = encode(data, { serializer: "raw", compressor, threshold, createdAt: 1 });
          assert.deepEqual(decode(entry).value, data);
        },
      ),
      RUNS,
    );
    fc.assert(
      fc.property(jsonValue, fc.constantFrom("msgpack" as const, "json" as const), (value, serializer) => {
        const entry = encode(value, { serializer, compressor: "lz4", threshold: 0, createdAt: 1 });
        const back = decode(entry, { mode: "faithful" }).value as Value;
        assert.deepEqual(
          encode(back, { serializer, compressor: "none", createdAt: 1 }),
          encode(value, { serializer, compressor: "none", createdAt: 1 }),
        );
      }),
      RUNS,
    );
  });
  test("non-finite floats: MessagePack keeps them, the json serializer refuses them", () => {
    for (const n of [Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, Number.NaN]) {
      const back = decode(encode(new Float(n), { createdAt: 1 }), { mode: "faithful" }).value as Float;
      assert.ok(Object.is(back.value, n));
      assert.throws(() => encode(new Float(n), { serializer: "json" }), /NaN or Infinity/);
    }
  });
  test("lz4 and snappy on repetitive data compress and come back", () => {
    const data = new Uint8Array(100_000).map((_, i) => (i % 251) & 0xff);
    for (const codec of ["lz4", "snappy"] as const) {
      const packed = compress(codec, data);
      assert.ok(packed.length < data.length / 10, codec);
      assert.deepEqual(decompress(codec, packed), data);
    }
  });
  test("both LZ4 encoders (lz4-napi where it loads, lz4js) write larder's form, which the decoder reads back", () => {
    assert.ok(["native", "js"].includes(lz4Encoder));
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 5000 }), fc.integer({ min: 0, max: 200 }), (noise, repeats) => {
        const data = Uint8Array.from([...noise, ...Array.from({ length: repeats }, (_, i) => i % 7)]);
        for (const packed of [lz4Compress(data), lz4CompressJs(data)]) {
          assert.equal(new DataView(packed.buffer, packed.byteOffset).getUint32(0, true), data.length);
          assert.deepEqual(lz4Decompress(packed, 1 << 20), data);
        }
      }),
      RUNS,
    );
  });
  test("lz4 matches that overlap their own output (runs of a short pattern) come back exactly", () => {
    // The decoder copies an overlapping match in doubling runs: every period, length and tail must still land.
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            pattern: fc.uint8Array({ minLength: 1, maxLength: 40 }),
            repeats: fc.integer({ min: 1, max: 400 }),
          }),
          { minLength: 1, maxLength: 6 },
        ),
        (pieces) => {
          const parts = pieces.flatMap(({ pattern, repeats }) => Array.from({ length: repeats }, () => [...pattern]));
          const data = Uint8Array.from(parts.flat());
          assert.deepEqual(decompress("lz4", compress("lz4", data)), data);
        },
      ),
      RUNS,
    );
  });
});
