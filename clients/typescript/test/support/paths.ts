// Where the tests find the repository (spec/, the Rust binaries) and this package, from the compiled file's place.

import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** clients/typescript (tests run from build/test/...). */
export const TS_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
export const REPO = resolve(TS_ROOT, "..", "..");
/** The Rust CLI (target/debug/larder), the hostile server and the fault proxy, from the environment make test sets. */
export const LARDER_BIN = process.env.LARDER_BIN ?? join(REPO, "target", "debug", "larder");
export const LARDER_HOSTILE = process.env.LARDER_HOSTILE ?? join(REPO, "target", "debug", "larder-hostile");
export const LARDER_FAULTS = process.env.LARDER_FAULTS ?? join(REPO, "target", "debug", "larder-faults");
