// The memory store's Cache.fetch hit against lru-cache's own fetch, in paired rounds in one process: the two take
// turns for 0.2 s each, and what is printed is the median and quartiles of the rounds' own ratios. Unlike clients.js
// it reads the clock once per 1,000 calls, not once per call (a clock read is a third of a hit, which dilutes any
// gap toward 1.00), and it reads the 1,000 keys either in turn or in a fixed random order.
//
//   node build/bench/memory_fetch.js [cyclic|random] [keys 1000] [rounds 31]

import { LRUCache } from "lru-cache";
import { Cache } from "../src/cache.js";
import { MemoryStore } from "../src/stores/memory.js";
import { quantile } from "./stats.js";

const pattern = process.argv[2] ?? "cyclic";
const keyCount = Number(process.argv[3] ?? 1000);
const rounds = Number(process.argv[4] ?? 31);

const keys = Array.from({ length: keyCount }, (_, i) => `key:${i}`);
let seed = 12345;
const random = (): number => {
  seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
  return seed / 2 ** 32;
};
const ORDER = 1 << 20;
const order = Array.from({ length: ORDER }, (_, i) =>
  pattern === "random" ? (keys[Math.floor(random() * keyCount)] as string) : (keys[i % keyCount] as string),
);
let turn = 0;
const nextKey = (): string => order[turn++ & (ORDER - 1)] as string;

/** Awaited calls of `op` per second over 0.2 s, the clock read once per 1,000 calls. */
async function rate(op: () => Promise<unknown>): Promise<number> {
  for (let i = 0; i < 2000; i++) await op();
  let done = 0;
  const start = performance.now();
  while (performance.now() < start + 200) {
    for (let i = 0; i < 1000; i++) await op();
    done += 1000;
  }
  return (done / (performance.now() - start)) * 1000;
}

const cache = new Cache(new MemoryStore());
const lru = new LRUCache<string, string>({ max: Math.max(keyCount * 10, 10_000) });
for (const key of keys) {
  await cache.set(key, "x".repeat(1024));
  lru.set(key, "x".repeat(1024));
}
const ratios: number[] = [];
for (let r = 0; r < rounds; r++) {
  const larder = await rate(() => cache.fetch(nextKey(), () => "never"));
  const incumbent = await rate(() => lru.fetch(nextKey()));
  ratios.push(larder / incumbent);
}
const at = (q: number): string => quantile(ratios, q).toFixed(3);
console.log(`${pattern} ${keyCount} keys: larder/lru-cache fetch ${at(0.5)} (quartiles ${at(0.25)}–${at(0.75)})`);
