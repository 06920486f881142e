import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Layer, Option, Stream } from "effect"
import { DevIds } from "../../../src/core/dev/DevIds.js"
import { SessionStore } from "../../../src/core/dev/SessionStore.js"
import * as Store from "../../../src/core/dev/Store.js"
import { fromEntry, type JournalItem, type JournalWriter, layer as journalLayer, toEntry, TurnJournal } from "../../../src/core/dev/TurnJournal.js"
import { StoreFailed } from "../../../src/core/dev/StoreErrors.js"
import { TurnStore } from "../../../src/core/dev/TurnStore.js"
import type * as Outcome from "../../../src/core/Outcome.js"
import { Ids, MessageInput } from "../../../src/proto/index.js"
import { yieldTimes } from "../../support/coreFakeSession.js"
import { turnJournalCases } from "./cases/TurnJournalCases.js"

/** The store with its TurnStore reads of the journal and of the Turn row counted. */
const countedReads = () => {
  const reads = { events: 0, get: 0, lastSeq: 0 }
  const base = Store.layerFile(":memory:").pipe(Layer.provide(DevIds.layerTest))
  const counted = Layer.effect(TurnStore, Effect.map(Effect.service(TurnStore), (store) => TurnStore.of({
    ...store,
    events: (turnId, afterSeq, kind) => Effect.suspend(() => {
      reads.events++
      return store.events(turnId, afterSeq, kind)
    }),
    get: (turnId) => Effect.suspend(() => {
      reads.get++
      return store.get(turnId)
    }),
    lastSeq: (turnId) => Effect.suspend(() => {
      reads.lastSeq++
      return store.lastSeq(turnId)
    })
  }))).pipe(Layer.provide(base))
  return { reads, layer: journalLayer.pipe(Layer.provideMerge(Layer.merge(base, counted))) }
}

const describeItems = (items: ReadonlyArray<JournalItem>) =>
  items.map((i) => (i._tag === "entry" ? `${i.seq}:${i.kind}:${i.type}` : i._tag === "outcome" ? `outcome:${i.turn.status}` : `notice:${i.event}`))

const run = Ids.unsafeMake.runId("run-1")
/** Session "s1" with Turn "t1" created in the store; the Turn store and the created row. */
const sessionWithTurn = Effect.gen(function* () {
  yield* (yield* SessionStore).create({ sessionId: "s1", agentKind: "scripted", environmentType: "none", configuration: {}, deviceId: undefined })
  const store = yield* TurnStore
  const created = yield* store.create({ turnId: "t1", sessionId: "s1", runId: run, input: MessageInput.text("hi") })
  return { store, created }
})
const delta = (n: number): Outcome.TurnFact => ({
  _tag: "RunEvent",
  event: { type: "delta", id: run, payload: { delta: `d${n}`, sequence: n } }
})
/** Starts a follower before the Turn's first fact, runs `write`, settles the Turn with `content` and returns what the follower read. */
const followWhileWriting = <E, R>(write: (writer: JournalWriter) => Effect.Effect<void, E, R>, content: string) =>
  Effect.gen(function* () {
    const { store, created } = yield* sessionWithTurn
    const journal = yield* TurnJournal
    const writer = yield* journal.open("t1", 1, 0)
    const follower = yield* Effect.forkChild(Stream.runCollect(journal.follow("t1", 0, Effect.void, created)))
    yield* yieldTimes(50)
    yield* write(writer)
    const written = yield* store.settle("t1", { status: "completed", content })
    yield* writer.finish(Option.getOrUndefined(written))
    return { store, items: yield* Fiber.join(follower) }
  })

/** A follower of t1 from its start, told the Turn is running, forked now and given the time to subscribe. */
const followRunning = (journal: TurnJournal["Service"]) =>
  Effect.gen(function* () {
    const follower = yield* Effect.forkChild(Stream.runCollect(journal.follow("t1", 0, Effect.void, "running")))
    yield* yieldTimes(50)
    return follower
  })

