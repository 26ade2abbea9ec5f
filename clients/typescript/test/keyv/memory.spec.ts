// @keyv/test-suite (Keyv's own tests for storage adapters) on KeyvLarder over the memory store (Keyv
// offers iterator() only to the dialects it lists, which memory is not).
import keyvTestSuite from "@keyv/test-suite";
import Keyv from "keyv";
import * as test from "vitest";
import { KeyvLarder } from "../../src/keyv.js";
import { MemoryStore } from "../../src/stores/memory.js";

const store = new MemoryStore();
const adapter = () => new KeyvLarder(store);
keyvTestSuite(test, Keyv, adapter);
