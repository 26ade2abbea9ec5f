// larder's TypeScript client for Node: the entry format, keys and ring every larder language shares
// (spec/FORMAT.md, spec/STORES.md), and the stores and cache built on them.

export * from "./bytes.js";
export * from "./cache.js";
export * from "./compressors.js";
export * from "./display.js";
export * from "./entry.js";
export * from "./errors.js";
export * from "./express.js";
export * from "./fastify.js";
export * from "./header.js";
export * from "./http/storageRules.js";
export * from "./json.js";
export * from "./keys.js";
export * from "./keyv.js";
export * from "./msgpack.js";
export * from "./outage.js";
export * from "./page_origin.js";
export * from "./pages.js";
export * from "./report.js";
export * from "./response.js";
export * from "./ring.js";
export * from "./serializers.js";
export * from "./signing.js";
export * from "./stores/index.js";
export * from "./value.js";
