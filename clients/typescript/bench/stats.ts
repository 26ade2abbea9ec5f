// The summaries the benchmarks print of their rounds (one definition for clients.ts, cpu_per_op.ts and
// memory_fetch.ts): the median, and a quantile by nearest lower rank for the spread of a row's round-by-round ratios.

/** The middle value of `xs` (the mean of the two middle ones for an even count); 0 for none. */
export function median(xs: readonly number[]): number {
  const sorted = [...xs].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  if (sorted.length === 0) return 0;
  return sorted.length % 2 === 1
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

/** The value at fraction `q` (0..1) of `xs` sorted, by nearest lower rank; 0 for none. */
export function quantile(xs: readonly number[], q: number): number {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.floor(q * (sorted.length - 1))] ?? 0;
}
