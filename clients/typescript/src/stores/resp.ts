// RESP (Redis's protocol) for larder's Redis store: commands packed as arrays of bulk strings (a string part as its
// UTF-8, the bytes a key's check read; one without a UTF-8 form is refused), and a resumable reply reader that
// bounds everything a hostile server could send (spec/STORES.md §2), whole replies of every command: lines of 8 KiB,
// lengths of 18 digits, bulk strings of `maxBulk` (refused when announced), `maxBytes` of bulk data and lines (simple
// strings, errors, integers; one line's worth, 8 KiB, on top), `maxElements` array elements per reply, and nesting at most
// 8 deep. Anything else is a WireFailure: the connection is out of step and is closed. Bulk strings are views of the socket's reads (received.ts); an array reply that spans reads keeps the
// values read so far and goes on where the read stopped, so no byte of a reply is scanned or copied twice.

import { MORE, type ReplyReader, view } from "./received.js";
import { WireFailure } from "./wire.js";

const MAX_LINE = 8192;
const MAX_DEPTH = 8;

export interface Limits {
  /** The longest bulk string. */
  maxBulk: number;
  /** Bulk data and line text of the whole reply (lines have one line's worth, MAX_LINE, on top). */
  maxBytes: number;
  /** Array elements of the whole reply, nested ones included. */
  maxElements: number;
}

/** An error answer (-ERR …): the server is fine, the command failed. */
export class ErrorReply {
  constructor(readonly message: string) {}
}

export type RespValue = null | Uint8Array | string | number | bigint | ErrorReply | RespValue[];

/** A command as a RESP array of bulk strings, in one Buffer (one allocation: a command per request is the hot path).
 * Short ASCII strings (command names, keys, numbers) are sized and copied in JavaScript: Buffer.byteLength and
 * Buffer#write cross into C++ at ~60 ns a call, which made a SET's packing 300 ns where this takes 160 (node 20). */
export function pack(...parts: Array<string | number | bigint | Uint8Array>): Buffer {
  let size = 1 + decimalLength(parts.length) + 2;
  for (const part of parts) {
    const n = part instanceof Uint8Array ? part.length : textLength(typeof part === "string" ? part : String(part));
    size += 1 + decimalLength(n) + 2 + n + 2;
  }
  const out = Buffer.allocUnsafe(size);
  let at = writeLength(out, 0, 0x2a, parts.length);
  for (const part of parts) {
    if (part instanceof Uint8Array) {
      at = writeLength(out, at, 0x24, part.length);
      out.set(part, at);
      at += part.length;
    } else {
      const text = typeof part === "string" ? part : String(part);
      const ascii = shortAsciiLength(text);
      if (ascii >= 0) {
        at = writeLength(out, at, 0x24, ascii);
        for (let i = 0; i < ascii; i++) out[at + i] = text.charCodeAt(i);
        at += ascii;
      } else {
        // textLength refused a string without a UTF-8 form, so these are the bytes of the string, none replaced
        at = writeLength(out, at, 0x24, Buffer.byteLength(text, "utf8"));
        at += out.write(text, at, "utf8");
      }
    }
    out[at++] = 13;
    out[at++] = 10;
  }
  return out;
}

/** The UTF-8 length of `text`; throws for a string with an unpaired surrogate, which has no UTF-8 (an encoder would
 * write U+FFFD, bytes no check saw). */
function textLength(text: string): number {
  const ascii = shortAsciiLength(text);
  if (ascii >= 0) return ascii;
  if (!text.isWellFormed()) throw new RangeError("a Redis command part with a lone surrogate has no UTF-8 form");
  return Buffer.byteLength(text, "utf8");
}

/** `text`'s length when it is at most 64 characters, all ASCII (one byte each), else -1. */
function shortAsciiLength(text: string): number {
  if (text.length > 64) return -1;
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) > 0x7f) return -1;
  return text.length;
}

/** `<marker><n>\r\n` written at `at` (the digits from the number, no string made); the position after it. */
function writeLength(out: Buffer, at: number, marker: number, n: number): number {
  out[at] = marker;
  const digits = decimalLength(n);
  let rest = n;
  for (let i = at + digits; i > at; i--) {
    out[i] = 0x30 + (rest % 10);
    rest = Math.floor(rest / 10);
  }
  const end = at + digits + 1;
  out[end] = 13;
  out[end + 1] = 10;
  return end + 2;
}

function decimalLength(n: number): number {
  let digits = 1;
  for (let x = n; x >= 10; x = Math.floor(x / 10)) digits++;
  return digits;
}

/** An array reply being read: its values so far and how many are still to come. */
interface Frame {
  items: RespValue[];
  left: number;
}

const malformed = (what: string): WireFailure => new WireFailure(`malformed reply: ${what}`);

/** Reads one connection's replies; an array that spans socket reads is resumed where the last read ended. */
export class RespReader implements ReplyReader<RespValue, Limits> {
  end = 0;
  need = 1;
  /** The arrays of the reply in progress, outermost first (empty between replies). */
  private readonly frames: Frame[] = [];
  /** What is left of the reply's budgets (set when a reply starts): bulk data and lines, the slack of one line that
   * lines take first, and array elements. */
  private bytes = 0;
  private lineSlack = 0;
  private elements = 0;

