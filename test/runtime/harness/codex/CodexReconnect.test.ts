/**
 * The Codex Turn's reconnect deadline (CodexWatchdog.ts) on the TestClock: Codex keeps sending
 * `error {willRetry: true}` while the model endpoint refuses connections, so the Turn ends itself after
 * `reconnectBudget` without native progress: `turn/interrupt` for its turn id, then the `interrupted` completion
 * settles it as completed with a classified error. Each boundary is tested just before and at the budget.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Queue } from "effect"
import { TestClock } from "effect/testing"
import { unsafeMake } from "../../../../src/proto/Ids.js"
import type { TurnEvent } from "../../../../src/runtime/harness/Harness.js"
import { makeCodexTurn } from "../../../../src/runtime/harness/codex/CodexTurn.js"
import { connected } from "../../../support/codexRpcChannel.js"

const thread = "thread-1"
const zero = { totalTokens: 0, inputTokens: 0, cachedInputTokens: 0, outputTokens: 0, reasoningOutputTokens: 0 }
const retry = {
  _tag: "Notification" as const,
  method: "error",
  params: {
    threadId: thread,
    turnId: "t1",
    willRetry: true,
    error: { message: "Reconnecting... waiting for network", codexErrorInfo: { responseStreamDisconnected: { httpStatusCode: null } } }
  }
}
const delta = {
  _tag: "Notification" as const,
  method: "item/agentMessage/delta",
  params: { threadId: thread, turnId: "t1", itemId: "msg_1", delta: "hi" }
}
const interrupted = {
  _tag: "Notification" as const,
  method: "turn/completed",
  params: { threadId: thread, turn: { id: "t1", status: "interrupted" } }
}

const setup = Effect.gen(function* () {
  const { ch, rpc } = yield* connected
  const events: Array<TurnEvent> = []
  const turn = yield* makeCodexTurn({
    runId: unsafeMake.runId("run-1"),
    rpc,
    threadId: thread,
    config: { agent_kind: "codex", conversation_id: "", run_id: "" },
    sink: { emit: (e) => Effect.sync(() => void events.push(e)) },
    baseline: zero,
    onTotal: () => {},
    nextInteractionId: (prefix) => unsafeMake.interactionId(`${prefix}_1`),
    reconnectBudget: Duration.seconds(30),
    scope: yield* Effect.scope
  })
  turn.adoptTurnId("t1")
  const advance = (ms: number) => Effect.andThen(TestClock.adjust(Duration.millis(ms)), Effect.yieldNow)
  return { ch, turn, events, advance }
})

describe("Codex reconnect deadline", () => {
  it.effect("interrupts the turn exactly at the budget after a retried error and settles with connection_failed", () =>
    Effect.gen(function* () {
      const { ch, turn, events, advance } = yield* setup
      assert.isTrue(yield* turn.handle(retry))
      yield* advance(29_999)
      assert.strictEqual(yield* Queue.size(ch.written), 0, "nothing is interrupted before the budget")
      yield* advance(1)
      const sent = yield* Queue.take(ch.written)
      assert.deepStrictEqual(sent, { id: 1, method: "turn/interrupt", params: { threadId: thread, turnId: "t1" } })
      yield* Queue.offer(ch.lines, JSON.stringify({ id: 1, result: {} }))
      yield* turn.handle(interrupted)
      const settled = yield* turn.turn.awaitSettlement
      assert.strictEqual(settled.outcome, "completed")
      assert.isTrue(settled.reusable)
      assert.deepStrictEqual(events.filter((e) => e.type === "error"), [{
        type: "error",
        payload: { error: "codex could not reach the model endpoint within 30s (it kept reconnecting)", code: "connection_failed" }
      }])
    }))

  it.effect("native progress resets the deadline; a later retried error starts a new one", () =>
    Effect.gen(function* () {
      const { ch, turn, advance } = yield* setup
      yield* turn.handle(retry)
      yield* advance(20_000)
      yield* turn.handle(delta)
      yield* advance(29_999)
      assert.strictEqual(yield* Queue.size(ch.written), 0, "progress stopped the first deadline")
      yield* turn.handle(retry)
      yield* advance(29_999)
      assert.strictEqual(yield* Queue.size(ch.written), 0)
      yield* advance(1)
      assert.strictEqual((yield* Queue.take(ch.written))["method"], "turn/interrupt")
    }))

  it.effect("a turn that does not stop after the interrupt still ends: not reusable, 10 s after the unanswered interrupt", () =>
    Effect.gen(function* () {
      const { ch, turn, events, advance } = yield* setup
      yield* turn.handle(retry)
      yield* advance(30_000)
      yield* Queue.take(ch.written)
      const settled = yield* Deferred.make<boolean>()
      yield* Effect.forkChild(Effect.andThen(turn.turn.awaitSettlement, Deferred.succeed(settled, true)))
      yield* advance(9_999)
      assert.isFalse(yield* Deferred.isDone(settled))
      yield* advance(1)
      const s = yield* turn.turn.awaitSettlement
      assert.deepStrictEqual([s.outcome, s.reusable, s.reason], ["completed", false, "codex did not stop after the reconnect deadline"])
      assert.strictEqual(events.filter((e) => e.type === "error").length, 1)
    }))

  it.effect("a retried error after our own cancel never overrides the cancellation", () =>
    Effect.gen(function* () {
      const { ch, turn, advance } = yield* setup
      yield* turn.handle(retry)
      yield* Effect.forkChild(turn.turn.cancel)
      yield* Effect.yieldNow
      assert.strictEqual((yield* Queue.take(ch.written))["method"], "turn/interrupt")
      yield* Queue.offer(ch.lines, JSON.stringify({ id: 1, result: {} }))
      yield* advance(30_000)
      assert.strictEqual(yield* Queue.size(ch.written), 0)
      yield* turn.handle(interrupted)
      assert.strictEqual((yield* turn.turn.awaitSettlement).outcome, "cancelled")
    }))
})
