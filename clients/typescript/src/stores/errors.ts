// The errors every store reports (spec/STORES.md §2): each names the backend and, for remote stores, the server,
// and has the spec's `kind` (server, timeout, too_large, not_a_counter, unsupported, invalid_key).

export type StoreErrorKind = "server" | "timeout" | "too_large" | "not_a_counter" | "unsupported" | "invalid_key";

export class StoreError extends Error {
  override readonly name: string = "StoreError";
  constructor(
    readonly kind: StoreErrorKind,
    readonly backend: string,
    readonly detail: string,
    readonly server?: string,
  ) {
    super(`${server ? `${backend} server ${server}` : backend}: ${detail}`);
  }
}

export class ServerError extends StoreError {
  override readonly name: string = "ServerError";
  constructor(backend: string, detail: string, server: string) {
    super("server", backend, detail, server);
  }
}

export class StoreTimeout extends StoreError {
  override readonly name = "StoreTimeout";
  constructor(
    backend: string,
    server: string,
    readonly timeoutMs: number,
  ) {
    super("timeout", backend, `no answer within ${timeoutMs} ms`, server);
  }
}

export class TooLarge extends StoreError {
  override readonly name = "TooLarge";
  constructor(backend: string, key: string, size: number, limit: number) {
    super(
      "too_large",
      backend,
      `value of ${size} bytes for key ${JSON.stringify(key)} exceeds the ${limit}-byte entry limit`,
    );
  }
}

export class NotACounter extends StoreError {
  override readonly name = "NotACounter";
  constructor(backend: string, key: string) {
    super("not_a_counter", backend, `the value at key ${JSON.stringify(key)} is not a counter`);
  }
}

export class Unsupported extends StoreError {
  override readonly name = "Unsupported";
  constructor(backend: string, operation: string) {
    super("unsupported", backend, `${operation} is not supported`);
  }
}

export class InvalidKey extends StoreError {
  override readonly name = "InvalidKey";
  constructor(
    backend: string,
    readonly key: string,
    readonly reason: string,
  ) {
    const shown = JSON.stringify(key.slice(0, 80)) + (key.length > 80 ? "…" : "");
    super("invalid_key", backend, `invalid key ${shown}: ${reason}`);
  }
}

/** A store URL that cannot be used (nothing was contacted); the password is never shown. */
export class UrlError extends Error {
  override readonly name = "UrlError";
  constructor(
    readonly url: string,
    readonly detail: string,
  ) {
    super(`store URL ${JSON.stringify(url)}: ${detail}`);
  }
}
