// One pipelined TCP connection to a server that answers in order (memcached, Redis): the requests of one tick are
// collected and written together when the tick ends (small ones joined into one Buffer and one socket.write: a
// write per request cost ~0.2 µs of stream bookkeeping each with 50 callers; large parts written as they lie) and their
// replies read in order out of the socket's reads (received.ts: values are views of the reads, bytes are copied only
// where a reply straddles two reads), each request taking the replies it asked for. Every byte is hostile: a reader
// bounds lines and values, a request has a total deadline (connecting included) after which the connection is
// destroyed, and anything malformed closes the connection (it is out of step) and fails what was pending on it,
// with one failure counted against the server. Deadlines share one timer per connection, armed for the earliest
// (a timer per request cost more than the request's own parsing).

import net from "node:net";
import { Received, type ReplyReader, type ReplySink } from "./received.js";

/** A connection-level failure: the server could not be reached, timed out, closed, or sent something malformed. */
export class WireFailure extends Error {
  override readonly name = "WireFailure";
  constructor(
    message: string,
    readonly timeout = false,
  ) {
    super(message);
  }
}

/** What a request writes: bytes, text, or parts written in turn into the same corked write (a large value is sent
 * from where it lies, not copied behind its command line). */
export type WireRequest = Buffer | string | readonly Uint8Array[];

/** What ends every write of a connection's requests (memcached's `mn`, STORES.md §4.1): its bytes, the bounds of its
 * reply, and a check that throws (a WireFailure) when the reply read in its place is another. The requests of a write
 * are answered only once the terminator's reply has been read right after theirs, so a surplus reply (a server
 * answering one get with two values) fails them all instead of being taken as the next request's. */
export interface Terminator<R, L> {
  bytes: Uint8Array;
  limits: () => L;
  check: (reply: R) => void;
}

interface Pending<R, L> {
  /** The bounds of every reply, or of each reply in turn. */
  limits: L;
  perReply: readonly L[] | undefined;
  /** Called with each reply and the replies so far; true when the request has all its replies. */
  take: ((reply: R, replies: R[]) => boolean) | undefined;
  /** Without `take`: how many replies the request gets. */
  want: number;
  replies: R[];
  resolve: (replies: R[]) => void;
  reject: (e: Error) => void;
  /** Date.now() past which the request has failed, and the timeout it was given (for the message). */
  deadline: number;
  timeoutMs: number;
  /** With a terminator: this is the terminator's entry, which answers the requests queued before it. */
  ends?: true;
}

export interface ConnectionOptions {
  host: string;
  port: number;
  connectTimeoutMs: number;
  /** Called once when the connection fails (for the server's health). */
  onFailure: (failure: WireFailure) => void;
}

export class Connection<R, L = undefined> {
  private socket: net.Socket | undefined;
  /** Bytes received and not yet read into replies. */
  private received: Received<R, L> | undefined;
  /** Where `received` puts the replies it reads: the request at `active` in the queue (the head, unless requests
   * before it have all their replies and wait for their write's terminator). */
  private readonly sink: ReplySink<R, L> = {
    nextLimits: () => {
      const head = this.queue[this.active];
      if (head === undefined) throw new WireFailure("malformed reply: bytes nobody asked for");
      return head.perReply === undefined ? head.limits : (head.perReply[head.replies.length] as L);
    },
    take: (reply) => {
      const head = this.queue[this.active] as Pending<R, L>;
      if (head.ends) {
        (this.terminator as Terminator<R, L>).check(reply);
        const answered = this.queue.splice(0, this.active + 1);
        this.active = 0;
        for (const p of answered) if (!p.ends) p.resolve(p.replies);
        return;
      }
      const replies = head.replies;
      replies.push(reply);
      if (head.take === undefined ? replies.length === head.want : head.take(reply, replies)) {
        if (this.terminator !== undefined) this.active++;
        else {
          this.queue.shift();
          head.resolve(replies);
        }
      }
    },
  };
  private readonly queue: Array<Pending<R, L>> = [];
  /** How many requests at the head of the queue have all their replies and wait for their terminator's. */
  private active = 0;
  private failed: WireFailure | undefined;
  /** This tick's requests' bytes, written when it ends (flush), and how many bytes and requests they are. */
  private outgoing: Uint8Array[] = [];
  private outgoingBytes = 0;
  private batched = 0;
  /** The one deadline timer, and the moment it is set for (Infinity: not armed). */
  private deadlineTimer: NodeJS.Timeout | undefined;
  private timerAt = Number.POSITIVE_INFINITY;
  private readonly flush = (): void => {
    const parts = this.outgoing;
    let bytes = this.outgoingBytes;
    this.outgoing = [];
    this.outgoingBytes = 0;
    this.batched = 0;
    const socket = this.socket;
    if (socket === undefined || this.failed !== undefined || parts.length === 0) return;
    const terminator = this.terminator;
    if (terminator !== undefined) {
      parts.push(terminator.bytes);
      bytes += terminator.bytes.length;
      const never = Number.POSITIVE_INFINITY; // the requests it answers have their deadlines
      const resolve = (): void => {};
      this.queue.push({
        ends: true,
        take: undefined,
        want: 1,
        replies: [],
        limits: terminator.limits(),
        perReply: undefined,
        resolve,
        reject: resolve,
        deadline: never,
        timeoutMs: 0,
      });
    }
    if (parts.length === 1) socket.write(parts[0] as Uint8Array);
    else if (bytes <= JOIN_UP_TO) socket.write(Buffer.concat(parts, bytes));
    else {
      socket.cork();
      for (const part of parts) socket.write(part);
      socket.uncork();
    }
  };

