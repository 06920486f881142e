/**
 * Runtime side of the wire scenario suite: every scenario the Runtime replays, against the real daemon over a
 * loopback WebSocket (test/support/wireRuntimeRunner.ts). Imports the daemon, never the gateway.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { allScenarios, replays } from "../../scenarios/index.js"
import { runRuntimeScenario } from "../support/wireRuntimeRunner.js"

describe("wire scenarios, Runtime side (real daemon vs scripted Core)", () => {
  for (const scenario of allScenarios.filter((s) => replays(s, "runtime"))) {
    it.effect(`${scenario.name}: ${"asserts" in scenario.replay.runtime ? scenario.replay.runtime.asserts : ""}`, () =>
      Effect.gen(function* () {
        const verdict = yield* runRuntimeScenario(scenario)
        assert.deepStrictEqual(verdict._tag === "Fail" ? verdict.divergence : undefined, undefined)
        assert.strictEqual(verdict._tag, "Pass")
      }))
  }
})

describe("wire scenarios, Runtime side, determinism", () => {
  it.effect("replays the whole suite three times in a row with the same verdicts", () =>
    Effect.gen(function* () {
      const scenarios = allScenarios.filter((s) => replays(s, "runtime"))
      const rounds: Array<ReadonlyArray<string>> = []
      for (let round = 0; round < 3; round++) {
        const verdicts: Array<string> = []
        for (const scenario of scenarios) {
          const verdict = yield* runRuntimeScenario(scenario)
          verdicts.push(`${scenario.name}:${verdict._tag === "Pass" ? `pass/${verdict.framesChecked}` : JSON.stringify(verdict)}`)
        }
        rounds.push(verdicts)
      }
      assert.deepStrictEqual(rounds[1], rounds[0])
      assert.deepStrictEqual(rounds[2], rounds[0])
      assert.isTrue(rounds[0]!.every((v) => v.includes(":pass/")), rounds[0]!.join("\n"))
    }), { timeout: 180_000 })
})
