// `sqlite:///path/cache.db` (spec/STORES.md §6): the table, tag index and statements every language runs on one
// SQLite file, through the system libsqlite3 called by koffi (ffi.ts; loaded when the store is first used).
//
// Staying off the event loop: SQLite's own busy handler sleeps in the calling thread, which here is Node's only
// one, so the connection keeps SQLite's busy timeout at 0 and does the waiting itself. Each operation is one
// synchronous burst of calls (no other JavaScript runs on the connection in between, so it needs no queue); when
// another process holds the write lock the burst fails with SQLITE_BUSY, is rolled back, and is retried after an
// asynchronous pause (those of SQLite's own busy handler: 1 ms growing to 100 ms) for at most BUSY_WAIT_MS, the
// 5 s busy timeout of the other languages, then fails with a timeout. Writes take the lock up front (BEGIN IMMEDIATE), so a retried burst has
// changed nothing. WAL mode as the spec says, with synchronous=NORMAL (a cache survives an application crash,
// and a commit does not wait for fsync on the event loop).

import { createHash } from "node:crypto";
import { utf8, utf8OrUndefined } from "../bytes.js";
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
  parseCounter,
  type Store,
  type StoreStats,
  saturate,
} from "./base.js";
import { NotACounter, ServerError, StoreError, StoreTimeout, TooLarge } from "./errors.js";
import { type Handle, loadSqlite, type Sqlite } from "./ffi.js";
import type { StoreUrl } from "./url.js";

export const SCHEMA_VERSION = 1;
/** How long an operation waits for another process's write lock (the other languages' busy timeout). */
export const BUSY_WAIT_MS = 5_000;
/** The pauses of SQLite's own busy handler (sqliteDefaultBusyCallback), which the other languages' connections
 * use: a waiter here is neither greedier nor more patient than theirs. */
const BUSY_PAUSES_MS = [1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, 100];
const SWEEP_EVERY = 100;
const SWEEP_ROWS = 1000;
const MAX_VALUE = 512 << 20;
const CACHED_STATEMENTS = 64;
const CHUNK = 500;

const OK = 0;
const BUSY = 5;
const LOCKED = 6;
const ROW = 100;
const DONE = 101;
const OPEN_READWRITE = 0x2;
const OPEN_CREATE = 0x4;
const TRANSIENT = -1;
const INTEGER = 1;
const FLOAT = 2;
const NULL = 5;

/** First 8 bytes of SHA-256(key) as a big-endian signed integer (Solid Cache's key hash). */
export function keyHash(key: string): bigint {
  return createHash("sha256").update(key, "utf8").digest().readBigInt64BE(0);
}

/** A value read from a row: TEXT and BLOB both come back as their bytes. */
type Cell = null | number | bigint | Uint8Array;
type Param = null | number | bigint | string | Uint8Array;

/** Another connection holds the lock: the burst is rolled back and retried. */
class Busy extends Error {}

const ONE_BYTE = new Uint8Array(1);

/** One SQLite connection with its prepared statements (the most recent CACHED_STATEMENTS kept). */
class Connection {
  private readonly statements = new Map<string, Handle>();

  private constructor(
    private readonly lib: Sqlite,
    private readonly db: Handle,
    private readonly backend: string,
    private readonly server: string,
  ) {}

  static open(lib: Sqlite, path: string, backend: string): Connection {
    const out: [Handle] = [null];
    const rc = lib.open(path, out, OPEN_READWRITE | OPEN_CREATE, null);
    if (rc !== OK) {
      const message = out[0] === null ? `error ${rc}` : lib.errmsg(out[0]);
      if (out[0] !== null) lib.close(out[0]);
      throw new ServerError(backend, `cannot open the database: ${message}`, path);
    }
    return new Connection(lib, out[0], backend, path);
  }

  private failure(rc: number): Error {
    const primary = rc & 0xff;
    if (primary === BUSY || primary === LOCKED) return new Busy();
    return new ServerError(this.backend, `${this.lib.errmsg(this.db)} (SQLite error ${rc})`, this.server);
  }

  private statement(sql: string): Handle {
    const cached = this.statements.get(sql);
    if (cached !== undefined) {
      this.statements.delete(sql); // re-inserted below: the map's order is the order of use
      this.statements.set(sql, cached);
      return cached;
    }
    const out: [Handle] = [null];
    const rc = this.lib.prepare(this.db, sql, -1, out, null);
    if (rc !== OK) throw this.failure(this.lib.extendedErrcode(this.db));
    this.statements.set(sql, out[0]);
    if (this.statements.size > CACHED_STATEMENTS) {
      const [oldest, handle] = this.statements.entries().next().value as [string, Handle];
      this.statements.delete(oldest);
      this.lib.finalize(handle);
    }
    return out[0];
  }

