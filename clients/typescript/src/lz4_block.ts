// An LZ4 block encoder in JavaScript that writes straight into the caller's buffer (behind an entry's header and
// size prefix) and gives up as soon as the block would not be shorter than the caller allows: an entry keeps LZ4
// only when it shrinks the payload (FORMAT.md §3), so an incompressible value costs one bounded pass, not a
// compression and a comparison. At 1 KiB it is cheaper than crossing into lz4-napi (~2 µs, most of it the N-API
// call and its output Buffer) or lz4js (which clears a 256 KiB hash table on every call): the table here is never
// cleared, its slots carry the call's base so an earlier call's positions read as absent.
//
// The block keeps LZ4's end rules, which liblz4's decoder enforces: the last 5 bytes are literals, the last match
// starts at least 12 bytes before the end, and an input under 13 bytes is all literals.

const HASH_LOG = 16;
const MIN_MATCH = 4;
const LAST_LITERALS = 5;
const MF_LIMIT = 12;
const MAX_OFFSET = 0xffff;
/** After 2^SKIP_STRENGTH misses in a row the scan steps 2 bytes, then 3..., as liblz4 does on incompressible data. */
const SKIP_STRENGTH = 6;

const table = new Int32Array(1 << HASH_LOG);
/** Added to every position stored by the current call; slots below it belong to earlier calls. */
let base = 1;
const MAX_BASE = 0x7000_0000;

function hash(sequence: number): number {
  return Math.imul(sequence, 2654435761) >>> (32 - HASH_LOG);
}

/** The most bytes a sequence with `literals` literals and a match of `match` bytes (0: none) takes. */
function sequenceBound(literals: number, match: number): number {
  return 1 + literals + ((literals / 255) | 0) + 1 + (match > 0 ? 2 + ((match / 255) | 0) + 1 : 0);
}

/** Writes a length's continuation bytes (the part past 15) at `op`; returns the new position. */
function putLength(dst: Uint8Array, op: number, rest: number): number {
  let r = rest;
  while (r >= 255) {
    dst[op++] = 255;
    r -= 255;
  }
  dst[op++] = r;
  return op;
}

function putLiterals(src: Uint8Array, from: number, to: number, dst: Uint8Array, op: number): number {
  if (to - from < 32) {
    for (let i = from; i < to; i++) dst[op++] = src[i] as number;
    return op;
  }
  dst.set(src.subarray(from, to), op);
  return op + (to - from);
}

/**
 * `src` as one LZ4 block written into `dst` from `start`, ending at or before `limit`: returns the block's end, or -1
 * when it would pass `limit` (nothing beyond `limit` is written).
 */
export function lz4BlockInto(src: Uint8Array, dst: Uint8Array, start: number, limit: number): number {
  const n = src.length;
  if (base + n + 1 > MAX_BASE) {
    table.fill(0);
    base = 1;
  }
  const b = base;
  base += n + 1;
  let op = start;
  let anchor = 0;
  const view = new DataView(src.buffer, src.byteOffset, src.byteLength);
  if (n >= MF_LIMIT + 1) {
    const mfLimit = n - MF_LIMIT;
    const matchLimit = n - LAST_LITERALS;
    let ip = 0;
    let misses = 1 << SKIP_STRENGTH;
    while (ip < mfLimit) {
      const sequence = view.getInt32(ip, true);
      const h = hash(sequence);
      const candidate = (table[h] as number) - b;
      table[h] = ip + b;
      if (candidate < 0 || ip - candidate > MAX_OFFSET || view.getInt32(candidate, true) !== sequence) {
        ip += misses++ >> SKIP_STRENGTH;
        continue;
      }
      let ref = candidate;
      while (ip > anchor && ref > 0 && src[ip - 1] === src[ref - 1]) {
        ip--;
        ref--;
      }
      let length = MIN_MATCH;
      while (
        ip + length + 8 <= matchLimit &&
        view.getInt32(ip + length, true) === view.getInt32(ref + length, true) &&
        view.getInt32(ip + length + 4, true) === view.getInt32(ref + length + 4, true)
      )
        length += 8;
      while (ip + length + 4 <= matchLimit && view.getInt32(ip + length, true) === view.getInt32(ref + length, true))
        length += 4;
      while (ip + length < matchLimit && src[ip + length] === src[ref + length]) length++;
      const literals = ip - anchor;
      if (op + sequenceBound(literals, length) > limit) return -1;
      const tokenAt = op++;
      let token: number;
      if (literals >= 15) {
        token = 0xf0;
        op = putLength(dst, op, literals - 15);
      } else token = literals << 4;
      op = putLiterals(src, anchor, ip, dst, op);
      const offset = ip - ref;
      dst[op++] = offset & 0xff;
      dst[op++] = offset >>> 8;
      const extra = length - MIN_MATCH;
      if (extra >= 15) {
        token |= 15;
        op = putLength(dst, op, extra - 15);
      } else token |= extra;
      dst[tokenAt] = token;
      ip += length;
      anchor = ip;
      misses = 1 << SKIP_STRENGTH;
      if (ip < mfLimit) table[hash(view.getInt32(ip - 2, true))] = ip - 2 + b;
    }
  }
  const literals = n - anchor;
  if (op + sequenceBound(literals, 0) > limit) return -1;
  const tokenAt = op++;
  if (literals >= 15) {
    dst[tokenAt] = 0xf0;
    op = putLength(dst, op, literals - 15);
  } else dst[tokenAt] = literals << 4;
  return putLiterals(src, anchor, n, dst, op);
}

/** The largest block `n` input bytes can need (all literals). */
export function lz4BlockBound(n: number): number {
  return sequenceBound(n, 0);
}
