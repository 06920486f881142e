/**
 * The `codex` Harness's active operations against the pinned real Codex binary and the fake Responses server:
 * steering with receipts, cancellation by `turn/interrupt`, permission requests (allow, deny, withdrawn by an
 * interrupt), user choice (`request_user_input`) and function tools (dynamic tools). Real processes and time.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit } from "effect"
import { unsafeMake } from "../../src/proto/Ids.js"
import type { TurnEvent } from "../../src/runtime/harness/Harness.js"
import { codexFixture, prepareRequest, recorder, text } from "../support/fakeResponsesCodex.js"
import { withPreparationServices } from "../support/preparationServices.js"

const run = (id: string) => unsafeMake.runId(id)
const is = <T extends TurnEvent["type"]>(type: T) => (e: TurnEvent): e is Extract<TurnEvent, { type: T }> => e.type === type
const lookupTool = { name: "lookup", description: "Looks a value up", parameters: { type: "object", properties: { q: { type: "string" } } } }

describe("CodexHarness interactions (real binary)", () => {
  it.live("steers the active turn: written once on flush, accepted for that turn, and the model sees the input", () =>
    Effect.gen(function* () {
      const { fake, harness } = yield* codexFixture
      const executor = yield* withPreparationServices(harness.prepare(prepareRequest(harness)))
      const r = recorder()
      const turn = yield* executor.startTurn(run("run-s"), text("SLOW please"), r.sink)
      yield* r.waitFor(is("delta"))
      let written = 0
      const flushed = yield* Deferred.make<void>()
      yield* turn.steerWithReceipt(
        { inputId: unsafeMake.inputId("input-1"), input: text("and STEERED too"), durable: true },
        Effect.andThen(Effect.sync(() => written++), Deferred.succeed(flushed, undefined))
      )
      assert.strictEqual(written, 1)
      const settled = yield* turn.awaitSettlement
      assert.strictEqual(settled.outcome, "completed")
      assert.isTrue(fake.requests().some((q) => JSON.stringify(q.body.input).includes("and STEERED too")))
      // After settlement there is no active turn: a definite rejection before any write.
      let late = 0
      const rejected = yield* Effect.exit(turn.steerWithReceipt(
        { inputId: unsafeMake.inputId("input-2"), input: text("late"), durable: true },
        Effect.sync(() => late++)
      ))
      assert.isTrue(Exit.isFailure(rejected))
      assert.match(JSON.stringify(rejected), /NativeRejected/)
      assert.strictEqual(late, 0)
      yield* executor.close
    }), 60_000)

  it.live("cancels by turn/interrupt: settles cancelled with the partial output, and the Executor stays usable", () =>
    Effect.gen(function* () {
      const { harness } = yield* codexFixture
      const executor = yield* withPreparationServices(harness.prepare(prepareRequest(harness)))
      const r = recorder()
      const turn = yield* executor.startTurn(run("run-c"), text("SLOW please"), r.sink)
      yield* r.waitFor(is("delta"))
      yield* turn.cancel
      const settled = yield* turn.awaitSettlement
      assert.strictEqual(settled.outcome, "cancelled")
      assert.isTrue(settled.reusable)
      assert.isTrue(settled.done.content.startsWith("s0 "))
      // The open message stays open: no synthetic completion.
      assert.isFalse(r.events.some((e) => e.type === "output_message" && e.payload.status === "completed"))
      yield* turn.cancel
      const next = yield* Effect.flatMap(executor.startTurn(run("run-c2"), text("after"), recorder().sink), (t) => t.awaitSettlement)
      assert.strictEqual(next.outcome, "completed")
      assert.strictEqual(next.done.content, "echo: after")
      yield* executor.close
    }), 60_000)

  it.live("a denied permission fails the command and the Turn still completes; a pending one is withdrawn by cancel", () =>
    Effect.gen(function* () {
      const { harness } = yield* codexFixture
      const executor = yield* withPreparationServices(harness.prepare(prepareRequest(harness)))
      const r = recorder()
      const turn = yield* executor.startTurn(run("run-d"), text("SHELL:echo denied"), r.sink)
      const asked = yield* r.waitFor(is("permission_request"))
      yield* turn.decidePermission(asked.payload.request_id, { approved: false })
      const settled = yield* turn.awaitSettlement
      assert.strictEqual(settled.outcome, "completed")
      const again = yield* Effect.exit(turn.decidePermission(asked.payload.request_id, { approved: true }))
      assert.isTrue(Exit.isFailure(again))
      const after = r.events.filter(is("tool_call")).find((e) => e.payload.stage === "after")
      assert.notStrictEqual(after?.payload.observation?.status, "completed")

      const w = recorder()
      const pending = yield* executor.startTurn(run("run-w"), text("SHELL:echo withdrawn"), w.sink)
      const request = yield* w.waitFor(is("permission_request"))
      yield* pending.cancel
      const cancelled = yield* pending.awaitSettlement
      assert.strictEqual(cancelled.outcome, "cancelled")
      assert.deepStrictEqual(w.events.filter(is("permission_cancel")), [
        { type: "permission_cancel", interactionId: request.payload.request_id }
      ])
      // The running command's observation closes as incomplete.
      const closed = w.events.filter(is("tool_call")).find((e) => e.payload.stage === "after")
      assert.strictEqual(closed?.payload.observation?.status, "incomplete")
      yield* executor.close
    }), 60_000)

  it.live("asks the user through request_user_input and applies the answer", () =>
    Effect.gen(function* () {
      const { fake, harness } = yield* codexFixture
      const executor = yield* withPreparationServices(harness.prepare(prepareRequest(harness)))
      const r = recorder()
      const turn = yield* executor.startTurn(run("run-u"), text("RUI please"), r.sink)
      const ask = yield* r.waitFor(is("prompt_for_user_choice"))
      assert.deepStrictEqual(ask.payload.questions, [{
        id: "color",
        header: "Color",
        question: "Which color?",
        is_other: true,
        is_secret: false,
        options: [{ label: "Blue", description: "cool" }, { label: "Red", description: "warm" }]
      }])
      yield* turn.answerUserChoice(ask.payload.ask_id, { cancelled: false, questionAnswers: [{ question_id: "color", answers: ["Blue"] }] })
      const settled = yield* turn.awaitSettlement
      assert.strictEqual(settled.done.content, "tool done")
      assert.include(JSON.stringify(fake.requests().at(-1)!.body.input), "Blue")
      yield* executor.close
    }), 60_000)

  it.live("exposes function tools natively and delivers the result under the native call id", () =>
    Effect.gen(function* () {
      const { fake, harness } = yield* codexFixture
      const executor = yield* withPreparationServices(harness.prepare(prepareRequest(harness, { function_tools: [lookupTool] })))
      const r = recorder()
      const turn = yield* executor.startTurn(run("run-f"), text("DYN:lookup"), r.sink)
      const call = yield* r.waitFor(is("function_call"))
      assert.deepStrictEqual(call.payload, { call_id: unsafeMake.callId("call_1"), name: "lookup", arguments: { q: "x" } })
      yield* turn.submitFunctionResult({ callId: call.payload.call_id, success: true, content: [{ type: "input_text", text: "forty-two" }] })
      const settled = yield* turn.awaitSettlement
      assert.strictEqual(settled.done.content, "tool done")
      assert.include(JSON.stringify(fake.requests().at(-1)!.body.input), "forty-two")
      assert.isTrue(fake.requests()[0]!.body.tools!.some((t) => t["name"] === "lookup"))
      const observed = r.events.filter(is("tool_call")).map((e) => [e.payload.stage, e.payload.observation?.kind, e.payload.observation?.status])
      assert.deepStrictEqual(observed, [["before", "function", "in_progress"], ["after", "function", "completed"]])
      yield* executor.close
    }), 60_000)
})