  private bind(stmt: Handle, params: readonly Param[]): void {
    const lib = this.lib;
    params.forEach((p, i) => {
      let rc: number;
      if (p === null) rc = lib.bindNull(stmt, i + 1);
      else if (typeof p === "bigint") rc = lib.bindInt64(stmt, i + 1, p);
      else if (typeof p === "number")
        rc = Number.isInteger(p) ? lib.bindInt64(stmt, i + 1, p) : lib.bindDouble(stmt, i + 1, p);
      else if (typeof p === "string") {
        const b = utf8(p);
        // An empty buffer would reach SQLite as a null pointer, which binds NULL, not ''.
        rc = lib.bindText(stmt, i + 1, b.length > 0 ? b : ONE_BYTE, b.length, TRANSIENT);
      } else rc = lib.bindBlob(stmt, i + 1, p.length > 0 ? p : ONE_BYTE, p.length, TRANSIENT);
      if (rc !== OK) throw this.failure(rc);
    });
  }

  /** Runs one statement to its end; the rows it gave. */
  all(sql: string, params: readonly Param[] = []): Cell[][] {
    const lib = this.lib;
    const stmt = this.statement(sql);
    try {
      this.bind(stmt, params);
      const rows: Cell[][] = [];
      for (;;) {
        const rc = lib.step(stmt);
        if (rc === DONE) return rows;
        if (rc !== ROW) throw this.failure(lib.extendedErrcode(this.db));
        const row: Cell[] = [];
        const n = lib.columnCount(stmt);
        for (let c = 0; c < n; c++) {
          const type = lib.columnType(stmt, c);
          if (type === NULL) row.push(null);
          else if (type === INTEGER) row.push(lib.columnInt64(stmt, c));
          else if (type === FLOAT) row.push(lib.columnDouble(stmt, c));
          else {
            const length = lib.columnBytes(stmt, c);
            // The file may have been written by anyone: nothing longer than the store writes is copied out.
            if (length > MAX_VALUE + 0xffff)
              throw new ServerError(this.backend, `a column of ${length} bytes exceeds the store's bound`, this.server);
            const pointer = lib.columnBlob(stmt, c);
            row.push(pointer === null || length === 0 ? new Uint8Array() : lib.copy(pointer, length));
          }
        }
        rows.push(row);
      }
    } finally {
      lib.reset(stmt);
      lib.clearBindings(stmt);
    }
  }

  /** Runs one statement; how many rows it changed. */
  run(sql: string, params: readonly Param[] = []): number {
    this.all(sql, params);
    return this.lib.changes(this.db);
  }

  /** `work` inside BEGIN IMMEDIATE … COMMIT, rolled back if anything fails. */
  transaction<T>(work: () => T): T {
    this.run("BEGIN IMMEDIATE");
    try {
      const result = work();
      this.run("COMMIT");
      return result;
    } catch (e) {
      if (this.lib.getAutocommit(this.db) === 0) {
        try {
          this.run("ROLLBACK");
        } catch {
          // the connection reports the first error
        }
      }
      throw e;
    }
  }

