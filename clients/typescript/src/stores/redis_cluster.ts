// `redis+cluster://h1:7000,h2:7001` (spec/STORES.md §5): the Redis store's operations (redis.ts) routed over a Redis
// Cluster. Keys go to slots by CRC16 of the key (or of its hash tag, as Redis defines; larder adds none), multi-key
// commands are split per slot, SCAN/FLUSHDB/DBSIZE run on every master. The slot map comes from CLUSTER SLOTS (a
// hostile reply like any other: bounded, every field checked); MOVED updates it and retries, ASK retries once on
// the named node after ASKING. Nodes are not ejected (the cluster's own failover decides); each operation,
// redirects and map refreshes included, is bounded by one total `timeout`.

import { ServerError, StoreTimeout } from "./errors.js";
import { DEFAULT_MAX_VALUE, type RedisOptions, RedisStore, type Runner, redisUrlOptions } from "./redis.js";
import { RedisNode, type Request, SMALL, serverName } from "./redis_node.js";
import { ErrorReply, type Limits, pack, type RespValue } from "./resp.js";
import type { StoreUrl } from "./url.js";

export const SLOTS = 16384;
const MAX_REDIRECTS = 5;
const MAX_NODES = 1000;
/** CLUSTER SLOTS is bounded by the cluster's 16,384 slots (STORES.md §2, whole replies): at worst a range per slot,
 * each of its two ends, a master and a replica of a few fields (some 12 elements a range), in 1 MiB of text. */
const SLOTS_REPLY: Limits = { maxBulk: 1024, maxBytes: 1 << 20, maxElements: 200_000 };

const CRC16_TABLE = (() => {
  const table = new Uint16Array(256);
  for (let i = 0; i < 256; i++) {
    let crc = i << 8;
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    table[i] = crc;
  }
  return table;
})();

/** CRC16/XMODEM, the checksum Redis Cluster hashes keys with. */
export function crc16(bytes: Uint8Array): number {
  let crc = 0;
  for (const b of bytes) crc = ((crc << 8) & 0xffff) ^ (CRC16_TABLE[((crc >> 8) ^ b) & 0xff] as number);
  return crc;
}

/** The slot of a key: CRC16 of the first `{…}` hash tag when it is not empty, else of the whole key, mod 16384. */
export function keySlot(key: string | Uint8Array): number {
  const bytes = typeof key === "string" ? Buffer.from(key, "utf8") : key;
  const open = bytes.indexOf(0x7b);
  if (open !== -1) {
    const close = bytes.indexOf(0x7d, open + 1);
    if (close > open + 1) return crc16(bytes.subarray(open + 1, close)) % SLOTS;
  }
  return crc16(bytes) % SLOTS;
}

interface Seed {
  host: string;
  port: number;
}

export class RedisClusterStore extends RedisStore {
  override readonly backend = "redis-cluster"; // as Rust and Python name it (metrics, errors)
  private readonly nodes = new Map<string, RedisNode>();
  private slots: Array<RedisNode | undefined> = new Array(SLOTS);
  private mapped = false;
  private refreshing: Promise<void> | undefined;

  constructor(
    private readonly seeds: Seed[],
    private readonly options: RedisOptions = {},
  ) {
    super(undefined, 0, options);
    (this as { server: string }).server = seeds.map((s) => serverName(s.host, s.port)).join(",");
  }

  static override fromUrl(url: StoreUrl): RedisClusterStore {
    const hosts = url.requireHosts();
    const dbText = url.path.replace(/^\/+/, "");
    if (dbText && dbText !== "0") throw url.error("a Redis Cluster has only database 0");
    const o = redisUrlOptions(url);
    url.finish();
    if ((o.maxValue ?? DEFAULT_MAX_VALUE) < 1024) throw url.error("max_value must be at least 1K");
    return new RedisClusterStore(
      hosts.map((h) => ({ host: h.host, port: h.port ?? 6379 })),
      o,
    );
  }

  private nodeAt(host: string, port: number): RedisNode {
    const name = serverName(host, port);
    let node = this.nodes.get(name);
    if (node === undefined) {
      if (this.nodes.size >= MAX_NODES) throw new ServerError(this.backend, `more than ${MAX_NODES} nodes`, name);
      node = new RedisNode(host, port, {
        backend: this.backend,
        db: 0,
        username: this.options.username,
        password: this.options.password,
        connectTimeoutMs: this.options.connectTimeoutMs ?? 500,
        timeoutMs: this.timeoutMs,
        pool: this.options.pool ?? 4,
        policy: { failures: Number.POSITIVE_INFINITY, retryAfterMs: 0 },
      });
      this.nodes.set(name, node);
    }
    return node;
  }

  private remaining(deadline: number): number {
    const left = deadline - Date.now();
    if (left <= 0) throw new StoreTimeout(this.backend, this.server, this.timeoutMs);
    return left;
  }

  /** Reads the slot map from the first node (known ones first, then the seeds) that answers CLUSTER SLOTS. */
  private async refresh(deadline: number): Promise<void> {
    if (this.refreshing === undefined) {
      this.refreshing = this.readSlots(deadline).finally(() => {
        this.refreshing = undefined;
      });
    }
    return this.refreshing;
  }

