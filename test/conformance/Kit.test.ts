import { assert, describe, it } from "@effect/vitest"
import { Option } from "effect"
import { allScenarios, scenarioNamed } from "../../scenarios/index.js"
import { stopsRuntime } from "../../src/conformance/Kit.js"
import { kitIneligibility } from "../../src/conformance/Replay.js"
import { formatJson, formatTable, type Report } from "../../src/conformance/Report.js"

const named = (name: string) => scenarioNamed(name)!

describe("conformance kit", () => {
  it("replays against an external Runtime only what the wire alone reproduces", () => {
    assert.isTrue(Option.isNone(kitIneligibility(named("preparation-ready-start-done"), "runtime")))
    assert.deepStrictEqual(
      kitIneligibility(named("cancellation-waits-for-settlement"), "runtime"),
      Option.some("needs native settlement control (in-process runner only)")
    )
    assert.deepStrictEqual(kitIneligibility(named("admission-expiry"), "runtime"), Option.some("needs clock control (in-process runner only)"))
    assert.deepStrictEqual(
      kitIneligibility(named("invalid-heartbeat-closes"), "runtime"),
      Option.some("a daemon never sends an incomplete declaration: its encoder refuses it (unit-tested in src/proto)")
    )
  })

  it("replays against an external Core only the scenarios a Runtime drives by itself", () => {
    const eligible = allScenarios.filter((s) => Option.isNone(kitIneligibility(s, "core"))).map((s) => s.name)
    assert.deepStrictEqual(eligible, [
      "heartbeat-and-declaration",
      "invalid-heartbeat-closes",
      "stray-frames-tolerated",
      "connection-replacement",
      "incompatible-version",
      "bad-credential"
    ])
  })

  it("knows which scenarios leave the Runtime stopped for good", () => {
    assert.deepStrictEqual(allScenarios.filter(stopsRuntime).map((s) => s.name), ["shutdown", "incompatible-version", "bad-credential"])
  })

  it("formats a table with the first divergent frame and a JSON report with a summary", () => {
    const report: Report = {
      side: "runtime",
      results: [
        { scenario: "a", side: "runtime", verdict: { _tag: "Pass", framesChecked: 3, skippedChecks: 1 } },
        {
          scenario: "bb",
          side: "runtime",
          verdict: {
            _tag: "Fail",
            divergence: {
              step: 4,
              stepKind: "Runtime",
              reason: "frame differs at payload.state",
              expected: "\"ready\"",
              actual: "\"failed\"",
              frame: { type: "preparation_status", id: "prep-1" }
            }
          }
        },
        { scenario: "c", side: "runtime", verdict: { _tag: "Skip", reason: "needs clock control" } }
      ]
    }
    assert.strictEqual(
      formatTable(report),
      [
        "scenario  verdict  first divergent frame / note",
        "--------  -------  ----------------------------",
        "a         pass     3 frames checked, 1 side checks not observable here",
        "bb        FAIL     step 4 (Runtime): frame differs at payload.state [preparation_status id=prep-1]; expected \"ready\"; got \"failed\"",
        "c         skip     needs clock control",
        "",
        "1 passed, 1 failed, 1 skipped (runtime under test)"
      ].join("\n")
    )
    const json = JSON.parse(formatJson(report)) as { summary: unknown; results: ReadonlyArray<unknown> }
    assert.deepStrictEqual(json.summary, { passed: 1, failed: 1, skipped: 1 })
    assert.strictEqual(json.results.length, 3)
  })
})
