// The SQL stores' shared part (spec/STORES.md §6): one table after Rails' Solid Cache, one tag index, a schema
// version, and every operation on them, written once for both databases as the spec's statements. PostgreSQL
// (postgres.ts, over pg) and SQLite (sqlite.ts, the system libsqlite3 through koffi) only give a session on one
// connection, their column types and their own bounds. Placeholders are `$1, $2, …` in order of appearance, which
// both databases read the same way.

import { createHash } from "node:crypto";
import { utf8 } from "../bytes.js";
import { storedKey } from "../keys.js";
import {
  type Counter,
  checkKey,
  checkPrefix,
  checkTag,
  checkTtl,
  counterValue,
  emptyStats,
  entryTags,
  expiresAtMs,
  parseCounter,
  type Store,
  type StoreStats,
  saturate,
} from "./base.js";
import { NotACounter, ServerError, StoreError, TooLarge } from "./errors.js";

export const SCHEMA_VERSION = 1;
const SWEEP_EVERY = 100;
const SWEEP_ROWS = 1000;
export const MAX_VALUE = 512 << 20;
/** Keys per statement of a multi-key read or delete. */
const CHUNK = 500;

export type SqlParam = null | number | bigint | string | Uint8Array;
/** A cell as the drivers give it: integers as number, bigint or decimal text (pg's BIGINT), text as string, bytes
 * as Uint8Array (a Buffer from pg). */
export type SqlCell = null | number | bigint | string | Uint8Array;

/** Statements on one connection, for the duration of one `withSession`. */
export interface SqlSession {
  all(sql: string, params?: readonly SqlParam[]): Promise<SqlCell[][]>;
  /** How many rows the statement changed. */
  run(sql: string, params?: readonly SqlParam[]): Promise<number>;
}

/** What differs between the databases in the statements. */
export interface SqlDialect {
  text: string;
  blob: string;
  begin: string;
  /** A statement run first in the schema's transaction so that processes opening one database at once take turns. */
  schemaLock?: string;
}

/** First 8 bytes of SHA-256(stored key) as a big-endian signed integer (Solid Cache's key hash). */
export function keyHash(key: string): bigint {
  return createHash("sha256").update(key, "utf8").digest().readBigInt64BE(0);
}

export function tableProblem(table: string): string | undefined {
  return /^[a-z_][a-z0-9_]{0,50}$/.test(table) ? undefined : "lowercase letters, digits and _, at most 51";
}

function number(cell: SqlCell | undefined): number | null {
  if (typeof cell === "number") return cell;
  if (typeof cell === "bigint" || (typeof cell === "string" && /^-?[0-9]+$/.test(cell))) return Number(cell);
  return null;
}

function isHash(cell: SqlCell | undefined): cell is number | bigint | string {
  return number(cell ?? null) !== null;
}

export interface SqlOptions {
  prefix?: string;
  table?: string;
}

export abstract class SqlStore implements Store {
  abstract readonly backend: string;
  readonly prefix: string;
  protected readonly entries: string;
  protected readonly tags: string;
  protected readonly schema: string;
  private writes = 0;

  constructor(
    private readonly dialect: SqlDialect,
    o: SqlOptions,
  ) {
    this.prefix = o.prefix ?? "";
    const table = o.table ?? "larder_entries";
    const problem = tableProblem(table);
    if (problem !== undefined) throw new RangeError(`table ${JSON.stringify(table)}: ${problem}`);
    this.entries = table;
    this.tags = `${table}_tags`;
    this.schema = `${table}_schema`;
  }

  /** Where errors say the database is (host:port, or the file). */
  protected abstract readonly location: string;

  /** Runs `work` on one connection within the database's bounds (the schema made first), mapping its errors to
   * the store's. */
  protected abstract withSession<T>(work: (s: SqlSession) => Promise<T>): Promise<T>;

  /** `work` in one transaction, rolled back if anything in it fails. */
  protected async transaction<T>(s: SqlSession, work: () => Promise<T>): Promise<T> {
    await s.run(this.dialect.begin);
    try {
      const result = await work();
      await s.run("COMMIT");
      return result;
    } catch (e) {
      await s.run("ROLLBACK").catch(() => {}); // the first error is the one to report
      throw e;
    }
  }

