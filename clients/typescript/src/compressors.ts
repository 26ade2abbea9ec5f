// The six compressors of FORMAT.md §3 behind one pair of functions: `compress` (the encoder's choice of level is
// its own) and `decompress`, which enforces max_size for every codec and reports only InvalidEntry.

import zlib from "node:zlib";
import { asBuffer } from "./bytes.js";
import { InvalidEntry } from "./errors.js";
import { lz4Compress, lz4Decompress } from "./lz4.js";
import { snappyCompress, snappyDecompress } from "./snappy.js";
import { zstdCompress, zstdDecompress } from "./zstd.js";

export const COMPRESSORS = ["none", "lz4", "snappy", "zstd", "brotli", "gzip"] as const;
export type Compressor = (typeof COMPRESSORS)[number];

/** The default decompressed-size limit: 64 MiB. */
export const DEFAULT_MAX_SIZE = 64 * 1024 * 1024;

const DEFAULT_LEVELS = { zstd: 3, brotli: 4, gzip: 6 } as const;

function clamp(value: number, low: number, high: number): number {
  return Math.max(low, Math.min(high, value));
}

/** `data` compressed with `name` (level: zstd 1–22, brotli 0–11, gzip 0–9; ignored by the others). */
export function compress(name: Compressor, data: Uint8Array, level?: number | null): Uint8Array {
  switch (name) {
    case "none":
      return data;
    case "lz4":
      return lz4Compress(data);
    case "snappy":
      return snappyCompress(data);
    case "zstd":
      return zstdCompress(data, clamp(level ?? DEFAULT_LEVELS.zstd, 1, 22));
    case "brotli":
      return new Uint8Array(
        zlib.brotliCompressSync(asBuffer(data), {
          params: {
            [zlib.constants.BROTLI_PARAM_QUALITY]: clamp(level ?? DEFAULT_LEVELS.brotli, 0, 11),
            [zlib.constants.BROTLI_PARAM_SIZE_HINT]: data.length,
          },
        }),
      );
    case "gzip":
      return new Uint8Array(zlib.gzipSync(asBuffer(data), { level: clamp(level ?? DEFAULT_LEVELS.gzip, 0, 9) }));
  }
}

/** `data` decompressed with `name`; at most `maxSize` bytes, else InvalidEntry too_large; corrupt_payload for
 * anything that does not decode to exactly what it declares. */
export function decompress(name: Compressor, data: Uint8Array, maxSize = DEFAULT_MAX_SIZE): Uint8Array {
  switch (name) {
    case "none":
      if (data.length > maxSize)
        throw new InvalidEntry("too_large", `payload of ${data.length} bytes exceeds the ${maxSize}-byte limit`);
      return data;
    case "lz4":
      return lz4Decompress(data, maxSize);
    case "snappy":
      return snappyDecompress(data, maxSize);
    case "zstd":
      return zstdDecompress(data, maxSize);
    case "brotli":
      return brotliDecompress(data, maxSize);
    case "gzip":
      return gzipDecompress(data, maxSize);
  }
}

interface ZlibResult {
  buffer: Buffer;
  engine: { bytesWritten: number };
}

/** Runs a zlib decoder bounded by maxSize, mapping its errors to larder's kinds; the input bytes it used. */
function bounded(codec: string, maxSize: number, run: (limit: number) => ZlibResult): ZlibResult {
  try {
    // maxOutputLength must be at least 1; an empty result is still told apart by its length.
    return run(Math.max(1, maxSize));
  } catch (e) {
    const code = (e as { code?: string }).code;
    if (code === "ERR_BUFFER_TOO_LARGE")
      throw new InvalidEntry("too_large", `${codec} payload decompresses to more than the ${maxSize}-byte limit`);
    throw new InvalidEntry("corrupt_payload", `${codec}: ${(e as Error).message}`);
  }
}

function brotliDecompress(data: Uint8Array, maxSize: number): Uint8Array {
  const r = bounded(
    "brotli",
    maxSize,
    (limit) =>
      zlib.brotliDecompressSync(asBuffer(data), {
        maxOutputLength: limit,
        info: true,
      } as zlib.BrotliOptions) as unknown as ZlibResult,
  );
  if (r.buffer.length > maxSize)
    throw new InvalidEntry("too_large", `brotli payload decompresses to more than the ${maxSize}-byte limit`);
  if (r.engine.bytesWritten !== data.length)
    throw new InvalidEntry("corrupt_payload", `${data.length - r.engine.bytesWritten} bytes after the brotli stream`);
  return new Uint8Array(r.buffer.buffer, r.buffer.byteOffset, r.buffer.length);
}

/** One gzip member (RFC 1952): the header read here, the deflate stream by zlib (bounded), then the trailer's
 * CRC-32 and length checked, and nothing after it (node's gunzip would go on into a second member). */
function gzipDecompress(data: Uint8Array, maxSize: number): Uint8Array {
  const corrupt = (why: string): never => {
    throw new InvalidEntry("corrupt_payload", `gzip: ${why}`);
  };
  if (data.length < 18) corrupt("member too short");
  if (data[0] !== 0x1f || data[1] !== 0x8b) corrupt("not a gzip member");
  if (data[2] !== 8) corrupt("compression method is not deflate");
  const flags = data[3] as number;
  if (flags & 0xe0) corrupt("reserved flag set");
  let pos = 10;
  if (flags & 0x04) {
    if (pos + 2 > data.length) corrupt("extra field cut short");
    pos += 2 + ((data[pos] as number) | ((data[pos + 1] as number) << 8));
  }
  for (const bit of [0x08, 0x10]) {
    if (flags & bit) {
      while (pos < data.length && data[pos] !== 0) pos++;
      pos++;
    }
  }
  if (flags & 0x02) pos += 2;
  if (pos > data.length) corrupt("header cut short");
  const body = data.subarray(pos);
  const r = bounded(
    "gzip",
    maxSize,
    (limit) => zlib.inflateRawSync(asBuffer(body), { maxOutputLength: limit, info: true }) as unknown as ZlibResult,
  );
  if (r.buffer.length > maxSize)
    throw new InvalidEntry("too_large", `gzip payload decompresses to more than the ${maxSize}-byte limit`);
  const trailer = pos + r.engine.bytesWritten;
  if (trailer + 8 > data.length) corrupt("member is truncated");
  if (trailer + 8 < data.length) corrupt(`${data.length - trailer - 8} bytes after the gzip member`);
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  if (view.getUint32(trailer, true) !== zlib.crc32(r.buffer)) corrupt("CRC-32 does not match");
  if (view.getUint32(trailer + 4, true) !== r.buffer.length % 2 ** 32) corrupt("length does not match");
  return new Uint8Array(r.buffer.buffer, r.buffer.byteOffset, r.buffer.length);
}
