/**
 * The memory check of the workspace suite, pure (covered by test/bench/workspace.test.ts): RSS samples taken
 * while an export streams, keyed by the export's progress, reduced to the two judged numbers.
 *
 * - *Growth*: the largest RSS seen during the export minus the RSS just before it began (target < 100 MiB).
 * - *Second half*: the largest RSS over the second half of the export minus the largest over the first half.
 *   Memory that does not grow with the workspace has settled by the middle (heap and buffers warmed), so a
 *   streamed export shows about zero; anything that keeps a share of every chunk shows half of what it keeps.
 */

export interface RssSample {
  /** Bytes of the export received when the sample was taken (0..total). */
  readonly at: number
  readonly rss: number
}

export interface RssGrowth {
  /** max RSS during the export − RSS before it (bytes). */
  readonly growth: number
  /** max RSS over the second half − max RSS over the first half (bytes). */
  readonly secondHalf: number
}

/** Reduces samples of one export of `total` bytes; NaN when a half has no sample (too few to judge). */
export const rssGrowth = (before: number, samples: ReadonlyArray<RssSample>, total: number): RssGrowth => {
  let first = Number.NaN
  let second = Number.NaN
  for (const s of samples) {
    if (s.at * 2 <= total) first = Number.isNaN(first) ? s.rss : Math.max(first, s.rss)
    else second = Number.isNaN(second) ? s.rss : Math.max(second, s.rss)
  }
  const peak = Math.max(first, second)
  return {
    growth: Number.isNaN(first) || Number.isNaN(second) ? Number.NaN : peak - before,
    secondHalf: second - first
  }
}

export const MiB = 1024 * 1024