  constructor(
    private readonly options: ConnectionOptions,
    reader: ReplyReader<R, L>,
    private readonly terminator?: Terminator<R, L>,
  ) {
    this.received = new Received(reader);
    const socket = net.connect({ host: options.host, port: options.port, noDelay: true });
    this.socket = socket;
    const timer = setTimeout(() => {
      this.fail(new WireFailure(`no connection within ${options.connectTimeoutMs} ms`, true));
    }, options.connectTimeoutMs);
    socket.setNoDelay(true);
    socket.once("connect", () => clearTimeout(timer));
    socket.on("data", (chunk: Buffer) => this.onData(chunk));
    socket.on("error", (e) => {
      clearTimeout(timer);
      this.fail(new WireFailure(e.message));
    });
    socket.on("close", () => {
      clearTimeout(timer);
      this.fail(new WireFailure("the connection closed"));
    });
  }

  get broken(): boolean {
    return this.failed !== undefined;
  }

  get inFlight(): number {
    return this.queue.length;
  }

  /** How many requests this tick's write carries so far (0: none yet). */
  get batchedThisTick(): number {
    return this.batched;
  }

  /** Sends `request` and resolves with its replies (as `take` collects them), within `timeoutMs` in total. */
  request(request: WireRequest, take: (reply: R, replies: R[]) => boolean, timeoutMs: number, limits: L): Promise<R[]> {
    return this.send(request, take, 0, timeoutMs, limits, undefined);
  }

  /** Sends `request` (several commands) and resolves with its `perReply.length` replies, each within its bounds. */
  requestEach(request: WireRequest, timeoutMs: number, perReply: readonly L[]): Promise<R[]> {
    return this.send(request, undefined, perReply.length, timeoutMs, perReply[0] as L, perReply);
  }

  private send(
    request: WireRequest,
    take: ((reply: R, replies: R[]) => boolean) | undefined,
    want: number,
    timeoutMs: number,
    limits: L,
    perReply: readonly L[] | undefined,
  ): Promise<R[]> {
    if (this.failed !== undefined) return Promise.reject(this.failed);
    return new Promise<R[]>((resolve, reject) => {
      const deadline = Date.now() + timeoutMs;
      this.queue.push({ take, want, replies: [], limits, perReply, resolve, reject, deadline, timeoutMs });
      if (deadline < this.timerAt) this.armDeadline(deadline);
      if (this.batched++ === 0) process.nextTick(this.flush);
      if (typeof request === "string") this.queueBytes(Buffer.from(request));
      else if (request instanceof Uint8Array) this.queueBytes(request);
      else for (const part of request) this.queueBytes(part);
    });
  }

  private queueBytes(bytes: Uint8Array): void {
    this.outgoing.push(bytes);
    this.outgoingBytes += bytes.length;
  }

