/**
 * The deterministic simulation in `npm test` (docs/simulation.md): a fixed seed set of schedules runs the real
 * Runtime against the real dev Core over in-memory links on the TestClock, with seeded faults, and every
 * invariant must hold; a seed replays byte for byte; and the deliberately broken build (an Executor freed when a
 * cancel waiter times out) is caught within the same seed set, so the simulator is shown to be able to fail.
 * `npm run sim -- --seeds 10000` runs the long version.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { families } from "./Invariants.js"
import { budgetsMs } from "./Plan.js"
import { formatFailure, reproduction, runSeeds } from "./Runner.js"
import { runSchedule } from "./Simulator.js"

/** The fixed seed set (first seed, count). */
const FixedFirst = 1
const FixedCount = 30
const fixedSeeds = Array.from({ length: FixedCount }, (_, i) => FixedFirst + i)

/**
 * The workload the issue names, as the frames that prove it happened (delivered at least once over the fixed
 * seed set): Sessions (prepare), Turns (start), deltas, tool calls, usage, steers, permissions, questions,
 * function calls, cancels and releases, with the Runtime's side of each.
 */
const namedWorkload = [
  "→runtime execution_prepare",
  "→runtime execution_start",
  "→core delta",
  "→core tool_call",
  "→core usage",
  "→runtime prompt_steer",
  "→core prompt_steer_ack",
  "→core permission_request",
  "→runtime permission_decision",
  "→core prompt_for_user_choice",
  "→runtime prompt_for_user_choice_decision",
  "→core function_call",
  "→runtime function_result",
  "→core interaction_decision_ack",
  "→runtime prompt_cancel",
  "→runtime execution_release",
  "→runtime device_shutdown",
  "→core done",
  "→core error",
  // Workspace: operator writes (multi-chunk), reads, and initialization files as runtime_prepare transfers.
  "→runtime workspace_write",
  "→core workspace_write_result",
  "→runtime workspace_read",
  "→core workspace_read_result",
  "→runtime runtime_prepare",
  "→core runtime_prepare_result",
  "workspace_write chunk after the first",
  "runtime_prepare chunk after the first",
  // Their settlements as Core recorded them, each checked against the in-memory workspace.
  "workspace write completed",
  "workspace write rejected",
  "workspace write unknown",
  "initialization file completed"
]

describe("deterministic simulation", () => {
  it.effect("holds every invariant over the fixed seed set", () =>
    Effect.gen(function* () {
      const summary = yield* runSeeds({ seeds: fixedSeeds })
      assert.strictEqual(summary.failures.map(formatFailure).join("\n\n"), "")
      assert.strictEqual(summary.schedules, FixedCount)
      // The set exercises every fault kind and performs checks (a simulation that checks nothing cannot fail).
      for (const [kind, n] of Object.entries(summary.faults)) assert.isAbove(n, 0, `fault ${kind} never injected`)
      for (const budget of budgetsMs) {
        assert.isAbove(summary.exercised[`clock jump across ${budget / 1000} s`] ?? 0, 0, `no clock jump across ${budget} ms`)
      }
      for (const key of namedWorkload) assert.isAbove(summary.exercised[key] ?? 0, 0, `workload ${key} never exercised`)
      // Every invariant family was checked, each many times (the no-replay family once per input, decision and
      // function result sent).
      for (const family of families) assert.isAbove(summary.checksBy[family], 5, `invariant family ${family} barely checked`)
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

  it.effect("catches the broken build that sends a workspace write's frame again after a reconnect", () =>
    Effect.gen(function* () {
      const summary = yield* runSeeds({ seeds: fixedSeeds, broken: "replayWriteAfterReconnect", maxFailures: 1, minimize: false })
      assert.strictEqual(summary.failures.length, 1)
      const failure = summary.failures[0]!
      assert.match(failure.violations[0]!, /^no replay: (the begin|a (chunk|commit)) of write operation-\d+ reached the Runtime /)
      assert.strictEqual(failure.reproduce, `npm run sim -- --seed ${failure.seed} --broken replayWriteAfterReconnect`)
      const correct = yield* runSchedule({ seed: failure.seed })
      assert.deepStrictEqual(correct.violations, [])
    }), 120_000)

  it.effect("catches the broken build that frees an Executor when a cancel waiter times out", () =>
    Effect.gen(function* () {
      const summary = yield* runSeeds({ seeds: fixedSeeds, broken: "freeOnCancelTimeout", maxFailures: 1 })
      assert.strictEqual(summary.failures.length, 1)
      const failure = summary.failures[0]!
      assert.match(failure.violations[0]!, /^ownership: /)
      assert.strictEqual(failure.reproduce, `npm run sim -- --seed ${failure.seed} --broken freeOnCancelTimeout`)
      assert.strictEqual(reproduction(failure.seed), `npm run sim -- --seed ${failure.seed}`)
      assert.match(formatFailure(failure), new RegExp(`^FAIL seed ${failure.seed} at (step \\d+|quiescence): ownership: .*\n  reproduce: npm run sim -- --seed ${failure.seed} --broken freeOnCancelTimeout\n  minimized steps \\(\\d+\\):\n    #1 `))
      // The minimized plan is shorter than the original and still fails when replayed, with the same kind of
      // violation; the correct build passes that same minimized plan.
      assert.isAbove(failure.minimizedPlan.length, 0)
      assert.isBelow(failure.minimizedPlan.length, failure.planLength)
      const replay = yield* runSchedule({ seed: failure.seed, plan: failure.minimizedPlan, broken: "freeOnCancelTimeout" })
      assert.match(replay.violations[0] ?? "", /^ownership: /)
      const correct = yield* runSchedule({ seed: failure.seed, plan: failure.minimizedPlan })
      assert.deepStrictEqual(correct.violations, [])
      // The failing seed replays byte for byte (the trace a developer reproduces is the one that failed).
      const again = yield* runSchedule({ seed: failure.seed, broken: "freeOnCancelTimeout" })
      const twice = yield* runSchedule({ seed: failure.seed, broken: "freeOnCancelTimeout" })
      assert.isAbove(again.violations.length, 0)
      assert.strictEqual(twice.trace.join("\n"), again.trace.join("\n"))
    }), 120_000)
})
