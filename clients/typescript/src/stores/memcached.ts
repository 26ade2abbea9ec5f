// `memcached://h1:11211,h2:11211?…`: a pool of memcached servers (spec/STORES.md §4), speaking the meta protocol
// (mg, ms, md, ma) pipelined over a few connections per server; keys go to servers by the ketama ring; a server
// that fails `failures` times in a row is ejected for `retry_after` and its keys move to the others (the failing
// request is retried once on the key's new server); purges are records checked on read (§4.4).
//
// Replies are bounded as §2 says, whole replies of every command and not only gets: a line of 8 KiB, a value of what
// the command can get back (max_item for a get, 20 digits for a counter, nothing for a write: refused when its length
// is announced), the bytes all of a request's replies take together (stats: 64 KiB in at most 1,024 lines), and only
// the replies the command can get; a reply past a bound fails the connection. The timeout is a total deadline for
// each request, connecting included.
//
// Keys go on the wire as the UTF-8 bytes their check read (STORES.md §2, "wire bytes are the checked bytes"):
// commands are encoded as UTF-8, never latin1, which made U+010D U+010A U+0120 of a checked key CR LF and a space.

import { internalKey, storedKey } from "../keys.js";
import { Ring, type RingServer } from "../ring.js";
import {
  type Counter,
  checkKey,
  checkPrefix,
  checkTag,
  checkTtl,
  counterValue,
  emptyStats,
  entryHeader,
  expiresAtMs,
  type FailurePolicy,
  Health,
  I64_MAX,
  memcachedExptime,
  type Store,
  type StoreStats,
} from "./base.js";
import { NotACounter, ServerError, type StoreError, StoreTimeout, TooLarge, Unsupported } from "./errors.js";
import { MORE, type ReplyReader, view } from "./received.js";
import type { StoreUrl } from "./url.js";
import { Connection, ConnectionPool, type Terminator, WireFailure, type WireRequest } from "./wire.js";

const BACKEND = "memcached";
/** memcached's per-item overhead (48-byte header + CAS) that counts against its item size. */
export const ITEM_OVERHEAD = 56;
const MAX_LINE = 8192;
/** What one reply may take besides its value: its line and the value's CRLF. */
const REPLY_ALLOWANCE = MAX_LINE + 2;
const MAX_PREFIX_LINES = 1000;
/** `stats` answers some 90 lines of a few dozen bytes: these bound it generously, and far below memory that matters. */
const MAX_STAT_LINES = 1024;
const MAX_STAT_BYTES = 64 * 1024;
/** The longest counter an `ma` returns: an unsigned 64-bit number. */
const MAX_COUNTER = 20;
const GET_REPLIES = new Set(["VA", "EN"]);
const SET_REPLIES = new Set(["HD", "NS", "NF", "EX"]);
const DELETE_REPLIES = new Set(["HD", "NF", "EX"]);
const INCR_REPLIES = new Set(["VA", "NF", "EN", "NS", "EX"]);
const STATUS = new Set(["HD", "NS", "EX", "NF", "EN", "MN", "OK", "END"]);
const ERRORS = new Set(["ERROR", "CLIENT_ERROR", "SERVER_ERROR"]);

/** One meta reply: code VA, HD, NS, EX, NF, EN, MN, OK, END, STAT or ERROR. */
export interface Reply {
  code: string;
  data?: Uint8Array;
  flags: string[];
  message?: string;
}

const MN_REPLY: Reply = Object.freeze({ code: "MN", flags: [] as string[] }) as Reply;

function flag(reply: Reply, letter: string): string | undefined {
  return reply.flags.find((f) => f.startsWith(letter))?.slice(1);
}

/** The bounds of one request's replies: the longest value one reply may carry, and the bytes (lines and values) all
 * of them may still take, counted down as each reply is read (one object per request, shared by its replies). */
export interface MetaLimits {
  maxValue: number;
  left: number;
}

/** Bounds for `replies` replies that carry values of at most `maxValue` bytes. */
export function metaLimits(maxValue: number, replies = 1): MetaLimits {
  return { maxValue, left: replies * (maxValue + REPLY_ALLOWANCE) };
}

/** Reads the meta replies of one connection, each within its request's MetaLimits; a value is a view of the socket
 * read it came in (received.ts). */
export class MetaReader implements ReplyReader<Reply, MetaLimits> {
  end = 0;
  need = 1;

  private more(pos: number, need: number): typeof MORE {
    this.end = pos;
    this.need = need;
    return MORE;
  }

