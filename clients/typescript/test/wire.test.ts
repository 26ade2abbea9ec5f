// copyOut, the rule for values handed out of a socket read: a small value is a copy (it must not keep the whole read
// alive), a large one may be a view, never keeping alive more than twice its size.

import assert from "node:assert/strict";
import { test } from "node:test";
import { copyOut } from "../src/stores/wire.js";

test("a small value is copied out of the read buffer", () => {
  const read = Buffer.alloc(65536, 1);
  read.fill(7, 100, 1124);
  const value = copyOut(read, 100, 1124);
  assert.ok(value instanceof Uint8Array && !Buffer.isBuffer(value));
  assert.equal(value.length, 1024);
  assert.notEqual(value.buffer, read.buffer);
  read.fill(0);
  assert.ok(value.every((b) => b === 7));
});

test("a large value is a view that keeps at most twice its size alive", () => {
  const read = Buffer.alloc(70000, 3);
  const value = copyOut(read, 10, 65546);
  assert.equal(value.length, 65536);
  assert.ok(value.buffer.byteLength <= 2 * value.length);
  assert.ok(value.every((b) => b === 3));
  assert.ok(!Buffer.isBuffer(value));
});
