import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { DevIds } from "../../../src/core/dev/DevIds.js"
import { SessionStore } from "../../../src/core/dev/SessionStore.js"
import * as Store from "../../../src/core/dev/Store.js"
import * as TurnFacts from "../../../src/core/dev/TurnFacts.js"
import { layer as journalLayer, TurnJournal } from "../../../src/core/dev/TurnJournal.js"
import { TurnStore } from "../../../src/core/dev/TurnStore.js"
import type * as Interactions from "../../../src/core/Interactions.js"
import type * as Outcome from "../../../src/core/Outcome.js"
import { type Functions, Ids, MessageInput } from "../../../src/proto/index.js"

/** The store with every journal append (one store statement, one transaction each) counted with its options. */
const countedAppends = () => {
  const appends: Array<{ readonly types: ReadonlyArray<string>; readonly markDispatched: boolean }> = []
  const base = Store.layerFile(":memory:").pipe(Layer.provide(DevIds.layerTest))
  const counted = Layer.effect(TurnStore, Effect.map(Effect.service(TurnStore), (store) => TurnStore.of({
    ...store,
    appendEvents: (turnId, rows, options) => Effect.suspend(() => {
      appends.push({ types: rows.map((r) => r.type), markDispatched: options?.markDispatched === true })
      return store.appendEvents(turnId, rows, options)
    })
  }))).pipe(Layer.provide(base))
  return { appends, layer: journalLayer.pipe(Layer.provideMerge(Layer.merge(base, counted))) }
}

const run = Ids.unsafeMake.runId("run-1")
const handle = Ids.unsafeMake.admissionHandle("handle-1")
const status = (state: "ready" | "started", revision: number): Outcome.TurnFact => ({
  _tag: "PreparationStatus",
  status: state === "ready"
    ? { state, handle, revision, executor_id: Ids.unsafeMake.executorId("ex-1"), expires_at: 1 }
    : { state, handle, revision, run_id: run }
})
const event = (type: "output_message" | "done"): Outcome.TurnFact =>
  type === "done"
    ? { _tag: "RunEvent", event: { type, id: run, payload: { content: "hi" } } }
    : { _tag: "RunEvent", event: { type, id: run, payload: { id: "m1", status: "completed", text: "hi" } } }

/** Session s1 with Turn t1, its attempt-1 writer, and `TurnFacts` over the store with every confirmation counted. */
const turnOne = Effect.gen(function* () {
  yield* (yield* SessionStore).create({ sessionId: "s1", agentKind: "scripted", environmentType: "none", configuration: {}, deviceId: undefined })
  const store = yield* TurnStore
  yield* store.create({ turnId: "t1", sessionId: "s1", runId: run, input: MessageInput.text("hi") })
  const writer = yield* (yield* TurnJournal).open("t1", 1, 0)
  const target: TurnFacts.FactTarget = {
    turnId: "t1",
    pending: new Map<string, Interactions.PendingInteraction>(),
    calls: new Map<string, Functions.FunctionCallPayload>()
  }
  const { flush, onFacts, takeHeld } = TurnFacts.make(store, <A, E>(_: typeof target, __: string, write: Effect.Effect<A, E>) => Effect.orDie(write))
  let count = 0
  const confirm = Effect.sync(() => {
    count++
  })
  return { confirm, flush, journaled: () => count, onFacts, store, takeHeld, target, writer }
})

describe("TurnFacts", () => {
  const counted = countedAppends()
  it.effect("stores facts that arrive together and change no other record in one append; a receipt fact alone, before its record", () =>
    Effect.gen(function* () {
      const { confirm, journaled, onFacts, store, target, writer } = yield* turnOne
      // The preparation's `ready` and the start's `Dispatching` (the bench's usual pair), then the Run's dispatch
      // with the next status, then a receipt fact (its input record follows it) between two Run events.
      yield* onFacts(target, writer, [status("ready", 2), { _tag: "Dispatching", type: "execution_start" }], confirm)
      yield* onFacts(target, writer, [{ _tag: "Dispatched", type: "execution_start" }, status("started", 3)], confirm)
      yield* onFacts(target, writer, [event("output_message"), { _tag: "InputWritten", input_id: "in-1" }, event("done")], confirm)
      assert.deepStrictEqual(counted.appends, [
        { types: ["PreparationStatus", "Dispatching"], markDispatched: false },
        { types: ["Dispatched", "PreparationStatus"], markDispatched: true },
        { types: ["output_message"], markDispatched: false },
        { types: ["InputWritten"], markDispatched: false },
        { types: ["done"], markDispatched: false }
      ])
      assert.strictEqual(journaled(), 7)
      const stored = yield* store.events("t1", 0)
      assert.deepStrictEqual(stored.map((e) => [e.seq, e.type]), [
        [1, "PreparationStatus"],
        [2, "Dispatching"],
        [3, "Dispatched"],
        [4, "PreparationStatus"],
        [5, "output_message"],
        [6, "InputWritten"],
        [7, "done"]
      ])
      // The Run's dispatch mark rode its group's transaction.
      assert.isDefined(Option.getOrThrow(yield* store.get("t1")).dispatchedAtMs)
    }).pipe(Effect.provide(counted.layer)))

  const held = countedAppends()
  it.effect("a preparation's or start's Dispatched that arrives alone is confirmed at once and stored first in the Turn's next write; flush stores one left at the end", () =>
    Effect.gen(function* () {
      const { confirm, flush, journaled, onFacts, store, target, writer } = yield* turnOne
      yield* onFacts(target, writer, [{ _tag: "Dispatching", type: "execution_prepare" }], confirm)
      yield* onFacts(target, writer, [{ _tag: "Dispatched", type: "execution_prepare" }], confirm)
      // Held: confirmed, not stored.
      assert.strictEqual(journaled(), 2)
      assert.deepStrictEqual(held.appends.map((a) => a.types), [["Dispatching"]])
      yield* onFacts(target, writer, [status("ready", 2), { _tag: "Dispatching", type: "execution_start" }], confirm)
      yield* onFacts(target, writer, [{ _tag: "Dispatched", type: "execution_start" }], confirm)
      yield* onFacts(target, writer, [status("started", 3), event("output_message"), { _tag: "InputWritten", input_id: "in-1" }], confirm)
      // A steer's Dispatched is not held; the start's, left last, is stored by flush with the Run's dispatch mark.
      yield* onFacts(target, writer, [{ _tag: "Dispatched", type: "prompt_steer", input_id: "in-2" }], confirm)
      yield* onFacts(target, writer, [{ _tag: "Dispatched", type: "execution_start" }], confirm)
      yield* flush(target, writer)
      yield* flush(target, writer)
      assert.deepStrictEqual(held.appends, [
        { types: ["Dispatching"], markDispatched: false },
        { types: ["Dispatched", "PreparationStatus", "Dispatching"], markDispatched: false },
        { types: ["Dispatched", "PreparationStatus", "output_message"], markDispatched: true },
        { types: ["InputWritten"], markDispatched: false },
        { types: ["Dispatched"], markDispatched: false },
        { types: ["Dispatched"], markDispatched: true }
      ])
      // Every fact confirmed exactly once, in order.
      assert.strictEqual(journaled(), 10)
      const stored = yield* store.events("t1", 0)
      assert.deepStrictEqual(stored.map((e) => e.type), [
        "Dispatching", "Dispatched", "PreparationStatus", "Dispatching", "Dispatched", "PreparationStatus",
        "output_message", "InputWritten", "Dispatched", "Dispatched"
      ])
    }).pipe(Effect.provide(held.layer)))
})

