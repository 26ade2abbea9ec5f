// Side-by-side throughput of larder's TypeScript stores and the incumbents, on the same servers in one run (the
// machine is shared: only ratios mean anything). Starts its own memcached and redis-server on free loopback ports.
// Strings and bytes first, then structured values (structured.ts: query results, a nested document, a page).
//
//   node build/bench/clients.js [--seconds 1] [--rounds 3] [--only REGEX] [--raw FILE]
//
// Prints one line per figure: what, size, callers in flight, the median ops/s of each client over `rounds` rounds
// (the clients of a figure take turns within each round, so a burst of load from elsewhere hits them alike),
// larder's ratio to the best other client, and each client's CPU µs per op (process.cpuUsage over the timed
// loop: a figure the machine's load does not change much). --raw appends every round of every figure to FILE
// in bench/report.py's raw format (raw.ts).

import KeyvMemcache from "@keyv/memcache";
import KeyvRedis from "@keyv/redis";
import { Redis as IORedis } from "ioredis";
import Keyv from "keyv";
import { LRUCache } from "lru-cache";
import memjs from "memjs";
import { createClient } from "redis";
import { Cache } from "../src/cache.js";
import { KeyvLarder } from "../src/keyv.js";
import { MemcachedStore } from "../src/stores/memcached.js";
import { MemoryStore } from "../src/stores/memory.js";
import { RedisStore } from "../src/stores/redis.js";
import { startMemcached, startRedis } from "../test/support/servers.js";
import { RawLog } from "./raw.js";
import { median, quantile } from "./stats.js";
import { structuredLines } from "./structured.js";

const arg = (name: string): string | undefined => {
  const at = process.argv.indexOf(name);
  return at === -1 ? undefined : process.argv[at + 1];
};
const seconds = Number(arg("--seconds") ?? 1) || 1;
const rounds = Math.max(1, Number(arg("--rounds") ?? 3) || 3);
const only = new RegExp(arg("--only") ?? "");
const raw = new RawLog(
  arg("--raw"),
  `node clients/typescript/build/bench/${process.argv
    .slice(1)
    .join(" ")
    .replace(/^.*build\/bench\//, "")}`,
);

/** The client process's CPU µs per op over the last rate() or syncRate() measurement. */
let lastCpuUs = 0;
const cpuSince = (start: NodeJS.CpuUsage, ops: number): number => {
  const used = process.cpuUsage(start);
  return (used.user + used.system) / Math.max(ops, 1);
};

/** ops/s of `op` run by `callers` concurrent loops for `seconds`. */
async function rate(op: () => Promise<unknown> | unknown, callers: number): Promise<number> {
  for (let i = 0; i < 200; i++) await op(); // warm up
  let done = 0;
  const until = performance.now() + seconds * 1000;
  const loop = async (): Promise<void> => {
    while (performance.now() < until) {
      await op();
      done++;
    }
  };
  const cpu = process.cpuUsage();
  const start = performance.now();
  await Promise.all(Array.from({ length: callers }, loop));
  const elapsed = performance.now() - start;
  lastCpuUs = cpuSince(cpu, done);
  return done / (elapsed / 1000);
}

/** ops/s of a synchronous `op`, in batches, for `seconds`. */
function syncRate(op: () => unknown): number {
  let done = 0;
  const cpu = process.cpuUsage();
  const start = performance.now();
  const until = start + seconds * 1000;
  while (performance.now() < until) {
    for (let i = 0; i < 10_000; i++) op();
    done += 10_000;
  }
  const elapsed = performance.now() - start;
  lastCpuUs = cpuSince(cpu, done);
  return done / (elapsed / 1000);
}

/** Whether a contender is the one larder is held to: not larder's own variants, and not a reference figure shown
 * beside them (named "ref: …", such as lru-cache's synchronous `get` beside awaited fetches). */
const isIncumbent = (name: string): boolean => !name.startsWith("larder") && !name.startsWith("ref: ");

/** Measures each contender (the first is larder's) `rounds` times, taking turns, and prints the medians, larder's
 * ratio to the best incumbent's median, and the middle half (quartiles) of the rounds' own ratios, each round's
 * larder against that round's best incumbent: where that range straddles 1.00 the two are at parity in this run. */