  /** Creates the tables when missing; refuses a database of a newer schema than this code knows. */
  protected async createSchema(s: SqlSession): Promise<void> {
    const { text, blob, schemaLock } = this.dialect;
    const e = this.entries;
    const t = this.tags;
    await this.transaction(s, async () => {
      if (schemaLock !== undefined) await s.all(schemaLock);
      for (const statement of [
        `CREATE TABLE IF NOT EXISTS ${e} (key_hash BIGINT PRIMARY KEY, key ${text} NOT NULL, value ${blob} NOT NULL, byte_size INTEGER NOT NULL, created_at BIGINT NOT NULL, expires_at BIGINT)`,
        `CREATE INDEX IF NOT EXISTS ${e}_key ON ${e} (key)`,
        `CREATE INDEX IF NOT EXISTS ${e}_expires_at ON ${e} (expires_at)`,
        `CREATE TABLE IF NOT EXISTS ${t} (tag ${text} NOT NULL, key_hash BIGINT NOT NULL, PRIMARY KEY (tag, key_hash))`,
        `CREATE INDEX IF NOT EXISTS ${t}_key_hash ON ${t} (key_hash)`,
        `CREATE TABLE IF NOT EXISTS ${this.schema} (version INTEGER NOT NULL)`,
      ])
        await s.run(statement);
      const version = number((await s.all(`SELECT CAST(MAX(version) AS BIGINT) FROM ${this.schema}`))[0]?.[0]);
      if (version === null) await s.run(`INSERT INTO ${this.schema} (version) VALUES ($1)`, [SCHEMA_VERSION]);
      else if (version > SCHEMA_VERSION)
        throw new StoreError(
          "server",
          this.backend,
          `the database's larder schema is version ${version}, newer than this larder's ${SCHEMA_VERSION}`,
          this.location,
        );
    });
  }

  private key(key: string): string {
    return storedKey(this.prefix, checkKey(this.backend, key));
  }

