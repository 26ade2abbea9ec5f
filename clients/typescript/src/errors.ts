// The error kinds of spec/FORMAT.md §7, shared by every larder language: a decoder reports exactly one of them.

export const ERROR_KINDS = [
  "truncated",
  "bad_magic",
  "unsupported_version",
  "unknown_codec",
  "bad_header",
  "too_large",
  "corrupt_payload",
  "bad_value",
] as const;

export type ErrorKind = (typeof ERROR_KINDS)[number];

/** An entry that cannot be decoded: `kind` is one of FORMAT.md §7's kinds, `message` says what was wrong. */
export class InvalidEntry extends Error {
  override readonly name = "InvalidEntry";
  constructor(
    readonly kind: ErrorKind,
    readonly detail: string,
  ) {
    super(`${kind}: ${detail}`);
  }
}
