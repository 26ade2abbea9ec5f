// The memory store's recency order: a doubly linked list of slot numbers in two typed arrays, circular through a
// sentinel at 0 (newer[0] is the oldest, older[0] the newest), as lru-cache keeps its own. A read makes its slot the
// newest with six typed-array writes and no branch but "already the newest?". The same list through the slot objects
// (pointer fields, each write behind V8's write barrier, and the neighbours' objects touched) cost ~10% of an awaited
// Cache.fetch hit over 1,000 keys, these arrays ~3% (paired rounds as bench/memory_fetch.ts takes them, node 20,
// 2026-11-25). Freed numbers are reused; the arrays double when full.

/** Slot numbers 1.. in least- to most-recently-used order. */
export class Recency {
  private newer = new Uint32Array(64);
  private older = new Uint32Array(64);
  private readonly free: number[] = [];
  private next = 1;

  /** The least recently used number, or 0 when the list is empty. */
  get oldest(): number {
    return this.newer[0] as number;
  }

  /** A number not in use, linked in as the newest. */
  add(): number {
    let n = this.free.pop();
    if (n === undefined) {
      n = this.next++;
      if (n === this.newer.length) this.grow();
    }
    this.link(n);
    return n;
  }

  /** Unlinks `n` and frees it for reuse. */
  remove(n: number): void {
    this.unlink(n);
    this.free.push(n);
  }

  /** Makes `n` the most recently used. */
  touch(n: number): void {
    if (this.older[0] === n) return;
    this.unlink(n);
    this.link(n);
  }

  /** Empties the list. */
  clear(): void {
    this.newer = new Uint32Array(64);
    this.older = new Uint32Array(64);
    this.free.length = 0;
    this.next = 1;
  }

  private unlink(n: number): void {
    const older = this.older[n] as number;
    const newer = this.newer[n] as number;
    this.newer[older] = newer;
    this.older[newer] = older;
  }

  private link(n: number): void {
    const newest = this.older[0] as number;
    this.newer[newest] = n;
    this.older[n] = newest;
    this.newer[n] = 0;
    this.older[0] = n;
  }

  private grow(): void {
    const newer = new Uint32Array(this.newer.length * 2);
    const older = new Uint32Array(this.older.length * 2);
    newer.set(this.newer);
    older.set(this.older);
    this.newer = newer;
    this.older = older;
  }
}
