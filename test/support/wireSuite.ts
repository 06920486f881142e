/**
 * The shape both wire test files share: one test per scenario the side replays (a Pass, or the first divergence
 * shown), then the whole side's suite three times in a row with identical verdicts. Takes the side's runner as a
 * parameter and imports neither the daemon nor the gateway, so each wire test file keeps importing only its own
 * side (test/wire/separation.test.ts).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { allScenarios, replays } from "../../scenarios/index.js"
import type { Side, WireScenario } from "../../scenarios/WireScenario.js"
import type { Verdict } from "../../src/conformance/Report.js"

export const wireSuite = (
  side: Side,
  title: string,
  run: (scenario: WireScenario) => Effect.Effect<Verdict, unknown>
): void => {
  const scenarios = allScenarios.filter((s) => replays(s, side))

  describe(`wire scenarios, ${title}`, () => {
    for (const scenario of scenarios) {
      const replay = scenario.replay[side]
      it.effect(`${scenario.name}: ${"asserts" in replay ? replay.asserts : ""}`, () =>
        Effect.gen(function* () {
          const verdict = yield* run(scenario)
          assert.deepStrictEqual(verdict._tag === "Fail" ? verdict.divergence : undefined, undefined)
          assert.strictEqual(verdict._tag, "Pass")
        }))
    }
  })

  describe(`wire scenarios, ${title.split(" (")[0]}, determinism`, () => {
    it.effect("replays the whole suite three times in a row with the same verdicts", () =>
      Effect.gen(function* () {
        const rounds: Array<ReadonlyArray<string>> = []
        for (let round = 0; round < 3; round++) {
          const verdicts: Array<string> = []
          for (const scenario of scenarios) {
            const verdict = yield* run(scenario)
            verdicts.push(`${scenario.name}:${verdict._tag === "Pass" ? `pass/${verdict.framesChecked}` : JSON.stringify(verdict)}`)
          }
          rounds.push(verdicts)
        }
        assert.deepStrictEqual(rounds[1], rounds[0])
        assert.deepStrictEqual(rounds[2], rounds[0])
        assert.isTrue(rounds[0]!.every((v) => v.includes(":pass/")), rounds[0]!.join("\n"))
      }), { timeout: 180_000 })
  })
}
