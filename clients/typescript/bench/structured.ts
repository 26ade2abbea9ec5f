// The structured-value figures of clients.ts (issue 34): each shape of shapes.ts set and read through larder (Cache
// over the memory store, memcached and Redis, MessagePack in larder's entry format; Keyv over KeyvLarder) against the
// incumbents on the same servers, each encoding the value as its users do: JSON.stringify/JSON.parse around memjs,
// ioredis, node-redis and lru-cache (a page stored as the string it is), Keyv's own JSON serializer over
// @keyv/memcache and @keyv/redis. lru-cache
// holding the object itself (no copy: what it hands back is the caller's object) is shown for reference. The Keyv
// figures carry larder's Cache over the same store too: Cache.set held to KeyvLarder's rate.

import KeyvMemcache from "@keyv/memcache";
import KeyvRedis from "@keyv/redis";
import type { Redis as IORedis } from "ioredis";
import Keyv from "keyv";
import { LRUCache } from "lru-cache";
import type memjs from "memjs";
import { Cache } from "../src/cache.js";
import { KeyvLarder } from "../src/keyv.js";
import type { MemcachedStore } from "../src/stores/memcached.js";
import { MemoryStore } from "../src/stores/memory.js";
import type { RedisStore } from "../src/stores/redis.js";
import type { Value } from "../src/value.js";
import { shapes } from "./shapes.js";

type Measure = () => Promise<number> | number;
export type Line = (what: string, contenders: Record<string, Measure>) => Promise<void>;
export type Rate = (op: () => Promise<unknown> | unknown, callers: number) => Promise<number>;

export interface Servers {
  memcachedAddress: string;
  redisAddress: string;
  mcStore: MemcachedStore;
  rs: RedisStore;
  mj: memjs.Client;
  ior: IORedis;
  /** node-redis's client: only its string get and set are used. */
  nr: { get(key: string): Promise<unknown>; set(key: string, value: string): Promise<unknown> };
}

/** The incumbents' encoding: JSON, but a page (a string) as it is, as a program stores its HTML. */
const json = (v: unknown): string => (typeof v === "string" ? v : JSON.stringify(v));
/** The incumbents' decoding of what `json` wrote (`page`: the shape is a string, read back as it is). */
const parsedAs =
  (page: boolean) =>
  (s: string | null | undefined): unknown =>
    s == null ? undefined : page ? s : JSON.parse(s);

export async function structuredLines(line: Line, rate: Rate, s: Servers): Promise<void> {
  const memoryCache = new Cache(new MemoryStore());
  const lruJson = new LRUCache<string, string>({ max: 10_000 });
  const lruObject = new LRUCache<string, object | string>({ max: 10_000 });
  const mcCache = new Cache(s.mcStore);
  const redisCache = new Cache(s.rs);
  const keyvMc = new Keyv({ store: new KeyvLarder(s.mcStore), namespace: "sb" });
  const keyvMcTheirs = new Keyv({ store: new KeyvMemcache(s.memcachedAddress), namespace: "sb" });
  const keyvRedis = new Keyv({ store: new KeyvLarder(s.rs), namespace: "sb" });
  const keyvRedisTheirs = new Keyv({ store: new KeyvRedis(`redis://${s.redisAddress}`), namespace: "sbt" });
  try {
    for (const [shape, v] of shapes()) {
      const value = v as Value;
      const parsed = parsedAs(typeof v === "string");
      const k = `s:${shape.replace(" ", "-")}`;
      await memoryCache.set(k, value);
      lruJson.set(k, json(v));
      lruObject.set(k, v);
      await line(`memory set ${shape}`, {
        larder: () => rate(() => memoryCache.set(`w${k}`, value), 1),
        "lru-cache (JSON)": () => rate(() => lruJson.set(`w${k}`, json(v)), 1),
        "ref: lru-cache (object)": () => rate(() => lruObject.set(`w${k}`, v), 1),
      });
      await line(`memory get ${shape}`, {
        larder: () => rate(() => memoryCache.get(k), 1),
        "lru-cache (JSON)": () => rate(() => parsed(lruJson.get(k)), 1),
        "ref: lru-cache (object)": () => rate(() => lruObject.get(k), 1),
      });

      await mcCache.set(k, value);
      await s.mj.set(k, json(v), {});
      await line(`memcached set ${shape}`, {
        larder: () => rate(() => mcCache.set(`w${k}`, value), 1),
        memjs: () => rate(() => s.mj.set(`w${k}`, json(v), {}), 1),
      });
      await line(`memcached get ${shape}`, {
        larder: () => rate(() => mcCache.get(k), 1),
        memjs: () => rate(async () => parsed((await s.mj.get(k)).value?.toString()), 1),
      });

      await redisCache.set(k, value);
      await s.ior.set(`i${k}`, json(v));
      await line(`redis set ${shape}`, {
        larder: () => rate(() => redisCache.set(`w${k}`, value), 1),
        ioredis: () => rate(() => s.ior.set(`wi${k}`, json(v)), 1),
        "node-redis": () => rate(() => s.nr.set(`wn${k}`, json(v)), 1),
      });
      await line(`redis get ${shape}`, {
        larder: () => rate(() => redisCache.get(k), 1),
        ioredis: () => rate(async () => parsed(await s.ior.get(`i${k}`)), 1),
        "node-redis": () => rate(async () => parsed((await s.nr.get(`i${k}`)) as string | null), 1),
      });

      for (const [server, ours, theirs, name, cache] of [
        ["memcached", keyvMc, keyvMcTheirs, "@keyv/memcache", mcCache],
        ["redis", keyvRedis, keyvRedisTheirs, "@keyv/redis", redisCache],
      ] as const) {
        await ours.set(k, v);
        await theirs.set(k, v);
        await line(`keyv ${server} set ${shape}`, {
          larder: () => rate(() => ours.set(`w${k}`, v), 1),
          "larder Cache": () => rate(() => cache.set(`wc${k}`, value), 1),
          [name]: () => rate(() => theirs.set(`w${k}`, v), 1),
        });
        await line(`keyv ${server} get ${shape}`, {
          larder: () => rate(() => ours.get(k), 1),
          "larder Cache": () => rate(() => cache.get(k), 1),
          [name]: () => rate(() => theirs.get(k), 1),
        });
      }
    }
  } finally {
    await Promise.all([keyvMcTheirs.disconnect(), keyvRedisTheirs.disconnect()]);
  }
}
