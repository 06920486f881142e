/** TurnJournal tests shared by every store dialect (docs/store.md). */
import { assert, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer, Stream } from "effect"
import { SessionStore } from "../../../../src/core/dev/SessionStore.js"
import * as Store from "../../../../src/core/dev/Store.js"
import { type JournalItem, layer as journalLayer, TurnJournal } from "../../../../src/core/dev/TurnJournal.js"
import { TurnStore } from "../../../../src/core/dev/TurnStore.js"
import type * as Outcome from "../../../../src/core/Outcome.js"
import { Ids, MessageInput } from "../../../../src/proto/index.js"
import { yieldTimes } from "../../../support/coreFakeSession.js"

const run = Ids.unsafeMake.runId("run-1")
const delta = (n: number): Outcome.TurnFact => ({
  _tag: "RunEvent",
  event: { type: "delta", id: run, payload: { delta: `d${n}`, sequence: n } }
})

const turn = Effect.gen(function* () {
  yield* (yield* SessionStore).create({ sessionId: "s1", agentKind: "scripted", environmentType: "none", configuration: {}, deviceId: undefined })
  yield* (yield* TurnStore).create({ turnId: "t1", sessionId: "s1", runId: run, input: MessageInput.text("hi") })
})

const describeItems = (items: ReadonlyArray<JournalItem>) =>
  items.map((i) => (i._tag === "entry" ? `${i.seq}:${i.kind}:${i.type}` : i._tag === "outcome" ? `outcome:${i.turn.status}` : `notice:${i.event}`))

/** The TurnJournal cases over `store` (a fresh store per test): SQLite in TurnJournal.test.ts, PostgreSQL in pg/. */
export const turnJournalCases = (store: Layer.Layer<Store.StoreServices, unknown>) => {
  it.effect("replays stored entries, then continues live without a gap or a duplicate, and ends with the outcome", () =>
    Effect.gen(function* () {
      yield* turn
      const journal = yield* TurnJournal
      const writer = yield* journal.open("t1", 1)
      yield* writer.record({ _tag: "Dispatched", type: "execution_start" })
      yield* writer.record(delta(1))
      // Notices are live only (never stored): the follower must have finished its stored replay (it emitted both
      // stored entries, so its one replay query returned) before the notice is published, or the notice could
      // overtake entries that the replay then reads from the store.
      const replayed = yield* Deferred.make<void>()
      const follower = yield* Effect.forkChild(
        Stream.runCollect(
          journal.follow("t1", 0).pipe(
            Stream.tap((item) => item._tag === "entry" && item.seq === 2 ? Deferred.succeed(replayed, undefined) : Effect.void)
          )
        )
      )
      yield* Deferred.await(replayed)
      yield* yieldTimes(50)
      yield* writer.record(delta(2))
      yield* writer.notify("input", { input_id: "in-1", status: "written" })
      yield* writer.record({ _tag: "RunEvent", event: { type: "done", id: run, payload: { content: "d1d2" } } })
      yield* (yield* TurnStore).complete("t1", { status: "completed", content: "d1d2" })
      yield* writer.finish()
      const items = yield* Fiber.join(follower)
      assert.deepStrictEqual(describeItems(items), [
        "1:fact:Dispatched",
        "2:frame:delta",
        "3:frame:delta",
        "notice:input",
        "4:frame:done",
        "outcome:completed"
      ])
    }).pipe(Effect.provide(journalLayer.pipe(Layer.provideMerge(store)))))

  it.effect("replays a finished Turn after a given seq and ends at once", () =>
    Effect.gen(function* () {
      yield* turn
      const journal = yield* TurnJournal
      const writer = yield* journal.open("t1", 1)
      for (const n of [1, 2, 3]) yield* writer.record(delta(n))
      yield* (yield* TurnStore).complete("t1", { status: "failed", error_code: "event_stream_incomplete", observation: "disconnected" })
      yield* writer.finish()
      const items = yield* Stream.runCollect(journal.follow("t1", 1))
      assert.deepStrictEqual(describeItems(items), ["2:frame:delta", "3:frame:delta", "outcome:failed"])
      assert.deepStrictEqual(yield* Stream.runCollect(journal.follow("nope", 0)), [])
    }).pipe(Effect.provide(journalLayer.pipe(Layer.provideMerge(store)))))
}