  /** `n` value bytes announced by a line ending at `end`: refused past the request's bounds before any is read. */
  private static checkValue(n: number, lineBytes: number, limits: MetaLimits): void {
    if (n > limits.maxValue)
      throw new WireFailure(
        `malformed reply: a value of ${n} bytes (this request's replies carry at most ${limits.maxValue})`,
      );
    if (lineBytes + n + 2 > limits.left)
      throw new WireFailure("malformed reply: more bytes than the request's replies may take");
  }

  read(buf: Buffer, pos: number, limits: MetaLimits): Reply | typeof MORE {
    let end = buf.indexOf(13, pos); // memchr for CR; a CR without LF inside a line falls back to the full search
    if (end !== -1 && end + 1 < buf.length && buf[end + 1] !== 10) end = buf.indexOf("\r\n", end + 1, "latin1");
    else if (end !== -1 && end + 1 >= buf.length) end = -1;
    if (end === -1) {
      if (buf.length - pos > MAX_LINE) throw new WireFailure(`malformed reply: a line longer than ${MAX_LINE} bytes`);
      return this.more(pos, buf.length - pos + 1);
    }
    if (end - pos > MAX_LINE) throw new WireFailure(`malformed reply: a line longer than ${MAX_LINE} bytes`);
    if (end === pos + 2 && buf[pos] === 0x4d && buf[pos + 1] === 0x4e) {
      // `MN`, which ends every request's replies: one shared reply, read from the bytes
      if (limits.left < 4) throw new WireFailure("malformed reply: more bytes than the request's replies may take");
      limits.left -= 4;
      this.end = end + 2;
      return MN_REPLY;
    }
    if (buf[pos] === 0x56 && buf[pos + 1] === 0x41 && buf[pos + 2] === 0x20) {
      // `VA <length>[ flags]`, read from the bytes: the reply to every hit
      let i = pos + 3;
      let n = 0;
      while (i < end && i - pos - 3 < 13) {
        const c = buf[i] as number;
        if (c < 0x30 || c > 0x39) break;
        n = n * 10 + (c - 0x30);
        i++;
      }
      const digits = i - pos - 3;
      if (digits >= 1 && digits <= 12 && (i === end || buf[i] === 0x20)) {
        MetaReader.checkValue(n, end + 2 - pos, limits);
        const start = end + 2;
        if (buf.length < start + n + 2) return this.more(pos, start + n + 2 - pos);
        if (buf[start + n] !== 13 || buf[start + n + 1] !== 10)
          throw new WireFailure("malformed reply: a value without CRLF");
        const flags = i === end ? [] : buf.toString("latin1", i + 1, end).split(" ");
        this.end = start + n + 2;
        limits.left -= this.end - pos;
        return { code: "VA", data: view(buf, start, start + n), flags };
      }
    }
    const line = buf.toString("latin1", pos, end);
    const tokens = line.split(" ");
    const code = tokens[0] as string;
    if (code === "VA") {
      const length = tokens[1] ?? "";
      if (!/^[0-9]{1,12}$/.test(length))
        throw new WireFailure(`malformed reply: ${JSON.stringify(line.slice(0, 100))}`);
      const n = Number(length);
      MetaReader.checkValue(n, end + 2 - pos, limits);
      const start = end + 2;
      if (buf.length < start + n + 2) return this.more(pos, start + n + 2 - pos);
      if (buf[start + n] !== 13 || buf[start + n + 1] !== 10)
        throw new WireFailure("malformed reply: a value without CRLF");
      this.end = start + n + 2;
      limits.left -= this.end - pos;
      return { code, data: view(buf, start, start + n), flags: tokens.slice(2) };
    }
    if (end + 2 - pos > limits.left)
      throw new WireFailure("malformed reply: more bytes than the request's replies may take");
    limits.left -= end + 2 - pos;
    this.end = end + 2;
    if (STATUS.has(code) || code === "STAT") return { code, flags: tokens.slice(1) };
    if (ERRORS.has(code)) return { code: "ERROR", flags: [], message: line };
    throw new WireFailure(`malformed reply: ${JSON.stringify(line.slice(0, 100))}`);
  }
}

class Server {
  readonly health = new Health();
  readonly pool: ConnectionPool<Reply, MetaLimits>;
  constructor(
    readonly name: string,
    host: string,
    port: number,
    poolSize: number,
    connectTimeoutMs: number,
    onFailure: (server: Server) => void,
  ) {
    this.pool = new ConnectionPool(
      poolSize,
      () =>
        new Connection<Reply, MetaLimits>(
          { host, port, connectTimeoutMs, onFailure: () => onFailure(this) },
          new MetaReader(),
          MN_TERMINATOR,
        ),
    );
  }