  private async getStored(stored: string[]): Promise<Array<Uint8Array | undefined>> {
    const values: Array<Uint8Array | undefined> = [];
    for (let at = 0; at < stored.length; at += CHUNK) {
      const chunk = stored.slice(at, at + CHUNK);
      const marks = chunk.map((_, i) => `$${i + 1}`).join(", ");
      const rows = await this.withSession((s) =>
        s.all(`SELECT key, value, expires_at FROM ${this.entries} WHERE key_hash IN (${marks})`, chunk.map(keyHash)),
      );
      const now = Date.now();
      const found = new Map<string, Uint8Array>();
      for (const [key, value, expires] of rows) {
        const at = number(expires);
        if (typeof key === "string" && value instanceof Uint8Array && (at === null || at > now))
          // pg's Buffers may share a pooled slab: a copy of their own; SQLite's arrays are copies already.
          found.set(key, Buffer.isBuffer(value) ? new Uint8Array(value) : value);
      }
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
    const e = this.entries;
    let upsert = `INSERT INTO ${e} (key_hash, key, value, byte_size, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (key_hash) DO UPDATE SET key = excluded.key, value = excluded.value, byte_size = excluded.byte_size, created_at = excluded.created_at, expires_at = excluded.expires_at`;
    if (onlyIfAbsent) upsert += ` WHERE ${e}.expires_at IS NOT NULL AND ${e}.expires_at <= $7`;
    const stored = await this.withSession((s) =>
      this.transaction(s, async () => {
        const now = Date.now();
        let all = true;
        for (const [key, value] of items) {
          const h = keyHash(key);
          const expiry = expiresAtMs(value, ttlMs, now);
          if (expiry !== undefined && expiry <= now) {
            if (onlyIfAbsent) {
              all = false;
              continue;
            }
            await s.run(`DELETE FROM ${e} WHERE key_hash = $1`, [h]);
            await s.run(`DELETE FROM ${this.tags} WHERE key_hash = $1`, [h]);
            continue;
          }
          const params: SqlParam[] = [h, key, value, utf8(key).length + value.length, now, expiry ?? null];
          if (onlyIfAbsent) params.push(now);
          const written = (await s.run(upsert, params)) === 1;
          all &&= written;
          if (!written) continue;
          await s.run(`DELETE FROM ${this.tags} WHERE key_hash = $1`, [h]);
          for (const tag of entryTags(value))
            await s.run(`INSERT INTO ${this.tags} (tag, key_hash) VALUES ($1, $2) ON CONFLICT DO NOTHING`, [tag, h]);
        }
        return all;
      }),
    );
    if (++this.writes % SWEEP_EVERY === 0) {
      await this.withSession((s) =>
        s.run(
          `DELETE FROM ${e} WHERE key_hash IN (SELECT key_hash FROM ${e} WHERE expires_at IS NOT NULL AND expires_at <= $1 LIMIT $2)`,
          [Date.now(), SWEEP_ROWS],
        ),
      );
    }
    return stored;
  }

  private async deleteHashes(hashes: Array<number | bigint | string>): Promise<number> {
    let deleted = 0;
    for (let at = 0; at < hashes.length; at += CHUNK) {
      const chunk = hashes.slice(at, at + CHUNK);
      const marks = chunk.map((_, i) => `$${i + 1}`).join(", ");
      deleted += await this.withSession((s) =>
        this.transaction(s, async () => {
          const n = await s.run(`DELETE FROM ${this.entries} WHERE key_hash IN (${marks})`, chunk);
          await s.run(`DELETE FROM ${this.tags} WHERE key_hash IN (${marks})`, chunk);
          return n;
        }),
      );
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

  /** Optimistic (§6): read, then update only while the value is still the one read; no lock across statements. */
  async incr(key: string, delta: number | bigint, ttlMs?: number, create = true): Promise<Counter | undefined> {
    const stored = this.key(key);
    checkTtl(ttlMs);
    const h = keyHash(stored);
    const d = BigInt(delta);
    for (let attempt = 0; attempt < 100; attempt++) {
      const row = (
        await this.withSession((s) =>
          s.all(`SELECT value, expires_at FROM ${this.entries} WHERE key_hash = $1 AND key = $2`, [h, stored]),
        )
      )[0];
      const expires = number(row?.[1]);
      const live =
        row?.[0] instanceof Uint8Array && (expires === null || expires > Date.now())
          ? new Uint8Array(row[0])
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
      const next = utf8(n.toString());
      const updated = await this.withSession((s) =>
        s.run(`UPDATE ${this.entries} SET value = $1, byte_size = $2 WHERE key_hash = $3 AND value = $4`, [
          next,
          utf8(stored).length + next.length,
          h,
          live,
        ]),
      );
      if (updated === 1) return counterValue(n);
    }
    throw new ServerError(
      this.backend,
      `counter ${JSON.stringify(key)} kept changing under 100 attempts to update it`,
      this.location,
    );
  }

  async deleteIf(key: string, expected: Uint8Array): Promise<boolean> {
    const stored = this.key(key);
    const n = await this.withSession((s) =>
      s.run(`DELETE FROM ${this.entries} WHERE key_hash = $1 AND key = $2 AND value = $3`, [
        keyHash(stored),
        stored,
        expected,
      ]),
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
    await this.withSession((s) =>
      this.transaction(s, async () => {
        await s.run(`DELETE FROM ${this.entries}`);
        await s.run(`DELETE FROM ${this.tags}`);
      }),
    );
  }

  async purgePrefix(prefix: string): Promise<number> {
    checkPrefix(this.backend, prefix);
    const stored = this.prefix ? storedKey(this.prefix, prefix) : prefix;
    const length = [...stored].length;
    const rows = await this.withSession((s) =>
      s.all(`SELECT key_hash FROM ${this.entries} WHERE substr(key, 1, ${length}) = $1`, [stored]),
    );
    return this.deleteHashes(rows.map((r) => r[0]).filter(isHash));
  }

  async purgeTag(tag: string): Promise<number> {
    checkTag(this.backend, tag);
    const rows = await this.withSession((s) => s.all(`SELECT key_hash FROM ${this.tags} WHERE tag = $1`, [tag]));
    const deleted = await this.deleteHashes(rows.map((r) => r[0]).filter(isHash));
    await this.withSession((s) => s.run(`DELETE FROM ${this.tags} WHERE tag = $1`, [tag]));
    return deleted;
  }

  async stats(): Promise<StoreStats> {
    const row = (
      await this.withSession((s) =>
        s.all(`SELECT CAST(COUNT(*) AS BIGINT), CAST(COALESCE(SUM(byte_size), 0) AS BIGINT) FROM ${this.entries}`),
      )
    )[0];
    return { ...emptyStats(), entries: number(row?.[0]) ?? 0, bytes: number(row?.[1]) ?? 0 };
  }

  abstract close(): Promise<void>;
}
