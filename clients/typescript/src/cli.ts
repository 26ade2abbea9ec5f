// `larder-ts encode|inspect|key`: the format commands every larder implementation ships (spec/CLI.md), with the
// same flags, output and exit statuses as the Rust `larder` binary: 0 on success, 1 when inspect is given an
// invalid entry, 2 for a usage error or bad input; errors are one line on stderr beginning with `larder: `.

import { readFileSync } from "node:fs";
import { fromBase64, toBase64, utf8, utf8OrUndefined } from "./bytes.js";
import { COMPRESSORS, type Compressor, DEFAULT_MAX_SIZE } from "./compressors.js";
import { DEFAULT_THRESHOLD, type EncodeOptions, encode, encodeResponse } from "./entry.js";
import { InvalidEntry } from "./errors.js";
import { SERIALIZERS, type Serializer } from "./header.js";
import { JsonError, parseJson } from "./json.js";
import { DEFAULT_DROP, urlKey } from "./keys.js";
import { Report } from "./report.js";
import { CONTENT_ENCODINGS, type ContentEncoding, HttpResponse } from "./response.js";
import type { Value } from "./value.js";

export const FORCE_TTY_VAR = "LARDER_FORCE_TTY";
const NOT_UTF8_TEXT = "stdin is not UTF-8 text (--serializer text); use --serializer raw for other bytes";
const U64_MAX = 2n ** 64n - 1n;

class Failure extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

const usage = (message: string): Failure => new Failure(2, `${message} (see --help)`);

interface OptionSpec {
  takesValue: boolean;
  repeatable?: boolean;
  choices?: readonly string[];
}

const ENCODE: Record<string, OptionSpec> = {
  serializer: { takesValue: true, choices: SERIALIZERS },
  compressor: { takesValue: true, choices: COMPRESSORS },
  ttl: { takesValue: true },
  stale: { takesValue: true },
  "created-at": { takesValue: true },
  version: { takesValue: true },
  tag: { takesValue: true, repeatable: true },
  threshold: { takesValue: true },
  level: { takesValue: true },
  kind: { takesValue: true, choices: ["value", "response"] },
  "json-input": { takesValue: false },
};
const INSPECT: Record<string, OptionSpec> = {
  json: { takesValue: false },
  "max-size": { takesValue: true },
  body: { takesValue: false },
  full: { takesValue: false },
};
const KEY: Record<string, OptionSpec> = {
  method: { takesValue: true },
  namespace: { takesValue: true },
  drop: { takesValue: true, repeatable: true },
  "no-default-drops": { takesValue: false },
};

const HELP = `usage: larder-ts {encode,inspect,key} ...

Encode, inspect and key larder entries (spec/FORMAT.md, spec/CLI.md).

  encode [--serializer msgpack|json|raw|text] [--compressor none|lz4|snappy|zstd|brotli|gzip]
         [--ttl SECS] [--stale SECS] [--created-at MS] [--version V] [--tag T]...
         [--threshold BYTES] [--level N] [--kind value|response] [--json-input]
      Encode stdin as an entry, written to stdout. text stores stdin's UTF-8 verbatim, raw its bytes; msgpack and
      json read one JSON document; --kind response reads {"status", "headers", "body", "content_encoding"}.
  inspect [FILE|-] [--json] [--max-size BYTES] [--body] [--full]
      Print an entry's header and decoded value; exits 1, naming the error kind, for an invalid entry.
  key URL [--method M] [--namespace N] [--drop PARAM]... [--no-default-drops]
      Print the cache key of a request URL (spec/FORMAT.md §5.3).
`;

interface Parsed {
  options: Map<string, string[]>;
  positionals: string[];
  help: boolean;
}

function parse(args: string[], specs: Record<string, OptionSpec>): Parsed {
  const options = new Map<string, string[]>();
  const positionals: string[] = [];
  let help = false;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    if (arg === "--help" || arg === "-h") {
      help = true;
      continue;
    }
    if (!arg.startsWith("--") || arg === "-") {
      positionals.push(arg);
      continue;
    }
    const eq = arg.indexOf("=");
    const name = arg.slice(2, eq === -1 ? undefined : eq);
    const spec = specs[name];
    if (spec === undefined) throw usage(`unexpected argument '${arg}'`);
    let value = "";
    if (spec.takesValue) {
      if (eq !== -1) value = arg.slice(eq + 1);
      else {
        const next = args[++i];
        if (next === undefined) throw usage(`a value is required for '--${name}'`);
        value = next;
      }
      if (spec.choices !== undefined && !spec.choices.includes(value))
        throw usage(`invalid value '${value}' for '--${name}' [possible values: ${spec.choices.join(", ")}]`);
    } else if (eq !== -1) throw usage(`unexpected value for '--${name}'`);
    const seen = options.get(name);
    if (seen !== undefined && !spec.repeatable) throw usage(`the argument '--${name}' cannot be used multiple times`);
    options.set(name, [...(seen ?? []), value]);
  }
  return { options, positionals, help };
}