  private async readSlots(deadline: number): Promise<void> {
    const candidates = [...new Set([...this.nodes.values(), ...this.seeds.map((s) => this.nodeAt(s.host, s.port))])];
    let last: Error | undefined;
    for (const node of candidates) {
      try {
        const [reply] = await node.run([[pack("CLUSTER", "SLOTS"), SLOTS_REPLY]], this.remaining(deadline));
        this.slots = this.parseSlots(node, reply as RespValue);
        this.mapped = true;
        return;
      } catch (e) {
        last = e as Error;
        if (e instanceof StoreTimeout && Date.now() >= deadline) break;
      }
    }
    throw last ?? new ServerError(this.backend, "no node answered CLUSTER SLOTS", this.server);
  }

  private parseSlots(from: RedisNode, reply: RespValue): Array<RedisNode | undefined> {
    if (reply instanceof ErrorReply)
      throw new ServerError(this.backend, `CLUSTER SLOTS: ${reply.message.slice(0, 200)}`, from.server);
    if (!Array.isArray(reply)) throw from.malformed("CLUSTER SLOTS", reply);
    const slots: Array<RedisNode | undefined> = new Array(SLOTS);
    for (const range of reply) {
      if (!Array.isArray(range) || range.length < 3) throw from.malformed("CLUSTER SLOTS", range);
      const [start, end, master] = range;
      if (
        typeof start !== "number" ||
        typeof end !== "number" ||
        !Number.isInteger(start) ||
        !Number.isInteger(end) ||
        start < 0 ||
        end >= SLOTS ||
        start > end ||
        !Array.isArray(master) ||
        master.length < 2 ||
        !(master[0] instanceof Uint8Array) ||
        typeof master[1] !== "number" ||
        !Number.isInteger(master[1]) ||
        master[1] < 1 ||
        master[1] > 65535
      )
        throw from.malformed("CLUSTER SLOTS", range);
      let host = Buffer.from(master[0]).toString("utf8");
      if (host === "" || host === "?") host = from.host; // "the node you asked", as Redis documents
      if (!/^[A-Za-z0-9.:_-]{1,255}$/.test(host)) throw from.malformed("CLUSTER SLOTS", range);
      const node = this.nodeAt(host, master[1]);
      for (let slot = start; slot <= end; slot++) slots[slot] = node;
    }
    return slots;
  }

  private async nodeForSlot(slot: number, deadline: number): Promise<RedisNode> {
    if (!this.mapped) await this.refresh(deadline);
    const node = this.slots[slot];
    if (node === undefined) throw new ServerError(this.backend, `no node serves slot ${slot}`, this.server);
    return node;
  }

  /** "MOVED 3999 127.0.0.1:6381" / "ASK …": [kind, slot, node], or undefined for any other reply. */
  private redirect(reply: RespValue): ["MOVED" | "ASK", number, RedisNode] | undefined {
    if (!(reply instanceof ErrorReply)) return undefined;
    const m = /^(MOVED|ASK) ([0-9]{1,5}) (.{1,255}):([0-9]{1,5})$/.exec(reply.message);
    if (m === null) return undefined;
    const [, kind, slotText, hostText, portText] = m as unknown as [string, "MOVED" | "ASK", string, string, string];
    const slot = Number(slotText);
    const port = Number(portText);
    const host = hostText.replace(/^\[(.*)\]$/, "$1");
    if (slot >= SLOTS || port < 1 || port > 65535 || !/^[A-Za-z0-9.:_-]{1,255}$/.test(host)) return undefined;
    return [kind, slot, this.nodeAt(host, port)];
  }

  protected override async run(requests: Request[], key?: string | Uint8Array): Promise<RespValue[]> {
    const deadline = Date.now() + this.timeoutMs;
    const slot = keySlot(key ?? "");
    let node = await this.nodeForSlot(slot, deadline);
    let asking = false;
    for (let hop = 0; ; hop++) {
      const batch: Request[] = asking ? [[pack("ASKING"), SMALL], ...requests] : requests;
      let replies: RespValue[];
      try {
        replies = await node.run(batch, this.remaining(deadline));
      } catch (e) {
        this.mapped = false; // a node that fails may have failed over: read the map again next time
        throw e;
      }
      const answers: RespValue[] = asking ? replies.slice(1) : replies;
      const moved: ["MOVED" | "ASK", number, RedisNode] | undefined = answers
        .map((r) => this.redirect(r))
        .find((r) => r !== undefined);
      const retry = answers.some((r) => r instanceof ErrorReply && r.message.startsWith("TRYAGAIN"));
      if ((moved === undefined && !retry) || hop >= MAX_REDIRECTS) return answers;
      if (moved !== undefined) {
        const [kind, movedSlot, target] = moved;
        if (kind === "MOVED") {
          this.slots[movedSlot] = target;
          this.mapped = false; // the map changed under us: the rest of it is read again on the next request
        }
        node = target;
        asking = kind === "ASK";
      } else await new Promise((r) => setTimeout(r, Math.min(20, this.remaining(deadline))));
    }
  }

  protected override groups<K extends string | Uint8Array>(keys: K[]): K[][] {
    const bySlot = new Map<number, K[]>();
    for (const key of keys) {
      const slot = keySlot(key);
      const group = bySlot.get(slot);
      if (group === undefined) bySlot.set(slot, [key]);
      else group.push(key);
    }
    return [...bySlot.values()];
  }

  protected override async everyServer(): Promise<Runner[]> {
    await this.refresh(Date.now() + this.timeoutMs);
    const masters = [...new Set(this.slots.filter((n): n is RedisNode => n !== undefined))];
    return masters.map((node) => (requests: Request[]) => node.run(requests));
  }

  override serverErrors(): Array<[string, number]> {
    return [...this.nodes.values()].map((n) => [n.server, n.health.errors]);
  }

  override async close(): Promise<void> {
    for (const node of this.nodes.values()) node.close();
  }
}
