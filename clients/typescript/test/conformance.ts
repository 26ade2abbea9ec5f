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
import { cases as keyCases } from "./vectors/keys.js";
import { cases as signedCases } from "./vectors/signed.js";
import { cases as storageCases } from "./vectors/storage.js";
import { ringCases, storeCases } from "./vectors/stores.js";

/** The vector files this runner knows, and what lists their cases. */
export const FILES: Record<string, (document: Value) => Case[]> = {
  "entries.json": validCases,
  "invalid.json": invalidCases,
  "keys.json": keyCases,
  "ring.json": ringCases,
  "stores.json": storeCases,
  "signed.json": signedCases,
  "storage.json": storageCases,
};
const MAX_FAILED = 20;

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
    return lister(document);
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

export function judge(path: string): FileReport {
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
    try {
      c.check();
    } catch (e) {
      const err = e as Error;
      failures.push(`${c.name}: ${err.name}: ${err.message}`);
      report.failed.push(c.name);
    }
  }
  report.cases = listed.length;
  report.failed = report.failed.slice(0, MAX_FAILED);
  if (failures.length > 0) return { ...report, status: "fail", reason: failures[0] ?? null };
  return report;
}

function main(argv: string[]): number {
  if (argv.length === 0) {
    process.stderr.write("usage: conformance.js FILE… (files of spec/vectors)\n");
    return 2;
  }
  for (const path of argv) process.stdout.write(`${JSON.stringify(judge(path))}\n`);
  return 0;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) process.exitCode = main(process.argv.slice(2));
