// `postgres://user@host:5432/db` (spec/STORES.md §6): the SQL store of sql.ts over node-postgres (`pg`, pure
// JavaScript) with a pool of `pool` connections. Bounds: `statement_timeout` and the driver's query_timeout are the
// store's `timeout`, connecting is bounded by `connect_timeout`; a server that fails `failures` times in a row is
// refused for `retry_after` (§1).

import pg from "pg";
import { type FailurePolicy, Health } from "./base.js";
import { ServerError, StoreError, StoreTimeout } from "./errors.js";
import { type SqlParam, type SqlSession, SqlStore, tableProblem } from "./sql.js";
import type { StoreUrl } from "./url.js";

export { keyHash, SCHEMA_VERSION } from "./sql.js";

export interface PostgresOptions {
  prefix?: string;
  table?: string;
  timeoutMs?: number;
  connectTimeoutMs?: number;
  pool?: number;
  failures?: number;
  retryAfterMs?: number;
}

export class PostgresStore extends SqlStore {
  readonly backend = "postgres";
  readonly server: string;
  protected readonly location: string;
  readonly health = new Health();
  private readonly timeoutMs: number;
  private readonly policy: FailurePolicy;
  private readonly pool: pg.Pool;
  private schemaReady: Promise<void> | undefined;

  constructor(config: pg.PoolConfig, server: string, o: PostgresOptions = {}) {
    super(
      {
        text: 'TEXT COLLATE "C"',
        blob: "BYTEA",
        begin: "BEGIN",
        // Serialises table creation between processes opening one database at once.
        schemaLock: "SELECT pg_advisory_xact_lock(4242424242)",
      },
      o,
    );
    this.server = server;
    this.location = server;
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
    const problem = tableProblem(o.table as string);
    if (problem !== undefined) throw url.error(`table: ${problem}`);
    const port = h.port ?? 5432;
    return new PostgresStore(
      { host: h.host, port, user: url.username, password: url.password, database },
      `${h.host}:${port}`,
      o,
    );
  }

  // -------------------------------------------------------------------------------------------- plumbing

  /** Runs `work` on a pooled connection within the store's bounds, counting the server's health. */
  protected async withSession<T>(work: (s: SqlSession) => Promise<T>): Promise<T> {
    if (!this.health.admits(Date.now())) {
      this.health.errors++;
      throw new ServerError(this.backend, "ejected after failures; retrying after retry_after", this.server);
    }
    let client: pg.PoolClient | undefined;
    try {
      client = await this.pool.connect();
      if (this.schemaReady === undefined) {
        this.schemaReady = this.createSchema(session(client));
        this.schemaReady.catch(() => {
          this.schemaReady = undefined;
        });
      }
      await this.schemaReady;
      const result = await work(session(client));
      this.health.record(true, this.policy, Date.now());
      client.release();
      return result;
    } catch (e) {
      client?.release(e instanceof StoreError ? undefined : true);
      if (e instanceof StoreError) throw e;
      const error = e as Error & { code?: string };
      // An error answer (a constraint, a type) is the query's, not the server's: the server answered (a probe on
      // probation included); anything else is a failure.
      if (typeof error.code === "string" && /^[0-9A-Z]{5}$/.test(error.code) && error.code !== "57014") {
        this.health.record(true, this.policy, Date.now());
        throw new ServerError(this.backend, error.message, this.server);
      }
      this.health.record(false, this.policy, Date.now());
      if (error.code === "57014" || /timeout/i.test(error.message))
        throw new StoreTimeout(this.backend, this.server, this.timeoutMs);
      throw new ServerError(this.backend, error.message, this.server);
    }
  }

  serverErrors(): Array<[string, number]> {
    return [[this.server, this.health.errors]];
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}

function session(client: pg.PoolClient): SqlSession {
  return {
    all: async (text: string, params: readonly SqlParam[] = []) =>
      (await client.query({ text, values: params as unknown[], rowMode: "array" })).rows,
    run: async (text: string, params: readonly SqlParam[] = []) =>
      (await client.query(text, params as unknown[])).rowCount ?? 0,
  };
}
