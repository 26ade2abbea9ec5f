// A bounded memo of what was decoded from an entry's bytes, per key, for stores that hand back new bytes on every
// read (memcached, Redis, SQL, files): a read that gets the same bytes back (a hot key, read again before it
// changes) uses what was decoded then instead of decompressing and decoding again (a 1 KiB entry's decode was 2-3 µs
// of a Keyv get's ~8 µs of client CPU with 50 callers). The bytes are compared whole, against a copy (a store's
// bytes may be a view of a larger socket read, which is reused or changed), so a rewritten entry is never taken for
// the old one. The copy is made only when a key is decoded the second time: a key read once (or written and read
// back once) costs a small mark, not a copy of its bytes. Callers keep only what is safe to hand to every reader
// (strings, numbers: immutable). Bounded in bytes; the oldest go first.

/** What a key's first decode leaves: its mark's weight in the budget (a Map entry and the key). */
const MARK_WEIGHT = 64;

export class BytesMemo<T> {
  /** A key's copy of the bytes and what was decoded from them, or (bytes undefined) the mark of one decode. */
  private readonly entries = new Map<string, [Buffer | undefined, T | undefined, number]>();
  private held = 0;

  /** At most `budget` bytes in all (as `weight`s say), entries of at most `maxBytes` bytes, and no one entry of
   * more than a sixteenth of the budget (a small entry that decompresses to a long text must not fill it). */
  constructor(
    private readonly budget: number,
    private readonly maxBytes: number,
  ) {}

  /** What was decoded from exactly these bytes under `key`, if it is still held. */
  get(key: string, bytes: Uint8Array): T | undefined {
    const known = this.entries.get(key);
    const copy = known?.[0];
    if (copy === undefined || copy.length !== bytes.length || !copy.equals(bytes)) return undefined;
    return known?.[1];
  }

  /** Keeps `value`, decoded from `bytes` under `key`, if the key was decoded before (else marks it); `weight` is
   * what the value holds beyond the bytes. */
  set(key: string, bytes: Uint8Array, value: T, weight: number): void {
    const total = bytes.length + weight;
    if (bytes.length > this.maxBytes || total > this.budget / 16) return;
    const seen = this.entries.has(key);
    this.delete(key);
    const kept = seen ? total : MARK_WEIGHT + 2 * key.length;
    for (const oldest of this.entries.keys()) {
      if (this.held + kept <= this.budget) break;
      this.delete(oldest);
    }
    this.entries.set(key, seen ? [Buffer.from(bytes), value, kept] : [undefined, undefined, kept]);
    this.held += kept;
  }

  delete(key: string): void {
    const known = this.entries.get(key);
    if (known === undefined) return;
    this.entries.delete(key);
    this.held -= known[2];
  }

  /** The bytes held, as weighed. */
  get heldBytes(): number {
    return this.held;
  }
}
