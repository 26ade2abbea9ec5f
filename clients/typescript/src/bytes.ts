// Small byte helpers used everywhere: strict UTF-8, hex, base64, and little-endian integers as bigint.

const strictUtf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
const lossyUtf8 = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true });
const encoder = new TextEncoder();

/** The UTF-8 text of `data`, or undefined when it is not valid UTF-8 (RFC 3629). */
export function utf8OrUndefined(data: Uint8Array): string | undefined {
  try {
    return strictUtf8.decode(data);
  } catch {
    return undefined;
  }
}

/** The UTF-8 text of `data` with each invalid sequence as U+FFFD (Rust's `from_utf8_lossy`). */
export function utf8Lossy(data: Uint8Array): string {
  return lossyUtf8.decode(data);
}

export function utf8(text: string): Uint8Array {
  return encoder.encode(text);
}

/** Whether `text` has a lone surrogate (it has no UTF-8 form). */
export function hasLoneSurrogate(text: string): boolean {
  return !text.isWellFormed();
}

export function toHex(data: Uint8Array): string {
  return Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString("hex");
}

export function fromHex(text: string): Uint8Array {
  if (text.length % 2 !== 0 || !/^[0-9a-fA-F]*$/.test(text)) throw new Error("not hex");
  return new Uint8Array(Buffer.from(text, "hex"));
}

export function toBase64(data: Uint8Array): string {
  return Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString("base64");
}

/** Strict standard base64 (padded); throws on anything else. */
export function fromBase64(text: string): Uint8Array {
  if (!/^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/.test(text)) throw new Error("not base64");
  return new Uint8Array(Buffer.from(text, "base64"));
}

export function concat(parts: Uint8Array[]): Uint8Array {
  let length = 0;
  for (const p of parts) length += p.length;
  const out = new Uint8Array(length);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

export function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** A view of `data` as a Buffer without copying. */
export function asBuffer(data: Uint8Array): Buffer {
  return Buffer.isBuffer(data) ? data : Buffer.from(data.buffer, data.byteOffset, data.byteLength);
}
