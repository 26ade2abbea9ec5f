// Counted work per operation, for deciding on a shared, noisy machine where ops/s swing: the client process's CPU
// time (process.cpuUsage) and the server's (/proc/<pid>/stat) per operation, for Keyv over larder against Keyv over
// @keyv/memcache and @keyv/redis, and for larder's raw stores against memjs and ioredis, on the same servers, in
// interleaved rounds (median shown). Starts its own memcached and redis-server on loopback.
//
//   node build/bench/cpu_per_op.js [--op set|get] [--size 1024] [--callers 1,50] [--n 20000] [--rounds 5] [--only RE]

import { readdirSync, readFileSync } from "node:fs";
import KeyvMemcache from "@keyv/memcache";
import KeyvRedis from "@keyv/redis";
import { Redis as IORedis } from "ioredis";
import Keyv from "keyv";
import memjs from "memjs";
import { KeyvLarder } from "../src/keyv.js";
import { MemcachedStore } from "../src/stores/memcached.js";
import { RedisStore } from "../src/stores/redis.js";
import { startMemcached, startRedis } from "../test/support/servers.js";
import { median } from "./stats.js";

const arg = (name: string, fallback: string): string => {
  const at = process.argv.indexOf(name);
  return at === -1 ? fallback : (process.argv[at + 1] ?? fallback);
};
const op = arg("--op", "set");
const size = Number(arg("--size", "1024"));
const n = Number(arg("--n", "20000"));
const rounds = Number(arg("--rounds", "5"));
const only = new RegExp(arg("--only", ""));
const callersList = arg("--callers", "1,50").split(",").map(Number);

/** The pid of the server process listening on `port` (its command line names the port). */
function serverPid(port: number): string | undefined {
  for (const pid of readdirSync("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const command = readFileSync(`/proc/${pid}/cmdline`, "utf8");
      if (/redis-server|memcached/.test(command) && command.includes(String(port))) return pid;
    } catch {
      // gone meanwhile
    }
  }
  return undefined;
}

/** A process's user + system CPU time in µs (clock ticks of 10 ms). */
function processCpuUs(pid: string | undefined): number {
  if (pid === undefined) return 0;
  const fields = (readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1] ?? "").split(" ");
  return (Number(fields[11]) + Number(fields[12])) * 10_000;
}

async function main(): Promise<void> {
  const [memcached, redis] = await Promise.all([startMemcached(), startRedis()]);
  const mcPid = serverPid(memcached.port);
  const redisPid = serverPid(redis.port);
  const mcStore = new MemcachedStore([["127.0.0.1", memcached.port]], { timeoutMs: 2000, prefixPurge: false });
  const rs = new RedisStore("127.0.0.1", redis.port, { timeoutMs: 2000 });
  const mj = memjs.Client.create(memcached.address, { logger: { log: () => {} } });
  const ior = new IORedis({ host: "127.0.0.1", port: redis.port });
  const keyvs = {
    "keyv larder memcached": new Keyv({ store: new KeyvLarder(mcStore), namespace: "kb" }),
    "keyv @keyv/memcache": new Keyv({ store: new KeyvMemcache(memcached.address), namespace: "kb" }),
    "keyv larder redis": new Keyv({ store: new KeyvLarder(rs), namespace: "kb" }),
    "keyv @keyv/redis": new Keyv({ store: new KeyvRedis(`redis://${redis.address}`), namespace: "kbt" }),
  };
  const text = "x".repeat(size);
  const bytes = new Uint8Array(size).map((_, i) => 97 + ((i * 7) % 26));
  for (const k of Object.values(keyvs)) await k.set("k", text);
  await mcStore.set("v", bytes);
  await rs.set("v", bytes);
  const contenders: Array<[string, string | undefined, () => Promise<unknown>]> = [];
  for (const [name, k] of Object.entries(keyvs))
    contenders.push([
      name,
      /memcach/.test(name) ? mcPid : redisPid,
      op === "set" ? () => k.set("w", text) : () => k.get("k"),
    ]);
  contenders.push(
    ["larder memcached", mcPid, op === "set" ? () => mcStore.set("w", bytes) : () => mcStore.get("v")],
    ["memjs", mcPid, op === "set" ? () => mj.set("w", Buffer.from(bytes), {}) : () => mj.get("v")],
    ["larder redis", redisPid, op === "set" ? () => rs.set("w", bytes) : () => rs.get("v")],
    ["ioredis", redisPid, op === "set" ? () => ior.set("w", Buffer.from(bytes)) : () => ior.getBuffer("v")],
  );
  const chosen = contenders.filter(([name]) => only.test(name));
  try {
    for (const callers of callersList) {
      const runs = new Map<string, Array<[number, number]>>(chosen.map(([name]) => [name, []]));
      for (let r = 0; r < rounds; r++) {
        for (const [name, pid, run] of chosen) {
          for (let i = 0; i < 300; i++) await run();
          let left = n;
          const server0 = processCpuUs(pid);
          const client0 = process.cpuUsage();
          await Promise.all(
            Array.from({ length: callers }, async () => {
              while (left-- > 0) await run();
            }),
          );
          const client = process.cpuUsage(client0);
          runs.get(name)?.push([(client.user + client.system) / n, (processCpuUs(pid) - server0) / n]);
        }
      }
      for (const [name, figures] of runs) {
        const client = median(figures.map(([c]) => c)).toFixed(2);
        const server = median(figures.map(([, s]) => s)).toFixed(2);
        console.log(`${op} ${size} B x${callers}  ${name.padEnd(22)} client ${client} µs/op  server ${server} µs/op`);
      }
    }
  } finally {
    await Promise.all(Object.values(keyvs).map((k) => k.disconnect()));
    mj.close();
    ior.disconnect();
    await Promise.all([memcached.stop(), redis.stop()]);
  }
}

await main();
