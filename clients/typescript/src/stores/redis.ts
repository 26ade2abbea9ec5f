// `redis://[user:pass@]host:6379/0` (spec/STORES.md §5) on larder's own RESP client (resp.ts over wire.ts), because
// Node's Redis clients cannot be bounded from outside as §2 asks (total deadlines, bulk lengths refused when
// announced, nesting and element counts bounded). What larder adds: PXAT expiry from the entry header, tag sets kept
// as long as their longest-lived member (tag.lua), the scripts of spec/redis loaded as they are (EVALSHA, EVAL when
// the server lacks them), SCAN purges, and the server's ejection after `failures` (redis_node.ts). Every request
// goes through four routing hooks, which redis_cluster.ts overrides to spread the same operations over a Cluster.

import { asBuffer, utf8OrUndefined } from "../bytes.js";
import { internalKey, storedKey } from "../keys.js";
import {
  type Counter,
  checkKey,
  checkPrefix,
  checkTag,
  checkTtl,
  earlierExpiry,
  emptyStats,
  type Store,
  type StoreStats,
  writeFacts,
} from "./base.js";
import { NotACounter, ServerError, type StoreError, TooLarge } from "./errors.js";
import { RedisNode, type Request, SMALL, serverName } from "./redis_node.js";
import { ErrorReply, type Limits, pack, type RespValue } from "./resp.js";
import { type ScriptName, scriptSha, scriptSource } from "./scripts.js";
import type { StoreUrl } from "./url.js";

export const DEFAULT_MAX_VALUE = 64 << 20;
const DELETE_BATCH = 500;
const SCAN_COUNT = 1000;
/** What one SCAN/SSCAN page may hold: the cursor and its list, and the keys COUNT asks for with 1,024 to spare (a
 * page overshoots COUNT by at most a hash bucket; a small set answers whole, at most 512 members by default). */
const SCAN_ELEMENTS = 2 + SCAN_COUNT + 1024;
const INFO: Limits = { maxBulk: 1 << 20, maxBytes: 1 << 20, maxElements: 0 };

/** Values from this size are sent from where they lie, between their command's head and tail, not copied into it. */
const SET_IN_PARTS = 16 * 1024;

const none = (): void => {};

function setCommand(key: string, value: Uint8Array, expiry: number | undefined): Buffer {
  return expiry === undefined ? pack("SET", key, value) : pack("SET", key, value, "PXAT", expiry);
}

/** setCommand as three parts of one write: the command up to the value's length line, the value, and the rest. */
function setParts(key: string, value: Uint8Array, expiry: number | undefined): Buffer[] {
  const keyLength = Buffer.byteLength(key, "utf8");
  const head = `*${expiry === undefined ? 3 : 5}\r\n$3\r\nSET\r\n$${keyLength}\r\n${key}\r\n$${value.length}\r\n`;
  const tail = expiry === undefined ? "\r\n" : `\r\n$4\r\nPXAT\r\n$${String(expiry).length}\r\n${expiry}\r\n`;
  return [Buffer.from(head, "utf8"), asBuffer(value), Buffer.from(tail, "latin1")];
}

/** `prefix` with SCAN's glob characters escaped, then `*`. */
export function globPrefix(prefix: string): string {
  return `${prefix.replace(/[*?[\]\\]/g, (c) => `\\${c}`)}*`;
}

export interface RedisOptions {
  db?: number;
  username?: string | undefined;
  password?: string | undefined;
  prefix?: string;
  timeoutMs?: number;
  connectTimeoutMs?: number;
  pool?: number;
  failures?: number;
  retryAfterMs?: number;
  maxValue?: number;
}

/** The options every Redis URL takes (spec/STORES.md §1), read from `url`. */
export function redisUrlOptions(url: StoreUrl): RedisOptions {
  return {
    username: url.username,
    password: url.password,
    prefix: url.take("prefix") ?? "",
    timeoutMs: url.takeDurationMs("timeout", 250),
    connectTimeoutMs: url.takeDurationMs("connect_timeout", 500),
    pool: url.takeNumber("pool", 4, 1, 64),
    failures: url.takeNumber("failures", 2, 1, 1000),
    retryAfterMs: url.takeDurationMs("retry_after", 1000),
    maxValue: url.takeSize("max_value", DEFAULT_MAX_VALUE),
  };
}

/** `keys` without repeats, compared byte for byte. */
function uniqueBytes(keys: readonly Uint8Array[]): Uint8Array[] {
  const seen = new Set<string>();
  return keys.filter((k) => {
    const id = Buffer.from(k.buffer, k.byteOffset, k.byteLength).toString("hex");
    if (seen.has(id)) return false;
    seen.add(id);
    return true;
  });
}

