/**
 * What a bench reports: figures with min / median / max over repeated runs, the baseline measured in the same
 * process run, their ratio and the target. Pure; covered by test/bench/bench.test.ts.
 */
import { type Summary, summarize } from "./stats.js"

/**
 * A target: `on: "ratio"` compares the figure's ratio to its baseline, `on: "value"` the figure itself (in its
 * unit). `over: "median"` (the default) checks the median of the rounds; `over: "every"` requires every round to
 * meet it, i.e. checks the worst round (the max for `<` / `<=`, the min for `>=`).
 */
export interface Target {
  readonly on: "ratio" | "value"
  readonly op: ">=" | "<=" | "<"
  readonly value: number
  readonly over?: "median" | "every"
}

export interface Baseline {
  readonly name: string
  readonly value: Summary
  /** The baseline's individual measurements, paired with the figure's (absent in older results files). */
  readonly samples?: ReadonlyArray<number>
}

export interface Figure {
  readonly suite: string
  readonly name: string
  readonly unit: string
  readonly value: Summary
  /**
   * The individual measurements the summary is over (one per round, or per Turn where the note says so), in
   * order; absent in results files written before they were recorded.
   */
  readonly samples?: ReadonlyArray<number>
  readonly baseline?: Baseline
  /** value / baseline per round (paired), when the two were measured together. */
  readonly ratio?: Summary
  readonly target?: Target
  /**
   * Whether the figure meets the target (on the median, or on every round) and its negative control misses it;
   * absent without a target and in a `--quick` run (too few samples to judge: see `unjudged`).
   */
  readonly meets?: boolean
  /**
   * The negative control: a variant known to be worse (e.g. raw `ws` without batching, a path with a known
   * added delay), judged by the same target against the same baseline. It must miss: a control that meets
   * the target shows the check cannot fail, and the figure then does not meet it either.
   */
  readonly control?: Control
  /** False in a `--quick` run: the target is shown but not judged. */
  readonly judged?: boolean
  readonly note?: string
}

export interface Control {
  readonly name: string
  readonly value: Summary
  readonly samples: ReadonlyArray<number>
  readonly ratio?: Summary
  /** Whether the control meets the target (it must not). */
  readonly meets: boolean
}

const compare = (op: Target["op"], a: number, b: number): boolean =>
  op === ">=" ? a >= b : op === "<=" ? a <= b : a < b

/**
 * Whether a figure meets its target: its median, or with `over: "every"` its worst round (false when the
 * compared number is missing or NaN).
 */
export const meetsTarget = (target: Target, value: Summary, ratio: Summary | undefined): boolean => {
  const s = target.on === "ratio" ? ratio : value
  const x = s === undefined ? undefined : target.over === "every" ? (target.op === ">=" ? s.min : s.max) : s.median
  return x !== undefined && !Number.isNaN(x) && compare(target.op, x, target.value)
}

export interface FigureInput {
  readonly suite: string
  readonly name: string
  readonly unit: string
  readonly samples: ReadonlyArray<number>
  readonly baseline?: { readonly name: string; readonly samples: ReadonlyArray<number> }
  /** Paired ratios; computed from samples / baseline samples when omitted and both have the same length. */
  readonly ratios?: ReadonlyArray<number>
  readonly target?: Target
  /** A negative control judged by the same target (see `Figure.control`); ratios pair with the baseline. */
  readonly control?: { readonly name: string; readonly samples: ReadonlyArray<number>; readonly ratios?: ReadonlyArray<number> }
  readonly note?: string
}

const pairedWith = (
  samples: ReadonlyArray<number>,
  baseline: { readonly samples: ReadonlyArray<number> } | undefined
): Array<number> | undefined =>
  baseline !== undefined && baseline.samples.length === samples.length
    ? samples.map((x, i) => x / baseline.samples[i]!)
    : undefined

/** Builds a figure from raw samples: summaries, paired ratio, target verdict. */
export const figure = (input: FigureInput): Figure => {
  const value = summarize(input.samples)
  const baseline = input.baseline === undefined
    ? undefined
    : { name: input.baseline.name, value: summarize(input.baseline.samples), samples: [...input.baseline.samples] }
  const ratios = input.ratios ?? pairedWith(input.samples, input.baseline)
  const ratio = ratios === undefined ? undefined : summarize(ratios)
  const control = input.control === undefined || input.target === undefined ? undefined : (() => {
    const c = input.control!
    const cValue = summarize(c.samples)
    const cRatios = c.ratios ?? pairedWith(c.samples, input.baseline)
    const cRatio = cRatios === undefined ? undefined : summarize(cRatios)
    return {
      name: c.name,
      value: cValue,
      samples: [...c.samples],
      ...(cRatio === undefined ? {} : { ratio: cRatio }),
      meets: meetsTarget(input.target!, cValue, cRatio)
    } satisfies Control
  })()
  const meets = input.target === undefined
    ? undefined
    : meetsTarget(input.target, value, ratio) && (control === undefined || !control.meets)
  return {
    suite: input.suite,
    name: input.name,
    unit: input.unit,
    value,
    samples: [...input.samples],
    ...(baseline === undefined ? {} : { baseline }),
    ...(ratio === undefined ? {} : { ratio }),
    ...(input.target === undefined || meets === undefined ? {} : { target: input.target, meets }),
    ...(control === undefined ? {} : { control }),
    ...(input.note === undefined ? {} : { note: input.note })
  }
}

