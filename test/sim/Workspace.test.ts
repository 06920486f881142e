/**
 * Focused schedules of the simulation's workspace part (docs/simulation.md): plans written by hand, so the cases
 * the random schedules reach only rarely run on every `npm test` — a Core restart while a write's install hangs
 * (its reservation `committing`: it must come out `unknown`, keep blocking the Session's next write, and settle
 * only by the operator), and a Session whose initialization files are transferred before its first Turn.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import type { Step } from "./Plan.js"
import { runSchedule } from "./Simulator.js"

const hosted = (init: ReadonlyArray<{ path: string; size: number }> = []): Step => ({ k: "session", options: {}, workspace: { init } })

describe("simulation: workspace", () => {
  it.effect("a Core restart while a write's install hangs leaves it unknown, blocking, until the operator settles it", () =>
    Effect.gen(function* () {
      const plan: ReadonlyArray<Step> = [
        hosted(),
        { k: "advance", ms: 1_000 },
        { k: "write", session: 0, file: { path: "big.bin", size: 150_000, fault: "install_hangs" } },
        { k: "advance", ms: 100 },
        { k: "core_restart" },
        { k: "advance", ms: 5_000 },
        { k: "write", session: 0, file: { path: "next.bin", size: 10 } },
        { k: "advance", ms: 1_000 },
        { k: "settle", session: 0 },
        { k: "advance", ms: 1_000 },
        { k: "write", session: 0, file: { path: "after.bin", size: 10 } },
        { k: "advance", ms: 1_000 }
      ]
      const result = yield* runSchedule({ seed: 1, plan })
      if (process.env.SIM_DEBUG !== undefined || result.violations.length > 0) console.log(result.trace.filter((l) => !l.includes("heartbeat")).join("\n"))
      assert.deepStrictEqual(result.violations, [])
      assert.strictEqual(result.exercised["workspace write in flight across a core restart, then unknown"], 1)
      const trace = result.trace.join("\n")
      // The successor is refused while the first write is unknown; after the operator's settle the next one runs.
      assert.match(trace, /write next\.bin on \S+ → OperatorConflict: conflict \(write_unsettled\)/)
      assert.match(trace, /settle operation-1 failed → \{"write_id":"operation-1","status":"failed"\}/)
      assert.match(trace, /write after\.bin on \S+ → \{.*"write_id":"operation-2"/)
      assert.strictEqual(result.exercised["workspace write completed"], 1)
    }), 60_000)

  it.effect("initialization files reach the workspace as runtime_prepare transfers before the first Turn", () =>
    Effect.gen(function* () {
      const plan: ReadonlyArray<Step> = [
        hosted([{ path: "init/a.txt", size: 70_000 }, { path: "init/b.txt", size: 0 }]),
        { k: "turn", session: 0, script: [{ delta: "hello " }] },
        { k: "advance", ms: 1_000 },
        { k: "read", session: 0, path: "init/a.txt" },
        { k: "advance", ms: 1_000 }
      ]
      const result = yield* runSchedule({ seed: 1, plan })
      assert.deepStrictEqual(result.violations, [])
      assert.strictEqual(result.exercised["initialization file completed"], 2)
      assert.strictEqual(result.exercised["runtime_prepare chunk after the first"], 1)
      const trace = result.trace.join("\n")
      assert.isBelow(trace.indexOf("→runtime runtime_prepare"), trace.indexOf("→runtime execution_prepare"))
    }), 60_000)
})