function u64(text: string | undefined, name: string): bigint | undefined {
  if (text === undefined) return undefined;
  if (!/^\+?[0-9]+$/.test(text) || BigInt(text) > U64_MAX)
    throw usage(`invalid value '${text}' for '--${name}': expected an integer in 0..2^64-1`);
  return BigInt(text);
}

function i32(text: string | undefined, name: string): number | undefined {
  if (text === undefined) return undefined;
  if (!/^[+-]?[0-9]+$/.test(text) || Number(text) < -(2 ** 31) || Number(text) > 2 ** 31 - 1)
    throw usage(`invalid value '${text}' for '--${name}': expected a 32-bit integer`);
  return Number(text);
}

const small = (n: bigint): number | bigint => (n <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(n) : n);
const min = (a: bigint, b: bigint): bigint => (a < b ? a : b);

function jsonDocument(data: Uint8Array): Value {
  const text = utf8OrUndefined(data);
  if (text === undefined) throw new Failure(2, "stdin is not a JSON document: not UTF-8");
  try {
    return parseJson(text, { duplicates: "last", maxDepth: 1000 });
  } catch (e) {
    if (e instanceof JsonError) throw new Failure(2, `stdin is not a JSON document: ${e.message}`);
    throw e;
  }
}

function bytesFromJson(value: Value, what: string): Uint8Array {
  if (typeof value === "string") return utf8(value);
  if (value instanceof Map && value.size === 1 && typeof value.get("$base64") === "string") {
    const text = value.get("$base64") as string;
    let data: Uint8Array;
    try {
      data = fromBase64(text);
    } catch {
      throw new Failure(2, "bad base64: not in canonical padded form");
    }
    if (toBase64(data) !== text) throw new Failure(2, "bad base64: not in canonical padded form");
    return data;
  }
  throw new Failure(2, what);
}

function responseFromJson(document: Value): HttpResponse {
  const doc = document instanceof Map ? document : undefined;
  const status = doc?.get("status");
  if (typeof status !== "number" || !Number.isInteger(status))
    throw new Failure(2, 'a response document needs an integer "status"');
  const headers: Array<[Uint8Array, Uint8Array]> = [];
  if (doc?.has("headers")) {
    const list = doc.get("headers");
    if (!Array.isArray(list)) throw new Failure(2, '"headers" must be a list of [name, value]');
    for (const pair of list) {
      if (!Array.isArray(pair) || pair.length !== 2) throw new Failure(2, "each header must be a [name, value] pair");
      headers.push([
        bytesFromJson(pair[0] as Value, "a header name must be a string"),
        bytesFromJson(pair[1] as Value, "a header value must be a string"),
      ]);
    }
  }
  const body = doc?.has("body")
    ? bytesFromJson(doc.get("body") as Value, '"body" must be a string or {"$base64": ...}')
    : new Uint8Array(0);
  const encoding = doc?.get("content_encoding") ?? "identity";
  if (typeof encoding !== "string") throw new Failure(2, '"content_encoding" must be a string');
  const canonical = [...encoding].every((c) => c.charCodeAt(0) < 128) ? encoding.toLowerCase() : encoding;
  if (!(CONTENT_ENCODINGS as readonly string[]).includes(canonical))
    throw new Failure(2, `unknown content encoding '${encoding}' (expected identity, gzip, br or zstd)`);
  try {
    return new HttpResponse(status, headers, body, canonical as ContentEncoding);
  } catch (e) {
    throw new Failure(2, (e as Error).message);
  }
}

function runEncode(p: Parsed, stdin: Uint8Array): Uint8Array {
  if (p.positionals.length > 0) throw usage(`unexpected argument '${p.positionals[0]}'`);
  const one = (name: string): string | undefined => p.options.get(name)?.[0];
  const serializer = (one("serializer") ?? "msgpack") as Serializer;
  const ttl = u64(one("ttl"), "ttl") ?? 0n;
  const stale = u64(one("stale"), "stale") ?? 0n;
  const createdAt = u64(one("created-at"), "created-at");
  const threshold = u64(one("threshold"), "threshold") ?? BigInt(DEFAULT_THRESHOLD);
  const ttlMs = min(ttl * 1000n, U64_MAX);
  const created = createdAt ?? BigInt(Date.now());
  const options: EncodeOptions = {
    compressor: (one("compressor") ?? "lz4") as Compressor,
    threshold: Number(min(threshold, BigInt(Number.MAX_SAFE_INTEGER))),
    level: i32(one("level"), "level") ?? null,
    createdAt: small(created),
    expiresAt: ttlMs === 0n ? 0 : small(min(created + ttlMs, U64_MAX)),
    staleMs: small(min(stale * 1000n, U64_MAX)),
    version: one("version"),
    tags: p.options.get("tag") ?? [],
  };
  try {
    if (one("kind") === "response") {
      if (serializer !== "msgpack") throw new Failure(2, "--kind response needs --serializer msgpack");
      return encodeResponse(responseFromJson(jsonDocument(stdin)), options);
    }
    let value: Value;
    const jsonInput = p.options.has("json-input");
    if (serializer === "raw" && !jsonInput) value = stdin;
    else if (serializer === "text" && !jsonInput) {
      const text = utf8OrUndefined(stdin);
      if (text === undefined) throw new Failure(2, NOT_UTF8_TEXT);
      value = text;
    } else {
      const document = jsonDocument(stdin);
      if (serializer === "text") {
        if (typeof document !== "string")
          throw new Failure(2, "--serializer text --json-input needs a JSON string on stdin");
        value = document;
      } else if (serializer === "raw") {
        value = bytesFromJson(document, '--serializer raw --json-input needs a JSON string or {"$base64": ...}');
      } else value = document;
    }
    return encode(value, { ...options, serializer });
  } catch (e) {
    if (e instanceof Failure) throw e;
    throw new Failure(2, `cannot encode: ${(e as Error).message}`);
  }
}

