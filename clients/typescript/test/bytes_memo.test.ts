// BytesMemo (src/bytes_memo.ts): a decoded value comes back only for exactly the bytes it was decoded from, even
// when the caller's buffer changes afterwards; a key's bytes are copied only from its second decode; the budget holds.

import assert from "node:assert/strict";
import { test } from "node:test";
import { BytesMemo } from "../src/bytes_memo.js";

test("the first decode of a key leaves a mark, the second keeps a copy that answers equal bytes", () => {
  const memo = new BytesMemo<string>(1 << 20, 16 * 1024);
  const bytes = new Uint8Array(1000).fill(7);
  memo.set("k", bytes, "seven", 10);
  assert.equal(memo.get("k", bytes), undefined, "a key decoded once is not answered");
  assert.ok(memo.heldBytes < 200, `a mark holds ${memo.heldBytes} bytes`);
  memo.set("k", bytes, "seven", 10);
  assert.equal(memo.get("k", bytes), "seven");
  assert.equal(memo.get("k", Uint8Array.from(bytes)), "seven", "equal bytes in another buffer");
  assert.equal(memo.heldBytes, 1010);
});

test("bytes that changed after the decode (a reused socket read) are never answered with the old value", () => {
  const memo = new BytesMemo<string>(1 << 20, 16 * 1024);
  const read = new Uint8Array(64).fill(1);
  const view = read.subarray(8, 40);
  memo.set("k", view, "old", 3);
  memo.set("k", view, "old", 3);
  read.fill(2); // the read's buffer is reused for other bytes
  assert.equal(memo.get("k", view), undefined);
  assert.equal(memo.get("k", new Uint8Array(32).fill(1)), "old", "the copy kept the bytes decoded");
  const longer = new Uint8Array(33).fill(1);
  assert.equal(memo.get("k", longer), undefined);
});

test("a rewritten key is answered only for its new bytes, and the budget drops the oldest keys", () => {
  const memo = new BytesMemo<string>(16 * 1024, 1024);
  const a = new Uint8Array(500).fill(3);
  const b = new Uint8Array(500).fill(4);
  memo.set("k", a, "a", 0);
  memo.set("k", a, "a", 0);
  memo.set("k", b, "b", 0);
  assert.equal(memo.get("k", a), undefined);
  assert.equal(memo.get("k", b), "b");
  for (let i = 0; i < 200; i++) {
    memo.set(`x${i}`, a, "a", 0);
    memo.set(`x${i}`, a, "a", 0);
  }
  assert.ok(memo.heldBytes <= 16 * 1024, `${memo.heldBytes} bytes held`);
  assert.equal(memo.get("x199", a), "a");
  assert.equal(memo.get("x0", a), undefined);
  memo.set("big", new Uint8Array(2000), "too big", 0);
  memo.set("big", new Uint8Array(2000), "too big", 0);
  assert.equal(memo.get("big", new Uint8Array(2000)), undefined, "entries over maxBytes are not kept");
});