  /** Sends `request` and reads `expect` replies (or, without, until END/OK, at most `most`), each of a code in
   * `allowed` or an error answer, all within `limits`; anything else is a failure of the server. The connection ends
   * each write of requests with the meta no-op `mn` and answers them once its `MN` follows their replies
   * (MN_TERMINATOR), so a reply past what the requests can get (a second value to one get) fails them. */
  exchange(
    request: WireRequest,
    expect: number | undefined,
    timeoutMs: number,
    allowed: Set<string>,
    limits: MetaLimits,
    most = 1,
  ): Promise<Reply[]> {
    return this.pool.pick().request(
      request,
      (reply, replies) => {
        if (!allowed.has(reply.code) && reply.code !== "ERROR")
          throw new WireFailure(`malformed reply: ${reply.code} is not an answer to this request`);
        if (expect !== undefined) return replies.length === expect;
        if (reply.code === "END" || reply.code === "OK" || (reply.code === "ERROR" && replies.length === 1))
          return true;
        if (replies.length > most) throw new WireFailure(`malformed reply: more than ${most} lines`);
        return false;
      },
      timeoutMs,
      limits,
    );
  }
}

/** Every write of requests ends with the meta no-op `mn` (STORES.md §4.1), whose `MN` must come right after the
 * replies they can get: one per write, not per request (memcached answers each `mn` with a write of its own, and an
 * `mn` per request cut a pipelined get's throughput by half). */
const MN_TERMINATOR: Terminator<Reply, MetaLimits> = {
  bytes: Buffer.from("mn\r\n"),
  limits: () => ({ maxValue: 0, left: 4 }),
  check: (reply) => {
    if (reply.code !== "MN")
      throw new WireFailure(
        `malformed reply: ${reply.code} where MN ends the replies (more replies than the requests can get)`,
      );
  },
};

/** The bytes of command lines: UTF-8, so a key goes out as exactly the bytes its check read (its only encoding; a
 * checked key is well-formed, and a string that is not is refused here too rather than written as U+FFFD). */
export function commandBytes(text: string): Buffer {
  if (!text.isWellFormed()) throw new RangeError("a memcached command with a lone surrogate has no UTF-8 form");
  return Buffer.from(text, "utf8");
}

const getCmd = (key: string, flags: string): string => `mg ${key} ${flags}\r\n`;
const deleteCmd = (key: string, flags = ""): string => `md ${key}${flags ? ` ${flags}` : ""}\r\n`;
/** Values from this size are written from where they lie, after their command line, instead of copied behind it. */
const SET_IN_PARTS = 16 * 1024;
const CRLF = Buffer.from("\r\n");

function setLine(key: string, value: Uint8Array, exptime: number, mode: string): Buffer {
  return commandBytes(`ms ${key} ${value.length} T${exptime} F0${mode ? ` ${mode}` : ""}\r\n`);
}

function setCmd(key: string, value: Uint8Array, exptime: number, mode: string): Buffer {
  return Buffer.concat([setLine(key, value, exptime, mode), value, CRLF]);
}

/** setCmd for one request: a large value as its own part of the write (no copy). */
function setRequest(key: string, value: Uint8Array, exptime: number, mode: string): WireRequest {
  if (value.length < SET_IN_PARTS) return setCmd(key, value, exptime, mode);
  return [setLine(key, value, exptime, mode), value, CRLF];
}

export interface MemcachedOptions {
  weights?: number[];
  prefix?: string;
  timeoutMs?: number;
  connectTimeoutMs?: number;
  pool?: number;
  failures?: number;
  retryAfterMs?: number;
  maxItem?: number;
  prefixPurge?: boolean;
  purgeSkewMs?: number;
  purgeRetentionMs?: number;
}

export class MemcachedStore implements Store {
  readonly backend = BACKEND;
  readonly prefix: string;
  readonly timeoutMs: number;
  readonly maxItem: number;
  readonly prefixPurge: boolean;
  private readonly policy: FailurePolicy;
  /** Entries written within this long after a purge are treated as purged too (clock skew between machines). */
  readonly purgeSkewMs: number;
  private readonly purgeRetentionMs: number;
  private readonly prefixesKey: string;
  private readonly ringServers: RingServer[];
  readonly servers: Server[];
  private ring: Ring;
  private nextReadmitCheck = 0;

