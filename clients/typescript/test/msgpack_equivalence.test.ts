// The fast MessagePack paths (issue 34) against the encoder and decoder they replaced (support/msgpack_reference.ts):
// byte-identical output for every value, the same accepted values and the same refusals, the same decoded values
// for any bytes, including the repeated map keys the decoder's key cache serves.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "fast-check";
import { decode, encode } from "../src/entry.js";
import { decodeMsgpack, encodeMsgpack } from "../src/msgpack.js";
import { Ext, Float, Pairs, type Value } from "../src/value.js";
import * as reference from "./support/msgpack_reference.js";

const RUNS = { numRuns: 400 };

/** What encoding gives: the bytes, or the error's class name and message. */
function outcome(f: () => Uint8Array): string | Uint8Array {
  try {
    return f();
  } catch (e) {
    return `${(e as Error).name}: ${(e as Error).message}`;
  }
}

const edgeNumbers = [
  0,
  -0,
  1,
  127,
  128,
  255,
  256,
  65535,
  65536,
  2 ** 32 - 1,
  2 ** 32,
  2 ** 53 - 1,
  2 ** 53,
  -1,
  -32,
  -33,
  -128,
  -129,
  -32768,
  -32769,
  -(2 ** 31),
  -(2 ** 31) - 1,
  -(2 ** 53) + 1,
  -(2 ** 53),
  1.5,
  -1.5,
  Number.NaN,
  Infinity,
  -Infinity,
  Number.MIN_VALUE,
  1e300,
];
const edgeBigints = [
  0n,
  1n,
  -1n,
  2n ** 32n,
  2n ** 63n,
  2n ** 64n - 1n,
  2n ** 64n,
  -(2n ** 31n) - 1n,
  -(2n ** 63n),
  -(2n ** 63n) - 1n,
];

const text = fc.oneof(
  fc.string({ maxLength: 70 }),
  fc.string({ unit: "binary", maxLength: 70 }),
  fc.string({ unit: "grapheme", maxLength: 40 }),
  fc.constantFrom("a".repeat(31), "a".repeat(32), "a".repeat(48), "a".repeat(49), "é".repeat(20), "\ud800", "a\udc00b"),
  fc.string({ minLength: 250, maxLength: 600 }),
);

const leaf: fc.Arbitrary<Value> = fc.oneof(
  fc.constantFrom<Value>(null, undefined, true, false, ...edgeNumbers, ...edgeBigints),
  fc.integer(),
  fc.double(),
  fc.maxSafeInteger(),
  fc.bigInt({ min: -(2n ** 64n), max: 2n ** 65n }),
  text,
  fc.uint8Array({ maxLength: 300 }),
  fc.double().map((d) => new Float(d)),
  fc.tuple(fc.integer({ min: -130, max: 130 }), fc.uint8Array({ maxLength: 20 })).map(([t, d]) => new Ext(t, d)),
);

const value: fc.Arbitrary<Value> = fc.letrec<{ v: Value }>((tie) => ({
  v: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    leaf,
    fc.array(tie("v"), { maxLength: 6 }),
    fc.dictionary(text, tie("v"), { maxKeys: 6 }),
    fc.array(fc.tuple(tie("v"), tie("v")), { maxLength: 4 }).map((e) => new Map(e)),
    fc.array(fc.tuple(tie("v"), tie("v")), { maxLength: 4 }).map((e) => new Pairs(e)),
  ),
})).v;