/** Sends batches to a server: the standalone store's one server, or one Cluster master. */
export type Runner = (requests: Request[]) => Promise<RespValue[]>;

export class RedisStore implements Store {
  readonly backend: string = "redis";
  readonly prefix: string;
  readonly timeoutMs: number;
  readonly maxValue: number;
  readonly server: string;
  private readonly node: RedisNode | undefined;
  private readonly scanLimits: Limits;
  /** The bounds of a reply that is one value (GET). */
  private readonly valueLimits: Limits;

  /** `host` undefined: a subclass routes every request itself (redis_cluster.ts). */
  constructor(host: string | undefined, port: number, o: RedisOptions = {}) {
    scriptSource("incr"); // the scripts, read now: an installation without them fails here, not on a first write
    this.prefix = o.prefix ?? "";
    this.timeoutMs = o.timeoutMs ?? 250;
    this.maxValue = o.maxValue ?? DEFAULT_MAX_VALUE;
    this.server = host === undefined ? "" : serverName(host, port);
    this.scanLimits = { maxBulk: this.maxValue, maxBytes: this.maxValue, maxElements: SCAN_ELEMENTS };
    this.valueLimits = { maxBulk: this.maxValue, maxBytes: this.maxValue, maxElements: 0 };
    if (host !== undefined)
      this.node = new RedisNode(host, port, {
        backend: "redis",
        db: o.db ?? 0,
        username: o.username,
        password: o.password,
        connectTimeoutMs: o.connectTimeoutMs ?? 500,
        timeoutMs: this.timeoutMs,
        pool: o.pool ?? 4,
        policy: { failures: o.failures ?? 2, retryAfterMs: o.retryAfterMs ?? 1000 },
      });
  }

  static fromUrl(url: StoreUrl): RedisStore {
    const hosts = url.requireHosts();
    const dbText = url.path.replace(/^\/+/, "");
    if (dbText && !(/^[0-9]+$/.test(dbText) && Number(dbText) <= 1_000_000))
      throw url.error(`the path ${JSON.stringify(url.path)} must be a database number (/0)`);
    if (hosts.length !== 1) throw url.error("redis:// takes one host; use redis+cluster:// for a Cluster");
    const o: RedisOptions = { ...redisUrlOptions(url), db: Number(dbText || "0") };
    url.finish();
    if ((o.maxValue as number) < 1024) throw url.error("max_value must be at least 1K");
    const h = hosts[0] as { host: string; port: number | undefined };
    return new RedisStore(h.host, h.port ?? 6379, o);
  }

  // -------------------------------------------------------------------------------------------- plumbing
  // A Cluster store overrides the four routing hooks below; everything else is the same for both.

  /** One pipelined batch within `timeout` to the server holding `key` (every request's key is in its slot). */
  protected run(requests: Request[], _key?: string | Uint8Array): Promise<RespValue[]> {
    return (this.node as RedisNode).run(requests);
  }

  /** `keys` in groups that one multi-key command may name (one group here; one per slot in a Cluster). */
  protected groups<K extends string | Uint8Array>(keys: K[]): K[][] {
    return [keys];
  }

  /** A runner for every server that holds keys (every master in a Cluster). */
  protected async everyServer(): Promise<Runner[]> {
    return [(requests) => this.run(requests)];
  }

  protected failedReply(command: string, reply: RespValue): StoreError {
    if (this.node !== undefined) return this.node.malformed(command, reply);
    return new ServerError(this.backend, `malformed reply to ${command}`, this.server);
  }

  /** A script by SHA; sent whole (EVAL) when the server lacks it. */
  private async script(
    name: ScriptName,
    key: string,
    ...args: Array<string | number | bigint | Uint8Array>
  ): Promise<RespValue> {
    const [reply] = await this.run([[pack("EVALSHA", scriptSha(name), 1, key, ...args), SMALL]], key);
    if (reply instanceof ErrorReply && reply.message.startsWith("NOSCRIPT")) {
      return (await this.run([[pack("EVAL", scriptSource(name), 1, key, ...args), SMALL]], key))[0] as RespValue;
    }
    return reply as RespValue;
  }

  private answer(reply: RespValue): RespValue {
    if (reply instanceof ErrorReply) throw new ServerError(this.backend, reply.message.slice(0, 500), this.server);
    return reply;
  }

