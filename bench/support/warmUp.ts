/**
 * When a suite's warm-up is over (the turns suite, docs/performance.md "twarm" and "jitwarm"). A fresh Core's first full
 * rounds cost about twice its later ones, and the cost keeps falling slowly for thousands of Turns (V8 still compiling
 * more of its code with Maglev and TurboFan, the young generation still growing); the figure is the steady state, so
 * full unmeasured rounds run first (the turns suite: at least 30) until one round's figure is within
 * `tolerance` of the round before it, at least `min` rounds (two cold rounds can agree with each other) and at most
 * `max`. Every warm-up round's figure is logged and named in the figure's note, so nothing is hidden.
 */
import { formatNumber } from "../lib/figures.js"

export interface WarmUpRule {
  /** Warm-up rounds always run (at least 1). */
  readonly min: number
  /** Warm-up rounds at most, settled or not. */
  readonly max: number
  /** The largest relative change from the previous round that counts as settled (0.1 = 10 %). */
  readonly tolerance: number
}

/** Whether the last round is within the rule's tolerance of the one before it. */
const settled = (rule: WarmUpRule, figures: ReadonlyArray<number>): boolean => {
  const n = figures.length
  return n >= 2 && Math.abs(figures[n - 1]! - figures[n - 2]!) <= rule.tolerance * figures[n - 2]!
}

/** Whether the warm-up is over after rounds whose figures (oldest first) are `figures`. */
export const warmedUp = (rule: WarmUpRule, figures: ReadonlyArray<number>): boolean => {
  const n = figures.length
  if (n >= rule.max) return true
  if (n < Math.max(2, rule.min)) return false
  return settled(rule, figures)
}

/** "k warm-up rounds (how it ended), a → b → … unit", for a figure's note. */
export const warmUpNote = (rule: WarmUpRule, figures: ReadonlyArray<number>, unit: string): string => {
  const n = figures.length
  const how = n < 2
    ? "a fixed round, not compared"
    : settled(rule, figures)
    ? `settled: the last within ${formatNumber(rule.tolerance * 100)} % of the one before, at least ${rule.min}, at most ${rule.max}`
    : `not settled within ${rule.max}`
  return `${n} warm-up round${n === 1 ? "" : "s"} (${how}), ${figures.map((x) => formatNumber(x)).join(" → ")} ${unit}`
}