  /** `hosts`: [host as written in the URL (IPv6 in brackets), port]. */
  constructor(hosts: ReadonlyArray<readonly [string, number]>, o: MemcachedOptions = {}) {
    if (hosts.length === 0) throw new RangeError("memcached needs at least one server");
    const weights = o.weights ?? hosts.map(() => 1);
    this.prefix = o.prefix ?? "";
    this.timeoutMs = o.timeoutMs ?? 250;
    this.maxItem = o.maxItem ?? 1 << 20;
    if (this.maxItem <= ITEM_OVERHEAD + 250) throw new RangeError("max_item is too small");
    this.prefixPurge = o.prefixPurge ?? true;
    this.policy = { failures: o.failures ?? 2, retryAfterMs: o.retryAfterMs ?? 5000 };
    this.purgeSkewMs = o.purgeSkewMs ?? 1000;
    this.purgeRetentionMs = o.purgeRetentionMs ?? 30 * 86_400_000;
    this.prefixesKey = internalKey(this.prefix, "prefixes", "");
    this.ringServers = hosts.map(([host, port], i) => ({ host, port, weight: weights[i] ?? 1 }));
    this.servers = hosts.map(([host, port]) => {
      const bare = host.startsWith("[") ? host.slice(1, -1) : host;
      return new Server(`${host}:${port}`, bare, port, o.pool ?? 2, o.connectTimeoutMs ?? 500, (s) =>
        this.recordFailure(s),
      );
    });
    this.ring = new Ring(this.ringServers);
  }

  static fromUrl(url: StoreUrl): MemcachedStore {
    if (url.path !== "" && url.path !== "/") throw url.error("memcached:// takes no path");
    const hosts = url.requireHosts();
    const o: MemcachedOptions = {
      prefix: url.take("prefix") ?? "",
      timeoutMs: url.takeDurationMs("timeout", 250),
      connectTimeoutMs: url.takeDurationMs("connect_timeout", 500),
      pool: url.takeNumber("pool", 2, 1, 64),
      failures: url.takeNumber("failures", 2, 1, 1000),
      retryAfterMs: url.takeDurationMs("retry_after", 5000),
      maxItem: url.takeSize("max_item", 1 << 20),
      prefixPurge: url.takeBool("prefix_purge", true),
      purgeSkewMs: url.takeDurationMs("purge_skew", 1000),
      purgeRetentionMs: url.takeDurationMs("purge_retention", 30 * 86_400_000),
    };
    const weightsText = url.take("weights");
    if (weightsText !== undefined) {
      const parts = weightsText.split(",").map((w) => w.trim());
      if (parts.length !== hosts.length || !parts.every((p) => /^[0-9]+$/.test(p) && Number(p) > 0))
        throw url.error(`weights=${JSON.stringify(weightsText)}: one whole number > 0 per host, in order`);
      o.weights = parts.map(Number);
    }
    url.finish();
    if ((o.maxItem as number) <= ITEM_OVERHEAD + 250) throw url.error("max_item is too small");
    return new MemcachedStore(
      hosts.map((h) => [h.written, h.port ?? 11211] as const),
      o,
    );
  }

  // ------------------------------------------------------------------------------------------------ routing

  /** A connection failed: one failure against its server; ejection rebuilds the ring. */
  private recordFailure(server: Server): void {
    if (server.health.record(false, this.policy, Date.now())) this.rebuild();
  }

  private rebuild(): void {
    this.ring = new Ring(this.ringServers, (i) => !(this.servers[i] as Server).health.isEjected());
  }

  private route(stored: string): number {
    const now = Date.now();
    if (now >= this.nextReadmitCheck) {
      this.nextReadmitCheck = now + 100;
      let changed = false;
      for (const s of this.servers) changed = s.health.readmitIfDue(now) || changed;
      if (changed) this.rebuild();
    }
    const index = this.ring.serverFor(stored);
    if (index === undefined) {
      for (const s of this.servers) s.health.errors++;
      throw new ServerError(
        BACKEND,
        "every server is ejected after failures; retrying after retry_after",
        this.servers.map((s) => s.name).join(","),
      );
    }
    return index;
  }

  /** The server (host:port) a caller's key goes to now. */
  serverOf(key: string): string {
    return (this.servers[this.route(this.stored(key))] as Server).name;
  }

  private stored(key: string): string {
    return storedKey(this.prefix, checkKey(BACKEND, key));
  }

  private error(server: Server, failure: WireFailure): StoreError {
    if (failure.timeout) return new StoreTimeout(BACKEND, server.name, this.timeoutMs);
    return new ServerError(BACKEND, failure.message, server.name);
  }

