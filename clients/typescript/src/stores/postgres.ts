// `postgres://user@host:5432/db` (spec/STORES.md §6): one table after Rails' Solid Cache and one tag index, the same
// statements every language runs, over node-postgres (`pg`, pure JavaScript) with a pool of `pool` connections.
// Bounds: `statement_timeout` and the driver's query_timeout are the store's `timeout`, connecting is bounded by
// `connect_timeout`; a server that fails `failures` times in a row is refused for `retry_after` (§1).

import { createHash } from "node:crypto";
import pg from "pg";
import { utf8 } from "../bytes.js";
import { storedKey } from "../keys.js";
import {
  type Counter,
  checkKey,
  checkPrefix,
  checkTtl,
  counterValue,
  emptyStats,
  entryTags,
  expiresAtMs,
  type FailurePolicy,
  Health,
  parseCounter,
  type Store,
  type StoreStats,
  saturate,
} from "./base.js";
import { NotACounter, ServerError, StoreError, StoreTimeout, TooLarge } from "./errors.js";
import type { StoreUrl } from "./url.js";

export const SCHEMA_VERSION = 1;
const SWEEP_EVERY = 100;
const SWEEP_ROWS = 1000;
const MAX_VALUE = 512 << 20;

/** The first 8 bytes of SHA-256(key) as a big-endian signed integer (Solid Cache's key hash), as decimal text. */
export function keyHash(key: string): string {
  return createHash("sha256").update(key, "utf8").digest().readBigInt64BE(0).toString();
}

export interface PostgresOptions {
  prefix?: string;
  table?: string;
  timeoutMs?: number;
  connectTimeoutMs?: number;
  pool?: number;
  failures?: number;
  retryAfterMs?: number;
}

export class PostgresStore implements Store {
  readonly backend = "postgres";
  readonly prefix: string;
  readonly server: string;
  readonly health = new Health();
  private readonly entries: string;
  private readonly tags: string;
  private readonly schema: string;
  private readonly timeoutMs: number;
  private readonly policy: FailurePolicy;
  private readonly pool: pg.Pool;
  private schemaReady: Promise<void> | undefined;
  private writes = 0;

  constructor(config: pg.PoolConfig, server: string, o: PostgresOptions = {}) {
    this.prefix = o.prefix ?? "";
    const table = o.table ?? "larder_entries";
    if (!/^[a-z_][a-z0-9_]{0,50}$/.test(table))
      throw new RangeError(`table ${JSON.stringify(table)}: lowercase letters, digits and _`);
    this.entries = table;
    this.tags = `${table}_tags`;
    this.schema = `${table}_schema`;
    this.server = server;
    this.timeoutMs = o.timeoutMs ?? 250;
    this.policy = { failures: o.failures ?? 2, retryAfterMs: o.retryAfterMs ?? 1000 };
    this.pool = new pg.Pool({
      ...config,
      max: o.pool ?? 8,
      connectionTimeoutMillis: o.connectTimeoutMs ?? 500,
      statement_timeout: this.timeoutMs,
      query_timeout: this.timeoutMs + 50,
    });
    this.pool.on("error", () => {}); // an idle client's error: the next query reports it
  }

  static fromUrl(url: StoreUrl): PostgresStore {
    const hosts = url.requireHosts();
    if (hosts.length !== 1) throw url.error("postgres:// takes one host");
    const h = hosts[0] as { host: string; port: number | undefined };
    const database = url.path.replace(/^\/+/, "") || "postgres";
    const o: PostgresOptions = {
      prefix: url.take("prefix") ?? "",
      table: url.take("table") ?? "larder_entries",
      timeoutMs: url.takeDurationMs("timeout", 250),
      connectTimeoutMs: url.takeDurationMs("connect_timeout", 500),
      pool: url.takeNumber("pool", 8, 1, 64),
      failures: url.takeNumber("failures", 2, 1, 1000),
      retryAfterMs: url.takeDurationMs("retry_after", 1000),
    };
    url.finish();
    if (!/^[a-z_][a-z0-9_]{0,50}$/.test(o.table as string))
      throw url.error("table: lowercase letters, digits and _, at most 51");
    const port = h.port ?? 5432;
    return new PostgresStore(
      { host: h.host, port, user: url.username, password: url.password, database },
      `${h.host}:${port}`,
      o,
    );
  }

  // -------------------------------------------------------------------------------------------- plumbing