/** Whether stdout is a terminal, unless LARDER_FORCE_TTY says otherwise. */
function isTerminal(env: Environment): boolean {
  const forced = env.vars[FORCE_TTY_VAR];
  if (forced === "0" || forced === "1") return forced === "1";
  return env.stdoutIsTty;
}

/** What a command sees of its process: stdin, the environment's variables, whether stdout is a terminal. */
export interface Environment {
  readStdin: () => Uint8Array;
  vars: Record<string, string | undefined>;
  stdoutIsTty: boolean;
}

function runInspect(p: Parsed, env: Environment): Uint8Array {
  if (p.positionals.length > 1) throw usage(`unexpected argument '${p.positionals[1]}'`);
  const file = p.positionals[0] ?? "-";
  let data: Uint8Array;
  if (file === "-") data = env.readStdin();
  else {
    try {
      data = new Uint8Array(readFileSync(file));
    } catch (e) {
      throw new Failure(2, `cannot read ${file}: ${(e as Error).message}`);
    }
  }
  const maxSize = u64(p.options.get("max-size")?.[0], "max-size") ?? BigInt(DEFAULT_MAX_SIZE);
  let report: Report;
  try {
    report = Report.of(data, Number(min(maxSize, BigInt(Number.MAX_SAFE_INTEGER))));
  } catch (e) {
    if (e instanceof InvalidEntry) throw new Failure(1, `invalid entry: ${e.kind}: ${e.detail}`);
    throw e;
  }
  if (p.options.has("json")) return utf8(report.json());
  const terminal = isTerminal(env);
  const cut = terminal && !p.options.has("full");
  const human = utf8(report.human(cut));
  if (!p.options.has("body")) return human;
  return Buffer.concat([human, utf8("\n"), report.bodyOutput(terminal, cut)]);
}

function runKey(p: Parsed): Uint8Array {
  if (p.positionals.length === 0) throw usage("the following required arguments were not provided: <URL>");
  if (p.positionals.length > 1) throw usage(`unexpected argument '${p.positionals[1]}'`);
  const drop = [...(p.options.has("no-default-drops") ? [] : DEFAULT_DROP), ...(p.options.get("drop") ?? [])];
  try {
    const key = urlKey(p.options.get("method")?.[0] ?? "GET", p.positionals[0] as string, {
      namespace: p.options.get("namespace")?.[0] ?? "",
      drop,
    });
    return utf8(`${key}\n`);
  } catch (e) {
    throw new Failure(2, (e as Error).message);
  }
}

/** Runs one command; returns [exit status, stdout bytes, stderr text]. */
export function run(argv: readonly string[], environment: Environment): [number, Uint8Array, string] {
  const env: Environment = {
    ...environment,
    readStdin: () => {
      try {
        return environment.readStdin();
      } catch (e) {
        throw new Failure(2, `cannot read stdin: ${(e as Error).message}`);
      }
    },
  };
  try {
    const [command, ...rest] = argv;
    if (command === "--help" || command === "-h") return [0, utf8(HELP), ""];
    const specs = command === "encode" ? ENCODE : command === "inspect" ? INSPECT : command === "key" ? KEY : undefined;
    if (specs === undefined) {
      if (command === undefined) throw usage("a subcommand is required: encode, inspect or key");
      throw usage(`unrecognized subcommand '${command}'`);
    }
    const parsed = parse(rest, specs);
    if (parsed.help) return [0, utf8(HELP), ""];
    if (command === "encode") return [0, runEncode(parsed, env.readStdin()), ""];
    if (command === "inspect") return [0, runInspect(parsed, env), ""];
    return [0, runKey(parsed), ""];
  } catch (e) {
    if (e instanceof Failure) return [e.status, new Uint8Array(0), `larder: ${e.message}\n`];
    throw e;
  }
}
