/** Recovery tests shared by every store dialect (docs/store.md). */
import { assert, it } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { recoverUnfinishedTurns } from "../../../../src/core/dev/Recovery.js"
import { SessionStore } from "../../../../src/core/dev/SessionStore.js"
import * as Store from "../../../../src/core/dev/Store.js"
import { toEntry } from "../../../../src/core/dev/TurnJournal.js"
import { TurnStore } from "../../../../src/core/dev/TurnStore.js"
import type * as Outcome from "../../../../src/core/Outcome.js"
import { Ids, MessageInput } from "../../../../src/proto/index.js"

const run = Ids.unsafeMake.runId("run-1")

/** A Turn left `running` by a "previous process" with these facts journaled under attempt 1. */
const leftRunning = (facts: ReadonlyArray<Outcome.TurnFact>, options: { readonly attempt?: boolean } = {}) =>
  Effect.gen(function* () {
    const sessions = yield* SessionStore
    const turns = yield* TurnStore
    yield* sessions.create({ sessionId: "s1", agentKind: "scripted", environmentType: "none", configuration: {}, deviceId: undefined })
    yield* turns.create({ turnId: "t1", sessionId: "s1", runId: run, input: MessageInput.text("hi") })
    if (options.attempt !== false) yield* turns.beginAttempt("t1", "dev-1")
    let seq = 0
    for (const fact of facts) yield* turns.appendEvent("t1", { seq: ++seq, attempt: 1, ...toEntry(fact) })
    yield* turns.insertInput("t1", "in-1", MessageInput.text("steer"))
    yield* turns.setInputStatus("t1", "in-1", "written")
  })

const outcomeOf = Effect.gen(function* () {
  const turn = Option.getOrThrow(yield* (yield* TurnStore).get("t1"))
  return { status: turn.status, error_code: turn.errorCode, observation: turn.observationReason, outcome: turn.outcome }
})

/** The outcome of a Turn left running with `facts`, after restart recovery. */
const recoveredOutcome = (facts: ReadonlyArray<Outcome.TurnFact>) =>
  leftRunning(facts).pipe(Effect.andThen(recoverUnfinishedTurns), Effect.andThen(outcomeOf))

const delta: Outcome.TurnFact = { _tag: "RunEvent", event: { type: "delta", id: run, payload: { delta: "partial", sequence: 1 } } }
const prepared: ReadonlyArray<Outcome.TurnFact> = [
  { _tag: "Dispatched", type: "execution_prepare" },
  {
    _tag: "PreparationStatus",
    status: {
      state: "ready",
      revision: 2,
      handle: Ids.unsafeMake.admissionHandle("h1"),
      executor_id: Ids.unsafeMake.executorId("x1"),
      expires_at: 300_000
    }
  }
]