describe("TurnJournal", () => {
  turnJournalCases(Store.layerFile(":memory:").pipe(Layer.provide(DevIds.layerTest)))

  // Issue 18: a follower that starts before the Turn's first fact (the operator's usual POST then GET events)
  // costs no journal read; the record the caller read is not read again; a new Turn's writer reads no seq.
  const fast = countedReads()
  it.effect("a follower that starts before the first fact reads no journal and still gets every entry and the outcome", () =>
    Effect.gen(function* () {
      const { store, items } = yield* followWhileWriting((writer) =>
        Effect.andThen(
          writer.record({ _tag: "Dispatched", type: "execution_start" }, { markDispatched: true }),
          writer.record(delta(1))
        ), "d1")
      assert.deepStrictEqual(describeItems(items), ["1:fact:Dispatched", "2:frame:delta", "outcome:completed"])
      assert.deepStrictEqual(fast.reads, { events: 0, get: 0, lastSeq: 0 })
      // The dispatch mark was stored with its fact.
      const stored = yield* store.get("t1")
      assert.isDefined(Option.getOrThrow(stored).dispatchedAtMs)
    }).pipe(Effect.provide(fast.layer)))

  // `recordAll` (a group of facts in one append): each fact is published once, in order, with the seq it was stored at.
  const grouped = countedReads()
  it.effect("facts stored together are published in order, once each, with their stored seqs", () =>
    Effect.gen(function* () {
      const { store, items } = yield* followWhileWriting((writer) =>
        Effect.andThen(
          writer.recordAll([{ _tag: "Dispatched", type: "execution_start" }, delta(1), delta(2)], { markDispatched: true }),
          writer.record(delta(3))
        ), "d1d2d3")
      const expected = ["1:fact:Dispatched", "2:frame:delta", "3:frame:delta", "4:frame:delta"]
      assert.deepStrictEqual(describeItems(items), [...expected, "outcome:completed"])
      assert.deepStrictEqual((yield* store.events("t1", 0)).map((e) => `${e.seq}:${e.kind}:${e.type}`), expected)
      assert.isDefined(Option.getOrThrow(yield* store.get("t1")).dispatchedAtMs)
    }).pipe(Effect.provide(grouped.layer)))

  const slow = countedReads()
  it.effect("a follower that starts after facts were stored replays them from the store (negative control)", () =>
    Effect.gen(function* () {
      const { store } = yield* sessionWithTurn
      const journal = yield* TurnJournal
      const writer = yield* journal.open("t1", 1)
      yield* writer.record(delta(1))
      const follower = yield* Effect.forkChild(Stream.runCollect(journal.follow("t1", 0)))
      yield* yieldTimes(50)
      yield* writer.record(delta(2))
      const written = yield* store.settle("t1", { status: "completed", content: "d1d2" })
      yield* writer.finish(Option.getOrUndefined(written))
      assert.deepStrictEqual(describeItems(yield* Fiber.join(follower)), ["1:frame:delta", "2:frame:delta", "outcome:completed"])
      // The Turn row is not read a second time: this process's writer publishes the outcome (issue 18).
      assert.deepStrictEqual(slow.reads, { events: 1, get: 1, lastSeq: 1 })
    }).pipe(Effect.provide(slow.layer)))

  const running = countedReads()
  it.effect("a follower told the Turn is running reads no Turn row, and takes a fresh journal's first entries from memory", () =>
    Effect.gen(function* () {
      const { store } = yield* sessionWithTurn
      const journal = yield* TurnJournal
      const writer = yield* journal.open("t1", 1, 0)
      yield* writer.record(delta(1))
      const follower = yield* followRunning(journal)
      yield* writer.record(delta(2))
      const written = yield* store.settle("t1", { status: "completed", content: "d1d2" })
      yield* writer.finish(Option.getOrUndefined(written))
      assert.deepStrictEqual(describeItems(yield* Fiber.join(follower)), ["1:frame:delta", "2:frame:delta", "outcome:completed"])
      // delta 1 was stored before the follower came: kept by the journal's first writer, so no journal read either.
      assert.deepStrictEqual(running.reads, { events: 0, get: 0, lastSeq: 0 })
      // A caller that saw the runner just before it finished: the finished Turn is read from the store.
      const late = yield* Stream.runCollect(journal.follow("t1", 1, Effect.void, "running"))
      assert.deepStrictEqual(describeItems(late), ["2:frame:delta", "outcome:completed"])
    }).pipe(Effect.provide(running.layer)))

  const pastEarly = countedReads()
  it.effect("past its first 32 entries a fresh journal keeps none: a late follower reads them from the store", () =>
    Effect.gen(function* () {
      const { store } = yield* sessionWithTurn
      const journal = yield* TurnJournal
      const writer = yield* journal.open("t1", 1, 0)
      yield* writer.recordAll(Array.from({ length: 32 }, (_, i) => delta(i + 1)))
      const kept = yield* followRunning(journal)
      assert.strictEqual(pastEarly.reads.events, 0)
      yield* writer.record(delta(33))
      const read = yield* followRunning(journal)
      assert.strictEqual(pastEarly.reads.events, 1)
      const written = yield* store.settle("t1", { status: "completed", content: "" })
      yield* writer.finish(Option.getOrUndefined(written))
      const all = Array.from({ length: 33 }, (_, i) => `${i + 1}:frame:delta`)
      for (const follower of [kept, read]) assert.deepStrictEqual(describeItems(yield* Fiber.join(follower)), [...all, "outcome:completed"])
    }).pipe(Effect.provide(pastEarly.layer)))

  const settling = countedReads()
  it.effect("a follower that starts after the outcome was stored but before it was published gets it once, after the entries", () =>
    Effect.gen(function* () {
      const { store } = yield* sessionWithTurn
      const journal = yield* TurnJournal
      const writer = yield* journal.open("t1", 1)
      yield* writer.record(delta(1))
      yield* writer.record(delta(2))
      const written = yield* store.settle("t1", { status: "completed", content: "d1d2" })
      const follower = yield* Effect.forkChild(Stream.runCollect(journal.follow("t1", 1)))
      yield* yieldTimes(50)
      yield* writer.finish(Option.getOrUndefined(written))
      assert.deepStrictEqual(describeItems(yield* Fiber.join(follower)), ["2:frame:delta", "outcome:completed"])
      assert.deepStrictEqual(settling.reads, { events: 1, get: 1, lastSeq: 1 })
      // Once published, a new follower reads the finished Turn from the store.
      assert.deepStrictEqual(describeItems(yield* Stream.runCollect(journal.follow("t1", 0))), ["1:frame:delta", "2:frame:delta", "outcome:completed"])
    }).pipe(Effect.provide(settling.layer)))

  // `settle` (issue 18, "settlefacts"): the Turn's last facts stored in its outcome's transaction, published after it.
  const settled = countedReads()
  it.effect("settle stores the last facts with the outcome, publishes nothing until its publish runs, then both in order", () =>
    Effect.gen(function* () {
      const { store, created } = yield* sessionWithTurn
      const journal = yield* TurnJournal
      const writer = yield* journal.open("t1", 1, 0)
      const seen: Array<JournalItem> = []
      const follower = yield* Effect.forkChild(Stream.runForEach(journal.follow("t1", 0, Effect.void, created), (item) =>
        Effect.sync(() => {
          seen.push(item)
        })))
      yield* yieldTimes(50)
      yield* writer.record(delta(1))
      const last: Array<Outcome.TurnFact> = [delta(2), { _tag: "RunEvent", event: { type: "done", id: run, payload: { content: "d1d2" } } }]
      // A write that fails stores nothing and publishes nothing; the next try takes the same seqs.
      const failed = yield* Effect.exit(writer.settle(last, undefined, () => Effect.fail(new StoreFailed({ operation: "complete_turn" }))))
      assert.isTrue(failed._tag === "Failure")
      const { written, publish } = yield* writer.settle(last, undefined, (entries) => store.settle("t1", { status: "completed", content: "d1d2" }, undefined, entries))
      assert.strictEqual(Option.getOrThrow(written).status, "completed")
      // No journal read by the writer or the follower (the test's own read below is the one counted after it).
      assert.deepStrictEqual(settled.reads, { events: 0, get: 0, lastSeq: 0 })
      // Stored together with the outcome, and nothing of it published yet.
      assert.deepStrictEqual((yield* store.events("t1", 0)).map((e) => `${e.seq}:${e.type}`), ["1:delta", "2:delta", "3:done"])
      yield* yieldTimes(50)
      assert.deepStrictEqual(describeItems(seen), ["1:frame:delta"])
      yield* publish
      yield* Fiber.join(follower)
      assert.deepStrictEqual(describeItems(seen), ["1:frame:delta", "2:frame:delta", "3:frame:done", "outcome:completed"])
    }).pipe(Effect.provide(settled.layer)))

  it.effect("a later writer continues after what the store holds, not after an earlier writer's seq in this process", () =>
    Effect.gen(function* () {
      const { store } = yield* sessionWithTurn
      const journal = yield* TurnJournal
      const first = yield* journal.open("t1", 1, 0)
      yield* first.record(delta(1))
      // Another attempt (another node) stored seq 2 since; a writer of the next attempt here goes on at 3.
      yield* store.appendEvents("t1", [{ seq: 2, attempt: 2, ...toEntry(delta(2)) }])
      const second = yield* journal.open("t1", 3)
      assert.strictEqual(yield* second.record(delta(3)), 3)
      const stored = yield* store.events("t1", 0)
      assert.deepStrictEqual(stored.map((e) => [e.seq, e.attempt]), [[1, 1], [2, 2], [3, 3]])
    }).pipe(Effect.provide(Store.layerFile(":memory:").pipe(Layer.provide(DevIds.layerTest), (base) => journalLayer.pipe(Layer.provideMerge(base))))))

  it("stores Run events as their wire frame and other facts as encoded facts, and reads both back", () => {
    const frame = toEntry(delta(7))
    assert.deepStrictEqual(frame.kind, "frame")
    assert.deepStrictEqual(JSON.parse(frame.bodyJson), { type: "delta", id: "run-1", payload: { delta: "d7", sequence: 7 } })
    const fact: Outcome.TurnFact = { _tag: "InputUnknown", input_id: "in-1", reason: "written_ack_timeout" }
    const entry = toEntry(fact)
    const stored = { seq: 1, attempt: 1, receivedAtMs: 0, ...entry }
    assert.deepStrictEqual(fromEntry(stored), Option.some(fact))
    assert.deepStrictEqual(fromEntry({ seq: 2, attempt: 1, receivedAtMs: 0, ...frame }), Option.some(delta(7)))
    assert.deepStrictEqual(fromEntry({ ...stored, bodyJson: "{not json" }), Option.none())
  })
})
