// `sqlite:///path/cache.db` (spec/STORES.md §6): the SQL store of sql.ts on one SQLite file, through the system
// libsqlite3 called by koffi (ffi.ts; loaded when the store is first used).
//
// Staying off the event loop: SQLite's own busy handler sleeps in the calling thread, which here is Node's only
// one, so the connection keeps SQLite's busy timeout at 0 and does the waiting itself. Every call into SQLite
// returns at once; operations take the connection in turn (a promise queue, so no statement of one runs inside
// another's transaction), and when another process holds the write lock an operation fails with SQLITE_BUSY, is
// rolled back, and is run again after an asynchronous pause (those of SQLite's own busy handler: 1 ms growing to
// 100 ms) for at most BUSY_WAIT_MS, the 5 s busy timeout of the other languages, then fails with a timeout. Writes
// take the lock up front (BEGIN IMMEDIATE), so a retried operation has changed nothing. WAL mode as the spec says,
// with synchronous=NORMAL (a cache survives an application crash, and a commit does not wait for fsync on the
// event loop).

import { utf8, utf8OrUndefined } from "../bytes.js";
import { ServerError, StoreTimeout } from "./errors.js";
import { type Handle, loadSqlite, type Sqlite } from "./ffi.js";
import { MAX_VALUE, type SqlCell, type SqlParam, type SqlSession, SqlStore, tableProblem } from "./sql.js";
import type { StoreUrl } from "./url.js";

export { keyHash } from "./sql.js";

/** How long an operation waits for another process's write lock (the other languages' busy timeout). */
export const BUSY_WAIT_MS = 5_000;
/** The pauses of SQLite's own busy handler (sqliteDefaultBusyCallback), which the other languages' connections
 * use: a waiter here is neither greedier nor more patient than theirs. */
const BUSY_PAUSES_MS = [1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, 100];
const CACHED_STATEMENTS = 64;

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
const TEXT = 3;
const NULL = 5;

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

  private bind(stmt: Handle, params: readonly SqlParam[]): void {
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
  all(sql: string, params: readonly SqlParam[] = []): SqlCell[][] {
    const lib = this.lib;
    const stmt = this.statement(sql);
    try {
      this.bind(stmt, params);
      const rows: SqlCell[][] = [];
      for (;;) {
        const rc = lib.step(stmt);
        if (rc === DONE) return rows;
        if (rc !== ROW) throw this.failure(lib.extendedErrcode(this.db));
        const row: SqlCell[] = [];
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
            const data = pointer === null || length === 0 ? new Uint8Array() : lib.copy(pointer, length);
            // Text that is not UTF-8 (written by anyone) is no key this store looks for: null.
            row.push(type === TEXT ? (utf8OrUndefined(data) ?? null) : data);
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
  run(sql: string, params: readonly SqlParam[] = []): number {
    this.all(sql, params);
    return this.lib.changes(this.db);
  }

  close(): void {
    for (const handle of this.statements.values()) this.lib.finalize(handle);
    this.statements.clear();
    this.lib.close(this.db);
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface SqliteOptions {
  prefix?: string;
  table?: string;
}

export class SqliteStore extends SqlStore {
  readonly backend = "sqlite";
  readonly path: string;
  protected readonly location: string;
  private ready: Promise<Connection> | undefined;
  /** The tail of the queue of operations waiting for the connection. */
  private turn: Promise<unknown> = Promise.resolve();
  private closed = false;

  constructor(path: string, o: SqliteOptions = {}) {
    super({ text: "TEXT", blob: "BLOB", begin: "BEGIN IMMEDIATE" }, o);
    this.path = path;
    this.location = path;
  }

  static fromUrl(url: StoreUrl): SqliteStore {
    url.noHosts();
    const prefix = url.take("prefix") ?? "";
    const table = url.take("table") ?? "larder_entries";
    url.finish();
    if (url.path.length < 2) throw url.error("sqlite:// needs a file: sqlite:///var/lib/larder/cache.db");
    const problem = tableProblem(table);
    if (problem !== undefined) throw url.error(`table: ${problem}`);
    return new SqliteStore(url.path, { prefix, table });
  }

  /** Runs `work` again while another process holds the lock, for at most BUSY_WAIT_MS. */
  private async retrying<T>(work: () => Promise<T>): Promise<T> {
    const deadline = Date.now() + BUSY_WAIT_MS;
    let attempt = 0;
    for (;;) {
      try {
        return await work();
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
      await this.retrying(async () => c.all("PRAGMA journal_mode=WAL"));
      c.run("PRAGMA synchronous=NORMAL");
      await this.retrying(() => this.createSchema(session(c)));
    } catch (e) {
      c.close();
      throw e;
    }
    return c;
  }

  /** Runs `work` on the connection (opened first) when the operations before it are done. */
  protected async withSession<T>(work: (s: SqlSession) => Promise<T>): Promise<T> {
    if (this.closed) throw new ServerError(this.backend, "the store is closed", this.path);
    if (this.ready === undefined) {
      this.ready = this.open();
      this.ready.catch(() => {
        this.ready = undefined;
      });
    }
    const ready = this.ready;
    const mine = this.turn.then(async () => this.retrying(async () => work(session(await ready))));
    this.turn = mine.catch(() => {});
    return mine;
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.turn;
    const ready = this.ready;
    this.ready = undefined;
    if (ready !== undefined) (await ready.catch(() => undefined))?.close();
  }
}

function session(c: Connection): SqlSession {
  return {
    all: async (sql: string, params: readonly SqlParam[] = []) => c.all(sql, params),
    run: async (sql: string, params: readonly SqlParam[] = []) => c.run(sql, params),
  };
}
