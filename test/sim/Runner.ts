/**
 * Runs many schedules and reports (docs/simulation.md): schedules per second, faults injected per kind,
 * invariant checks performed, and for each failing seed a one-line reproduction and a minimized plan. Used by
 * `npm run sim` (test/sim/main.ts) and by the fixed seed set in `npm test` (test/sim/Simulation.test.ts).
 */
import { Effect } from "effect"
import type { Broken } from "./NativeLedger.js"
import { type Family, families } from "./Invariants.js"
import { describe, type FaultKind, faultKinds, type Step } from "./Plan.js"
import { runSchedule, type SimOptions, type SimResult } from "./Simulator.js"

export interface Failure {
  readonly seed: number
  readonly violations: ReadonlyArray<string>
  readonly failedAtStep: number | undefined
  /** The smallest failing sub-plan found, as step descriptions. */
  readonly minimized: ReadonlyArray<string>
  /** That sub-plan (replayable with `runSchedule({ seed, plan })`) and the length of the original plan. */
  readonly minimizedPlan: ReadonlyArray<Step>
  readonly planLength: number
  readonly reproduce: string
}

export interface Summary {
  readonly schedules: number
  readonly elapsedMs: number
  readonly schedulesPerSecond: number
  readonly faults: Readonly<Record<FaultKind, number>>
  readonly checks: number
  /** Checks performed per invariant family. */
  readonly checksBy: Readonly<Record<Family, number>>
  /** Frames delivered per type and clock jumps per budget, over all schedules. */
  readonly exercised: Readonly<Record<string, number>>
  readonly turns: number
  readonly failures: ReadonlyArray<Failure>
}

export const reproduction = (seed: number, broken: Broken = "none") =>
  `npm run sim -- --seed ${seed}${broken === "none" ? "" : ` --broken ${broken}`}`

/**
 * Shrinks a failing plan by dropping chunks of steps (halves, quarters, … single steps) while the schedule
 * still fails; at most `budget` re-runs. Steps are intentions, so every sub-plan is a valid plan.
 */
export const minimize = (result: SimResult, options: Omit<SimOptions, "seed" | "plan">, budget = 60) =>
  Effect.gen(function* () {
    let plan: ReadonlyArray<Step> = result.failedAtStep !== undefined && result.failedAtStep > 0
      ? result.plan.slice(0, result.failedAtStep)
      : result.plan
    let runs = 0
    let chunk = Math.max(1, Math.floor(plan.length / 2))
    while (chunk >= 1 && runs < budget) {
      let changed = false
      for (let start = 0; start < plan.length && runs < budget; start += chunk) {
        const candidate = [...plan.slice(0, start), ...plan.slice(start + chunk)]
        if (candidate.length === plan.length) continue
        runs++
        const rerun = yield* runSchedule({ ...options, seed: result.seed, plan: candidate, traceFrames: false })
        if (rerun.violations.length > 0) {
          plan = candidate
          changed = true
          start -= chunk
        }
      }
      if (!changed) chunk = Math.floor(chunk / 2)
    }
    return plan
  })

const describePlan = (plan: ReadonlyArray<Step>) => plan.map((step, i) => `#${i + 1} ${describe(step)}`)

export interface RunOptions {
  readonly seeds: ReadonlyArray<number>
  readonly broken?: Broken
  readonly steps?: number
  /** Minimize failing plans (default true). */
  readonly minimize?: boolean
  /** Called after every schedule (progress). */
  readonly onResult?: (result: SimResult, index: number) => void
  /** Stop after this many failures (default 5). */
  readonly maxFailures?: number
}

export const runSeeds = (options: RunOptions) =>
  Effect.gen(function* () {
    const started = Date.now()
    const faults = Object.fromEntries(faultKinds.map((k) => [k, 0])) as Record<FaultKind, number>
    let checks = 0
    const checksBy = Object.fromEntries(families.map((f) => [f, 0])) as Record<Family, number>
    const exercised: Record<string, number> = {}
    let turns = 0
    let schedules = 0
    const failures: Array<Failure> = []
    const base = {
      ...(options.broken === undefined ? {} : { broken: options.broken }),
      ...(options.steps === undefined ? {} : { steps: options.steps })
    }
    for (const seed of options.seeds) {
      const result = yield* runSchedule({ ...base, seed, traceFrames: false })
      schedules++
      checks += result.checks
      turns += result.turns
      for (const k of faultKinds) faults[k] += result.faults[k]
      for (const f of families) checksBy[f] += result.checksBy[f]
      for (const [k, n] of Object.entries(result.exercised)) exercised[k] = (exercised[k] ?? 0) + n
      options.onResult?.(result, schedules)
      if (result.violations.length > 0) {
        const minimized = options.minimize === false ? result.plan : yield* minimize(result, base)
        failures.push({
          seed,
          violations: result.violations,
          failedAtStep: result.failedAtStep,
          minimized: describePlan(minimized),
          minimizedPlan: minimized,
          planLength: result.plan.length,
          reproduce: reproduction(seed, options.broken)
        })
        if (failures.length >= (options.maxFailures ?? 5)) break
      }
    }
    const elapsedMs = Date.now() - started
    return {
      schedules,
      elapsedMs,
      schedulesPerSecond: schedules / Math.max(0.001, elapsedMs / 1000),
      faults,
      checks,
      checksBy,
      exercised: Object.fromEntries(Object.entries(exercised).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))),
      turns,
      failures
    } satisfies Summary
  })

export const formatFailure = (f: Failure): string =>
  [
    `FAIL seed ${f.seed} at ${f.failedAtStep === 0 ? "quiescence" : `step ${f.failedAtStep}`}: ${f.violations[0]}`,
    `  reproduce: ${f.reproduce}`,
    `  minimized steps (${f.minimized.length}):`,
    ...f.minimized.map((line) => `    ${line}`)
  ].join("\n")

export const formatSummary = (s: Summary): string =>
  [
    `schedules: ${s.schedules} in ${(s.elapsedMs / 1000).toFixed(1)} s (${s.schedulesPerSecond.toFixed(2)} schedules/s)`,
    `turns started: ${s.turns}`,
    `invariant checks performed: ${s.checks} (${families.map((f) => `${f}=${s.checksBy[f]}`).join(" ")})`,
    `faults injected: ${faultKinds.map((k) => `${k}=${s.faults[k]}`).join(" ")}`,
    `exercised: ${Object.entries(s.exercised).map(([k, n]) => `${k}=${n}`).join(", ")}`,
    `violations: ${s.failures.length === 0 ? "none" : `${s.failures.length} failing seed(s)`}`
  ].join("\n")
