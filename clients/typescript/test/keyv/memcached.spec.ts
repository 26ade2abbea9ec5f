// @keyv/test-suite on KeyvLarder over a real memcached (no iterator: memcached cannot list its keys). purge_skew=0ms:
// one machine, one clock, and Keyv clears before every test (a clear waits out the skew, src/keyv.ts).
import keyvTestSuite from "@keyv/test-suite";
import Keyv from "keyv";
import * as test from "vitest";
import { KeyvLarder } from "../../src/keyv.js";
import { startMemcached } from "../support/servers.js";

const server = await startMemcached();
test.afterAll(() => server.stop());
keyvTestSuite(test, Keyv, () => new KeyvLarder(`memcached://${server.address}?timeout=1s&purge_skew=0ms`));
