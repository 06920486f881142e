/**
 * `npm run sim -- [--seeds N] [--seed S] [--steps K] [--broken freeOnCancelTimeout|replayWriteAfterReconnect] [--trace] [--frames] [--json FILE]`
 *
 * - `--seeds N --seed S`: runs N schedules with seeds S, S+1, … (default S = 1, N = 100).
 * - `--seed S` alone: runs that one schedule and prints its whole trace (the reproduction of a failing seed).
 * - `--frames` (with `--seed`): frame lines show the frame text instead of a hash.
 * - `--broken freeOnCancelTimeout`: the negative control (a build that frees an Executor when a cancel waiter
 *   times out); it must fail.
 * Prints schedules/s, faults injected per kind and invariant checks performed; every failing seed with its
 * one-line reproduction and minimized steps. Exit code 1 when a schedule failed.
 */
import { Effect } from "effect"
import { writeFileSync } from "node:fs"
import { type Broken, brokenBuilds } from "./NativeLedger.js"
import { formatFailure, formatSummary, runSeeds } from "./Runner.js"
import { runSchedule } from "./Simulator.js"

const arg = (name: string): string | undefined => {
  const i = process.argv.indexOf(`--${name}`)
  if (i !== -1) return process.argv[i + 1]
  return process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3)
}
const int = (name: string): number | undefined => {
  const value = arg(name)
  if (value === undefined) return undefined
  const n = Number(value)
  if (!Number.isSafeInteger(n) || n < 0) {
    console.error(`--${name} must be a non-negative integer`)
    process.exit(2)
  }
  return n
}

const main = async () => {
  const seeds = int("seeds")
  const seed = int("seed")
  const steps = int("steps")
  const broken = (arg("broken") ?? "none") as Broken
  if (broken !== "none" && !brokenBuilds.includes(broken)) {
    console.error(`--broken must be one of ${brokenBuilds.join(", ")}`)
    process.exit(2)
  }
  if (seed !== undefined && seeds === undefined) {
    const result = await Effect.runPromise(
      runSchedule({ seed, broken, frameText: process.argv.includes("--frames"), ...(steps === undefined ? {} : { steps }) })
    )
    if (process.argv.includes("--trace") || result.violations.length > 0) console.log(result.trace.join("\n"))
    console.log(result.violations.length === 0 ? `seed ${seed}: ok (${result.checks} invariant checks)` : `seed ${seed}: FAIL ${result.violations.join("; ")}`)
    process.exit(result.violations.length === 0 ? 0 : 1)
  }
  const first = seed ?? 1
  const count = seeds ?? 100
  const list = Array.from({ length: count }, (_, i) => first + i)
  const started = Date.now()
  const summary = await Effect.runPromise(
    runSeeds({
      seeds: list,
      broken,
      ...(steps === undefined ? {} : { steps }),
      onResult: (result, n) => {
        if (result.violations.length > 0) console.log(`seed ${result.seed}: FAIL ${result.violations[0]}`)
        if (n % 250 === 0) console.log(`… ${n}/${count} schedules, ${((Date.now() - started) / 1000).toFixed(0)} s`)
      }
    })
  )
  for (const failure of summary.failures) console.log(formatFailure(failure))
  console.log(formatSummary(summary))
  const json = arg("json")
  if (json !== undefined) writeFileSync(json, JSON.stringify({ first, ...summary }, null, 2))
  process.exit(summary.failures.length === 0 ? 0 : 1)
}

void main()