  /** Sets the one timer for `at` (sooner than it was set for). */
  private armDeadline(at: number): void {
    if (this.deadlineTimer !== undefined) clearTimeout(this.deadlineTimer);
    this.timerAt = at;
    // Unreferenced: a pending request keeps its socket open, which keeps the process alive on its own.
    this.deadlineTimer = setTimeout(() => this.checkDeadlines(), Math.max(at - Date.now(), 1)).unref();
  }

  /** Fails the connection for the first request past its deadline, else sets the timer for the next deadline. */
  private checkDeadlines(): void {
    this.deadlineTimer = undefined;
    this.timerAt = Number.POSITIVE_INFINITY;
    if (this.failed !== undefined) return;
    const now = Date.now();
    let next = Number.POSITIVE_INFINITY;
    for (const p of this.queue) {
      if (p.deadline <= now) {
        this.fail(new WireFailure(`no answer within ${p.timeoutMs} ms`, true), p);
        return;
      }
      if (p.deadline < next) next = p.deadline;
    }
    if (next !== Number.POSITIVE_INFINITY) this.armDeadline(next);
  }

  private onData(chunk: Buffer): void {
    try {
      this.received?.push(chunk, this.sink);
    } catch (e) {
      this.fail(e instanceof WireFailure ? e : new WireFailure(`malformed reply: ${(e as Error).message}`));
    }
  }

  /** Fails every pending request (the one that timed out with the timeout), destroys the socket, once. */
  private fail(failure: WireFailure, cause?: Pending<R, L>): void {
    if (this.failed !== undefined) return;
    this.failed = failure;
    this.socket?.destroy();
    this.stopDeadlines();
    this.received = undefined;
    this.active = 0;
    const pending = this.queue.splice(0);
    for (const p of pending) {
      p.reject(
        p === cause || cause === undefined ? failure : new WireFailure(`the connection closed: ${failure.message}`),
      );
    }
    this.options.onFailure(failure);
  }

  close(): void {
    if (this.failed === undefined) {
      this.failed = new WireFailure("the store was closed");
      this.socket?.destroy();
      this.stopDeadlines();
      this.active = 0;
      for (const p of this.queue.splice(0)) p.reject(this.failed);
    }
  }

  private stopDeadlines(): void {
    if (this.deadlineTimer !== undefined) clearTimeout(this.deadlineTimer);
    this.deadlineTimer = undefined;
    this.timerAt = Number.POSITIVE_INFINITY;
  }
}

/** A tick's requests up to this many bytes in all are joined into one Buffer (one socket.write); beyond, each part is
 * written as it lies, corked into one writev. */
const JOIN_UP_TO = 64 * 1024;

/** How many requests of one tick a connection takes before the next one is used: 50 callers' requests go out as two
 * batches on two connections, so the server works on one while the client builds the other (one connection for all
 * 50 left the server and the client waiting on each other: Redis get 1 KiB x50 249k/s with 64 here, 512k/s with 32;
 * 16, spread over four connections, 309k/s). */
const TICK_BATCH = 32;

/** The connections to one server: up to `size`, opened as needed, the least busy one used. */
export class ConnectionPool<R, L = undefined> {
  private readonly connections: Array<Connection<R, L>> = [];
  constructor(
    private readonly size: number,
    private readonly open: () => Connection<R, L>,
  ) {}

  pick(): Connection<R, L> {
    for (let i = this.connections.length - 1; i >= 0; i--) {
      if ((this.connections[i] as Connection<R, L>).broken) this.connections.splice(i, 1);
    }
    // A connection already carrying this tick's write takes more of the tick's requests, up to TICK_BATCH: one
    // write (and one read on the server) for many callers, where spreading them cost a write per connection.
    for (const c of this.connections) {
      const n = c.batchedThisTick;
      if (n > 0 && n < TICK_BATCH) return c;
    }
    let best: Connection<R, L> | undefined;
    for (const c of this.connections) if (best === undefined || c.inFlight < best.inFlight) best = c;
    if (best === undefined || (best.inFlight > 0 && this.connections.length < this.size)) {
      best = this.open();
      this.connections.push(best);
    }
    return best;
  }

  close(): void {
    for (const c of this.connections.splice(0)) c.close();
  }
}
