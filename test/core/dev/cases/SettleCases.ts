/**
 * A settle that carries the Turn's last journal entries (issue 18, "settlefacts"), on every store dialect: the
 * entries and the outcome in one transaction, on the group commit and inside a caller's transaction (several nodes:
 * the runner's settle runs in the owner lease's fenced transaction).
 */
import { assert, it } from "@effect/vitest"
import { Effect, type Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import type * as Store from "../../../../src/core/dev/Store.js"
import { SessionStore } from "../../../../src/core/dev/SessionStore.js"
import { TurnStore } from "../../../../src/core/dev/TurnStore.js"
import { MessageInput } from "../../../../src/proto/index.js"
import { createSessionS1 } from "./StoreCases.js"

const entry = (seq: number, type: string) => ({ seq, attempt: 1, kind: "fact" as const, type, bodyJson: "{}" })

/** Session "s1" with Turns "t1" and "t2", each with its attempt 1 begun and seq 1 stored. */
const twoRunningTurns = Effect.gen(function* () {
  yield* createSessionS1(yield* SessionStore)
  const turns = yield* TurnStore
  for (const turnId of ["t1", "t2"]) {
    yield* turns.create({ turnId, sessionId: "s1", runId: `run-${turnId}`, input: MessageInput.text("hi") })
    yield* turns.appendEvents(turnId, [entry(1, "Dispatching")], { begin: { deviceId: "dev-a" } })
  }
  return turns
})

const seqs = (turns: TurnStore["Service"], turnId: string) => Effect.map(turns.events(turnId, 0), (events) => events.map((e) => `${e.seq}:${e.type}`))

export const settleJournalCases = (store: Layer.Layer<Store.StoreServices, unknown>) => {
  it.effect("a settle with journal entries stores them, their dispatch mark and the outcome together, or none of them", () =>
    Effect.gen(function* () {
      const turns = yield* twoRunningTurns
      const written = yield* turns.settle("t1", { status: "completed", content: "ok" }, "s1", {
        events: [entry(2, "Dispatched"), entry(3, "done")],
        markDispatched: true
      })
      const record = Option.getOrThrow(written)
      assert.strictEqual(record.status, "completed")
      assert.isDefined(record.dispatchedAtMs)
      assert.deepStrictEqual(yield* seqs(turns, "t1"), ["1:Dispatching", "2:Dispatched", "3:done"])
      // An entry whose seq is taken fails the settle: no entry and no outcome stored.
      const failed = yield* Effect.exit(turns.settle("t2", { status: "completed", content: "ok" }, "s1", { events: [entry(1, "done")] }))
      assert.isTrue(failed._tag === "Failure")
      assert.strictEqual(Option.getOrThrow(yield* turns.get("t2")).status, "running")
      assert.deepStrictEqual(yield* seqs(turns, "t2"), ["1:Dispatching"])
    }).pipe(Effect.provide(store)))

  it.effect("inside a caller's transaction, a settle's journal entries commit and roll back with it", () =>
    Effect.gen(function* () {
      const turns = yield* twoRunningTurns
      const sql = yield* SqlClient.SqlClient
      const settled = yield* sql.withTransaction(
        turns.settle("t1", { status: "completed", content: "ok" }, "s1", { events: [entry(2, "done")] })
      )
      assert.strictEqual(Option.getOrThrow(settled).status, "completed")
      assert.deepStrictEqual(yield* seqs(turns, "t1"), ["1:Dispatching", "2:done"])
      // The caller's transaction fails after the settle: neither the entry nor the outcome stays.
      const rolledBack = yield* Effect.exit(sql.withTransaction(Effect.andThen(
        turns.settle("t2", { status: "completed", content: "ok" }, "s1", { events: [entry(2, "done")] }),
        Effect.fail("after the settle" as const)
      )))
      assert.isTrue(rolledBack._tag === "Failure")
      assert.strictEqual(Option.getOrThrow(yield* turns.get("t2")).status, "running")
      assert.deepStrictEqual(yield* seqs(turns, "t2"), ["1:Dispatching"])
    }).pipe(Effect.provide(store)))
}
