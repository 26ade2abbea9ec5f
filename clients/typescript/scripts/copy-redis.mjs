// Copies spec/redis/*.lua into this package's redis/ folder at build time, so the npm package carries the very
// bytes every language loads (src/stores/scripts.ts); spec/redis lies outside the package, where `files` cannot point.
import { copyFileSync, existsSync, mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const spec = join(root, "..", "..", "spec", "redis");
if (!existsSync(spec)) {
  if (existsSync(join(root, "redis", "incr.lua"))) process.exit(0);
  throw new Error(`no ${spec}: build from a checkout of larder`);
}
mkdirSync(join(root, "redis"), { recursive: true });
for (const name of ["delete_if", "incr", "tag"]) copyFileSync(join(spec, `${name}.lua`), join(root, "redis", `${name}.lua`));