  /**
   * A request about one key to its server, and its replies: `batched`'s rule for a batch of one (a failure that
   * ejects the server is retried once on the key's new server).
   */
  /** One request for one key, as batched() sends a group of one (retried once on the rebuilt ring when the failure
   * ejected its server), without the grouping: the hot path of a single get or set. */
  private async exchange(
    routeKey: string,
    request: WireRequest,
    allowed: Set<string>,
    maxValue: number,
  ): Promise<[Server, Reply[]]> {
    for (let attempt = 0; ; attempt++) {
      const server = this.servers[this.route(routeKey)] as Server;
      if (!server.health.admitsNow()) throw MemcachedStore.probing(server);
      try {
        const replies = await server.exchange(request, 1, this.timeoutMs, allowed, metaLimits(maxValue));
        server.health.record(true, this.policy, Date.now());
        return [server, replies];
      } catch (e) {
        if (!(e instanceof WireFailure)) throw e;
        if (!(server.health.isEjected() && attempt === 0)) throw this.error(server, e);
      }
    }
  }

  /** Indexes of `keys` (all, or those of `indexes`) grouped by the server each key routes to. */
  private groups(keys: readonly string[], indexes?: readonly number[]): Map<number, number[]> {
    const groups = new Map<number, number[]>();
    for (const i of indexes ?? keys.keys()) {
      const s = this.route(keys[i] as string);
      const list = groups.get(s);
      if (list === undefined) groups.set(s, [i]);
      else list.push(i);
    }
    return groups;
  }

  /**
   * Several keys in one round trip per server, servers in parallel: each key's index, reply and the server that
   * gave it, for the commands `requestFor` writes for a group of indexes of `keys` (one reply each). A batch whose
   * failure ejects its server is retried once, its keys regrouped on the rebuilt ring (STORES.md §4.3: on each
   * key's new server; the keys of one ejected server move to several servers, so sending them all to the first
   * key's new server would read false misses and leave writes and deletes where no reader looks).
   */
  private async batched(
    keys: readonly string[],
    requestFor: (indexes: readonly number[]) => Buffer,
    allowed: Set<string>,
    maxValue: number,
  ): Promise<Array<[number, Reply, Server]>> {
    const results: Array<[number, Reply, Server]> = [];
    let groups = this.groups(keys);
    for (let attempt = 0; ; attempt++) {
      const retry: number[] = [];
      const failures: StoreError[] = [];
      const send = async ([index, indexes]: [number, number[]]): Promise<void> => {
        const server = this.servers[index] as Server;
        if (!server.health.admitsNow()) {
          failures.push(MemcachedStore.probing(server));
          return;
        }
        try {
          const replies = await server.exchange(
            requestFor(indexes),
            indexes.length,
            this.timeoutMs,
            allowed,
            metaLimits(maxValue, indexes.length),
          );
          server.health.record(true, this.policy, Date.now());
          for (const [n, i] of indexes.entries()) results.push([i, replies[n] as Reply, server]);
        } catch (e) {
          if (!(e instanceof WireFailure)) throw e;
          if (server.health.isEjected() && attempt === 0) retry.push(...indexes);
          else failures.push(this.error(server, e));
        }
      };
      // One server (one memcached, or every key on one): its batch awaited alone, without Promise.all's Promise.
      if (groups.size === 1) await send(groups.entries().next().value as [number, number[]]);
      else await Promise.all([...groups].map(send));
      if (failures.length > 0) throw failures[0];
      if (retry.length === 0) return results;
      groups = this.groups(keys, retry);
    }
  }

  /** A request refused at once: its server is back on probation and its one probe is out (STORES.md §1). */
  private static probing(server: Server): ServerError {
    server.health.errors++;
    return new ServerError(BACKEND, "on probation after failures; its one probe is out", server.name);
  }

  private static replyError(server: Server, reply: Reply): ServerError {
    return new ServerError(BACKEND, reply.message ?? `unexpected reply ${reply.code}`, server.name);
  }

  private async getStored(keys: readonly string[]): Promise<Array<Uint8Array | undefined>> {
    const values: Array<Uint8Array | undefined> = new Array(keys.length).fill(undefined);
    // One `mg <key> v` per key, each reply (VA or EN) paired with its key by position.
    const replies = await this.batched(
      keys,
      (indexes) => commandBytes(indexes.map((i) => getCmd(keys[i] as string, "v")).join("")),
      GET_REPLIES,
      this.maxItem,
    );
    for (const [i, reply, server] of replies) values[i] = MemcachedStore.valueOf(server, reply);
    return values;
  }