async function line(what: string, contenders: Record<string, () => Promise<number> | number>): Promise<void> {
  if (!only.test(what)) return;
  const runs = new Map<string, number[]>(Object.keys(contenders).map((k) => [k, []]));
  const cpus = new Map<string, number[]>(Object.keys(contenders).map((k) => [k, []]));
  for (let r = 0; r < rounds; r++)
    for (const [name, measure] of Object.entries(contenders)) {
      const ops = await measure();
      runs.get(name)?.push(ops);
      cpus.get(name)?.push(lastCpuUs);
      raw.row(what, name, r + 1, ops, lastCpuUs);
    }
  const figures = [...runs].map(([k, v]) => [k, median(v)] as const);
  const larder = figures[0];
  for (const [k] of figures) if (isIncumbent(k)) raw.target(what, larder?.[0] ?? "larder", k);
  // Cache.set is held to KeyvLarder's rate (issue 34), where a figure carries both.
  if (runs.has("larder Cache") && /\bset\b/.test(what)) raw.target(what, "larder Cache", "larder");
  const best = Math.max(...figures.filter(([k]) => isIncumbent(k)).map(([, v]) => v));
  const larderRuns = runs.get(larder?.[0] ?? "") ?? [];
  const roundRatios = larderRuns.map(
    (v, r) => v / Math.max(...[...runs].filter(([k]) => isIncumbent(k)).map(([, xs]) => xs[r] ?? 0)),
  );
  const quartile = (q: number): string => quantile(roundRatios, q).toFixed(2);
  const shown = figures
    .map(([k, v]) => `${k} ${Math.round(v).toLocaleString("en")}/s (${median(cpus.get(k) ?? []).toFixed(1)} µs cpu)`)
    .join("  ");
  console.log(
    `${what.padEnd(34)} ${shown}  larder/best-other ${((larder?.[1] ?? 0) / best).toFixed(2)} ` +
      `(rounds ${quartile(0.25)}–${quartile(0.75)}, min–max ${quantile(roundRatios, 0).toFixed(2)}–${quantile(roundRatios, 1).toFixed(2)})`,
  );
}

const value1k = new Uint8Array(1024).map((_, i) => 97 + (i % 26));
const value64k = new Uint8Array(65536).map((_, i) => 97 + ((i * 7) % 26));

