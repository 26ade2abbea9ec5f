// `redis://[user:pass@]host:6379/0` (spec/STORES.md §5) on larder's own RESP client (resp.ts over wire.ts), because
// Node's Redis clients cannot be bounded from outside as §2 asks (total deadlines, bulk lengths refused when
// announced, nesting and element counts bounded). What larder adds: PXAT expiry from the entry header, tag sets kept
// as long as their longest-lived member (tag.lua), the scripts of spec/redis loaded as they are (EVALSHA, EVAL when
// the server lacks them), SCAN purges, and the server's ejection after `failures`.

import { internalKey, storedKey } from "../keys.js";
import {
  type Counter,
  checkKey,
  checkPrefix,
  checkTtl,
  emptyStats,
  entryTags,
  expiresAtMs,
  type FailurePolicy,
  Health,
  type Store,
  type StoreStats,
} from "./base.js";
import { NotACounter, ServerError, type StoreError, StoreTimeout, TooLarge } from "./errors.js";
import { ErrorReply, type Limits, pack, parseResp, type RespValue } from "./resp.js";
import { type ScriptName, scriptSha, scriptSource } from "./scripts.js";
import type { StoreUrl } from "./url.js";
import { Connection, ConnectionPool, WireFailure } from "./wire.js";

export const DEFAULT_MAX_VALUE = 64 << 20;
const DELETE_BATCH = 500;
const SCAN_COUNT = 1000;
const SMALL: Limits = { maxBulk: 1024, maxBytes: 1024, maxElements: 0 };
const INFO: Limits = { maxBulk: 1 << 20, maxBytes: 1 << 20, maxElements: 0 };

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

type Request = [Buffer, Limits];

export class RedisStore implements Store {
  readonly backend = "redis";
  readonly prefix: string;
  readonly timeoutMs: number;
  readonly maxValue: number;
  readonly server: string;
  readonly health = new Health();
  private readonly policy: FailurePolicy;
  private readonly pool: ConnectionPool<RespValue, Limits>;
  private readonly scanLimits: Limits;

