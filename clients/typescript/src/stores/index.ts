// Opening a store by URL (spec/STORES.md §1): the scheme picks the backend, which takes the options it knows.

import type { Store } from "./base.js";
import { FileStore } from "./file.js";
import { MemcachedStore } from "./memcached.js";
import { MemoryStore } from "./memory.js";
import { PostgresStore } from "./postgres.js";
import { RedisStore } from "./redis.js";
import { RedisClusterStore } from "./redis_cluster.js";
import { SqliteStore } from "./sqlite.js";
import { StoreUrl } from "./url.js";

export * from "./base.js";
export * from "./errors.js";
export { NativeUnavailable } from "./ffi.js";
export { type FileOptions, FileStore, type FileStoreStats } from "./file.js";
export { type MemcachedOptions, MemcachedStore } from "./memcached.js";
export { type MemoryOptions, MemoryStore } from "./memory.js";
export { crc16, keySlot, RedisClusterStore } from "./redis_cluster.js";
export { NAMES as REDIS_SCRIPTS, scriptSha, scriptSource, scriptsLocation } from "./scripts.js";
export { type SqliteOptions, SqliteStore } from "./sqlite.js";
export { parseDurationMs, parseSize, redact, StoreUrl } from "./url.js";

export function openStore(url: string): Store {
  const parsed = StoreUrl.parse(url);
  switch (parsed.scheme) {
    case "memory":
      return MemoryStore.fromUrl(parsed);
    case "memcached":
      return MemcachedStore.fromUrl(parsed);
    case "postgres":
    case "postgresql":
      return PostgresStore.fromUrl(parsed);
    case "redis":
      return RedisStore.fromUrl(parsed);
    case "redis+cluster":
      return RedisClusterStore.fromUrl(parsed);
    case "file":
      return FileStore.fromUrl(parsed);
    case "sqlite":
      return SqliteStore.fromUrl(parsed);
    default:
      throw parsed.error(
        `unknown store scheme ${parsed.scheme}:// (this client knows memory://, memcached://, redis://, redis+cluster://, postgres://, sqlite://, file://)`,
      );
  }
}