  private malformed(command: string, reply: RespValue): StoreError {
    return this.failedReply(command, reply);
  }

  private int(command: string, reply: RespValue): number {
    const r = this.answer(reply);
    if (typeof r !== "number") throw this.malformed(command, r);
    return r;
  }

  private key(key: string): string {
    return storedKey(this.prefix, checkKey(this.backend, key));
  }

  private async write(
    items: ReadonlyArray<readonly [string, Uint8Array]>,
    ttlMs: number | undefined,
    nx: boolean,
  ): Promise<boolean> {
    checkTtl(ttlMs);
    const now = Date.now();
    const requests: Array<[Buffer, Limits, string]> = [];
    const tagged: Array<[string, number, string[]]> = [];
    for (const [key, value] of items) {
      const stored = this.key(key);
      if (value.length > this.maxValue) throw new TooLarge(this.backend, key, value.length, this.maxValue);
      const { hardExpiry, header } = writeFacts(value);
      const expiry = earlierExpiry(hardExpiry, ttlMs, now);
      if (expiry !== undefined && expiry <= now) {
        if (nx) return false;
        requests.push([pack("DEL", stored), SMALL, stored]);
        continue;
      }
      const command: Array<string | number | Uint8Array> = ["SET", stored, value];
      if (expiry !== undefined) command.push("PXAT", expiry);
      if (nx) command.push("NX");
      requests.push([pack(...command), SMALL, stored]);
      const tags = header?.tags ?? [];
      if (tags.length > 0) tagged.push([stored, expiry ?? 0, tags]);
    }
    if (requests.length === 0) return true;
    const replies = await this.runEach(requests);
    if (nx) {
      const reply = this.answer(replies[0] as RespValue);
      if (reply === null) return false;
      if (reply !== "OK") throw this.malformed("SET", reply);
    } else for (const r of replies) this.answer(r);
    for (const [member, at, tags] of tagged) {
      for (const tag of tags) {
        const tagKey = internalKey(this.prefix, "tag", tag);
        this.answer(await this.script("tag", tagKey, member, at));
      }
    }
    return true;
  }

  /** Requests each naming one key, sent in one batch per group of keys (per slot in a Cluster), in order. */
  private async runEach(requests: Array<[Buffer, Limits, string]>): Promise<RespValue[]> {
    const [first] = requests;
    if (requests.length === 1 && first !== undefined) return this.run([[first[0], first[1]]], first[2]);
    const byKey = new Map<string, number[]>();
    for (const [i, [, , key]] of requests.entries()) byKey.set(key, [...(byKey.get(key) ?? []), i]);
    const replies: RespValue[] = new Array(requests.length).fill(null);
    await Promise.all(
      this.groups([...byKey.keys()]).map(async (keys) => {
        const indexes = keys.flatMap((k) => byKey.get(k) ?? []).sort((a, b) => a - b);
        const batch = indexes.map((i) => requests[i] as [Buffer, Limits, string]);
        const answers = await this.run(
          batch.map(([c, l]) => [c, l]),
          keys[0],
        );
        indexes.forEach((i, j) => {
          replies[i] = answers[j] as RespValue;
        });
      }),
    );
    return replies;
  }

  /** DELs `keys` (as larder made them, or as a SCAN returned their bytes), in batches per group. */
  private async deleteStored(keys: Array<string | Uint8Array>): Promise<number> {
    let deleted = 0;
    for (const group of this.groups(keys)) {
      for (let at = 0; at < group.length; at += DELETE_BATCH) {
        const chunk = group.slice(at, at + DELETE_BATCH);
        deleted += this.int("DEL", (await this.run([[pack("DEL", ...chunk), SMALL]], chunk[0]))[0] as RespValue);
      }
    }
    return deleted;
  }

  /** Every key a SCAN-like command pages through, as the bytes the server sent (DEL is given back exactly those: a
   * key that is not UTF-8 decoded and encoded again would be another key): on `runner`, else on the server holding
   * `key`. */
  private async scanPages(
    command: string,
    page: (cursor: string) => Buffer,
    runner: Runner | undefined,
    key?: string,
  ): Promise<Uint8Array[]> {
    const send: Runner = runner ?? ((requests) => this.run(requests, key));
    const found: Uint8Array[] = [];
    let cursor = "0";
    do {
      const reply = this.answer((await send([[page(cursor), this.scanLimits]]))[0] as RespValue);
      if (
        !Array.isArray(reply) ||
        reply.length !== 2 ||
        !(reply[0] instanceof Uint8Array) ||
        !Array.isArray(reply[1]) ||
        !reply[1].every((k) => k instanceof Uint8Array)
      )
        throw this.malformed(command, reply);
      cursor = Buffer.from(reply[0]).toString("latin1");
      if (!/^[0-9]+$/.test(cursor)) throw this.malformed(command, reply);
      for (const k of reply[1] as Uint8Array[]) found.push(k);
    } while (cursor !== "0");
    return found;
  }

