/**
 * Core side of the wire scenario suite: every scenario Core replays, against the real gateway over a loopback
 * WebSocket (test/support/wireCoreRunner.ts). Imports the gateway, never the daemon.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { allScenarios, replays } from "../../scenarios/index.js"
import { runCoreScenario } from "../support/wireCoreRunner.js"

describe("wire scenarios, Core side (real gateway vs scripted Runtime)", () => {
  for (const scenario of allScenarios.filter((s) => replays(s, "core"))) {
    it.effect(`${scenario.name}: ${"asserts" in scenario.replay.core ? scenario.replay.core.asserts : ""}`, () =>
      Effect.gen(function* () {
        const verdict = yield* runCoreScenario(scenario)
        assert.deepStrictEqual(verdict._tag === "Fail" ? verdict.divergence : undefined, undefined)
        assert.strictEqual(verdict._tag, "Pass")
      }))
  }
})

describe("wire scenarios, Core side, determinism", () => {
  it.effect("replays the whole suite three times in a row with the same verdicts", () =>
    Effect.gen(function* () {
      const scenarios = allScenarios.filter((s) => replays(s, "core"))
      const rounds: Array<ReadonlyArray<string>> = []
      for (let round = 0; round < 3; round++) {
        const verdicts: Array<string> = []
        for (const scenario of scenarios) {
          const verdict = yield* runCoreScenario(scenario)
          verdicts.push(`${scenario.name}:${verdict._tag === "Pass" ? `pass/${verdict.framesChecked}` : JSON.stringify(verdict)}`)
        }
        rounds.push(verdicts)
      }
      assert.deepStrictEqual(rounds[1], rounds[0])
      assert.deepStrictEqual(rounds[2], rounds[0])
      assert.isTrue(rounds[0]!.every((v) => v.includes(":pass/")), rounds[0]!.join("\n"))
    }), { timeout: 180_000 })
})
