// Signed ext values (FORMAT.md §2, "Ext 80 and 101 are signed"): the HMAC-SHA256 envelope Python's pickles and
// Ruby's Marshal dumps travel in. TypeScript never interprets those payloads (they stay opaque `Ext` values); it
// signs and verifies the envelope so tools and tests can check it, byte-identically to the other languages.

import { createHmac, timingSafeEqual } from "node:crypto";
import { concat, utf8 } from "./bytes.js";

export const PICKLE_EXT = 80;
export const MARSHAL_EXT = 101;
export const SIGNING_SCHEME = 1;
const SIGNING_KEY_MESSAGE = "larder.signed-ext.v1";
const MAC_PREFIX = utf8("larder-ext\u0000");

/** Data that is not signed by any of the secrets given: the read is a miss. */
export class Refused extends Error {
  override readonly name = "Refused";
}

/** HMAC-SHA256(key = secret, message = "larder.signed-ext.v1"). */
export function signingKey(secret: string): Uint8Array {
  return new Uint8Array(createHmac("sha256", utf8(secret)).update(SIGNING_KEY_MESSAGE).digest());
}

function mac(key: Uint8Array, extType: number, payload: Uint8Array): Uint8Array {
  return new Uint8Array(
    createHmac("sha256", key)
      .update(concat([MAC_PREFIX, Uint8Array.of(extType & 0xff), payload]))
      .digest(),
  );
}

export class Signer {
  private readonly keys: Uint8Array[];
  constructor(secret: string, fallbacks: readonly string[] = []) {
    this.keys = [secret, ...fallbacks].map(signingKey);
  }

  /** The ext data: scheme byte, mac, payload. Signed with the current secret only. */
  sign(extType: number, payload: Uint8Array): Uint8Array {
    return concat([Uint8Array.of(SIGNING_SCHEME), mac(this.keys[0] as Uint8Array, extType, payload), payload]);
  }

  /** The payload of signed ext data; throws Refused when no secret's mac matches (compared in constant time). */
  verify(extType: number, data: Uint8Array): Uint8Array {
    if (data.length < 33) throw new Refused(`signed data of ${data.length} bytes (at least 33)`);
    if (data[0] !== SIGNING_SCHEME) throw new Refused(`signing scheme ${data[0]}`);
    const stored = data.subarray(1, 33);
    const payload = data.subarray(33);
    for (const key of this.keys) {
      if (timingSafeEqual(stored, mac(key, extType, payload))) return payload;
    }
    throw new Refused("the mac does not match any configured secret");
  }
}
