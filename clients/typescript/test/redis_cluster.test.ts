// The Redis Cluster store's own behaviour beyond the shared store contract (stores.test.ts runs that on a cluster):
// slots as Redis computes them, keys spread over the masters, and MOVED and ASK followed after the cluster's slots
// change under a store that has already read the slot map. A real three-master cluster, started here.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { keySlot, openStore, type Store, type StoreError } from "../src/stores/index.js";
import { RedisCluster, type ServerProcess } from "./support/servers.js";

const bytes = (s: string): Uint8Array => new Uint8Array(Buffer.from(s));
let cluster: RedisCluster;
let store: Store;
before(async () => {
  cluster = await RedisCluster.start();
  store = openStore(`redis+cluster://${(cluster.nodes[0] as ServerProcess).address}?timeout=2s`);
});
after(async () => {
  await store?.close();
  await cluster?.stop();
});

const node = (n: number): ServerProcess => cluster.nodes[n] as ServerProcess;
const owner = (slot: number): number => cluster.nodes.findIndex((n) => owns(n, slot));
function owns(n: ServerProcess, slot: number): boolean {
  return cluster
    .cli(n, "cluster", "nodes")
    .split("\n")
    .some((line) => {
      const fields = line.split(" ");
      if (!fields[2]?.includes("myself")) return false;
      return fields.slice(8).some((range) => {
        const [lo, hi] = range.split("-").map(Number);
        return lo !== undefined && lo <= slot && slot <= (hi ?? lo);
      });
    });
}

/** The id of the node that `n` believes serves `slot`. */
function ownerSeenBy(n: ServerProcess, slot: number): string | undefined {
  for (const line of cluster.cli(n, "cluster", "nodes").split("\n")) {
    const fields = line.split(" ");
    const serves = fields.slice(8).some((range) => {
      const [lo, hi] = range.split("-").map(Number);
      return lo !== undefined && lo <= slot && slot <= (hi ?? lo);
    });
    if (serves) return fields[0];
  }
  return undefined;
}

test("key slots are Redis's (CRC16/XMODEM of the key or of its hash tag)", () => {
  assert.equal(keySlot("123456789"), 0x31c3 % 16384);
  for (const key of ["foo", "bar", "{user1000}.following", "a{}b", "x{y}{z}", "ü-key", "larder#tag#1", ""]) {
    assert.equal(keySlot(key), Number(cluster.cli(node(0), "cluster", "keyslot", key).trim()), key);
  }
  assert.equal(keySlot("{user1000}.following"), keySlot("{user1000}.followers"));
});

test("keys spread over every master; getMany and deleteMany span slots", async () => {
  const keys = Array.from({ length: 60 }, (_, i) => `spread-${process.pid}-${i}`);
  await store.setMany(keys.map((k) => [k, bytes(k)] as const));
  for (const n of cluster.nodes) assert.ok(Number(cluster.cli(n, "dbsize").trim()) > 0, `${n.address} holds nothing`);
  assert.deepEqual(await store.getMany(keys), keys.map(bytes));
  assert.equal(await store.deleteMany(keys), keys.length);
  assert.deepEqual(
    await store.getMany(keys),
    keys.map(() => undefined),
  );
});

test("MOVED: a slot given to another master after the map was read is followed", async () => {
  const key = `moved-${process.pid}`;
  assert.equal(await store.get(key), undefined); // the store has the map now
  const slot = keySlot(key);
  const from = owner(slot);
  const to = (from + 1) % 3;
  const toId = cluster.cli(node(to), "cluster", "myid").trim();
  // The new owner's claim must carry the highest config epoch, or gossip from the old owner can hand the slot back
  // to it on some nodes, and the store would be sent back and forth until it gives up; then wait until every node
  // names the new owner (a cluster converging, not the store, is what this waits for).
  cluster.cli(node(to), "cluster", "bumpepoch");
  for (const n of [to, from, (from + 2) % 3]) cluster.cli(node(n), "cluster", "setslot", String(slot), "node", toId);
  for (const deadline = Date.now() + 10_000; ![0, 1, 2].every((n) => ownerSeenBy(node(n), slot) === toId); ) {
    assert.ok(Date.now() < deadline, "the cluster did not agree on the slot's new owner within 10 s");
    await new Promise((r) => setTimeout(r, 50));
  }
  await store.set(key, bytes("v"));
  assert.equal(cluster.cli(node(to), "get", key), "v\n");
  assert.deepEqual(await store.get(key), bytes("v"));
});

test("ASK: a key of a migrating slot that is not on the old master is written on the new one", async () => {
  const key = `ask-${process.pid}`;
  assert.equal(await store.get(key), undefined);
  const slot = keySlot(key);
  const from = owner(slot);
  const to = (from + 1) % 3;
  const [fromId, toId] = [from, to].map((n) => cluster.cli(node(n), "cluster", "myid").trim());
  cluster.cli(node(to), "cluster", "setslot", String(slot), "importing", fromId as string);
  cluster.cli(node(from), "cluster", "setslot", String(slot), "migrating", toId as string);
  await store.set(key, bytes("asked"));
  assert.deepEqual(await store.get(key), bytes("asked"));
  for (const n of [0, 1, 2]) cluster.cli(node(n), "cluster", "setslot", String(slot), "node", toId as string);
  assert.equal(cluster.cli(node(to), "get", key), "asked\n", "the key is not on the new master");
  assert.equal(cluster.cli(node(from), "cluster", "countkeysinslot", String(slot)), "0\n");
  assert.deepEqual(await store.get(key), bytes("asked"));
});

test("a cluster URL refuses a database other than 0 and unknown options", () => {
  assert.throws(() => openStore(`${cluster.url}/2`), /only database 0/);
  assert.throws(() => openStore(`${cluster.url}?shards=2`), /shards/);
  assert.throws(
    () => openStore(`${cluster.url}?timeout=2s&timeout=3s`),
    (e: StoreError | Error) => e instanceof Error,
  );
});