  /** The value an `mg <key> v` reply gives (undefined for EN); throws the server's error answer. */
  private static valueOf(server: Server, reply: Reply): Uint8Array | undefined {
    if (reply.code === "ERROR") throw MemcachedStore.replyError(server, reply);
    return reply.code === "VA" ? reply.data : undefined;
  }

  private async setStored(items: ReadonlyArray<readonly [string, Uint8Array, number]>, mode: string): Promise<void> {
    const replies = await this.batched(
      items.map(([k]) => k),
      (indexes) =>
        Buffer.concat(
          indexes.map((i) => {
            const [k, v, exptime] = items[i] as [string, Uint8Array, number];
            return exptime < 0 ? commandBytes(deleteCmd(k)) : setCmd(k, v, exptime, mode);
          }),
        ),
      SET_REPLIES,
      0,
    );
    for (const [, reply, server] of replies) if (reply.code === "ERROR") throw MemcachedStore.replyError(server, reply);
  }

  private async getWithCas(stored: string): Promise<[Uint8Array, string] | undefined> {
    const [server, [reply]] = (await this.exchange(
      stored,
      commandBytes(getCmd(stored, "v c")),
      GET_REPLIES,
      this.maxItem,
    )) as [Server, [Reply]];
    const cas = flag(reply, "c");
    if (reply.code === "VA" && cas !== undefined && /^[0-9]+$/.test(cas)) return [reply.data as Uint8Array, cas];
    if (reply.code === "EN") return undefined;
    throw MemcachedStore.replyError(server, reply);
  }

  private async setWith(stored: string, value: Uint8Array, exptime: number, mode: string): Promise<boolean> {
    const [server, [reply]] = (await this.exchange(
      stored,
      setRequest(stored, value, exptime, mode),
      SET_REPLIES,
      0,
    )) as [Server, [Reply]];
    if (reply.code === "HD") return true;
    if (reply.code === "NS" || reply.code === "EX" || reply.code === "NF") return false;
    throw MemcachedStore.replyError(server, reply);
  }

  private checkSize(stored: string, value: Uint8Array): void {
    if (value.length + Buffer.byteLength(stored, "utf8") + ITEM_OVERHEAD > this.maxItem)
      throw new TooLarge(BACKEND, stored, value.length, this.maxValueBytes());
  }

  /** `request` (flush_all, stats: no values) on every admitted server, each answering at most `lines` lines of
   * `bytes` in all. */
  private async onEveryServer(request: string, allowed: Set<string>, lines: number, bytes: number): Promise<Reply[][]> {
    const results: Reply[][] = [];
    for (const server of this.servers) {
      if (server.health.isEjected() || !server.health.admitsNow()) continue;
      try {
        const limits: MetaLimits = { maxValue: 0, left: bytes };
        results.push(await server.exchange(commandBytes(request), undefined, this.timeoutMs, allowed, limits, lines));
        server.health.record(true, this.policy, Date.now());
      } catch (e) {
        if (e instanceof WireFailure) throw this.error(server, e);
        throw e;
      }
    }
    return results;
  }

  // ------------------------------------------------------------------------------------------ purge records

  private tagKey(tag: string): string {
    return internalKey(this.prefix, "tag", tag);
  }

  /** `values` without those a purge record covers: at once when no value has tags (no tag records to read, so
   * nothing to await: an async layer per read cost a Promise and a microtask), else after reading the records. */
  private dropPurged(
    keys: readonly string[],
    values: Array<Uint8Array | undefined>,
    prefixList: Uint8Array | undefined,
  ): Array<Uint8Array | undefined> | Promise<Array<Uint8Array | undefined>> {
    const prefixes = prefixList ? parsePrefixList(prefixList) : [];
    const tagged: Array<[number, number, string[]]> = [];
    values.forEach((value, i) => {
      if (value === undefined) return;
      const h = entryHeader(value);
      if (h === undefined) return;
      const created = Number(h.createdAt);
      const tags = h.tags;
      if (prefixes.some(([at, p]) => (keys[i] as string).startsWith(p) && created <= at + this.purgeSkewMs))
        values[i] = undefined;
      else if (tags.length > 0) tagged.push([i, created, tags]);
    });
    return tagged.length === 0 ? values : this.dropTagPurged(values, tagged);
  }