/**
 * A `--quick` run's figure: the target stays visible but is not judged (too few, too short rounds), so no
 * quick run can print a pass or a miss.
 */
export const unjudged = (f: Figure): Figure => {
  if (f.target === undefined) return f
  const { meets: _meets, ...rest } = f
  return { ...rest, judged: false }
}

/**
 * A full run's figure whose measurement does not hold what its target assumes (a span without a whole GC cycle, for
 * example): its target stays visible with `reason` in its note, it is not judged, and the run's summary line counts
 * it as not met, so a measurement that could not be taken the way the target needs is never a pass (nor a miss).
 */
export const unjudgedBecause = (f: Figure, reason: string): Figure => {
  if (f.target === undefined) return f
  return { ...unjudged(f), note: f.note === undefined ? `not judged: ${reason}` : `${f.note}; not judged: ${reason}` }
}

/** The table's verdict cell: yes, NO, "NO (control met)" when the check could not fail, "not judged" (quick). */
export const verdict = (f: Figure): string => {
  if (f.target === undefined) return ""
  if (f.judged === false || f.meets === undefined) return "not judged"
  if (f.control?.meets === true) return "NO (control met: check cannot fail)"
  return f.meets ? "yes" : "NO"
}

/**
 * "Flat" as the issue defines it: the value at the last level over the value at the middle level (the first
 * level carries one-time costs). `values` are per level, in level order; NaN with fewer than two levels.
 */
export const lastVsMiddle = (values: ReadonlyArray<number>): number => {
  if (values.length < 2) return Number.NaN
  return values[values.length - 1]! / values[Math.floor((values.length - 1) / 2)]!
}

/**
 * Growth per unit over the last step against growth per unit over the middle step, from cumulative totals
 * at increasing levels (e.g. RSS at 1k / 5k / 10k devices; the step from 0 to the first level is step 0).
 * `zero` is the total at level 0. NaN with fewer than two steps.
 */
export const marginalLastVsMiddle = (levels: ReadonlyArray<number>, totals: ReadonlyArray<number>, zero: number): number => {
  const xs = [0, ...levels]
  const ys = [zero, ...totals]
  const steps = levels.map((_, i) => (ys[i + 1]! - ys[i]!) / (xs[i + 1]! - xs[i]!))
  return lastVsMiddle(steps)
}

/** "ratio ≥ 50 %", "< 1 ms", "< 1 ms every round". */
export const describeTarget = (target: Target, unit: string): string =>
  (target.on === "ratio"
    ? `ratio ${target.op === ">=" ? "≥" : target.op === "<=" ? "≤" : "<"} ${formatPercent(target.value)}`
    : `${target.op === ">=" ? "≥" : target.op === "<=" ? "≤" : "<"} ${formatNumber(target.value)} ${unit}`) +
  (target.over === "every" ? " every round" : "")

/** Three significant digits, with k / M suffixes from 10 000 up. */
export const formatNumber = (x: number): string => {
  if (Number.isNaN(x)) return "n/a"
  if (!Number.isFinite(x)) return x > 0 ? "∞" : "-∞"
  const abs = Math.abs(x)
  if (abs >= 1e7) return `${significant(x / 1e6)}M`
  if (abs >= 1e4) return `${significant(x / 1e3)}k`
  return significant(x)
}

/** Three significant digits below 100, whole numbers from 100 up, never an exponent. */
const significant = (x: number): string => {
  const abs = Math.abs(x)
  if (abs === 0) return "0"
  if (abs >= 99.95) return String(Math.round(x))
  if (abs < 0.001) return x.toFixed(6).replace(/\.?0+$/, "")
  const digits = Math.max(0, 2 - Math.floor(Math.log10(abs)))
  return x.toFixed(digits).replace(/\.0+$/, "").replace(/(\.\d*?)0+$/, "$1")
}

export const formatPercent = (x: number): string => (Number.isNaN(x) ? "n/a" : `${formatNumber(x * 100)} %`)

/** "median (min–max)", or the median alone when there is one sample or all are equal. */
export const formatSummary = (s: Summary, format: (x: number) => string = formatNumber): string =>
  s.n <= 1 || s.min === s.max ? format(s.median) : `${format(s.median)} (${format(s.min)}–${format(s.max)})`