  constructor(host: string, port: number, o: RedisOptions = {}) {
    scriptSource("incr"); // the scripts, read now: an installation without them fails here, not on a first write
    this.prefix = o.prefix ?? "";
    this.timeoutMs = o.timeoutMs ?? 250;
    this.maxValue = o.maxValue ?? DEFAULT_MAX_VALUE;
    this.server = host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`;
    this.policy = { failures: o.failures ?? 2, retryAfterMs: o.retryAfterMs ?? 1000 };
    this.scanLimits = { maxBulk: this.maxValue, maxBytes: this.maxValue, maxElements: 2 + 100 * SCAN_COUNT };
    const handshake: Buffer[] = [];
    if (o.password !== undefined)
      handshake.push(o.username ? pack("AUTH", o.username, o.password) : pack("AUTH", o.password));
    if ((o.db ?? 0) !== 0) handshake.push(pack("SELECT", o.db ?? 0));
    const connectTimeoutMs = o.connectTimeoutMs ?? 500;
    this.pool = new ConnectionPool(o.pool ?? 4, () => {
      const conn = new Connection<RespValue, Limits>({ host, port, connectTimeoutMs, onFailure: () => {} }, parseResp);
      for (const command of handshake) {
        conn
          .request(command, () => true, connectTimeoutMs + this.timeoutMs, SMALL)
          .then(
            ([reply]) => {
              if (reply instanceof ErrorReply) conn.close();
            },
            () => {},
          );
      }
      return conn;
    });
  }

  static fromUrl(url: StoreUrl): RedisStore {
    if (url.scheme === "redis+cluster")
      throw url.error("redis+cluster:// is not supported by this client yet (use redis://)");
    const hosts = url.requireHosts();
    const dbText = url.path.replace(/^\/+/, "");
    if (dbText && !(/^[0-9]+$/.test(dbText) && Number(dbText) <= 1_000_000))
      throw url.error(`the path ${JSON.stringify(url.path)} must be a database number (/0)`);
    if (hosts.length !== 1) throw url.error("redis:// takes one host; use redis+cluster:// for a Cluster");
    const o: RedisOptions = {
      db: Number(dbText || "0"),
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
    url.finish();
    if ((o.maxValue as number) < 1024) throw url.error("max_value must be at least 1K");
    const h = hosts[0] as { host: string; port: number | undefined };
    return new RedisStore(h.host, h.port ?? 6379, o);
  }

  // -------------------------------------------------------------------------------------------- plumbing

  private failed(failure: WireFailure): StoreError {
    this.health.record(false, this.policy, Date.now());
    if (failure.timeout) return new StoreTimeout(this.backend, this.server, this.timeoutMs);
    return new ServerError(this.backend, failure.message, this.server);
  }

  /** One pipelined batch within `timeout`; each request gets exactly one reply. */
  private async run(requests: Request[]): Promise<RespValue[]> {
    if (!this.health.admits(Date.now())) {
      this.health.errors++;
      throw new ServerError(this.backend, "ejected after failures; retrying after retry_after", this.server);
    }
    const conn = this.pool.pick();
    try {
      const replies = await Promise.all(
        requests.map(([command, limits]) => conn.request(command, () => true, this.timeoutMs, limits)),
      );
      this.health.record(true, this.policy, Date.now());
      return replies.map((r) => r[0] as RespValue);
    } catch (e) {
      if (e instanceof WireFailure) throw this.failed(e);
      throw e;
    }
  }

  /** A script by SHA; sent whole (EVAL) when the server lacks it. */
  private async script(
    name: ScriptName,
    key: string,
    ...args: Array<string | number | bigint | Uint8Array>
  ): Promise<RespValue> {
    const [reply] = await this.run([[pack("EVALSHA", scriptSha(name), 1, key, ...args), SMALL]]);
    if (reply instanceof ErrorReply && reply.message.startsWith("NOSCRIPT")) {
      return (await this.run([[pack("EVAL", scriptSource(name), 1, key, ...args), SMALL]]))[0] as RespValue;
    }
    return reply as RespValue;
  }

  private answer(reply: RespValue): RespValue {
    if (reply instanceof ErrorReply) throw new ServerError(this.backend, reply.message.slice(0, 500), this.server);
    return reply;
  }

  private malformed(command: string, reply: RespValue): StoreError {
    return this.failed(
      new WireFailure(`malformed reply to ${command}: ${Array.isArray(reply) ? "array" : typeof reply}`),
    );
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
    const requests: Request[] = [];
    const tagged: Array<[string, number, string[]]> = [];
    for (const [key, value] of items) {
      const stored = this.key(key);
      if (value.length > this.maxValue) throw new TooLarge(this.backend, key, value.length, this.maxValue);
      const expiry = expiresAtMs(value, ttlMs, now);
      if (expiry !== undefined && expiry <= now) {
        if (nx) return false;
        requests.push([pack("DEL", stored), SMALL]);
        continue;
      }
      const command: Array<string | number | Uint8Array> = ["SET", stored, value];
      if (expiry !== undefined) command.push("PXAT", expiry);
      if (nx) command.push("NX");
      requests.push([pack(...command), SMALL]);
      const tags = entryTags(value);
      if (tags.length > 0) tagged.push([stored, expiry ?? 0, tags]);
    }
    if (requests.length === 0) return true;
    const replies = await this.run(requests);
    if (nx) {
      const reply = this.answer(replies[0] as RespValue);
      if (reply === null) return false;
      if (reply !== "OK") throw this.malformed("SET", reply);
    } else for (const r of replies) this.answer(r);
    for (const [member, at, tags] of tagged) {
      for (const tag of tags) this.answer(await this.script("tag", internalKey(this.prefix, "tag", tag), member, at));
    }
    return true;
  }

  private async deleteStored(keys: string[]): Promise<number> {
    let deleted = 0;
    for (let at = 0; at < keys.length; at += DELETE_BATCH) {
      const chunk = keys.slice(at, at + DELETE_BATCH);
      deleted += this.int("DEL", (await this.run([[pack("DEL", ...chunk), SMALL]]))[0] as RespValue);
    }
    return deleted;
  }

  private async scanPages(command: string, page: (cursor: string) => Buffer): Promise<string[]> {
    const found: string[] = [];
    let cursor = "0";
    do {
      const reply = this.answer((await this.run([[page(cursor), this.scanLimits]]))[0] as RespValue);
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
      for (const k of reply[1] as Uint8Array[]) found.push(Buffer.from(k).toString("utf8"));
    } while (cursor !== "0");
    return found;
  }

  // ------------------------------------------------------------------------------------------------ Store

  maxValueBytes(): number {
    return this.maxValue;
  }

  serverErrors(): Array<[string, number]> {
    return [[this.server, this.health.errors]];
  }

  async get(key: string): Promise<Uint8Array | undefined> {
    const reply = this.answer(
      (
        await this.run([
          [pack("GET", this.key(key)), { maxBulk: this.maxValue, maxBytes: this.maxValue, maxElements: 0 }],
        ])
      )[0] as RespValue,
    );
    if (reply !== null && !(reply instanceof Uint8Array)) throw this.malformed("GET", reply);
    return reply ?? undefined;
  }

  async getMany(keys: readonly string[]): Promise<Array<Uint8Array | undefined>> {
    if (keys.length === 0) return [];
    const stored = keys.map((k) => this.key(k));
    const limits = { maxBulk: this.maxValue, maxBytes: this.maxValue * stored.length, maxElements: stored.length };
    const reply = this.answer((await this.run([[pack("MGET", ...stored), limits]]))[0] as RespValue);
    if (
      !Array.isArray(reply) ||
      reply.length !== stored.length ||
      !reply.every((r) => r === null || r instanceof Uint8Array)
    )
      throw this.malformed("MGET", reply);
    return (reply as Array<Uint8Array | null>).map((r) => r ?? undefined);
  }

  async set(key: string, value: Uint8Array, ttlMs?: number): Promise<void> {
    await this.write([[key, value]], ttlMs, false);
  }

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
    else this.answer((await this.run([[pack("FLUSHDB"), SMALL]]))[0] as RespValue);
  }

  async purgePrefix(prefix: string): Promise<number> {
    const pattern = globPrefix(storedKey(this.prefix, checkPrefix(this.backend, prefix)) || "");
    const found = await this.scanPages("SCAN", (cursor) => pack("SCAN", cursor, "MATCH", pattern, "COUNT", SCAN_COUNT));
    return this.deleteStored([...new Set(found)]);
  }

  async purgeTag(tag: string): Promise<number> {
    const tagKey = internalKey(this.prefix, "tag", tag);
    const members = await this.scanPages("SSCAN", (cursor) => pack("SSCAN", tagKey, cursor, "COUNT", SCAN_COUNT));
    const deleted = await this.deleteStored([...new Set(members)]);
    await this.deleteStored([tagKey]);
    return deleted;
  }

  /** The keys starting with `prefix` (after the store's own prefix, which is taken off), by SCAN. */
  async *keys(prefix = ""): AsyncGenerator<string, void, unknown> {
    const pattern = globPrefix(this.prefix + prefix);
    for (const key of new Set(
      await this.scanPages("SCAN", (cursor) => pack("SCAN", cursor, "MATCH", pattern, "COUNT", SCAN_COUNT)),
    )) {
      if (!key.startsWith("larder#") && !key.startsWith(`${this.prefix}larder#`)) yield key.slice(this.prefix.length);
    }
  }

  async stats(): Promise<StoreStats> {
    const stats = emptyStats();
    stats.entries = this.int("DBSIZE", (await this.run([[pack("DBSIZE"), SMALL]]))[0] as RespValue);
    const info = this.answer((await this.run([[pack("INFO"), INFO]]))[0] as RespValue);
    if (!(info instanceof Uint8Array)) throw this.malformed("INFO", info);
    const fields = new Map<string, string>();
    for (const line of Buffer.from(info).toString("utf8").split(/\r?\n/)) {
      const colon = line.indexOf(":");
      if (colon > 0 && colon < 64) fields.set(line.slice(0, colon), line.slice(colon + 1).trim());
    }
    const number = (name: string): number => {
      const text = fields.get(name) ?? "0";
      return /^[0-9]{1,19}$/.test(text) ? Number(text) : 0;
    };
    stats.hits = number("keyspace_hits");
    stats.misses = number("keyspace_misses");
    stats.evictions = number("evicted_keys");
    stats.expirations = number("expired_keys");
    stats.bytes = number("used_memory");
    stats.capacityBytes = number("maxmemory");
    return stats;
  }

  async close(): Promise<void> {
    this.pool.close();
  }
}
