/**
 * Pure statistics for the bench harness: summaries (min / median / max), percentiles and ratios of paired
 * samples. No timing, no I/O; covered by test/bench/bench.test.ts.
 */

/** min / median / max of repeated measurements, with their count. */
export interface Summary {
  readonly n: number
  readonly min: number
  readonly median: number
  readonly max: number
}

/** The p-th percentile (0..100) of already sorted values, by linear interpolation between closest ranks. */
export const percentileSorted = (sorted: ReadonlyArray<number>, p: number): number => {
  if (sorted.length === 0) return Number.NaN
  if (p <= 0) return sorted[0]!
  if (p >= 100) return sorted[sorted.length - 1]!
  const rank = (p / 100) * (sorted.length - 1)
  const lo = Math.floor(rank)
  const hi = Math.ceil(rank)
  const a = sorted[lo]!
  const b = sorted[hi]!
  return a + (b - a) * (rank - lo)
}

const sortedCopy = (values: ReadonlyArray<number>): Array<number> =>
  Array.from(values).sort((a, b) => a - b)

/** The p-th percentile (0..100) of unsorted values. */
export const percentile = (values: ReadonlyArray<number>, p: number): number => percentileSorted(sortedCopy(values), p)

/** min / median / max. An empty input gives NaN for each (and n = 0). */
export const summarize = (values: ReadonlyArray<number>): Summary => {
  const sorted = sortedCopy(values)
  return {
    n: sorted.length,
    min: sorted.length === 0 ? Number.NaN : sorted[0]!,
    median: percentileSorted(sorted, 50),
    max: sorted.length === 0 ? Number.NaN : sorted[sorted.length - 1]!
  }
}

/** Element-wise ratios a[i] / b[i] of paired samples (rounds measured together). */
export const pairedRatios = (a: ReadonlyArray<number>, b: ReadonlyArray<number>): Array<number> => {
  if (a.length !== b.length) throw new Error(`pairedRatios: ${a.length} samples against ${b.length}`)
  return a.map((x, i) => x / b[i]!)
}

/** Latency distribution of one run: p50, p90, p99, max, and the sample count. */
export interface Distribution {
  readonly n: number
  readonly p50: number
  readonly p90: number
  readonly p99: number
  readonly max: number
}

export const distribution = (values: ReadonlyArray<number>): Distribution => {
  const sorted = sortedCopy(values)
  return {
    n: sorted.length,
    p50: percentileSorted(sorted, 50),
    p90: percentileSorted(sorted, 90),
    p99: percentileSorted(sorted, 99),
    max: sorted.length === 0 ? Number.NaN : sorted[sorted.length - 1]!
  }
}
