/**
 * The scripted adapter's settlement hands a Turn's text over as parts (`Settlement.contentParts`): a long Turn's
 * content is never made one string on its way to the `done` frame (issue 18, relay). Runs on the TestClock.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { settledDone } from "../../src/runtime/harness/Harness.js"
import { makeScriptedHarness } from "../../src/runtime/harness/scripted/ScriptedHarness.js"
import { ScriptedSignals } from "../../src/runtime/harness/scripted/ScriptedSignals.js"
import { prepare, start } from "./HarnessLifecycleSuite.js"

describe("ScriptedHarness settlement", () => {
  it.effect("gives a long Turn's content as parts of at most 1024 deltas each, whose concatenation is the content", () =>
    Effect.gen(function* () {
      const harness = yield* makeScriptedHarness().pipe(Effect.provide(ScriptedSignals.layer))
      const executor = yield* prepare(harness, { agent_kind: "scripted", conversation_id: "", run_id: "" })
      const deltas = Array.from({ length: 2500 }, (_, i) => `delta ${i}; `)
      const started = yield* start(executor, [
        { content: [{ type: "input_text", text: JSON.stringify({ script: deltas.map((delta) => ({ delta })) }) }] }
      ])
      const settlement = yield* Effect.orDie(started.turn.awaitSettlement)
      assert.strictEqual(settlement.outcome, "completed")
      assert.deepStrictEqual(settlement.contentParts, [
        deltas.slice(0, 1024).join(""),
        deltas.slice(1024, 2048).join(""),
        deltas.slice(2048).join("")
      ])
      assert.strictEqual(settlement.done.content, "")
      assert.strictEqual(settledDone(settlement).content, deltas.join(""))
      // The continuity snapshot is still the whole content as one string.
      assert.strictEqual((yield* started.turn.cancellationOutcome).content, deltas.join(""))
    }))

  it.effect("joins the pieces as they fill: a Turn of exactly 1024 deltas settles as one part", () =>
    Effect.gen(function* () {
      const harness = yield* makeScriptedHarness().pipe(Effect.provide(ScriptedSignals.layer))
      const executor = yield* prepare(harness, { agent_kind: "scripted", conversation_id: "", run_id: "" })
      const deltas = Array.from({ length: 1024 }, (_, i) => `d${i} `)
      const started = yield* start(executor, [
        { content: [{ type: "input_text", text: JSON.stringify({ script: deltas.map((delta) => ({ delta })) }) }] }
      ])
      const settlement = yield* Effect.orDie(started.turn.awaitSettlement)
      assert.deepStrictEqual(settlement.contentParts, [deltas.join("")])
      assert.strictEqual((yield* started.turn.cancellationOutcome).content, deltas.join(""))
    }))

  it.effect("a delta step with repeat settles exactly as the same delta written that many times", () =>
    Effect.gen(function* () {
      const harness = yield* makeScriptedHarness().pipe(Effect.provide(ScriptedSignals.layer))
      const settle = (steps: ReadonlyArray<unknown>) =>
        Effect.gen(function* () {
          const executor = yield* prepare(harness, { agent_kind: "scripted", conversation_id: "", run_id: "" })
          const started = yield* start(executor, [{ content: [{ type: "input_text", text: JSON.stringify({ script: steps }) }] }])
          return yield* Effect.orDie(started.turn.awaitSettlement)
        })
      const repeated = yield* settle([{ delta: "a" }, { delta: "xy ", repeat: 1500 }, { delta: "b", repeat: 1 }])
      const expanded = yield* settle([{ delta: "a" }, ...Array.from({ length: 1500 }, () => ({ delta: "xy " })), { delta: "b" }])
      assert.strictEqual(repeated.outcome, "completed")
      assert.deepStrictEqual(repeated.contentParts, expanded.contentParts)
      assert.strictEqual(settledDone(repeated).content, `a${"xy ".repeat(1500)}b`)
    }))
})
