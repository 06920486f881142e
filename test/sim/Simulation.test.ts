/**
 * The deterministic simulation in `npm test` (docs/simulation.md): a fixed seed set of schedules runs the real
 * Runtime against the real dev Core over in-memory links on the TestClock, with seeded faults, and every
 * invariant must hold; a seed replays byte for byte; and the deliberately broken build (an Executor freed when a
 * cancel waiter times out) is caught within the same seed set, so the simulator is shown to be able to fail.
 * `npm run sim -- --seeds 10000` runs the long version.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { formatFailure, runSeeds } from "./Runner.js"
import { runSchedule } from "./Simulator.js"

/** The fixed seed set (first seed, count). */
const FixedFirst = 1
const FixedCount = 30
const fixedSeeds = Array.from({ length: FixedCount }, (_, i) => FixedFirst + i)

describe("deterministic simulation", () => {
  it.effect("holds every invariant over the fixed seed set", () =>
    Effect.gen(function* () {
      const summary = yield* runSeeds({ seeds: fixedSeeds })
      assert.strictEqual(summary.failures.map(formatFailure).join("\n\n"), "")
      assert.strictEqual(summary.schedules, FixedCount)
      // The set exercises every fault kind and performs checks (a simulation that checks nothing cannot fail).
      for (const [kind, n] of Object.entries(summary.faults)) assert.isAbove(n, 0, `fault ${kind} never injected`)
      assert.isAbove(summary.checks, 1_000)
      assert.isAbove(summary.turns, FixedCount)
    }), 240_000)

  it.effect("replays a seed byte for byte", () =>
    Effect.gen(function* () {
      for (const seed of [3, 16]) {
        const first = yield* runSchedule({ seed })
        const second = yield* runSchedule({ seed })
        assert.isAbove(first.trace.length, 20)
        assert.strictEqual(second.trace.join("\n"), first.trace.join("\n"))
      }
    }), 60_000)

  it.effect("catches the broken build that frees an Executor when a cancel waiter times out", () =>
    Effect.gen(function* () {
      const summary = yield* runSeeds({ seeds: fixedSeeds, broken: "freeOnCancelTimeout", maxFailures: 1 })
      assert.strictEqual(summary.failures.length, 1)
      const failure = summary.failures[0]!
      assert.match(failure.violations[0]!, /^ownership: /)
      assert.strictEqual(failure.reproduce, `npm run sim -- --seed ${failure.seed} --broken freeOnCancelTimeout`)
      // The minimized plan still fails when replayed, and is no longer than the original.
      assert.isAbove(failure.minimized.length, 0)
    }), 120_000)
})
