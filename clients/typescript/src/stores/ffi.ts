// Native calls for the two local stores: file:// needs libc's flock (STORES.md §7), sqlite:// the system libsqlite3
// (§6). Both go through koffi, an optional dependency that ships prebuilt binaries inside its npm package (npm's
// skipped install scripts do not matter). It is imported only when one of these stores first needs it, so users of
// the other stores never load it; when it or the library is missing the store fails with `NativeUnavailable`, which
// says what to install.

import { StoreError } from "./errors.js";

/** koffi or a system library (libc, libsqlite3) could not be loaded: the store cannot run on this machine. */
export class NativeUnavailable extends StoreError {
  override readonly name = "NativeUnavailable";
  constructor(backend: string, detail: string) {
    super("unsupported", backend, detail);
  }
}

type Koffi = typeof import("koffi").default;

let koffiLoading: Promise<Koffi> | undefined;

async function koffi(backend: string): Promise<Koffi> {
  koffiLoading ??= import("koffi").then((m) => m.default);
  try {
    return await koffiLoading;
  } catch (e) {
    koffiLoading = undefined;
    throw new NativeUnavailable(
      backend,
      `the optional dependency koffi could not be loaded (${(e as Error).message}); install it with \`npm install koffi\``,
    );
  }
}

export const LOCK_EX = 2;
export const LOCK_NB = 4;
export const LOCK_UN = 8;

/** flock(2); `errno` after a failed call (EWOULDBLOCK 11 when LOCK_NB finds the lock taken, EINTR 4). */
export interface Libc {
  flock(fd: number, operation: number): number;
  /** flock(2) on one of libuv's worker threads, where it may block: its result (0, or -1). */
  flockInThread(fd: number, operation: number): Promise<number>;
  errno(): number;
}

let libc: Promise<Libc> | undefined;

export function loadLibc(backend: string): Promise<Libc> {
  libc ??= (async () => {
    const k = await koffi(backend);
    try {
      const flock = k.load("libc.so.6").func("int flock(int, int)");
      return {
        flock: flock as (fd: number, op: number) => number,
        flockInThread: (fd: number, op: number) =>
          new Promise<number>((resolve, reject) =>
            flock.async(fd, op, (e: unknown, result: number) => (e ? reject(e) : resolve(result))),
          ),
        errno: () => k.errno(),
      };
    } catch (e) {
      throw new NativeUnavailable(backend, `libc's flock could not be loaded: ${(e as Error).message}`);
    }
  })();
  libc.catch(() => {
    libc = undefined;
  });
  return libc;
}

/** An opaque handle (sqlite3 *, sqlite3_stmt *) as koffi gives it. */
export type Handle = unknown;

/** The part of SQLite's C API the sqlite:// store uses. */
export interface Sqlite {
  version: string;
  open(path: string, out: [Handle], flags: number, vfs: null): number;
  close(db: Handle): number;
  errmsg(db: Handle): string;
  extendedErrcode(db: Handle): number;
  getAutocommit(db: Handle): number;
  changes(db: Handle): number;
  prepare(db: Handle, sql: string, bytes: number, out: [Handle], tail: null): number;
  finalize(stmt: Handle): number;
  reset(stmt: Handle): number;
  clearBindings(stmt: Handle): number;
  step(stmt: Handle): number;
  bindNull(stmt: Handle, index: number): number;
  bindInt64(stmt: Handle, index: number, value: number | bigint): number;
  bindDouble(stmt: Handle, index: number, value: number): number;
  /** `destructor` -1 is SQLITE_TRANSIENT: SQLite copies the bytes before the call returns. */
  bindBlob(stmt: Handle, index: number, data: Uint8Array, bytes: number, destructor: number): number;
  bindText(stmt: Handle, index: number, data: Uint8Array, bytes: number, destructor: number): number;
  columnCount(stmt: Handle): number;
  columnType(stmt: Handle, column: number): number;
  columnInt64(stmt: Handle, column: number): number | bigint;
  columnDouble(stmt: Handle, column: number): number;
  /** A pointer valid until the next step/reset of the statement, or null for an empty value. */
  columnBlob(stmt: Handle, column: number): unknown;
  columnBytes(stmt: Handle, column: number): number;
  /** A copy of `length` bytes at `pointer`. */
  copy(pointer: unknown, length: number): Uint8Array;
}

