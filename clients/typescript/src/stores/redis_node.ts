// One Redis server as larder's Redis stores see it: a pool of pipelined RESP connections (wire.ts, resp.ts), the
// AUTH/SELECT handshake, and the server's health (spec/STORES.md §1). A standalone store has one; a Cluster store
// (redis_cluster.ts) has one per node, which it never ejects (the cluster's own failover decides).

import { type FailurePolicy, Health } from "./base.js";
import { ServerError, type StoreError, StoreTimeout } from "./errors.js";
import { ErrorReply, type Limits, pack, RespReader, type RespValue } from "./resp.js";
import { Connection, ConnectionPool, WireFailure, type WireRequest } from "./wire.js";

/** A command's bytes (or parts of one write: a large value sent where it lies) and the bounds of its reply. */
export type Request = [WireRequest, Limits];
export const SMALL: Limits = { maxBulk: 1024, maxBytes: 1024, maxElements: 0 };

export interface NodeOptions {
  backend: string;
  db: number;
  username?: string | undefined;
  password?: string | undefined;
  connectTimeoutMs: number;
  timeoutMs: number;
  pool: number;
  policy: FailurePolicy;
}

export function serverName(host: string, port: number): string {
  return host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`;
}

export class RedisNode {
  readonly server: string;
  readonly health = new Health();
  private readonly pool: ConnectionPool<RespValue, Limits>;

  constructor(
    readonly host: string,
    readonly port: number,
    private readonly o: NodeOptions,
  ) {
    this.server = serverName(host, port);
    const handshake: Buffer[] = [];
    if (o.password !== undefined)
      handshake.push(o.username ? pack("AUTH", o.username, o.password) : pack("AUTH", o.password));
    if (o.db !== 0) handshake.push(pack("SELECT", o.db));
    this.pool = new ConnectionPool(o.pool, () => {
      const conn = new Connection<RespValue, Limits>(
        { host, port, connectTimeoutMs: o.connectTimeoutMs, onFailure: () => {} },
        new RespReader(),
      );
      for (const command of handshake) {
        conn
          .request(command, () => true, o.connectTimeoutMs + o.timeoutMs, SMALL)
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

  private failed(failure: WireFailure, timeoutMs: number): StoreError {
    this.health.record(false, this.o.policy, Date.now());
    if (failure.timeout) return new StoreTimeout(this.o.backend, this.server, timeoutMs);
    return new ServerError(this.o.backend, failure.message, this.server);
  }

  /** One pipelined batch on one connection within `timeoutMs`; each request gets exactly one reply. Not an async
   * function: the batch's own Promise is handed on with one `then` (each async layer cost a microtask per request). */
  run(requests: Request[], timeoutMs = this.o.timeoutMs): Promise<RespValue[]> {
    if (!this.health.admitsNow()) {
      this.health.errors++;
      return Promise.reject(
        new ServerError(this.o.backend, "ejected after failures; retrying after retry_after", this.server),
      );
    }
    const conn = this.pool.pick();
    // One pending request (one Promise) for the whole batch: its replies come in order on one connection.
    const sent =
      requests.length === 1
        ? conn.requestEach((requests[0] as Request)[0], timeoutMs, [(requests[0] as Request)[1]])
        : conn.requestEach(
            requests.flatMap(([command]) => (typeof command === "string" ? [Buffer.from(command)] : command)),
            timeoutMs,
            requests.map(([, limits]) => limits),
          );
    return sent.then(
      this.succeeded,
      timeoutMs === this.o.timeoutMs ? this.failedDefault : (e) => this.reject(e, timeoutMs),
    );
  }

  private readonly succeeded = (replies: RespValue[]): RespValue[] => {
    this.health.record(true, this.o.policy, 0);
    return replies;
  };

  private readonly failedDefault = (e: unknown): never => this.reject(e, this.o.timeoutMs);

  private reject(e: unknown, timeoutMs: number): never {
    if (e instanceof WireFailure) throw this.failed(e, timeoutMs);
    throw e;
  }

  /** A reply that breaks the protocol's shape: counted as a failure of this server. */
  malformed(command: string, reply: RespValue): StoreError {
    return this.failed(
      new WireFailure(`malformed reply to ${command}: ${Array.isArray(reply) ? "array" : typeof reply}`),
      this.o.timeoutMs,
    );
  }

  close(): void {
    this.pool.close();
  }
}