describe("TurnFacts once the Turn is finishing", () => {
  const settledCase = countedAppends()
  it.effect("journal-only facts are confirmed at once and held for the outcome's transaction; others are stored, held ones first", () =>
    Effect.gen(function* () {
      const { confirm, journaled, onFacts, takeHeld, target, writer } = yield* turnOne
      let finishing = false
      const isFinishing = () => finishing
      // Before the Turn is finishing, facts are stored as they come (the start's Dispatched alone is held, as always).
      yield* onFacts(target, writer, [{ _tag: "Dispatched", type: "execution_start" }], confirm, isFinishing)
      yield* onFacts(target, writer, [status("started", 3), event("output_message")], confirm, isFinishing)
      assert.deepStrictEqual(settledCase.appends.map((a) => a.types), [["Dispatched", "PreparationStatus", "output_message"]])
      // Finishing: the Run's last frame is confirmed and held, not stored.
      finishing = true
      yield* onFacts(target, writer, [event("done")], confirm, isFinishing)
      assert.strictEqual(journaled(), 4)
      assert.strictEqual(settledCase.appends.length, 1)
      // A fact that changes another record is stored at once, with what was held before it (in order).
      yield* onFacts(target, writer, [{ _tag: "InputWritten", input_id: "in-1" }], confirm, isFinishing)
      assert.deepStrictEqual(settledCase.appends.slice(1).map((a) => a.types), [["done"], ["InputWritten"]])
      // Journal-only facts after it are held again; `takeHeld` hands them over once and clears them.
      yield* onFacts(target, writer, [{ _tag: "Dispatched", type: "execution_start" }, event("output_message")], confirm, isFinishing)
      assert.strictEqual(journaled(), 7)
      const held = takeHeld(target)
      assert.deepStrictEqual(held.facts.map((f) => f._tag === "RunEvent" ? f.event.type : f._tag), ["Dispatched", "output_message"])
      // The Run's own dispatch among them: its mark rides the outcome's transaction.
      assert.deepStrictEqual(held.options, { markDispatched: true })
      assert.deepStrictEqual(takeHeld(target), TurnFacts.nothingHeld)
      assert.strictEqual(settledCase.appends.length, 3)
    }).pipe(Effect.provide(settledCase.layer)))

  const bounded = countedAppends()
  it.effect(`holds at most ${TurnFacts.maxHeldAtSettle} facts for the outcome; a group that would pass the bound is stored with them`, () =>
    Effect.gen(function* () {
      const { confirm, journaled, onFacts, target, writer } = yield* turnOne
      const isFinishing = () => true
      const frames = (n: number) => Array.from({ length: n }, () => event("output_message"))
      yield* onFacts(target, writer, frames(TurnFacts.maxHeldAtSettle - 1), confirm, isFinishing)
      yield* onFacts(target, writer, frames(1), confirm, isFinishing)
      assert.deepStrictEqual(bounded.appends, [])
      assert.strictEqual(target.held?.length, TurnFacts.maxHeldAtSettle)
      yield* onFacts(target, writer, frames(1), confirm, isFinishing)
      assert.deepStrictEqual(bounded.appends.map((a) => a.types.length), [TurnFacts.maxHeldAtSettle + 1])
      assert.isUndefined(target.held)
      assert.strictEqual(journaled(), TurnFacts.maxHeldAtSettle + 1)
    }).pipe(Effect.provide(bounded.layer)))
})
