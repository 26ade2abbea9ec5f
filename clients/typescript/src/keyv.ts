// KeyvLarder: a Keyv storage adapter (keyv 5) over any larder store, so Keyv, cache-manager and cacheable keep
// their values as larder entries that Rust, Python and Ruby read. What Keyv hands the adapter decides the entry:
// - an object {value, expires} (Keyv created with `serialize: undefined`): the value as a MessagePack entry, its
//   expiry the entry's expires_at, readable as a plain value by every language;
// - a string (Keyv's default JSON serializer): that JSON text as a json-serializer entry (its envelope
//   {"value":…,"expires":…}), expiring with it; read back byte for byte for Keyv's own deserializer.
// Keys are Keyv's (`namespace:key`), made safe by safeKey as the Cache does. `iterator` exists where the store can
// list its keys (memory, Redis); memcached cannot.

import { EventEmitter } from "node:events";
import { utf8OrUndefined } from "./bytes.js";
import { BytesMemo } from "./bytes_memo.js";
import { decodePayload, encode, encodeText } from "./entry.js";
import { InvalidEntry } from "./errors.js";
import { safeKey } from "./keys.js";
import { deserialize } from "./serializers.js";
import type { Store } from "./stores/base.js";
import { openStore, redact } from "./stores/index.js";
import { MemcachedStore } from "./stores/memcached.js";
import { MemoryStore } from "./stores/memory.js";
import { RedisStore } from "./stores/redis.js";
import type { Value } from "./value.js";

interface KeyvData {
  value: unknown;
  expires?: number | null;
}

export interface KeyvLarderOptions {
  /** Compressor of the entries (default lz4, above 1 KiB). */
  compressor?: "none" | "lz4" | "snappy" | "zstd" | "brotli" | "gzip";
}

export class KeyvLarder extends EventEmitter {
  readonly store: Store;
  namespace?: string | undefined;
  readonly opts: Record<string, unknown>;
  private readonly compressor: NonNullable<KeyvLarderOptions["compressor"]>;
  /** The JSON or text last decoded per key, with the entry bytes it came from: a read that gets the same bytes
   * back skips decompressing and decoding them (bytes_memo.ts). Strings are immutable, so handing the same one to
   * every reader is safe; values of other serializers are decoded afresh each time. */
  private readonly texts = new BytesMemo<string>(TEXT_MEMO_BUDGET, TEXT_MEMO_MAX_BYTES);
  /** Present only where the store can list its keys (Keyv checks for it). */
  iterator?: (namespace?: string) => AsyncGenerator<[string, unknown], void, unknown>;

  /** Over `store` (a Store or a store URL; default memory://). */
  constructor(store: Store | string = "memory://", options: KeyvLarderOptions = {}) {
    super();
    this.store = typeof store === "string" ? openStore(store) : store;
    // Keyv offers `iterator()` only for the dialects it lists (redis among them, not memory or memcached).
    this.opts = { url: typeof store === "string" ? redact(store) : this.store.backend, dialect: this.store.backend };
    this.compressor = options.compressor ?? "lz4";
    if (this.store instanceof MemoryStore || this.store instanceof RedisStore) this.iterator = (ns) => this.iterate(ns);
  }

  private key(key: string): string {
    return safeKey(key);
  }

  private entry(data: unknown, ttl: number | undefined): [Uint8Array, number | undefined] {
    const now = Date.now();
    const ttlMs = typeof ttl === "number" && ttl > 0 ? ttl : undefined;
    if (typeof data === "string") {
      let expires: unknown;
      try {
        expires = keyvJsonExpires(data);
      } catch {
        return [encodeText(data, "text", { compressor: this.compressor, createdAt: now, ttlMs: ttlMs ?? 0 }), ttlMs];
      }
      const expiresAt =
        typeof expires === "number" && Number.isSafeInteger(expires) && expires > 0 ? expires : undefined;
      const options =
        expiresAt !== undefined
          ? { compressor: this.compressor, createdAt: now, expiresAt }
          : { compressor: this.compressor, createdAt: now, ttlMs: ttlMs ?? 0 };
      return [encodeText(data, "json", options), ttlMs];
    }
    const d = data as KeyvData;
    const expiresAt = typeof d?.expires === "number" && d.expires > 0 ? d.expires : undefined;
    const options = expiresAt !== undefined ? { expiresAt } : ttlMs ? { ttlMs } : {};
    return [encode(toValue(d?.value), { compressor: this.compressor, createdAt: now, ...options }), ttlMs];
  }