  // ------------------------------------------------------------------------------------------------ Store

  maxValueBytes(): number {
    return this.maxValue;
  }

  serverErrors(): Array<[string, number]> {
    return this.node === undefined ? [] : [[this.server, this.node.health.errors]];
  }

  async get(key: string): Promise<Uint8Array | undefined> {
    const reply = this.answer((await this.run([[pack("GET", this.key(key)), this.valueLimits]]))[0] as RespValue);
    if (reply !== null && !(reply instanceof Uint8Array)) throw this.malformed("GET", reply);
    return reply ?? undefined;
  }

  async getMany(keys: readonly string[]): Promise<Array<Uint8Array | undefined>> {
    if (keys.length === 0) return [];
    const stored = keys.map((k) => this.key(k));
    const unique = new Set(stored);
    const groups = this.groups(unique.size === stored.length ? stored : [...unique]);
    const only = groups.length === 1 ? (groups[0] as string[]) : undefined;
    if (only !== undefined && only.length === stored.length && only.every((k, i) => k === stored[i])) {
      // every key once, in one MGET: its reply is in the keys' order (no map from keys to values)
      const reply = await this.mget(only);
      const values: Array<Uint8Array | undefined> = new Array(reply.length);
      for (let i = 0; i < reply.length; i++) values[i] = reply[i] ?? undefined;
      return values;
    }
    const found = new Map<string, Uint8Array>();
    await Promise.all(
      groups.map(async (group) => {
        const reply = await this.mget(group);
        group.forEach((key, i) => {
          const value = reply[i];
          if (value !== null && value !== undefined) found.set(key, value);
        });
      }),
    );
    return stored.map((key) => found.get(key));
  }

  /** The values of `group` (keys of one slot), by one MGET: a reply of exactly one value or nil per key. */
  private async mget(group: string[]): Promise<Array<Uint8Array | null>> {
    const limits = { maxBulk: this.maxValue, maxBytes: this.maxValue * group.length, maxElements: group.length };
    const reply = this.answer((await this.run([[pack("MGET", ...group), limits]], group[0]))[0] as RespValue);
    if (
      !Array.isArray(reply) ||
      reply.length !== group.length ||
      !reply.every((r) => r === null || r instanceof Uint8Array)
    )
      throw this.malformed("MGET", reply);
    return reply as Array<Uint8Array | null>;
  }