describe("the MessagePack encoder against its previous version", () => {
  test("edge numbers, bigints and strings: the same bytes or the same refusal", () => {
    for (const v of [...edgeNumbers, ...edgeBigints, "\ud800", "x".repeat(70_000), new Date(0) as unknown as Value])
      assert.deepEqual(
        outcome(() => encodeMsgpack(v)),
        outcome(() => reference.encodeMsgpack(v)),
      );
  });
  test("any value: the same bytes, or the same refusal", () => {
    fc.assert(
      fc.property(value, (v) => {
        assert.deepEqual(
          outcome(() => encodeMsgpack(v)),
          outcome(() => reference.encodeMsgpack(v)),
        );
      }),
      RUNS,
    );
  });
  test("nesting: 100 levels are written, 101 refused, as before", () => {
    let deep: Value = 1;
    for (let i = 0; i < 100; i++) deep = [deep];
    assert.deepEqual(encodeMsgpack(deep), reference.encodeMsgpack(deep));
    assert.equal(
      outcome(() => encodeMsgpack([deep])),
      outcome(() => reference.encodeMsgpack([deep])),
    );
  });
  test("objects of 0 to 70,000 keys, null-prototype objects, integer-like keys: the same bytes", () => {
    for (const n of [0, 1, 15, 16, 17, 255, 256, 65535, 65536, 70_000]) {
      const object: { [key: string]: Value } = {};
      for (let i = 0; i < n; i++) object[i % 3 === 0 ? String(i) : `k${i}`] = i % 2 === 0 ? i : { nested: [i] };
      assert.deepEqual(encodeMsgpack(object), reference.encodeMsgpack(object));
      assert.deepEqual(encodeMsgpack([object, object]), reference.encodeMsgpack([object, object]));
      const bare = Object.assign(Object.create(null) as { [key: string]: Value }, object);
      assert.deepEqual(encodeMsgpack(bare), reference.encodeMsgpack(bare));
    }
  });
  test("an enumerable property added to Object.prototype is not written, as before", () => {
    const proto = Object.prototype as { [key: string]: unknown };
    proto.added = 1;
    try {
      const v = { a: 1, b: [{ c: 2 }], d: Object.create(null) as Value };
      assert.deepEqual(encodeMsgpack(v), reference.encodeMsgpack(v));
    } finally {
      delete proto.added;
    }
  });
  test("class instances, functions and symbols are refused with the same message, at any depth", () => {
    class Thing {
      x = 1;
    }
    for (const odd of [new Thing(), () => 1, Symbol("s"), new Date(0), /re/, new Set([1])] as unknown[]) {
      assert.equal(
        outcome(() => encodeMsgpack(odd as Value)),
        outcome(() => reference.encodeMsgpack(odd as Value)),
      );
      let wrapped: Value = odd as Value;
      for (let i = 0; i < 100; i++) wrapped = [wrapped];
      assert.equal(
        outcome(() => encodeMsgpack(wrapped)),
        outcome(() => reference.encodeMsgpack(wrapped)),
      );
      assert.equal(
        outcome(() => encodeMsgpack({ a: odd as Value })),
        outcome(() => reference.encodeMsgpack({ a: odd as Value })),
      );
    }
  });
  test("a value refused half-way leaves the next encode whole", () => {
    assert.throws(() => encodeMsgpack({ a: "x".repeat(1000), b: "\ud800" }));
    assert.deepEqual(encodeMsgpack({ a: 1 }), reference.encodeMsgpack({ a: 1 }));
  });
  test("a getter that encodes during an encode gets its own buffer", () => {
    const inner = { n: 1, s: "inner" };
    const outer = {
      get x(): Value {
        return [...encodeMsgpack(inner)];
      },
      y: "after",
    } as unknown as Value;
    assert.deepEqual(encodeMsgpack(outer), reference.encodeMsgpack(outer));
  });
  test("entries of msgpack values are the same bytes as encoding then building", () => {
    fc.assert(
      fc.property(value, fc.constantFrom("none" as const, "lz4" as const), (v, compressor) => {
        const a = outcome(() => encode(v, { compressor, threshold: 0, createdAt: 7, ttlMs: 5 }));
        if (typeof a === "string") return;
        assert.deepEqual(decode(a, { mode: "faithful" }).value, reference.decodeMsgpack(encodeMsgpack(v), "faithful"));
      }),
      RUNS,
    );
  });
});

describe("the MessagePack decoder against its previous version", () => {
  const decodeOutcome = (f: () => Value): unknown => {
    try {
      return f();
    } catch (e) {
      return `${(e as Error).name}: ${(e as Error).message}`;
    }
  };
  test("any encoded value: the same value in both modes", () => {
    fc.assert(
      fc.property(value, (v) => {
        const bytes = outcome(() => reference.encodeMsgpack(v));
        if (typeof bytes === "string") return;
        for (const mode of ["plain", "faithful"] as const)
          assert.deepEqual(
            decodeOutcome(() => decodeMsgpack(bytes, mode)),
            decodeOutcome(() => reference.decodeMsgpack(bytes, mode)),
          );
      }),
      RUNS,
    );
  });
  test("any bytes: the same value or the same refusal", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), (bytes) => {
        for (const mode of ["plain", "faithful"] as const)
          assert.deepEqual(
            decodeOutcome(() => decodeMsgpack(bytes, mode)),
            decodeOutcome(() => reference.decodeMsgpack(bytes, mode)),
          );
      }),
      RUNS,
    );
  });
  test("map keys: many distinct, colliding and repeated keys, invalid UTF-8, __proto__", () => {
    const records = Array.from({ length: 5000 }, (_, i) => ({
      [`k${i % 3000}`]: i,
      id: i,
      [`é${i % 7}`]: i % 2 === 0,
    }));
    const bytes = reference.encodeMsgpack(records);
    assert.deepEqual(decodeMsgpack(bytes), reference.decodeMsgpack(bytes));
    // a key of invalid UTF-8 after a valid key of the same length and hash slot is still refused
    const good = Uint8Array.of(0x81, 0xa2, 0x61, 0x62, 0x01);
    const bad = Uint8Array.of(0x81, 0xa2, 0xc3, 0x28, 0x01);
    assert.deepEqual(decodeMsgpack(good), { ab: 1 });
    assert.equal(
      decodeOutcome(() => decodeMsgpack(bad)),
      decodeOutcome(() => reference.decodeMsgpack(bad)),
    );
    const proto = reference.encodeMsgpack(new Pairs([["__proto__", { polluted: true }]]));
    const decoded = decodeMsgpack(proto) as { [k: string]: Value };
    assert.deepEqual(Object.keys(decoded), ["__proto__"]);
    assert.equal(({} as { polluted?: boolean }).polluted, undefined);
    // a truncated key
    const cut = Uint8Array.of(0x81, 0xa5, 0x61, 0x62);
    assert.equal(
      decodeOutcome(() => decodeMsgpack(cut)),
      decodeOutcome(() => reference.decodeMsgpack(cut)),
    );
  });
});