  /** What Keyv gets back: the JSON text it wrote, or {value, expires}. */
  private read(key: string, raw: Uint8Array | undefined): unknown {
    if (raw === undefined) return undefined;
    const known = this.texts.get(key, raw);
    if (known !== undefined) return known;
    try {
      const [header, payload] = decodePayload(raw);
      if (header.kind !== "value") return undefined;
      if (header.serializer === "json" || header.serializer === "text") {
        const text = utf8OrUndefined(payload);
        if (text !== undefined) this.texts.set(key, raw, text, 2 * text.length);
        return text;
      }
      const expires = Number(header.expiresAt);
      return { value: fromValue(deserialize(header.serializer, payload)), expires: expires === 0 ? null : expires };
    } catch (e) {
      if (e instanceof InvalidEntry) return undefined;
      throw e;
    }
  }

  async get(key: string): Promise<unknown> {
    const stored = this.key(key);
    return this.read(stored, await this.store.get(stored));
  }

  async getMany(keys: string[]): Promise<unknown[]> {
    const stored = keys.map((k) => this.key(k));
    return (await this.store.getMany(stored)).map((raw, i) => this.read(stored[i] as string, raw));
  }

  /** Not an async function: the store's Promise is handed on with one `then` (an async layer per write costs). */
  set(key: string, value: unknown, ttl?: number): Promise<boolean> {
    try {
      const [data, ttlMs] = this.entry(value, ttl);
      return this.store.set(this.key(key), data, ttlMs).then(stored);
    } catch (e) {
      return Promise.reject(e);
    }
  }

  async delete(key: string): Promise<boolean> {
    return this.store.delete(this.key(key));
  }

  async deleteMany(keys: string[]): Promise<boolean> {
    return (await this.store.deleteMany(keys.map((k) => this.key(k)))) > 0;
  }

  async has(key: string): Promise<boolean> {
    return (await this.get(key)) !== undefined;
  }

  /** Clears this adapter's namespace (`namespace:` keys), or the whole store without one. On memcached a purge is a
   * record that hides entries written up to purge_skew after it (spec/STORES.md §4.4): clear returns once that has
   * passed, so what Keyv writes next is not mistaken for purged (use a small purge_skew, e.g. 0ms on one machine). */
  async clear(): Promise<void> {
    if (this.namespace) await this.store.purgePrefix(`${this.namespace}:`);
    else await this.store.clear();
    if (this.store instanceof MemcachedStore && (this.namespace || this.store.prefix)) {
      const until = Date.now() + this.store.purgeSkewMs + 1;
      while (Date.now() <= until) await new Promise((r) => setTimeout(r, Math.max(1, until - Date.now() + 1)));
    }
  }

  async disconnect(): Promise<void> {
    await this.store.close();
  }

  private async *iterate(namespace?: string): AsyncGenerator<[string, unknown], void, unknown> {
    const prefix = namespace ? `${namespace}:` : "";
    const store = this.store as MemoryStore | RedisStore;
    for await (const key of store.keys(prefix)) {
      const value = await this.get(key);
      if (value !== undefined) yield [key, value];
    }
  }
}

const stored = (): true => true;

/** What the text memo holds at most (entry bytes, and a string's characters as two bytes each), and the largest entry
 * it keeps: comparing bytes must stay cheaper than decoding them. */
const TEXT_MEMO_BUDGET = 4 * 1024 * 1024;
const TEXT_MEMO_MAX_BYTES = 16 * 1024;

/** What Keyv's JSON serializer writes: `{"value":…}`, and `,"expires":N}` at its end when the value expires. */
const KEYV_JSON_HEAD = '{"value":';
const KEYV_JSON_TAIL = /,"expires":(\d{1,16}|null)\}$/;

/**
 * The `expires` of JSON text Keyv's serializer wrote, read from the text's end without parsing the value (JSON.parse
 * of a 64 KiB string took 170 µs, of 2,000 small objects 4 ms, on every write). Text shaped as Keyv's is taken for
 * its JSON unparsed (a custom serializer's malformed text of that shape would be a json entry the other languages
 * read as a miss, as any undecodable entry); other text is parsed, and text that is not JSON throws, kept as text.
 */
function keyvJsonExpires(data: string): unknown {
  if (data.startsWith(KEYV_JSON_HEAD) && data.endsWith("}")) {
    // A forward search (includes: 0.7 µs over 64 KiB here; lastIndexOf scanned backwards in 36 µs).
    if (!data.includes('"expires":')) return undefined;
    const tail = KEYV_JSON_TAIL.exec(data.slice(-40));
    if (tail) return tail[1] === "null" ? null : Number(tail[1]);
  }
  return (JSON.parse(data) as { expires?: unknown }).expires;
}

/** A Keyv value as a larder Value: Buffers as bytes, Dates as ISO text, undefined as null. */
function toValue(value: unknown): Value {
  if (value === undefined) return null;
  return value as Value;
}

function fromValue(value: Value): unknown {
  return value;
}
