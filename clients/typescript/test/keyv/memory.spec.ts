// @keyv/test-suite (Keyv's own tests for storage adapters) on KeyvLarder over the memory store (Keyv
// offers iterator() only to the dialects it lists, which memory is not).
import keyvTestSuite from "@keyv/test-suite";
import Keyv from "keyv";
import * as test from "vitest";
import { decode } from "../../src/entry.js";
import { KeyvLarder } from "../../src/keyv.js";
import { MemoryStore } from "../../src/stores/memory.js";

const store = new MemoryStore();
const adapter = () => new KeyvLarder(store);
keyvTestSuite(test, Keyv, adapter);

test.it("Keyv's JSON text keeps its expiry, read from its end, and other text its own", async () => {
  const adapter = new KeyvLarder(new MemoryStore());
  const entry = async (key: string) => decode((await adapter.store.get(key)) as Uint8Array);
  const at = Date.now() + 60_000;
  await adapter.set("tail", `{"value":"${"y".repeat(70_000)}","expires":${at}}`);
  test.expect(Number((await entry("tail")).expiresAt)).toBe(at);
  await adapter.set("none", '{"value":{"a":[1,2]}}');
  test.expect((await entry("none")).value).toEqual({ value: { a: [1, 2] } });
  test.expect(Number((await entry("none")).expiresAt)).toBe(0);
  // An "expires" inside the value is not the entry's: the text is parsed for the top-level one.
  await adapter.set("nested", `{"value":{"expires":1,"b":2},"expires":${at}}`);
  test.expect(Number((await entry("nested")).expiresAt)).toBe(at);
  await adapter.set("inner", '{"value":{"expires":1}}');
  test.expect(Number((await entry("inner")).expiresAt)).toBe(0);
  // Text that is not JSON is kept as text.
  await adapter.set("text", "{not json}");
  test.expect(await adapter.get("text")).toBe("{not json}");
  test.expect((await entry("text")).value).toBe("{not json}");
});

test.it(
  "a text read again from the same bytes is the one decoded before, and the memo stays within its budget",
  async () => {
    const adapter = new KeyvLarder(new MemoryStore());
    const held = () => (adapter as unknown as { texts: { heldBytes: number } }).texts.heldBytes;
    await adapter.set("k", '{"value":"one"}');
    test.expect(await adapter.get("k")).toBe('{"value":"one"}');
    test.expect(await adapter.get("k")).toBe('{"value":"one"}');
    await adapter.set("k", '{"value":"two"}');
    test.expect(await adapter.get("k")).toBe('{"value":"two"}');
    test.expect(await adapter.getMany(["k", "missing"])).toEqual(['{"value":"two"}', undefined]);
    for (let i = 0; i < 100; i++) {
      const text = `{"value":"${String(i).repeat(50_000)}"}`;
      await adapter.set(`big${i}`, text);
      test.expect(await adapter.get(`big${i}`)).toBe(text);
    }
    test.expect(held()).toBeGreaterThan(0);
    test.expect(held()).toBeLessThanOrEqual(4 * 1024 * 1024);
  },
);
