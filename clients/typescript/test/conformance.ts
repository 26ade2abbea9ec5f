// The TypeScript column of the conformance matrix (spec/vectors/README.md, "Conformance runners"):
//
//   node clients/typescript/build/test/conformance.js spec/vectors/storage.json [FILE…]
//
// prints one JSON line per file and exits 0 whenever it could judge the files (2 without any). The cases are
// those of test/vectors, which the test suite runs too (vectors.test.ts), so the matrix and the suite agree.

import { readFileSync } from "node:fs";
import { basename } from "node:path";
import { pathToFileURL } from "node:url";
import type { Value } from "../src/value.js";
import { type Case, get, readVectorText } from "./vectors/common.js";
import { invalidCases, validCases } from "./vectors/entries.js";
import { hostileFileCases } from "./vectors/hostile_files.js";
import { hostileKeyCases } from "./vectors/hostile_keys.js";
import { hostilePageCases } from "./vectors/hostile_pages.js";
import { hostileReplyCases } from "./vectors/hostile_replies.js";
import { cases as keyCases } from "./vectors/keys.js";
import { outageCases } from "./vectors/outage.js";
import { cases as signedCases } from "./vectors/signed.js";
import { cases as storageCases } from "./vectors/storage.js";
import { ringCases, storeCases } from "./vectors/stores.js";

/** The vector files this runner knows, and what lists their cases (from the document and the file's path). The
 * hostile_*.json cases talk to stores, to memcached and Redis (LARDER_CONFORMANCE_MEMCACHED, LARDER_CONFORMANCE_REDIS)
 * and to larder-hostile (LARDER_HOSTILE); outage.json puts larder-faults (LARDER_FAULTS) before the same memcached and
 * Redis. A case that lacks its variable fails, saying which. */
export const FILES: Record<string, (document: Value, path: string) => Case[]> = {
  "entries.json": validCases,
  "invalid.json": invalidCases,
  "keys.json": keyCases,
  "ring.json": ringCases,
  "stores.json": storeCases,
  "signed.json": signedCases,
  "storage.json": storageCases,
  "hostile_keys.json": hostileKeyCases,
  "hostile_pages.json": hostilePageCases,
  "hostile_files.json": hostileFileCases,
  "hostile_replies.json": hostileReplyCases,
  "outage.json": outageCases,
};
const MAX_FAILED = 20;
/** The longest one case may take before it is reported as hung (the slowest, a hostile_replies.json case of nine
 * operations against a server that drips, takes a few seconds). */
const CASE_MS = 120_000;

class Unknown extends Error {}

/** The cases of the vector file at `path`; throws Unknown when it cannot be judged. */
export function casesOf(path: string): Case[] {
  const name = basename(path);
  const lister = FILES[name];
  if (lister === undefined)
    throw new Unknown(
      `${name} is not a vector file this runner knows: add it to clients/typescript/test/conformance.ts`,
    );
  let document: Value;
  try {
    document = readVectorText(readFileSync(path, "utf8"));
  } catch (e) {
    throw new Unknown(`cannot read ${path}: ${(e as Error).message}`);
  }
  if (get(document, "schema") !== 1) throw new Unknown(`${name} is not a schema 1 vector file`);
  try {
    return lister(document, path);
  } catch (e) {
    throw new Unknown(`${name} does not have the shape of ${name}: ${(e as Error).name}: ${(e as Error).message}`);
  }
}

export interface FileReport {
  language: "typescript";
  file: string;
  status: "pass" | "fail" | "not_applicable";
  cases: number;
  failed: string[];
  reason: string | null;
}

/** Runs one case: what it threw, or undefined; a case that does not settle within CASE_MS is a failure. */
export async function runCase(c: Case): Promise<unknown> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      c.check(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`the case did not finish within ${CASE_MS} ms`)), CASE_MS);
      }),
    ]);
    return undefined;
  } catch (e) {
    return e;
  } finally {
    clearTimeout(timer);
  }
}

export async function judge(path: string): Promise<FileReport> {
  const report: FileReport = {
    language: "typescript",
    file: basename(path),
    status: "pass",
    cases: 0,
    failed: [],
    reason: null,
  };
  let listed: Case[];
  try {
    listed = casesOf(path);
  } catch (e) {
    if (!(e instanceof Unknown) && !(e instanceof Error)) throw e;
    return { ...report, status: "fail", reason: (e as Error).message };
  }
  const failures: string[] = [];
  for (const c of listed) {
    const e = await runCase(c);
    if (e === undefined) continue;
    const err = e instanceof Error ? e : new Error(String(e));
    failures.push(`${c.name}: ${err.name}: ${err.message}`);
    report.failed.push(c.name);
  }
  report.cases = listed.length;
  report.failed = report.failed.slice(0, MAX_FAILED);
  if (failures.length > 0) return { ...report, status: "fail", reason: failures[0] ?? null };
  return report;
}

async function main(argv: string[]): Promise<number> {
  if (argv.length === 0) {
    process.stderr.write("usage: conformance.js FILE… (files of spec/vectors)\n");
    return 2;
  }
  for (const path of argv) {
    const line = `${JSON.stringify(await judge(path))}\n`;
    await new Promise<void>((resolve) => process.stdout.write(line, () => resolve()));
  }
  return 0;
}

// Exits once the lines are written: a connection a hostile server left half-open must not keep the runner alive.
if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href)
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (e: unknown) => {
      process.stderr.write(`${e instanceof Error ? e.stack : String(e)}\n`);
      process.exit(1);
    },
  );