  /** dropPurged for the values with tags ([index, created, tags]): their tags' purge records read in one batch. */
  private async dropTagPurged(
    values: Array<Uint8Array | undefined>,
    tagged: Array<[number, number, string[]]>,
  ): Promise<Array<Uint8Array | undefined>> {
    const tags = [...new Set(tagged.flatMap(([, , t]) => t))].sort();
    const records = await this.getStored(tags.map((t) => this.tagKey(t)));
    const purgedAt = new Map<string, number>();
    tags.forEach((tag, i) => {
      const record = records[i];
      const text = record === undefined ? undefined : Buffer.from(record).toString("latin1").trim();
      if (text !== undefined && /^[0-9]+$/.test(text)) purgedAt.set(tag, Number(text));
    });
    for (const [i, created, entryTags] of tagged) {
      if (entryTags.some((t) => purgedAt.has(t) && created <= (purgedAt.get(t) as number) + this.purgeSkewMs))
        values[i] = undefined;
    }
    return values;
  }

  // ---------------------------------------------------------------------------------------------------- Store

  maxValueBytes(): number {
    return this.maxItem - ITEM_OVERHEAD - 250;
  }

  /** Failures counted per server since the store was opened. */
  serverErrors(): Array<[string, number]> {
    return this.servers.map((s) => [s.name, s.health.errors]);
  }

  async get(key: string): Promise<Uint8Array | undefined> {
    if (this.prefixPurge) return (await this.getMany([key]))[0];
    // Without the prefix list a read is one request to one server: exchange(), not batched()'s grouping (three
    // async layers and a Promise.all fewer per get).
    const stored = this.stored(key);
    const [server, [reply]] = await this.exchange(stored, commandBytes(getCmd(stored, "v")), GET_REPLIES, this.maxItem);
    const value = MemcachedStore.valueOf(server, reply as Reply);
    if (value === undefined) return undefined;
    const kept = this.dropPurged([key], [value], undefined);
    return Array.isArray(kept) ? kept[0] : kept.then(([v]) => v);
  }

  async getMany(keys: readonly string[]): Promise<Array<Uint8Array | undefined>> {
    if (keys.length === 0) return [];
    const stored = keys.map((k) => this.stored(k));
    const asked = this.prefixPurge ? [...stored, this.prefixesKey] : stored;
    const values = await this.getStored(asked);
    const prefixList = this.prefixPurge ? values.pop() : undefined;
    return this.dropPurged(keys, values, prefixList);
  }

  async set(key: string, value: Uint8Array, ttlMs?: number): Promise<void> {
    checkTtl(ttlMs);
    const stored = this.stored(key);
    this.checkSize(stored, value);
    const now = Date.now();
    const exptime = memcachedExptime(expiresAtMs(value, ttlMs, now), now);
    if (exptime < 0) return this.setMany([[key, value]], ttlMs);
    const [server, [reply]] = (await this.exchange(stored, setRequest(stored, value, exptime, ""), SET_REPLIES, 0)) as [
      Server,
      [Reply],
    ];
    if (reply.code === "ERROR") throw MemcachedStore.replyError(server, reply);
  }

  async setMany(items: ReadonlyArray<readonly [string, Uint8Array]>, ttlMs?: number): Promise<void> {
    if (items.length === 0) return;
    checkTtl(ttlMs);
    const now = Date.now();
    const batch = items.map(([key, value]) => {
      const stored = this.stored(key);
      this.checkSize(stored, value);
      return [stored, value, memcachedExptime(expiresAtMs(value, ttlMs, now), now)] as const;
    });
    await this.setStored(batch, "");
  }

  async add(key: string, value: Uint8Array, ttlMs?: number): Promise<boolean> {
    const stored = this.stored(key);
    checkTtl(ttlMs);
    this.checkSize(stored, value);
    const now = Date.now();
    const exptime = memcachedExptime(expiresAtMs(value, ttlMs, now), now);
    if (exptime < 0) return false;
    return this.setWith(stored, value, exptime, "ME");
  }

  async incr(key: string, delta: number | bigint, ttlMs?: number, create = true): Promise<Counter | undefined> {
    const stored = this.stored(key);
    checkTtl(ttlMs);
    const d = BigInt(delta);
    const magnitude = d < 0n ? -d : d;
    let request = `ma ${stored} v D${magnitude} ${d < 0n ? "MD" : "MI"}`;
    if (create) {
      const now = Date.now();
      const exptime = Math.max(memcachedExptime(ttlMs === undefined ? undefined : now + Math.ceil(ttlMs), now), 0);
      request += ` N${exptime} J${d > 0n ? d : 0n}`;
    }
    const [server, [reply]] = (await this.exchange(
      stored,
      commandBytes(`${request}\r\n`),
      INCR_REPLIES,
      MAX_COUNTER,
    )) as [Server, [Reply]];
    if (reply.code === "VA") {
      const text = Buffer.from(reply.data as Uint8Array)
        .toString("latin1")
        .trim();
      if (!/^[0-9]{1,20}$/.test(text))
        throw new ServerError(BACKEND, `counter ${JSON.stringify(text.slice(0, 40))}`, server.name);
      const n = BigInt(text);
      return counterValue(n > I64_MAX ? I64_MAX : n);
    }
    if (reply.code === "NF" || reply.code === "EN") return undefined;
    if (reply.code === "ERROR" && (reply.message ?? "").includes("non-numeric")) throw new NotACounter(BACKEND, key);
    throw MemcachedStore.replyError(server, reply);
  }

