/**
 * One Claude Code Turn in isolation (ClaudeCodeTurn.ts), fed stdout lines in the shapes Claude Code 2.1.332
 * writes (decoded by StreamJson.decodeLine): usage is absent when no result carried any (never a made-up zero);
 * settlement waits for every uuid of the Run; an interrupt receipt whose `still_queued` lists one of the Run's
 * uuids makes the Executor not reusable; the error result caused by our own interrupt is the cancellation, not
 * an engine error. Real-binary behaviour is proven in claudeCode.*.live.test.ts; this pins the edge rules.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { unsafeMake } from "../../src/proto/Ids.js"
import { makeTurn } from "../../src/runtime/harness/claude_code/ClaudeCodeTurn.js"
import { decodeLine } from "../../src/runtime/harness/claude_code/StreamJson.js"
import type { TurnEvent } from "../../src/runtime/harness/Harness.js"

const session = "0f0e0d0c-0b0a-4090-8070-605040302010"

const setup = Effect.gen(function* () {
  const written: Array<string> = []
  const seen: Array<TurnEvent> = []
  let uuids = 0
  let interrupts = 0
  let ended = false
  const turn = yield* makeTurn({
    write: (line) => Effect.sync(() => void written.push(line)),
    interrupt: Effect.sync(() => void interrupts++),
    uuid: Effect.sync(() => `uuid-${++uuids}`),
    interactionId: (prefix) => unsafeMake.interactionId(`${prefix}_1`),
    sessionId: () => session,
    observeMessages: false,
    observeTools: false,
    ended: () => Effect.sync(() => void (ended = true))
  }, { emit: (event) => Effect.sync(() => void seen.push(event)) })
  const feed = (message: object) => turn.onMessage(decodeLine(JSON.stringify(message)))
  return { turn, feed, seen, written, interrupts: () => interrupts, ended: () => ended }
})

const lifecycle = (uuid: string, state: string) => ({ type: "command_lifecycle", command_uuid: uuid, state })
const result = (extra: object = {}) => ({
  type: "result",
  subtype: "success",
  is_error: false,
  session_id: session,
  parent_tool_use_id: null,
  ...extra
})
const usageSinceLast = { "fake-model": { inputTokens: 50, outputTokens: 12, cacheReadInputTokens: 0, cacheCreationInputTokens: 0, costUSD: 0.01 } }

describe("ClaudeCodeTurn", () => {
  it.effect("usage stays absent when no result carried any; present exactly as measured otherwise", () =>
    Effect.gen(function* () {
      const bare = yield* setup
      yield* bare.turn.submit([{ content: [{ type: "input_text", text: "hi" }] }])
      yield* bare.feed(result({ user_message_uuids: ["uuid-1"] }))
      yield* bare.feed(lifecycle("uuid-1", "completed"))
      const settled = yield* bare.turn.turn.awaitSettlement
      assert.isUndefined(settled.done.usage)
      assert.deepStrictEqual(bare.seen.filter((e) => e.type === "usage"), [])

      const measured = yield* setup
      yield* measured.turn.submit([{ content: [{ type: "input_text", text: "hi" }] }])
      yield* measured.feed(result({ user_message_uuids: ["uuid-1"], model_usage_since_last_result: usageSinceLast }))
      yield* measured.feed(lifecycle("uuid-1", "completed"))
      const withUsage = yield* measured.turn.turn.awaitSettlement
      assert.strictEqual(withUsage.done.usage?.input_tokens, 50)
      assert.strictEqual(withUsage.done.usage?.output_tokens, 12)
      assert.strictEqual(withUsage.done.usage?.model, "fake-model")
    }))

  it.effect("settles only once every uuid of the Run finished natively (steered input included)", () =>
    Effect.gen(function* () {
      const t = yield* setup
      yield* t.turn.submit([{ content: [{ type: "input_text", text: "first" }] }])
      yield* t.feed(lifecycle("uuid-1", "started"))
      const steer = yield* Effect.forkChild(t.turn.turn.steerWithReceipt(
        { inputId: unsafeMake.inputId("input-1"), input: [{ content: [{ type: "input_text", text: "more" }] }], durable: true },
        Effect.void
      ))
      yield* Effect.yieldNow
      assert.strictEqual(t.written.length, 2, "the steered line was written")
      yield* t.feed(result({ user_message_uuids: ["uuid-1"] }))
      yield* t.feed(lifecycle("uuid-1", "completed"))
      assert.isFalse(t.ended(), "not settled while the steered uuid is outstanding")
      yield* t.feed(lifecycle("uuid-2", "started"))
      yield* Fiber.join(steer) // accepted: consumed natively
      yield* t.feed(result({ user_message_uuids: ["uuid-2"] }))
      yield* t.feed(lifecycle("uuid-2", "completed"))
      assert.isTrue(t.ended())
      const settled = yield* t.turn.turn.awaitSettlement
      assert.strictEqual(settled.outcome, "completed")
      assert.isTrue(settled.reusable)
    }))

  it.effect("our interrupt's error result is the cancellation; queued input surviving it makes the Executor not reusable", () =>
    Effect.gen(function* () {
      const t = yield* setup
      yield* t.turn.submit([{ content: [{ type: "input_text", text: "long" }] }])
      yield* t.feed(lifecycle("uuid-1", "started"))
      yield* t.turn.turn.cancel
      yield* t.turn.turn.cancel // once only
      assert.strictEqual(t.interrupts(), 1)
      yield* t.turn.onInterruptReceipt(["uuid-1"])
      yield* t.feed(result({ subtype: "error_during_execution", is_error: true, terminal_reason: "aborted_streaming" }))
      yield* t.feed(lifecycle("uuid-1", "cancelled"))
      const settled = yield* t.turn.turn.awaitSettlement
      assert.strictEqual(settled.outcome, "cancelled")
      assert.isFalse(settled.reusable)
      assert.strictEqual(settled.reason, "queued input survived the interrupt")
      assert.deepStrictEqual(t.seen.filter((e) => e.type === "error"), [], "no engine error for our own interrupt")
      assert.strictEqual(settled.done.metadata?.agent_session_id, session)
    }))
})
