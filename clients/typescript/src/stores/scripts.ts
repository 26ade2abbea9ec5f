// The Lua scripts of the Redis store, from the one copy every language loads: spec/redis/*.lua (spec/STORES.md §5).
// Their bytes are used as they are, so EVALSHA names the same SHA-1 from every language. The npm package carries
// a copy in its `redis/` folder (copied from spec/redis by `npm run build`, see scripts/copy-redis.mjs); a checkout
// reads spec/redis itself.

import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const NAMES = ["delete_if", "incr", "tag"] as const;
export type ScriptName = (typeof NAMES)[number];

let loaded: Map<ScriptName, Buffer> | undefined;

/** The directory the scripts are read from: the package's own copy, else spec/redis of the checkout. */
export function scriptsLocation(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 8; i++) {
    for (const candidate of [join(dir, "redis"), join(dir, "spec", "redis")]) {
      if (NAMES.every((n) => existsSync(join(candidate, `${n}.lua`)))) return candidate;
    }
    dir = dirname(dir);
  }
  throw new Error(
    "this installation of larder-cache has no Redis scripts (its redis/ folder, copied from spec/redis by npm run build)",
  );
}

export function scriptSource(name: ScriptName): Buffer {
  if (loaded === undefined) {
    const dir = scriptsLocation();
    loaded = new Map(NAMES.map((n) => [n, readFileSync(join(dir, `${n}.lua`))]));
  }
  return loaded.get(name) as Buffer;
}

export function scriptSha(name: ScriptName): string {
  return createHash("sha1").update(scriptSource(name)).digest("hex");
}