  async deleteIf(key: string, expected: Uint8Array): Promise<boolean> {
    const stored = this.stored(key);
    const current = await this.getWithCas(stored);
    if (current === undefined || !Buffer.from(current[0]).equals(expected)) return false;
    const [, [reply]] = (await this.exchange(
      stored,
      commandBytes(deleteCmd(stored, `C${current[1]}`)),
      DELETE_REPLIES,
      0,
    )) as [Server, [Reply]];
    return reply.code === "HD";
  }

  async delete(key: string): Promise<boolean> {
    return (await this.deleteMany([key])) === 1;
  }

  async deleteMany(keys: readonly string[]): Promise<number> {
    const stored = keys.map((k) => this.stored(k));
    const replies = await this.batched(
      stored,
      (indexes) => commandBytes(indexes.map((i) => deleteCmd(stored[i] as string)).join("")),
      DELETE_REPLIES,
      0,
    );
    return replies.filter(([, reply]) => reply.code === "HD").length;
  }

  async clear(): Promise<void> {
    if (this.prefix) await this.purgePrefix("");
    else await this.onEveryServer("flush_all\r\n", new Set(["OK"]), 1, REPLY_ALLOWANCE);
  }

  /** Records the purge (§4.4): records cannot count what they hide, so the answer is null. */
  async purgePrefix(prefix: string): Promise<null> {
    checkPrefix(BACKEND, prefix);
    if (!this.prefixPurge) throw new Unsupported(BACKEND, "purge by prefix with prefix_purge=false");
    const key = this.prefixesKey;
    for (let attempt = 0; attempt < 50; attempt++) {
      const now = Date.now();
      const current = await this.getWithCas(key);
      let lines = current ? parsePrefixList(current[0]) : [];
      lines = lines.filter(([at, p]) => now - at <= this.purgeRetentionMs && p !== prefix);
      lines.push([now, prefix]);
      lines = lines.slice(-MAX_PREFIX_LINES);
      const text = Buffer.from(lines.map(([at, p]) => `${at} ${p}\n`).join(""), "utf8");
      if (await this.setWith(key, text, 0, current ? `C${current[1]}` : "ME")) return null;
    }
    throw new ServerError(BACKEND, "the prefix list kept changing under 50 attempts to update it", key);
  }

  /** Records the purge of `tag`; null, as for prefixes. */
  async purgeTag(tag: string): Promise<null> {
    checkTag(BACKEND, tag);
    await this.setWith(this.tagKey(tag), Buffer.from(String(Date.now())), 0, "");
    return null;
  }

  async stats(): Promise<StoreStats> {
    const stats = emptyStats();
    const names: Record<string, keyof StoreStats> = {
      get_hits: "hits",
      get_misses: "misses",
      total_items: "inserts",
      evictions: "evictions",
      expired_unfetched: "expirations",
      curr_items: "entries",
      bytes: "bytes",
      limit_maxbytes: "capacityBytes",
    };
    for (const replies of await this.onEveryServer(
      "stats\r\n",
      new Set(["STAT", "END"]),
      MAX_STAT_LINES,
      MAX_STAT_BYTES,
    )) {
      for (const reply of replies) {
        const field = names[reply.flags[0] ?? ""];
        if (reply.code === "STAT" && field !== undefined)
          stats[field] += /^[0-9]+$/.test(reply.flags[1] ?? "") ? Number(reply.flags[1]) : 0;
      }
    }
    return stats;
  }

  async close(): Promise<void> {
    for (const s of this.servers) s.pool.close();
  }
}

/** `<ms> <prefix>\n` lines; malformed lines are skipped. */
function parsePrefixList(data: Uint8Array): Array<[number, string]> {
  const lines: Array<[number, string]> = [];
  for (const line of Buffer.from(data).toString("utf8").split(/\r?\n/)) {
    const sp = line.indexOf(" ");
    if (sp === -1) continue;
    const at = line.slice(0, sp);
    if (/^[0-9]+$/.test(at)) lines.push([Number(at), line.slice(sp + 1)]);
  }
  return lines;
}
