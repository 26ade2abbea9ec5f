// What `inspect` prints (spec/CLI.md): an entry's header and value as labelled lines or as one JSON object, and
// on request its body. The text is specified to the byte so every language's inspect can be compared.

import { DEFAULT_MAX_SIZE } from "./compressors.js";
import { bytesJson, bytesText, CUT_AT, cutText, DisplayTooLarge, displayJson } from "./display.js";
import { decodePayload } from "./entry.js";
import { InvalidEntry } from "./errors.js";
import type { Header, Millis, Serializer } from "./header.js";
import { quoteJson } from "./json.js";
import { HttpResponse } from "./response.js";
import { deserialize } from "./serializers.js";

/** The last millisecond of year 9999: later times print without their date. */
export const LAST_MS_OF_9999 = 253_402_300_799_999;
export const DISPLAY_EXPANSION = 16;
export const DISPLAY_ALLOWANCE = 1 << 20;

export function timeText(ms: Millis): string {
  if (typeof ms === "bigint" || ms > LAST_MS_OF_9999) return String(ms);
  return `${ms} (${new Date(ms).toISOString()})`;
}

/** The display JSON of a value payload; InvalidEntry bad_value / too_large as inspect reports them. */
export function valueDisplay(serializer: Serializer, payload: Uint8Array): string {
  if (serializer === "raw") return bytesJson(payload);
  const value = deserialize(serializer, payload, "faithful");
  if (serializer === "text") return quoteJson(value as string);
  const limit = DISPLAY_EXPANSION * payload.length + DISPLAY_ALLOWANCE;
  try {
    return displayJson(value, limit);
  } catch (e) {
    if (e instanceof DisplayTooLarge)
      throw new InvalidEntry(
        "too_large",
        `displaying this ${payload.length}-byte payload would take more than ${limit} characters`,
      );
    throw e;
  }
}

export class Report {
  constructor(
    readonly header: Header,
    readonly storedBytes: number,
    readonly payloadBytes: number,
    readonly value: string | HttpResponse,
    readonly payload: Uint8Array,
  ) {}

  static of(data: Uint8Array, maxSize = DEFAULT_MAX_SIZE): Report {
    const [header, payload] = decodePayload(data, maxSize);
    const value =
      header.kind === "response" ? HttpResponse.fromPayload(payload) : valueDisplay(header.serializer, payload);
    return new Report(header, data.length, payload.length, value, payload);
  }

  human(cut = false): string {
    const h = this.header;
    const lines: Array<[string, string]> = [
      ["format", "1"],
      ["kind", h.kind],
      ["serializer", h.serializer],
      ["compressor", h.compressor],
      ["created_at", timeText(h.createdAt)],
      ["expires_at", Number(h.expiresAt) === 0 ? "never" : timeText(h.expiresAt)],
      ["stale_ms", String(h.staleMs)],
      ["version", h.version ?? "(none)"],
      ["tags", h.tags.length > 0 ? h.tags.join(", ") : "(none)"],
      ["size", `${this.storedBytes} bytes stored, ${this.payloadBytes} bytes payload`],
    ];
    if (this.value instanceof HttpResponse) {
      const r = this.value;
      lines.push(["status", String(r.status)], ["encoding", r.contentEncoding]);
      for (const [n, v] of r.headers) lines.push(["header", `${bytesText(n)}: ${bytesText(v)}`]);
      lines.push(["body", `${r.body.length} bytes`]);
    } else {
      lines.push(["value", this.value]);
    }
    return lines.map(([label, text]) => `${`${label}:`.padEnd(12)} ${cut ? cutText(text, CUT_AT) : text}\n`).join("");
  }

  /** What --body prints after the empty line: a response's body as stored, or a value's payload; on a terminal
   * its display text (cut unless --full) ending with a newline unless empty. */
  bodyOutput(terminal: boolean, cut: boolean): Uint8Array {
    const body = this.value instanceof HttpResponse ? this.value.body : this.payload;
    if (!terminal) return body;
    let text = bytesText(body);
    if (cut) text = cutText(text, CUT_AT);
    if (text !== "" && !text.endsWith("\n")) text += "\n";
    return new Uint8Array(Buffer.from(text, "utf8"));
  }

  json(): string {
    const h = this.header;
    const version = h.version === undefined ? "null" : quoteJson(h.version);
    const tags = h.tags.map(quoteJson).join(",");
    let value: string;
    if (this.value instanceof HttpResponse) {
      const r = this.value;
      const headers = r.headers.map(([n, v]) => `[${bytesJson(n)},${bytesJson(v)}]`).join(",");
      value = `{"status":${r.status},"headers":[${headers}],"content_encoding":${quoteJson(r.contentEncoding)},"body":${bytesJson(r.body)}}`;
    } else {
      value = this.value;
    }
    return (
      `{"format":1,"kind":${quoteJson(h.kind)},"serializer":${quoteJson(h.serializer)},` +
      `"compressor":${quoteJson(h.compressor)},"created_at":${h.createdAt},"expires_at":${h.expiresAt},` +
      `"stale_ms":${h.staleMs},"version":${version},"tags":[${tags}],"stored_bytes":${this.storedBytes},` +
      `"payload_bytes":${this.payloadBytes},"value":${value}}\n`
    );
  }
}

/** What inspect prints for `data`; throws InvalidEntry for an invalid entry. */
export function inspectText(data: Uint8Array, options: { json?: boolean; maxSize?: number } = {}): string {
  const report = Report.of(data, options.maxSize ?? DEFAULT_MAX_SIZE);
  return options.json ? report.json() : report.human();
}