  close(): void {
    for (const handle of this.statements.values()) this.lib.finalize(handle);
    this.statements.clear();
    this.lib.close(this.db);
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function text(cell: Cell | undefined): string | undefined {
  return cell instanceof Uint8Array ? utf8OrUndefined(cell) : undefined;
}

function ms(cell: Cell | undefined): number | null {
  return isHash(cell) ? Number(cell) : null;
}

function isHash(cell: Cell | undefined): cell is number | bigint {
  return typeof cell === "number" || typeof cell === "bigint";
}

export interface SqliteOptions {
  prefix?: string;
  table?: string;
}

export class SqliteStore implements Store {
  readonly backend = "sqlite";
  readonly path: string;
  readonly prefix: string;
  private readonly entries: string;
  private readonly tags: string;
  private readonly schema: string;
  private ready: Promise<Connection> | undefined;
  private closed = false;
  private writes = 0;

  constructor(path: string, o: SqliteOptions = {}) {
    this.path = path;
    this.prefix = o.prefix ?? "";
    const table = o.table ?? "larder_entries";
    if (!/^[a-z_][a-z0-9_]{0,50}$/.test(table))
      throw new RangeError(`table ${JSON.stringify(table)}: lowercase letters, digits and _`);
    this.entries = table;
    this.tags = `${table}_tags`;
    this.schema = `${table}_schema`;
  }

  static fromUrl(url: StoreUrl): SqliteStore {
    url.noHosts();
    const prefix = url.take("prefix") ?? "";
    const table = url.take("table") ?? "larder_entries";
    url.finish();
    if (url.path.length < 2) throw url.error("sqlite:// needs a file: sqlite:///var/lib/larder/cache.db");
    if (!/^[a-z_][a-z0-9_]{0,50}$/.test(table)) throw url.error("table: lowercase letters, digits and _, at most 51");
    try {
      checkPrefix("sqlite", prefix);
    } catch (e) {
      throw url.error(`option prefix: ${(e as Error).message}`);
    }
    return new SqliteStore(url.path, { prefix, table });
  }

  // -------------------------------------------------------------------------------------------- plumbing

  /** Runs the synchronous `work` again while another process holds the lock, for at most BUSY_WAIT_MS. */
  private async retrying<T>(work: () => T): Promise<T> {
    const deadline = Date.now() + BUSY_WAIT_MS;
    let attempt = 0;
    for (;;) {
      try {
        return work();
      } catch (e) {
        if (!(e instanceof Busy)) throw e;
      }
      if (Date.now() >= deadline) throw new StoreTimeout(this.backend, this.path, BUSY_WAIT_MS);
      await sleep(BUSY_PAUSES_MS[Math.min(attempt++, BUSY_PAUSES_MS.length - 1)] as number);
    }
  }

  private async open(): Promise<Connection> {
    const lib = await loadSqlite(this.backend);
    const c = Connection.open(lib, this.path, this.backend);
    try {
      await this.retrying(() => c.all("PRAGMA journal_mode=WAL"));
      c.run("PRAGMA synchronous=NORMAL");
      await this.retrying(() => c.transaction(() => this.createSchema(c)));
    } catch (e) {
      c.close();
      throw e;
    }
    return c;
  }

  private createSchema(c: Connection): void {
    const e = this.entries;
    const t = this.tags;
    for (const statement of [
      `CREATE TABLE IF NOT EXISTS ${e} (key_hash BIGINT PRIMARY KEY, key TEXT NOT NULL, value BLOB NOT NULL, byte_size INTEGER NOT NULL, created_at BIGINT NOT NULL, expires_at BIGINT)`,
      `CREATE INDEX IF NOT EXISTS ${e}_key ON ${e} (key)`,
      `CREATE INDEX IF NOT EXISTS ${e}_expires_at ON ${e} (expires_at)`,
      `CREATE TABLE IF NOT EXISTS ${t} (tag TEXT NOT NULL, key_hash BIGINT NOT NULL, PRIMARY KEY (tag, key_hash))`,
      `CREATE INDEX IF NOT EXISTS ${t}_key_hash ON ${t} (key_hash)`,
      `CREATE TABLE IF NOT EXISTS ${this.schema} (version INTEGER NOT NULL)`,
    ])
      c.run(statement);
    const version = ms(c.all(`SELECT CAST(MAX(version) AS BIGINT) FROM ${this.schema}`)[0]?.[0]);
    if (version === null) c.run(`INSERT INTO ${this.schema} (version) VALUES (?)`, [SCHEMA_VERSION]);
    else if (version > SCHEMA_VERSION)
      throw new StoreError(
        "server",
        this.backend,
        `the database's larder schema is version ${version}, newer than this larder's ${SCHEMA_VERSION}`,
        this.path,
      );
  }

  /** Runs `work` (synchronous: one burst of SQLite calls) on the connection, opening it first. */
  private async run<T>(work: (c: Connection) => T): Promise<T> {
    if (this.closed) throw new ServerError(this.backend, "the store is closed", this.path);
    if (this.ready === undefined) {
      this.ready = this.open();
      this.ready.catch(() => {
        this.ready = undefined;
      });
    }
    const c = await this.ready;
    return this.retrying(() => work(c));
  }

  private key(key: string): string {
    return storedKey(this.prefix, checkKey(this.backend, key));
  }

  private async getStored(stored: string[]): Promise<Array<Uint8Array | undefined>> {
    const values: Array<Uint8Array | undefined> = [];
    for (let at = 0; at < stored.length; at += CHUNK) {
      const chunk = stored.slice(at, at + CHUNK);
      const marks = chunk.map(() => "?").join(",");
      const rows = await this.run((c) =>
        c.all(`SELECT key, value, expires_at FROM ${this.entries} WHERE key_hash IN (${marks})`, chunk.map(keyHash)),
      );
      const now = Date.now();
      const found = new Map<string, Uint8Array>();
      for (const [key, value, expires] of rows) {
        const k = text(key);
        const at = ms(expires);
        if (k !== undefined && value instanceof Uint8Array && (at === null || at > now)) found.set(k, value);
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
    let upsert = `INSERT INTO ${e} (key_hash, key, value, byte_size, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (key_hash) DO UPDATE SET key = excluded.key, value = excluded.value, byte_size = excluded.byte_size, created_at = excluded.created_at, expires_at = excluded.expires_at`;
    if (onlyIfAbsent) upsert += ` WHERE ${e}.expires_at IS NOT NULL AND ${e}.expires_at <= ?`;
    const stored = await this.run((c) =>
      c.transaction(() => {
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
            c.run(`DELETE FROM ${e} WHERE key_hash = ?`, [h]);
            c.run(`DELETE FROM ${this.tags} WHERE key_hash = ?`, [h]);
            continue;
          }
          const params: Param[] = [h, key, value, utf8(key).length + value.length, now, expiry ?? null];
          if (onlyIfAbsent) params.push(now);
          const written = c.run(upsert, params) === 1;
          all &&= written;
          if (!written) continue;
          c.run(`DELETE FROM ${this.tags} WHERE key_hash = ?`, [h]);
          for (const tag of entryTags(value))
            c.run(`INSERT INTO ${this.tags} (tag, key_hash) VALUES (?, ?) ON CONFLICT DO NOTHING`, [tag, h]);
        }
        return all;
      }),
    );
    if (++this.writes % SWEEP_EVERY === 0) {
      await this.run((c) =>
        c.run(
          `DELETE FROM ${e} WHERE key_hash IN (SELECT key_hash FROM ${e} WHERE expires_at IS NOT NULL AND expires_at <= ? LIMIT ?)`,
          [Date.now(), SWEEP_ROWS],
        ),
      );
    }
    return stored;
  }

  private async deleteHashes(hashes: Array<number | bigint>): Promise<number> {
    let deleted = 0;
    for (let at = 0; at < hashes.length; at += CHUNK) {
      const chunk = hashes.slice(at, at + CHUNK);
      const marks = chunk.map(() => "?").join(",");
      deleted += await this.run((c) =>
        c.transaction(() => {
          const n = c.run(`DELETE FROM ${this.entries} WHERE key_hash IN (${marks})`, chunk);
          c.run(`DELETE FROM ${this.tags} WHERE key_hash IN (${marks})`, chunk);
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

  async incr(key: string, delta: number | bigint, ttlMs?: number, create = true): Promise<Counter | undefined> {
    const stored = this.key(key);
    checkTtl(ttlMs);
    const h = keyHash(stored);
    const d = BigInt(delta);
    for (let attempt = 0; attempt < 100; attempt++) {
      const row = (
        await this.run((c) =>
          c.all(`SELECT value, expires_at FROM ${this.entries} WHERE key_hash = ? AND key = ?`, [h, stored]),
        )
      )[0];
      const expires = ms(row?.[1]);
      const live =
        row !== undefined && row[0] instanceof Uint8Array && (expires === null || expires > Date.now())
          ? row[0]
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
      const updated = await this.run((c) =>
        c.run(`UPDATE ${this.entries} SET value = ?, byte_size = ? WHERE key_hash = ? AND value = ?`, [
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
      this.path,
    );
  }

  async deleteIf(key: string, expected: Uint8Array): Promise<boolean> {
    const stored = this.key(key);
    const n = await this.run((c) =>
      c.run(`DELETE FROM ${this.entries} WHERE key_hash = ? AND key = ? AND value = ?`, [
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
    await this.run((c) =>
      c.transaction(() => {
        c.run(`DELETE FROM ${this.entries}`);
        c.run(`DELETE FROM ${this.tags}`);
      }),
    );
  }

  async purgePrefix(prefix: string): Promise<number> {
    checkPrefix(this.backend, prefix);
    const stored = this.prefix ? storedKey(this.prefix, prefix) : prefix;
    const length = [...stored].length;
    const rows = await this.run((c) =>
      c.all(`SELECT key_hash FROM ${this.entries} WHERE substr(key, 1, ${length}) = ?`, [stored]),
    );
    return this.deleteHashes(rows.map((r) => r[0]).filter(isHash));
  }

  async purgeTag(tag: string): Promise<number> {
    const rows = await this.run((c) => c.all(`SELECT key_hash FROM ${this.tags} WHERE tag = ?`, [tag]));
    const deleted = await this.deleteHashes(rows.map((r) => r[0]).filter(isHash));
    await this.run((c) => c.run(`DELETE FROM ${this.tags} WHERE tag = ?`, [tag]));
    return deleted;
  }

  async stats(): Promise<StoreStats> {
    const row = (
      await this.run((c) =>
        c.all(`SELECT CAST(COUNT(*) AS BIGINT), CAST(COALESCE(SUM(byte_size), 0) AS BIGINT) FROM ${this.entries}`),
      )
    )[0];
    return { ...emptyStats(), entries: ms(row?.[0]) ?? 0, bytes: ms(row?.[1]) ?? 0 };
  }

  async close(): Promise<void> {
    this.closed = true;
    const ready = this.ready;
    this.ready = undefined;
    if (ready !== undefined) (await ready.catch(() => undefined))?.close();
  }
}