  /** Not an async function: the reply's Promise is handed on with one `then` (awaiting it in an async function
   * cost ~30 ns more a write, node 20). */
  set(key: string, value: Uint8Array, ttlMs?: number): Promise<void> {
    try {
      // One SET of a value without tags (the common write) goes straight to its server: write()'s lists, tag
      // bookkeeping and batch grouping are for the rest.
      const { hardExpiry, header } = writeFacts(value);
      if (header !== undefined && header.tags.length > 0) return this.write([[key, value]], ttlMs, false).then(none);
      checkTtl(ttlMs);
      const stored = this.key(key);
      if (value.length > this.maxValue) throw new TooLarge(this.backend, key, value.length, this.maxValue);
      const now = ttlMs === undefined && hardExpiry === undefined ? 0 : Date.now();
      const expiry = earlierExpiry(hardExpiry, ttlMs, now);
      if (expiry !== undefined && expiry <= now) return this.write([[key, value]], ttlMs, false).then(none);
      const command =
        value.length >= SET_IN_PARTS ? setParts(stored, value, expiry) : setCommand(stored, value, expiry);
      return this.run([[command, SMALL]], stored).then(this.answeredNothing);
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /** A one-reply write's answer: nothing, or its error reply thrown. */
  private readonly answeredNothing = (replies: RespValue[]): void => {
    this.answer(replies[0] as RespValue);
  };

  async setMany(items: ReadonlyArray<readonly [string, Uint8Array]>, ttlMs?: number): Promise<void> {
    if (items.length > 0) await this.write(items, ttlMs, false);
  }

  async add(key: string, value: Uint8Array, ttlMs?: number): Promise<boolean> {
    return this.write([[key, value]], ttlMs, true);
  }

  async incr(key: string, delta: number | bigint, ttlMs?: number, create = true): Promise<Counter | undefined> {
    const stored = this.key(key);
    checkTtl(ttlMs);
    const ms = ttlMs === undefined ? 0 : Math.max(Math.ceil(ttlMs), 1);
    const reply = await this.script("incr", stored, BigInt(delta), create ? 1 : 0, ms);
    if (reply instanceof ErrorReply && reply.message.includes("not an integer"))
      throw new NotACounter(this.backend, key);
    const r = this.answer(reply);
    if (r === null) return undefined;
    if (typeof r !== "number" && typeof r !== "bigint") throw this.malformed("INCR", r);
    return r;
  }

  async deleteIf(key: string, expected: Uint8Array): Promise<boolean> {
    const stored = this.key(key);
    return this.int("EVAL", await this.script("delete_if", stored, expected)) === 1;
  }

  async delete(key: string): Promise<boolean> {
    return (await this.deleteMany([key])) === 1;
  }

  async deleteMany(keys: readonly string[]): Promise<number> {
    return keys.length > 0 ? this.deleteStored(keys.map((k) => this.key(k))) : 0;
  }

  async clear(): Promise<void> {
    if (this.prefix) await this.purgePrefix("");
    else
      for (const send of await this.everyServer())
        this.answer((await send([[pack("FLUSHDB"), SMALL]]))[0] as RespValue);
  }

  async purgePrefix(prefix: string): Promise<number> {
    const pattern = globPrefix(storedKey(this.prefix, checkPrefix(this.backend, prefix)) || "");
    return this.deleteStored(uniqueBytes(await this.scanEveryServer(pattern)));
  }

  async purgeTag(tag: string): Promise<number> {
    checkTag(this.backend, tag);
    const tagKey = internalKey(this.prefix, "tag", tag);
    const members = await this.scanPages(
      "SSCAN",
      (cursor) => pack("SSCAN", tagKey, cursor, "COUNT", SCAN_COUNT),
      undefined,
      tagKey,
    );
    const deleted = await this.deleteStored(uniqueBytes(members));
    await this.deleteStored([tagKey]);
    return deleted;
  }

  private async scanEveryServer(pattern: string): Promise<Uint8Array[]> {
    const found: Uint8Array[] = [];
    for (const send of await this.everyServer()) {
      const page = (cursor: string) => pack("SCAN", cursor, "MATCH", pattern, "COUNT", SCAN_COUNT);
      found.push(...(await this.scanPages("SCAN", page, send)));
    }
    return found;
  }

  /** The keys starting with `prefix` (after the store's own prefix, which is taken off), by SCAN; a key that is not
   * UTF-8 is none of larder's and is left out. */
  async *keys(prefix = ""): AsyncGenerator<string, void, unknown> {
    checkPrefix(this.backend, prefix);
    const pattern = globPrefix(this.prefix + prefix);
    const keys = new Set<string>();
    for (const bytes of await this.scanEveryServer(pattern)) {
      const key = utf8OrUndefined(bytes);
      if (key !== undefined) keys.add(key);
    }
    for (const key of keys) {
      if (!key.startsWith("larder#") && !key.startsWith(`${this.prefix}larder#`)) yield key.slice(this.prefix.length);
    }
  }

  async stats(): Promise<StoreStats> {
    const stats = emptyStats();
    for (const send of await this.everyServer()) {
      const [size, info] = await send([
        [pack("DBSIZE"), SMALL],
        [pack("INFO"), INFO],
      ]);
      stats.entries += this.int("DBSIZE", size as RespValue);
      if (!(info instanceof Uint8Array)) throw this.malformed("INFO", this.answer(info as RespValue));
      const fields = new Map<string, string>();
      for (const line of Buffer.from(info).toString("utf8").split(/\r?\n/)) {
        const colon = line.indexOf(":");
        if (colon > 0 && colon < 64) fields.set(line.slice(0, colon), line.slice(colon + 1).trim());
      }
      const number = (name: string): number => {
        const text = fields.get(name) ?? "0";
        return /^[0-9]{1,19}$/.test(text) ? Number(text) : 0;
      };
      stats.hits += number("keyspace_hits");
      stats.misses += number("keyspace_misses");
      stats.evictions += number("evicted_keys");
      stats.expirations += number("expired_keys");
      stats.bytes += number("used_memory");
      stats.capacityBytes += number("maxmemory");
    }
    return stats;
  }

  async close(): Promise<void> {
    this.node?.close();
  }
}
