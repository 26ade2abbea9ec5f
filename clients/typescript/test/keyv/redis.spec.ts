// @keyv/test-suite on KeyvLarder over a real Redis, iterator included; and a value written through Keyv is a
// larder entry every language reads.
import keyvTestSuite, { keyvIteratorTests } from "@keyv/test-suite";
import Keyv from "keyv";
import * as test from "vitest";
import { decode } from "../../src/entry.js";
import { KeyvLarder } from "../../src/keyv.js";
import { startRedis } from "../support/servers.js";

const server = await startRedis();
test.afterAll(() => server.stop());
const url = `redis://${server.address}/5?timeout=1s`;
keyvTestSuite(test, Keyv, () => new KeyvLarder(url));
keyvIteratorTests(test, Keyv, () => new KeyvLarder(url));

test.it("values written through Keyv are larder entries", async () => {
  const adapter = new KeyvLarder(url);
  const raw = new Keyv({ store: adapter, namespace: "app", serialize: undefined, deserialize: undefined });
  await raw.set("user", { id: 7, name: "Ada" }, 60_000);
  test.expect(await raw.get("user")).toEqual({ id: 7, name: "Ada" });
  const entry = decode((await adapter.store.get("app:user")) as Uint8Array);
  test.expect(entry.value).toEqual({ id: 7, name: "Ada" });
  test.expect(Number(entry.expiresAt)).toBeGreaterThan(Date.now());
  const json = new Keyv({ store: adapter, namespace: "app" });
  await json.set("plain", "bar");
  test.expect(decode((await adapter.store.get("app:plain")) as Uint8Array).value).toEqual({ value: "bar" });
});
