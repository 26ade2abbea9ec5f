// The bytes a pipelined connection (wire.ts) has received and not yet read, and the contract of the readers that
// turn them into replies (resp.ts for Redis, memcached.ts's meta replies). It exists so that a reply's values are
// copied at most once between the socket and the caller: a reader reads each socket read in place and hands out
// values as views of it; only bytes that straddle two reads (one value, one header) are joined into a fresh buffer,
// exactly as many as the reader asked for. A reader may stop anywhere in a reply and keep what it made of the bytes
// before (an MGET's first values): those bytes are never read again.
//
// What a value keeps alive: the socket read it came in (at most 64 KiB, Node's read size) or its own joined copy
// (itself and at most the header before it, or a few hundred bytes around a header split between reads).

/** What a reader returns when its window ends before the reply does. */
export const MORE: unique symbol = Symbol("more");

/** Reads replies out of windows of the received bytes; one per connection (it keeps a reply in progress). */
export interface ReplyReader<R, L> {
  /**
   * Reads on from `buf[pos]` (the window may end anywhere), within `limits`: a whole reply, with `end` set past it;
   * or MORE, with `end` set to where reading stopped (the bytes before it are taken: the reader keeps what it made
   * of them) and `need` to the bytes from `end` it needs in one window before it can go on. Throws WireFailure for a
   * reply that breaks a bound or does not parse.
   */
  read(buf: Buffer, pos: number, limits: L): R | typeof MORE;
  end: number;
  need: number;
}

/** Where the replies read go: the connection's queue of requests. */
export interface ReplySink<R, L> {
  /** The bounds of the next reply; throws WireFailure when no request is waiting for one. */
  nextLimits(): L;
  take(reply: R): void;
}

/** `buf[start, end)` as a plain Uint8Array over the same memory (no copy; not a Buffer, whose slice() is a view). */
export function view(buf: Buffer, start: number, end: number): Uint8Array {
  return new Uint8Array(buf.buffer, buf.byteOffset + start, end - start);
}

/** The smallest window joined across reads when a reader asks for "more" without knowing how much (a line). */
const JOIN_STEP = 256;

export class Received<R, L> {
  /** The socket's reads not yet wholly read; `head` is the read position in the first. */
  private chunks: Buffer[] = [];
  private head = 0;
  private buffered = 0;
  /** Bytes from the read position that the reader needs in one window before it is called again. */
  private need = 1;

  constructor(private readonly reader: ReplyReader<R, L>) {}

  /** Bytes received and not yet read (a partial reply). */
  get pending(): number {
    return this.buffered;
  }

  /** Adds a socket read and reads every reply it completes into `sink`. Throws WireFailure (the connection is then
   * out of step: the caller closes it and drops this object). */
  push(chunk: Buffer, sink: ReplySink<R, L>): void {
    if (chunk.length === 0) return;
    this.chunks.push(chunk);
    this.buffered += chunk.length;
    while (this.buffered >= this.need) {
      let window = this.chunks[0] as Buffer;
      if (window.length - this.head < this.need) window = this.join();
      const pos = this.head;
      const available = window.length - pos;
      const reply = this.reader.read(window, pos, sink.nextLimits());
      const end = this.reader.end;
      if (!(end >= pos && end <= window.length)) throw new RangeError("a reader moved outside its window");
      this.buffered -= end - pos;
      if (end === window.length) {
        this.chunks.shift();
        this.head = 0;
      } else this.head = end;
      if (reply === MORE) {
        // A reader that took nothing gets more than it saw before it is called again (progress is certain).
        this.need = end === pos ? Math.max(this.reader.need, available + 1) : Math.max(this.reader.need, 1);
      } else {
        this.need = 1;
        sink.take(reply);
      }
      if (this.buffered === 0) break;
    }
  }

  /** Joins the unread bytes the reader needs (exactly those when it said how many; when it only asked for more than
   * the first read holds, as for a line, a step more, doubling) into one fresh buffer that replaces them at the head
   * of the reads. */
  private join(): Buffer {
    const first = (this.chunks[0] as Buffer).length - this.head;
    const size = this.need > first + 1 ? this.need : Math.min(this.buffered, Math.max(first * 2, first + JOIN_STEP));
    const out = Buffer.allocUnsafe(size);
    let filled = 0;
    let used = 0; // chunks wholly copied
    let from = this.head;
    while (filled < size) {
      const chunk = this.chunks[used] as Buffer;
      const n = Math.min(chunk.length - from, size - filled);
      chunk.copy(out, filled, from, from + n);
      filled += n;
      if (from + n === chunk.length) {
        used++;
        from = 0;
      } else from += n;
    }
    // `from` is now the position in chunks[used] after the joined bytes: keep only the rest of that read.
    const rest = this.chunks.slice(used);
    if (rest.length > 0 && from > 0) rest[0] = (rest[0] as Buffer).subarray(from);
    this.chunks = [out, ...rest];
    this.head = 0;
    return out;
  }
}
