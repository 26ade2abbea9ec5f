// Property tests of everything that reads untrusted bytes: whatever the input, decoders either give a value or
// throw InvalidEntry (never a RangeError, a stack overflow or a hang), and never allocate past max_size; encode/decode
// round-trips for every serializer and compressor; and the agreement of safeKey with the stores' key check that a
// memory-store hit relies on (it looks a key up before making it safe).

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "fast-check";
import { COMPRESSORS, compress, decompress } from "../src/compressors.js";
import { decode, encode, encodeSerialized, encodeText } from "../src/entry.js";
import { InvalidEntry } from "../src/errors.js";
import { packHeader, readHeader } from "../src/header.js";
import { parseJson } from "../src/json.js";
import { safeKey } from "../src/keys.js";
import { lz4CompressInto, lz4CompressJs, lz4CompressNative, lz4Decompress } from "../src/lz4.js";
import { decodeMsgpack, encodeMsgpack, MsgpackError } from "../src/msgpack.js";
import { inspectText } from "../src/report.js";
import { checkKey } from "../src/stores/base.js";
import { InvalidKey } from "../src/stores/errors.js";
import { Float, type Value } from "../src/value.js";

const RUNS = { numRuns: 300 };

/** LZ4's end-of-block rules, which liblz4's decoder (Ruby's, Python's) enforces: every match starts at least 12 bytes
 * before the end of the output and the last 5 bytes (all of an input under 13 bytes) are literals. */
function assertLz4EndRules(block: Uint8Array, outputLength: number): void {
  let ip = 0;
  let op = 0;
  let lastLiterals = 0;
  const length = (start: number): number => {
    let n = start;
    if (start === 15)
      for (;;) {
        const b = block[ip++] as number;
        n += b;
        if (b !== 255) break;
      }
    return n;
  };
  while (ip < block.length) {
    const token = block[ip++] as number;
    const literals = length(token >>> 4);
    ip += literals;
    op += literals;
    lastLiterals = literals;
    if (ip >= block.length) break;
    ip += 2;
    const match = length(token & 15) + 4;
    assert.ok(op <= outputLength - 12, `a match starts at ${op} of ${outputLength}`);
    op += match;
    lastLiterals = 0;
  }
  assert.equal(op, outputLength);
  assert.ok(lastLiterals >= Math.min(5, outputLength), `the block ends with ${lastLiterals} literals`);
}

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
  test("both LZ4 encoders (JavaScript, and lz4-napi where it loads) write larder's form within LZ4's end rules", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 5000 }), fc.integer({ min: 0, max: 200 }), (noise, repeats) => {
        const data = Uint8Array.from([...noise, ...Array.from({ length: repeats }, (_, i) => i % 7)]);
        const native = lz4CompressNative(data);
        for (const packed of native === undefined ? [lz4CompressJs(data)] : [lz4CompressJs(data), native]) {
          assert.equal(new DataView(packed.buffer, packed.byteOffset).getUint32(0, true), data.length);
          assertLz4EndRules(packed.subarray(4), data.length);
          assert.deepEqual(lz4Decompress(packed, 1 << 20), data);
        }
      }),
      RUNS,
    );
  });
  test("encodeText writes the entry encodeSerialized writes for the text's UTF-8, and entries stay their own", () => {
    fc.assert(
      fc.property(
        fc.string({ unit: "binary", maxLength: 3000 }),
        fc.string({ maxLength: 3000 }),
        fc.constantFrom("none", "lz4", "snappy", "gzip"),
        fc.option(fc.integer({ min: 0, max: 2 ** 40 }), { nil: undefined }),
        (text, other, compressor, ttlMs) => {
          const options = { compressor, createdAt: 1_700_000_000_000, threshold: 64, ...(ttlMs ? { ttlMs } : {}) };
          const entry = encodeText(text, "text", options);
          const copy = Uint8Array.from(entry);
          assert.deepEqual(entry, encodeSerialized(new TextEncoder().encode(text), "text", options));
          encodeText(other, "json", options); // reuses the scratch buffer: the first entry must not change
          assert.deepEqual(entry, copy);
          assert.equal(decode(entry).value, new TextDecoder().decode(new TextEncoder().encode(text)));
        },
      ),
      RUNS,
    );
  });
  test("the LZ4 encoder written in place stays within its room, or says it cannot", () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ maxLength: 3000 }),
        fc.integer({ min: 0, max: 200 }),
        fc.integer({ min: 0, max: 3300 }),
        fc.integer({ min: 0, max: 30 }),
        (noise, repeats, room, at) => {
          const data = Uint8Array.from([...noise, ...Array.from({ length: repeats }, () => 120)]);
          const dst = new Uint8Array(at + room + 64).fill(0xa5);
          const written = lz4CompressInto(data, dst, at, room);
          assert.ok(
            dst.subarray(at + room).every((b) => b === 0xa5),
            "wrote past its room",
          );
          const full = lz4CompressJs(data);
          // The encoder's bound per sequence may overestimate its length bytes by one each (two per sequence).
          if (written < 0) assert.ok(full.length > room - 2, `refused ${full.length} bytes in ${room}`);
          else {
            assert.ok(written <= room);
            assert.deepEqual(lz4Decompress(dst.subarray(at, at + written), 1 << 20), data);
          }
        },
      ),
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

describe("keys", () => {
  /** Strings near every edge of the rule: printable ASCII, spaces and controls, multi-byte and astral characters,
   * lone surrogates, and lengths around 250 characters and bytes. */
  const keys = fc.oneof(
    fc.string({ unit: "binary", maxLength: 300 }),
    fc.string({ unit: fc.integer({ min: 0, max: 0x9f }).map((c) => String.fromCharCode(c)), maxLength: 260 }),
    fc.string({
      unit: fc.constantFrom("a", "~", "!", "é", "€", "😀", " ", "\x7f", "\ud800", "\udc00"),
      maxLength: 260,
    }),
    fc.integer({ min: 240, max: 260 }).map((n) => "k".repeat(n)),
    fc.tuple(fc.integer({ min: 0, max: 250 }), fc.constantFrom("é", "€", "😀")).map(([n, c]) => "k".repeat(n) + c),
  );
  const accepted = (key: string): boolean => {
    try {
      checkKey("memory", key);
      return true;
    } catch (e) {
      if (!(e instanceof InvalidKey)) throw e;
      return false;
    }
  };

  test("a key any store accepts is its own safe key, and every well-formed safe key is accepted", () => {
    let seen = 0;
    fc.assert(
      fc.property(keys, (key) => {
        if (accepted(key)) {
          seen++;
          assert.equal(safeKey(key), key);
        }
        if (key !== "" && key.isWellFormed()) assert.ok(accepted(safeKey(key)), JSON.stringify(key));
      }),
      { numRuns: 3000 },
    );
    assert.ok(seen > 300, `only ${seen} accepted keys were tried`);
  });
});
