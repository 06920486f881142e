/**
 * Interleaved throughput measurement for a shared, busy machine. A round takes several short timed samples
 * (about `sampleMs` each) of every contender, interleaved and in rotating order, and keeps each contender's
 * fastest sample: a sample the scheduler preempted is slower, never faster, so the best of a round is the
 * undisturbed speed, and the contenders of a round are measured under the same conditions. Repeated rounds give
 * min / median / max; the per-round ratio against a baseline cancels what noise is left. (A best-of sample
 * also leaves out the occasional young-generation GC pause, for every contender alike.)
 *
 * Each contender gets its own compiled loop (a distinct function per contender), so V8's type feedback of
 * one never pollutes another's loop.
 */
import { performance } from "node:perf_hooks"

export interface Contender {
  readonly name: string
  /** Runs the operation `n` times; returns a value derived from the results (keeps the work alive). */
  readonly run: (n: number) => number
}

/** A contender whose loop calls `op` n times and counts results, with its own loop code. */
export const contender = (name: string, op: () => unknown): Contender => {
  // A fresh function per contender: distinct inline caches for the loop and the call site.
  const make = new Function(
    "op",
    `return function loop_${name.replace(/\W/g, "_")}(n) { let s = 0; for (let i = 0; i < n; i++) { if (op() !== undefined) s++ } return s }`
  ) as (op: () => unknown) => (n: number) => number
  return { name, run: make(op) }
}

export interface ThroughputOptions {
  readonly rounds: number
  /** Timed samples of each contender per round (the round keeps the fastest). */
  readonly samplesPerRound: number
  /** Target duration of one sample. */
  readonly sampleMs: number
  /** Warm-up time per contender before calibration. */
  readonly warmupMs: number
}

let sink = 0
/** Keeps results observable so no loop is dead code. */
export const consumed = (): number => sink

const timeRun = (c: Contender, n: number): number => {
  const t0 = performance.now()
  sink += c.run(n)
  return performance.now() - t0
}

/** Iterations that take about `ms`, found by doubling. */
const calibrate = (c: Contender, ms: number): number => {
  let n = 1
  for (;;) {
    const t = timeRun(c, n)
    if (t >= ms / 4 || n >= 1 << 30) return Math.max(1, Math.round((n * ms) / Math.max(t, 1e-3)))
    n *= 2
  }
}

/** Operations per second of each contender, one sample per round, keyed by name. */
export const compareThroughput = (
  contenders: ReadonlyArray<Contender>,
  options: ThroughputOptions
): Record<string, Array<number>> => {
  const iterations = new Map<string, number>()
  for (const c of contenders) {
    const until = performance.now() + options.warmupMs
    while (performance.now() < until) timeRun(c, 64)
    iterations.set(c.name, calibrate(c, options.sampleMs))
  }
  const out: Record<string, Array<number>> = {}
  for (const c of contenders) out[c.name] = []
  let turn = 0
  for (let r = 0; r < options.rounds; r++) {
    const best = new Map<string, number>()
    for (let s = 0; s < options.samplesPerRound; s++, turn++) {
      for (let k = 0; k < contenders.length; k++) {
        const c = contenders[(turn + k) % contenders.length]!
        const n = iterations.get(c.name)!
        const rate = (n * 1000) / timeRun(c, n)
        if (rate > (best.get(c.name) ?? 0)) best.set(c.name, rate)
      }
    }
    for (const c of contenders) out[c.name]!.push(best.get(c.name)!)
  }
  return out
}