async function main(): Promise<void> {
  const [memcached, redis] = await Promise.all([startMemcached(), startRedis()]);
  try {
    // In process: the memory store's Cache.fetch hit against lru-cache's own fetch (a Promise per call, awaited like
    // larder's), with lru-cache's get (a synchronous loop) shown for reference: what awaiting any call costs. Every
    // contender reads the same 1,000 keys in turn, not one key again and again: a hit on the key read just before
    // is the case a one-entry memo would win, and no service hits one key only.
    const hot = Array.from({ length: 1000 }, (_, i) => `key:${i}`);
    let turn = 0;
    const nextKey = (): string => hot[turn++ % hot.length] as string;
    const cache = new Cache(new MemoryStore());
    const lru = new LRUCache<string, string>({ max: 10_000 });
    for (const key of hot) {
      await cache.set(key, "x".repeat(1024));
      lru.set(key, "x".repeat(1024));
    }
    await line("memory fetch hit 1 KiB", {
      larder: () => rate(() => cache.fetch(nextKey(), () => "never"), 1),
      "ref: lru-cache get": () => syncRate(() => lru.get(nextKey())),
      "lru-cache fetch": () => rate(() => lru.fetch(nextKey()), 1),
    });
    const memory = new MemoryStore();
    for (const key of hot) await memory.set(key, value1k);
    await line("memory store getNow 1 KiB", {
      larder: () => syncRate(() => memory.getNow(nextKey())),
      "lru-cache get": () => syncRate(() => lru.get(nextKey())),
    });

    const mcStore = new MemcachedStore([["127.0.0.1", memcached.port]], { timeoutMs: 2000, prefixPurge: false });
    const mcStorePurge = new MemcachedStore([["127.0.0.1", memcached.port]], { timeoutMs: 2000 });
    const mj = memjs.Client.create(memcached.address, { logger: { log: () => {} } });
    const ior = new IORedis({ host: "127.0.0.1", port: redis.port, lazyConnect: false });
    const nr = createClient({ url: `redis://${redis.address}` });
    nr.on("error", () => {});
    await nr.connect();
    const rs = new RedisStore("127.0.0.1", redis.port, { timeoutMs: 2000 });
    for (const [size, value] of [
      ["1KiB", value1k],
      ["64KiB", value64k],
    ] as const) {
      await mcStore.set(`v${size}`, value);
      await rs.set(`v${size}`, value);
      for (const callers of [1, 50]) {
        await line(`memcached get ${size} x${callers}`, {
          larder: () => rate(() => mcStore.get(`v${size}`), callers),
          "larder+purge-records": () => rate(() => mcStorePurge.get(`v${size}`), callers),
          memjs: () => rate(() => mj.get(`v${size}`), callers),
        });
        await line(`memcached set ${size} x${callers}`, {
          larder: () => rate(() => mcStore.set(`w${size}`, value), callers),
          memjs: () => rate(() => mj.set(`w${size}`, Buffer.from(value), {}), callers),
        });
        await line(`redis get ${size} x${callers}`, {
          larder: () => rate(() => rs.get(`v${size}`), callers),
          ioredis: () => rate(() => ior.getBuffer(`v${size}`), callers),
          "node-redis": () => rate(() => nr.get(`v${size}`), callers),
        });
        await line(`redis set ${size} x${callers}`, {
          larder: () => rate(() => rs.set(`w${size}`, value), callers),
          ioredis: () => rate(() => ior.set(`w${size}`, Buffer.from(value)), callers),
          "node-redis": () => rate(() => nr.set(`w${size}`, Buffer.from(value)), callers),
        });
      }
    }
    const keys = Array.from({ length: 100 }, (_, i) => `m${i}`);
    for (const k of keys) {
      await mcStore.set(k, value1k);
      await rs.set(k, value1k);
    }
    await line("memcached getMany 100 x 1 KiB", {
      larder: () => rate(() => mcStore.getMany(keys), 1),
      memjs: () => rate(() => Promise.all(keys.map((k) => mj.get(k))), 1),
    });
    await line("redis getMany 100 x 1 KiB", {
      larder: () => rate(() => rs.getMany(keys), 1),
      ioredis: () => rate(() => ior.mgetBuffer(...keys), 1),
      "node-redis": () => rate(() => nr.mGet(keys), 1),
    });
    const mcCache = new Cache(mcStore);
    await mcCache.set("hit", "x".repeat(1024));
    await line("memcached Cache.fetch hit 1 KiB x1", {
      larder: () => rate(() => mcCache.fetch("hit", () => "never"), 1),
      "memjs get": () => rate(() => mj.get("v1KiB"), 1),
    });
    const redisCache = new Cache(rs);
    await redisCache.set("hit", "x".repeat(1024));
    await line("redis Cache.fetch hit 1 KiB x1", {
      larder: () => rate(() => redisCache.fetch("hit", () => "never"), 1),
      "ioredis get": () => rate(() => ior.getBuffer("v1KiB"), 1),
    });
    // Keyv on larder's stores against Keyv on its own adapters for the same servers (issue 19 item 6). Keyv's
    // default JSON serializer runs for both: what differs is the adapter under it.
    const text1k = "x".repeat(1024);
    const text64k = "y".repeat(65536);
    const keyvMc = new Keyv({ store: new KeyvLarder(mcStore), namespace: "kb" });
    const keyvMcTheirs = new Keyv({ store: new KeyvMemcache(memcached.address), namespace: "kb" });
    const keyvRedis = new Keyv({ store: new KeyvLarder(rs), namespace: "kb" });
    const keyvRedisTheirs = new Keyv({ store: new KeyvRedis(`redis://${redis.address}`), namespace: "kbt" });
    for (const [size, text] of [
      ["1KiB", text1k],
      ["64KiB", text64k],
    ] as const) {
      for (const [server, ours, theirs, name] of [
        ["memcached", keyvMc, keyvMcTheirs, "@keyv/memcache"],
        ["redis", keyvRedis, keyvRedisTheirs, "@keyv/redis"],
      ] as const) {
        await ours.set(`k${size}`, text);
        await theirs.set(`k${size}`, text);
        for (const callers of [1, 50]) {
          await line(`keyv ${server} get ${size} x${callers}`, {
            larder: () => rate(() => ours.get(`k${size}`), callers),
            [name]: () => rate(() => theirs.get(`k${size}`), callers),
          });
          await line(`keyv ${server} set ${size} x${callers}`, {
            larder: () => rate(() => ours.set(`w${size}`, text), callers),
            [name]: () => rate(() => theirs.set(`w${size}`, text), callers),
          });
        }
      }
    }
    const keyvKeys = Array.from({ length: 100 }, (_, i) => `m${i}`);
    for (const [server, ours, theirs, name] of [
      ["memcached", keyvMc, keyvMcTheirs, "@keyv/memcache"],
      ["redis", keyvRedis, keyvRedisTheirs, "@keyv/redis"],
    ] as const) {
      for (const k of keyvKeys) {
        await ours.set(k, text1k);
        await theirs.set(k, text1k);
      }
      await line(`keyv ${server} getMany 100 x 1 KiB`, {
        larder: () => rate(() => ours.getMany(keyvKeys), 1),
        [name]: () => rate(() => theirs.getMany(keyvKeys), 1),
      });
    }
    await Promise.all([keyvMcTheirs.disconnect(), keyvRedisTheirs.disconnect()]);
    await structuredLines(line, rate, {
      memcachedAddress: memcached.address,
      redisAddress: redis.address,
      mcStore,
      rs,
      mj,
      ior,
      nr,
    });
    await Promise.all([mcStore.close(), mcStorePurge.close(), rs.close(), nr.quit()]);
    mj.close();
    ior.disconnect();
  } finally {
    await Promise.all([memcached.stop(), redis.stop()]);
    raw.close();
  }
}

await main();