/** The Recovery cases over `store` (a fresh store per test): SQLite in Recovery.test.ts, PostgreSQL in pg/. */
export const recoveryCases = (store: Layer.Layer<Store.StoreServices, unknown>) => {
  it.effect("records a dispatched Turn with observed Run frames as failed, event_stream_incomplete, core_restarted", () =>
    Effect.gen(function* () {
      yield* leftRunning([...prepared, { _tag: "Dispatched", type: "execution_start" }, delta])
      const recovered = yield* recoverUnfinishedTurns
      assert.strictEqual(recovered.length, 1)
      const o = yield* outcomeOf
      assert.deepStrictEqual([o.status, o.error_code, o.observation], ["failed", "event_stream_incomplete", "core_restarted"])
      assert.isUndefined(o.outcome?.engine_error_code)
      // the stored events stay, and an unconfirmed input stays unknown (the cursor does not move)
      assert.strictEqual((yield* (yield* TurnStore).events("t1", 0)).length, 4)
      const turn = Option.getOrThrow(yield* (yield* TurnStore).get("t1"))
      assert.strictEqual(turn.inputCursor, 0)
      assert.deepStrictEqual((yield* (yield* TurnStore).inputs("t1")).map((i) => i.status), ["unknown"])
    }).pipe(Effect.provide(store)))

  it.effect("records a dispatched Turn with nothing observed afterwards as delivery_unknown", () =>
    Effect.gen(function* () {
      yield* leftRunning([...prepared, { _tag: "Dispatched", type: "execution_start" }])
      yield* recoverUnfinishedTurns
      const o = yield* outcomeOf
      assert.deepStrictEqual([o.status, o.error_code, o.observation], ["failed", "delivery_unknown", "core_restarted"])
    }).pipe(Effect.provide(store)))

  it.effect("records a Turn no delivery attempt of which began as delivery_failed (definite)", () =>
    Effect.gen(function* () {
      yield* leftRunning([], { attempt: false })
      yield* recoverUnfinishedTurns
      const o = yield* outcomeOf
      assert.deepStrictEqual(o.outcome, { status: "failed", error_code: "delivery_failed", detail: "core_restarted", observation: "core_restarted" })
    }).pipe(Effect.provide(store)))

  it.effect("records an attempt that began with nothing journaled as delivery_unknown, never as a definite failure", () =>
    Effect.gen(function* () {
      // A crash between a send and its journal write leaves exactly this: the attempt, no fact.
      yield* leftRunning([])
      const recovered = yield* recoverUnfinishedTurns
      const unknown = { status: "failed", error_code: "delivery_unknown", observation: "core_restarted" } as const
      assert.deepStrictEqual(recovered, [{ turnId: "t1", outcome: unknown }])
      assert.deepStrictEqual((yield* outcomeOf).outcome, unknown)
    }).pipe(Effect.provide(store)))

  it.effect("records a Turn whose execution_start was being dispatched, nothing after, as delivery_unknown", () =>
    Effect.gen(function* () {
      // Without the Dispatching fact this journal would read as preparation_interrupted (no Run input submitted).
      assert.deepStrictEqual((yield* recoveredOutcome([...prepared, { _tag: "Dispatching", type: "execution_start" }])).outcome, {
        status: "failed",
        error_code: "delivery_unknown",
        observation: "core_restarted"
      })
    }).pipe(Effect.provide(store)))

  it.effect("records a Turn whose execution_prepare was being dispatched, nothing after, as delivery_unknown", () =>
    Effect.gen(function* () {
      assert.deepStrictEqual((yield* recoveredOutcome([{ _tag: "Dispatching", type: "execution_prepare" }])).outcome, {
        status: "failed",
        error_code: "delivery_unknown",
        observation: "core_restarted"
      })
    }).pipe(Effect.provide(store)))

  it.effect("records a stored NotDispatched as the definite delivery_failed", () =>
    Effect.gen(function* () {
      assert.deepStrictEqual((yield* recoveredOutcome([
        ...prepared,
        { _tag: "Dispatching", type: "execution_start" },
        { _tag: "NotDispatched", type: "execution_start", reason: "journal_unavailable" }
      ])).outcome, {
        status: "failed",
        error_code: "delivery_failed",
        detail: "journal_unavailable"
      })
    }).pipe(Effect.provide(store)))

  it.effect("keeps what a stored done proves, never inventing a failure", () =>
    Effect.gen(function* () {
      yield* leftRunning([
        ...prepared,
        { _tag: "Dispatched", type: "execution_start" },
        delta,
        { _tag: "RunEvent", event: { type: "done", id: run, payload: { content: "all of it" } } }
      ])
      yield* recoverUnfinishedTurns
      const o = yield* outcomeOf
      assert.deepStrictEqual([o.status, o.error_code, o.outcome?.content], ["completed", undefined, "all of it"])
    }).pipe(Effect.provide(store)))

  it.effect("queues again a Turn left unclaimed by a preparation_capacity refusal", () =>
    Effect.gen(function* () {
      yield* leftRunning([
        { _tag: "Dispatched", type: "execution_prepare" },
        {
          _tag: "PreparationStatus",
          status: { state: "rejected", revision: 0, operation: "execution_prepare", error_code: "preparation_capacity" }
        }
      ])
      const recovered = yield* recoverUnfinishedTurns
      assert.deepStrictEqual(recovered, [{ turnId: "t1", outcome: "requeued" }])
      assert.strictEqual((yield* outcomeOf).status, "queued")
    }).pipe(Effect.provide(store)))

  it.effect("leaves finished Turns alone", () =>
    Effect.gen(function* () {
      yield* leftRunning([])
      yield* (yield* TurnStore).complete("t1", { status: "completed", content: "x" })
      assert.deepStrictEqual(yield* recoverUnfinishedTurns, [])
      assert.strictEqual((yield* outcomeOf).status, "completed")
    }).pipe(Effect.provide(store)))
}
