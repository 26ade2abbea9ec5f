// storage.json (spec/HTTP.md §1): placeholder until the storage rules are ported.
import type { Value } from "../../src/value.js";
import type { Case } from "./common.js";
export function cases(_document: Value): Case[] {
  throw new Error("storage rules not implemented yet");
}