  private async ensureSchema(client: pg.PoolClient): Promise<void> {
    const e = this.entries;
    const t = this.tags;
    await client.query("BEGIN");
    try {
      await client.query("SELECT pg_advisory_xact_lock(4242424242)");
      for (const statement of [
        `CREATE TABLE IF NOT EXISTS ${e} (key_hash BIGINT PRIMARY KEY, key TEXT COLLATE "C" NOT NULL, value BYTEA NOT NULL, byte_size INTEGER NOT NULL, created_at BIGINT NOT NULL, expires_at BIGINT)`,
        `CREATE INDEX IF NOT EXISTS ${e}_key ON ${e} (key)`,
        `CREATE INDEX IF NOT EXISTS ${e}_expires_at ON ${e} (expires_at)`,
        `CREATE TABLE IF NOT EXISTS ${t} (tag TEXT COLLATE "C" NOT NULL, key_hash BIGINT NOT NULL, PRIMARY KEY (tag, key_hash))`,
        `CREATE INDEX IF NOT EXISTS ${t}_key_hash ON ${t} (key_hash)`,
        `CREATE TABLE IF NOT EXISTS ${this.schema} (version INTEGER NOT NULL)`,
      ])
        await client.query(statement);
      const row = (await client.query(`SELECT CAST(MAX(version) AS BIGINT) AS v FROM ${this.schema}`)).rows[0] as {
        v: string | null;
      };
      if (row.v === null) await client.query(`INSERT INTO ${this.schema} (version) VALUES ($1)`, [SCHEMA_VERSION]);
      else if (Number(row.v) > SCHEMA_VERSION)
        throw new StoreError(
          "server",
          this.backend,
          `the database's larder schema is version ${row.v}, newer than this larder's ${SCHEMA_VERSION}`,
          this.server,
        );
      await client.query("COMMIT");
    } catch (e) {
      await client.query("ROLLBACK").catch(() => {});
      throw e;
    }
  }

