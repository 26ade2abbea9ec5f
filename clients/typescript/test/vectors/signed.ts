// signed.json (FORMAT.md §2, "Ext 80 and 101 are signed"): signing is byte-identical and verifies; refused data
// does not verify; an older secret among the fallbacks still verifies while writers sign with the current one.
// TypeScript never interprets pickle or Marshal payloads: every such entry decodes to an opaque Ext of its data.

import { fromHex, toHex } from "../../src/bytes.js";
import { decode } from "../../src/entry.js";
import { Refused, Signer, signingKey } from "../../src/signing.js";
import { Ext, type Value } from "../../src/value.js";
import { assert, type Case, each, get, list, num, section, str } from "./common.js";

export function cases(document: Value): Case[] {
  assert(get(document, "signing_key_message") === "larder.signed-ext.v1", "the spec's signing key message");
  assert(get(document, "mac_prefix_hex") === toHex(Buffer.from("larder-ext\u0000")), "the spec's MAC prefix");
  const sections: Array<[string, (c: Value) => void]> = [
    ["signed", checkSigned],
    ["refused", checkRefused],
    ["rotation", checkRotation],
  ];
  return sections.flatMap(([name, check]) => each(section(document, name), check, `${name}/`));
}

const hex = (c: Value, name: string): Uint8Array => fromHex(str(get(c, name), name));
const secrets = (c: Value): string[] => list(get(c, "secrets"), "secrets").map((s) => str(s, "secret"));

function opaque(c: Value, extType: number, data: Uint8Array): void {
  const value = decode(hex(c, "entry_hex")).value;
  assert(
    value instanceof Ext && value.type === extType && toHex(value.data) === toHex(data),
    "the entry holds the ext, opaque",
  );
}

function refuses(signer: Signer, extType: number, data: Uint8Array): boolean {
  try {
    signer.verify(extType, data);
    return false;
  } catch (e) {
    if (e instanceof Refused) return true;
    throw e;
  }
}

function checkSigned(c: Value): void {
  const extType = num(get(c, "ext_type"), "ext_type");
  const secret = str(get(c, "secret"), "secret");
  const payload = hex(c, "payload_hex");
  const data = hex(c, "data_hex");
  assert(toHex(signingKey(secret)) === get(c, "signing_key_hex"), "signing key");
  const signer = new Signer(secret);
  assert(toHex(signer.sign(extType, payload)) === toHex(data), "signed bytes");
  assert(toHex(signer.verify(extType, data)) === toHex(payload), "verified payload");
  opaque(c, extType, data);
}

function checkRefused(c: Value): void {
  const extType = num(get(c, "ext_type"), "ext_type");
  const data = hex(c, "data_hex");
  const s = secrets(c);
  if (s.length > 0) assert(refuses(new Signer(s[0] as string, s.slice(1)), extType, data), "verified");
  opaque(c, extType, data);
}

function checkRotation(c: Value): void {
  const extType = num(get(c, "ext_type"), "ext_type");
  const data = hex(c, "data_hex");
  const [current, ...fallbacks] = secrets(c) as [string, ...string[]];
  assert(
    toHex(new Signer(current, fallbacks).verify(extType, data)) === get(c, "payload_hex"),
    "verified with a fallback",
  );
  assert(refuses(new Signer(current), extType, data), "verified without the fallback");
  const written = new Signer(current, fallbacks).sign(extType, hex(c, "payload_hex"));
  assert(refuses(new Signer(fallbacks[0] as string), extType, written), "writers sign with the current secret only");
}