  read(buf: Buffer, pos: number, limits: Limits): RespValue | typeof MORE {
    const frames = this.frames;
    if (frames.length === 0) {
      this.bytes = limits.maxBytes;
      this.lineSlack = MAX_LINE;
      this.elements = limits.maxElements;
    }
    const length = buf.length;
    let at = pos;
    for (;;) {
      // One value at `at`: a bulk string or null, an array header (then its elements), or a one-line reply.
      if (at >= length) return this.more(at, 1);
      const type = buf[at] as number;
      let value: RespValue;
      if (type === 0x24 || type === 0x2a) {
        // `$<n>\r\n` or `*<n>\r\n`: the length read from the bytes, at most 18 digits (or -1)
        let i = at + 1;
        const negative = i < length && buf[i] === 0x2d;
        if (negative) i++;
        const digitsFrom = i;
        const stop = Math.min(length, i + 19);
        let n = 0;
        while (i < stop) {
          const c = buf[i] as number;
          if (c < 0x30 || c > 0x39) break;
          n = n * 10 + (c - 0x30);
          i++;
        }
        const digits = i - digitsFrom;
        if (digits > 18 || (i < length && buf[i] !== 13)) throw this.notALength(buf, at);
        if (i + 1 >= length) return this.more(at, length - at + 1); // the line's end is not here yet
        if (digits === 0 || buf[i + 1] !== 10) throw this.notALength(buf, at);
        const after = i + 2;
        if (negative) {
          if (n !== 1) throw malformed(`a negative ${type === 0x24 ? "bulk" : "array"} length`);
          value = null;
          at = after;
        } else if (type === 0x24) {
          if (n > limits.maxBulk) throw malformed(`a value of ${n} bytes (max_value is ${limits.maxBulk})`);
          if (n > this.bytes) throw malformed("more bulk data than the command can get");
          const dataEnd = after + n;
          if (dataEnd + 2 > length) return this.more(at, dataEnd + 2 - at);
          if (buf[dataEnd] !== 13 || buf[dataEnd + 1] !== 10) throw malformed("a bulk string without CRLF");
          this.bytes -= n;
          value = view(buf, after, dataEnd);
          at = dataEnd + 2;
        } else {
          if (frames.length + 1 > MAX_DEPTH) throw malformed(`arrays nested more than ${MAX_DEPTH} deep`);
          if (n > this.elements) throw malformed(`more than ${limits.maxElements} elements`);
          this.elements -= n;
          at = after;
          if (n > 0) {
            frames.push({ items: [], left: n });
            continue;
          }
          value = [];
        }
      } else if (type === 0x2b && buf[at + 1] === 0x4f && buf[at + 2] === 0x4b && buf[at + 3] === 13) {
        // +OK, the answer to every SET
        if (at + 4 >= length) return this.more(at, length - at + 1);
        if (buf[at + 4] !== 10) throw malformed("a line without LF");
        value = "OK";
        at += 5;
      } else if (type === 0x2b || type === 0x2d || type === 0x3a) {
        const eol = buf.indexOf("\r\n", at + 1, "latin1");
        if (eol === -1) {
          if (length - at > MAX_LINE) throw malformed(`a line longer than ${MAX_LINE} bytes`);
          return this.more(at, length - at + 1);
        }
        if (eol - at > MAX_LINE) throw malformed(`a line longer than ${MAX_LINE} bytes`);
        // a line takes the reply's one line of slack first, then its bytes
        const over = eol - at - 1 - this.lineSlack;
        if (over > this.bytes) throw malformed("more bytes than the command's reply can take");
        if (over > 0) {
          this.bytes -= over;
          this.lineSlack = 0;
        } else this.lineSlack = -over;
        const text = buf.toString("latin1", at + 1, eol);
        at = eol + 2;
        if (type === 0x2b) value = text;
        else if (type === 0x2d) value = new ErrorReply(text);
        else {
          if (!/^-?[0-9]{1,19}$/.test(text)) throw malformed(`integer ${JSON.stringify(text.slice(0, 40))}`);
          const big = BigInt(text);
          value = big >= -9007199254740991n && big <= 9007199254740991n ? Number(big) : big;
        }
      } else throw malformed(`type byte 0x${type.toString(16)}`);
      // The value completes the reply, or takes its place in the array being read (which may complete it in turn).
      for (;;) {
        const top = frames[frames.length - 1];
        if (top === undefined) {
          this.end = at;
          return value;
        }
        top.items.push(value);
        if (--top.left > 0) break;
        frames.pop();
        value = top.items;
      }
    }
  }

  private more(at: number, need: number): typeof MORE {
    this.end = at;
    this.need = need;
    return MORE;
  }

  private notALength(buf: Buffer, at: number): WireFailure {
    const text = buf.toString("latin1", at + 1, Math.min(buf.length, at + 41)).split("\r")[0] as string;
    return malformed(`${JSON.stringify(text)} is not a length`);
  }
}