  /** Runs `work` on a pooled connection within the store's bounds, counting the server's health. */
  private async run<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    if (!this.health.admits(Date.now())) {
      this.health.errors++;
      throw new ServerError(this.backend, "ejected after failures; retrying after retry_after", this.server);
    }
    let client: pg.PoolClient | undefined;
    try {
      client = await this.pool.connect();
      if (this.schemaReady === undefined) {
        const c = client;
        this.schemaReady = this.ensureSchema(c);
        this.schemaReady.catch(() => {
          this.schemaReady = undefined;
        });
      }
      await this.schemaReady;
      const result = await work(client);
      this.health.record(true, this.policy, Date.now());
      client.release();
      return result;
    } catch (e) {
      client?.release(e instanceof StoreError ? undefined : true);
      if (e instanceof StoreError) throw e;
      const error = e as Error & { code?: string };
      // An error answer (a constraint, a type) is the query's, not the server's; anything else is a failure.
      if (typeof error.code === "string" && /^[0-9A-Z]{5}$/.test(error.code) && error.code !== "57014") {
        throw new ServerError(this.backend, error.message, this.server);
      }
      this.health.record(false, this.policy, Date.now());
      if (error.code === "57014" || /timeout/i.test(error.message))
        throw new StoreTimeout(this.backend, this.server, this.timeoutMs);
      throw new ServerError(this.backend, error.message, this.server);
    }
  }

  private key(key: string): string {
    return storedKey(this.prefix, checkKey(this.backend, key));
  }

  private async getStored(stored: string[]): Promise<Array<Uint8Array | undefined>> {
    const now = Date.now();
    const values: Array<Uint8Array | undefined> = [];
    for (let at = 0; at < stored.length; at += 500) {
      const chunk = stored.slice(at, at + 500);
      const rows = await this.run(
        async (c) =>
          (
            await c.query(`SELECT key, value, expires_at FROM ${this.entries} WHERE key_hash = ANY($1::bigint[])`, [
              chunk.map(keyHash),
            ])
          ).rows as Array<{
            key: string;
            value: Buffer;
            expires_at: string | null;
          }>,
      );
      const found = new Map(
        rows
          .filter((r) => r.expires_at === null || Number(r.expires_at) > now)
          .map((r) => [r.key, new Uint8Array(r.value)]),
      );
      for (const k of chunk) values.push(found.get(k));
    }
    return values;
  }

  private async write(
    items: Array<[string, Uint8Array]>,
    ttlMs: number | undefined,
    onlyIfAbsent: boolean,
  ): Promise<boolean> {
    checkTtl(ttlMs);
    const now = Date.now();
    const e = this.entries;
    let upsert = `INSERT INTO ${e} (key_hash, key, value, byte_size, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (key_hash) DO UPDATE SET key = excluded.key, value = excluded.value, byte_size = excluded.byte_size, created_at = excluded.created_at, expires_at = excluded.expires_at`;
    if (onlyIfAbsent) upsert += ` WHERE ${e}.expires_at IS NOT NULL AND ${e}.expires_at <= $7`;
    const stored = await this.run(async (c) => {
      let all = true;
      await c.query("BEGIN");
      try {
        for (const [key, value] of items) {
          const h = keyHash(key);
          const expiry = expiresAtMs(value, ttlMs, now);
          if (expiry !== undefined && expiry <= now) {
            if (onlyIfAbsent) {
              all = false;
              continue;
            }
            await c.query(`DELETE FROM ${e} WHERE key_hash = $1`, [h]);
            await c.query(`DELETE FROM ${this.tags} WHERE key_hash = $1`, [h]);
            continue;
          }
          const params: unknown[] = [h, key, Buffer.from(value), utf8(key).length + value.length, now, expiry ?? null];
          if (onlyIfAbsent) params.push(now);
          const written = (await c.query(upsert, params)).rowCount === 1;
          all &&= written;
          if (!written) continue;
          await c.query(`DELETE FROM ${this.tags} WHERE key_hash = $1`, [h]);
          for (const tag of entryTags(value))
            await c.query(`INSERT INTO ${this.tags} (tag, key_hash) VALUES ($1, $2) ON CONFLICT DO NOTHING`, [tag, h]);
        }
        await c.query("COMMIT");
      } catch (err) {
        await c.query("ROLLBACK").catch(() => {});
        throw err;
      }
      return all;
    });
    if (++this.writes % SWEEP_EVERY === 0) {
      await this.run((c) =>
        c.query(
          `DELETE FROM ${e} WHERE key_hash IN (SELECT key_hash FROM ${e} WHERE expires_at IS NOT NULL AND expires_at <= $1 LIMIT $2)`,
          [Date.now(), SWEEP_ROWS],
        ),
      );
    }
    return stored;
  }

  private async deleteHashes(hashes: string[]): Promise<number> {
    let deleted = 0;
    for (let at = 0; at < hashes.length; at += 500) {
      const chunk = hashes.slice(at, at + 500);
      deleted += await this.run(async (c) => {
        await c.query("BEGIN");
        try {
          const n =
            (await c.query(`DELETE FROM ${this.entries} WHERE key_hash = ANY($1::bigint[])`, [chunk])).rowCount ?? 0;
          await c.query(`DELETE FROM ${this.tags} WHERE key_hash = ANY($1::bigint[])`, [chunk]);
          await c.query("COMMIT");
          return n;
        } catch (err) {
          await c.query("ROLLBACK").catch(() => {});
          throw err;
        }
      });
    }
    return deleted;
  }

  private check(key: string, value: Uint8Array): void {
    if (value.length > MAX_VALUE) throw new TooLarge(this.backend, key, value.length, MAX_VALUE);
  }

  // ------------------------------------------------------------------------------------------------ Store

  maxValueBytes(): number {
    return MAX_VALUE;
  }

  serverErrors(): Array<[string, number]> {
    return [[this.server, this.health.errors]];
  }

  async get(key: string): Promise<Uint8Array | undefined> {
    return (await this.getStored([this.key(key)]))[0];
  }

  async getMany(keys: readonly string[]): Promise<Array<Uint8Array | undefined>> {
    return keys.length > 0 ? this.getStored(keys.map((k) => this.key(k))) : [];
  }

  async set(key: string, value: Uint8Array, ttlMs?: number): Promise<void> {
    await this.setMany([[key, value]], ttlMs);
  }

  async setMany(items: ReadonlyArray<readonly [string, Uint8Array]>, ttlMs?: number): Promise<void> {
    const batch = items.map(([k, v]): [string, Uint8Array] => [this.key(k), v]);
    for (const [k, v] of items) this.check(k, v);
    if (batch.length > 0) await this.write(batch, ttlMs, false);
  }

  async add(key: string, value: Uint8Array, ttlMs?: number): Promise<boolean> {
    const stored = this.key(key);
    this.check(key, value);
    return this.write([[stored, value]], ttlMs, true);
  }

  async incr(key: string, delta: number | bigint, ttlMs?: number, create = true): Promise<Counter | undefined> {
    const stored = this.key(key);
    checkTtl(ttlMs);
    const h = keyHash(stored);
    const d = BigInt(delta);
    for (let attempt = 0; attempt < 100; attempt++) {
      const row = await this.run(
        async (c) =>
          (await c.query(`SELECT value, expires_at FROM ${this.entries} WHERE key_hash = $1 AND key = $2`, [h, stored]))
            .rows[0] as { value: Buffer; expires_at: string | null } | undefined,
      );
      const now = Date.now();
      const live =
        row !== undefined && (row.expires_at === null || Number(row.expires_at) > now)
          ? new Uint8Array(row.value)
          : undefined;
      if (live === undefined) {
        if (!create) return undefined;
        const n = saturate(d);
        if (await this.write([[stored, utf8(n.toString())]], ttlMs, true)) return counterValue(n);
        continue;
      }
      const old = parseCounter(live);
      if (old === undefined) throw new NotACounter(this.backend, key);
      const n = saturate(old + d);
      const text = utf8(n.toString());
      const updated = await this.run(
        async (c) =>
          (
            await c.query(`UPDATE ${this.entries} SET value = $1, byte_size = $2 WHERE key_hash = $3 AND value = $4`, [
              Buffer.from(text),
              utf8(stored).length + text.length,
              h,
              Buffer.from(live),
            ])
          ).rowCount,
      );
      if (updated === 1) return counterValue(n);
    }
    throw new ServerError(
      this.backend,
      `counter ${JSON.stringify(key)} kept changing under 100 attempts to update it`,
      this.server,
    );
  }

  async deleteIf(key: string, expected: Uint8Array): Promise<boolean> {
    const stored = this.key(key);
    const n = await this.run(
      async (c) =>
        (
          await c.query(`DELETE FROM ${this.entries} WHERE key_hash = $1 AND key = $2 AND value = $3`, [
            keyHash(stored),
            stored,
            Buffer.from(expected),
          ])
        ).rowCount,
    );
    return n === 1;
  }

  async delete(key: string): Promise<boolean> {
    return (await this.deleteMany([key])) === 1;
  }

  async deleteMany(keys: readonly string[]): Promise<number> {
    const stored = keys.map((k) => this.key(k));
    const live = await this.getStored(stored);
    return this.deleteHashes(stored.filter((_, i) => live[i] !== undefined).map(keyHash));
  }

  async clear(): Promise<void> {
    if (this.prefix) {
      await this.purgePrefix("");
      return;
    }
    await this.run(async (c) => {
      await c.query("BEGIN");
      await c.query(`DELETE FROM ${this.entries}`);
      await c.query(`DELETE FROM ${this.tags}`);
      await c.query("COMMIT");
    });
  }

  async purgePrefix(prefix: string): Promise<number> {
    checkPrefix(this.backend, prefix);
    const stored = this.prefix ? storedKey(this.prefix, prefix) : prefix;
    const length = [...stored].length;
    const hashes = await this.run(async (c) =>
      (
        (await c.query(`SELECT key_hash FROM ${this.entries} WHERE substr(key, 1, ${length}) = $1`, [stored]))
          .rows as Array<{ key_hash: string }>
      ).map((r) => r.key_hash),
    );
    return this.deleteHashes(hashes);
  }

  async purgeTag(tag: string): Promise<number> {
    const hashes = await this.run(async (c) =>
      (
        (await c.query(`SELECT key_hash FROM ${this.tags} WHERE tag = $1`, [tag])).rows as Array<{ key_hash: string }>
      ).map((r) => r.key_hash),
    );
    const deleted = await this.deleteHashes(hashes);
    await this.run((c) => c.query(`DELETE FROM ${this.tags} WHERE tag = $1`, [tag]));
    return deleted;
  }

  async stats(): Promise<StoreStats> {
    const row = await this.run(
      async (c) =>
        (
          await c.query(
            `SELECT CAST(COUNT(*) AS BIGINT) AS n, CAST(COALESCE(SUM(byte_size), 0) AS BIGINT) AS b FROM ${this.entries}`,
          )
        ).rows[0] as { n: string; b: string },
    );
    return { ...emptyStats(), entries: Number(row.n), bytes: Number(row.b) };
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}