let sqlite: Promise<Sqlite> | undefined;

export function loadSqlite(backend: string): Promise<Sqlite> {
  sqlite ??= (async () => {
    const k = await koffi(backend);
    let lib: ReturnType<Koffi["load"]>;
    try {
      lib = k.load("libsqlite3.so.0");
    } catch (e) {
      throw new NativeUnavailable(
        backend,
        `the system SQLite library libsqlite3.so.0 could not be loaded (${(e as Error).message}); install it (Debian: apt-get install libsqlite3-0)`,
      );
    }
    k.opaque("sqlite3");
    k.opaque("sqlite3_stmt");
    // biome-ignore lint/suspicious/noExplicitAny: koffi's functions are typed by the C declarations below
    const f = (declaration: string): any => lib.func(declaration);
    const version = f("const char *sqlite3_libversion()")() as string;
    const memcpy = k.load("libc.so.6").func("void *memcpy(void *, const void *, size_t)");
    return {
      version,
      open: f("int sqlite3_open_v2(const char *, _Out_ sqlite3 **, int, const char *)"),
      close: f("int sqlite3_close_v2(sqlite3 *)"),
      errmsg: f("const char *sqlite3_errmsg(sqlite3 *)"),
      extendedErrcode: f("int sqlite3_extended_errcode(sqlite3 *)"),
      getAutocommit: f("int sqlite3_get_autocommit(sqlite3 *)"),
      changes: f("int sqlite3_changes(sqlite3 *)"),
      prepare: f("int sqlite3_prepare_v2(sqlite3 *, const char *, int, _Out_ sqlite3_stmt **, void *)"),
      finalize: f("int sqlite3_finalize(sqlite3_stmt *)"),
      reset: f("int sqlite3_reset(sqlite3_stmt *)"),
      clearBindings: f("int sqlite3_clear_bindings(sqlite3_stmt *)"),
      step: f("int sqlite3_step(sqlite3_stmt *)"),
      bindNull: f("int sqlite3_bind_null(sqlite3_stmt *, int)"),
      bindInt64: f("int sqlite3_bind_int64(sqlite3_stmt *, int, int64_t)"),
      bindDouble: f("int sqlite3_bind_double(sqlite3_stmt *, int, double)"),
      bindBlob: f("int sqlite3_bind_blob(sqlite3_stmt *, int, const void *, int, intptr_t)"),
      bindText: f("int sqlite3_bind_text(sqlite3_stmt *, int, const void *, int, intptr_t)"),
      columnCount: f("int sqlite3_column_count(sqlite3_stmt *)"),
      columnType: f("int sqlite3_column_type(sqlite3_stmt *, int)"),
      columnInt64: f("int64_t sqlite3_column_int64(sqlite3_stmt *, int)"),
      columnDouble: f("double sqlite3_column_double(sqlite3_stmt *, int)"),
      columnBlob: f("const void *sqlite3_column_blob(sqlite3_stmt *, int)"),
      columnBytes: f("int sqlite3_column_bytes(sqlite3_stmt *, int)"),
      // memcpy into a fresh array is a quarter of the cost of copying out of a koffi.view (an external buffer).
      copy: (pointer: unknown, length: number) => {
        const out = new Uint8Array(length);
        memcpy(out, pointer, length);
        return out;
      },
    } satisfies Sqlite;
  })();
  sqlite.catch(() => {
    sqlite = undefined;
  });
  return sqlite;
}
