/**
 * Turns over the real gateway and an in-memory scripted Runtime (no daemon), with the store in memory and
 * every timer on TestClock.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Exit, Fiber, Layer, Option, Ref, Stream } from "effect"
import { TestClock } from "effect/testing"
import { DevIds } from "../../../src/core/dev/DevIds.js"
import { DeviceStore } from "../../../src/core/dev/DeviceStore.js"
import { SessionStore } from "../../../src/core/dev/SessionStore.js"
import * as Store from "../../../src/core/dev/Store.js"
import * as TurnJournal from "../../../src/core/dev/TurnJournal.js"
import * as Turns from "../../../src/core/dev/Turns.js"
import { OperatorConflict, OperatorNotFound, OperatorRequestInvalid, OperatorUnavailable } from "../../../src/core/dev/OperatorErrors.js"
import { StoreFailed } from "../../../src/core/dev/StoreErrors.js"
import { TurnStore } from "../../../src/core/dev/TurnStore.js"
import { Gateway } from "../../../src/core/Gateway.js"
import { GatewayConfig } from "../../../src/core/GatewayConfig.js"
import { HarnessUnavailable } from "../../../src/core/Outcome.js"
import { Ids, type Messages, MessageInput } from "../../../src/proto/index.js"
import { yieldTimes } from "../../support/coreFakeSession.js"
import { connectMemory, device, frames, heartbeat, kind } from "../../support/coreScriptedRuntime.js"
import { captureLogs } from "../gateway/helpers.js"

const gateway = Gateway.layer.pipe(Layer.provideMerge(GatewayConfig.layer({ publicUrl: "http://core.test" })))
// The in-thread store: these delivery tests move the TestClock and settle with `flush` (fiber yields), which
// cannot wait for replies from the worker thread of the default store (that store runs every other store test).
const store = Store.layerFile(":memory:", undefined, "in-thread").pipe(Layer.provideMerge(DevIds.layerTest))
const services = Turns.layer({ retryDelay: "1 second", maxRetryDelay: "4 seconds", shutdownGrace: "1 second" }).pipe(
  Layer.provideMerge(TurnJournal.layer),
  Layer.provideMerge(gateway),
  Layer.provideMerge(store)
)

const flush = yieldTimes(300)

/** The store with some of its operations replaced (`wrap` gets the real store). */
const storeWith = (wrap: (real: TurnStore["Service"]) => Partial<TurnStore["Service"]>) =>
  Layer.effect(TurnStore, Effect.map(Effect.service(TurnStore), (real) => TurnStore.of({ ...real, ...wrap(real) })))
/** Turns over a replaced store (`storeWith`), with the test's short retry and shutdown times. */
const turnsOver = (turnStore: Layer.Layer<TurnStore, never, TurnStore>) =>
  Turns.layer({ retryDelay: "1 second", maxRetryDelay: "4 seconds", shutdownGrace: "1 second" }).pipe(
    Layer.provideMerge(TurnJournal.layer),
    Layer.provideMerge(turnStore),
    Layer.provideMerge(gateway),
    Layer.provideMerge(store)
  )

/** The store records an interaction only after a few scheduler turns (as a store on another thread or node). */
const slowInteractionServices = turnsOver(storeWith((real) => ({
  recordInteraction: (turnId, kind, id, request) => Effect.andThen(yieldTimes(20), real.recordInteraction(turnId, kind, id, request))
})))
/** The store records a Turn's outcome only after a few scheduler turns. */
const slowSettleServices = turnsOver(storeWith((real) => ({
  settle: (turnId, outcome, sessionId, journal) => Effect.andThen(yieldTimes(50), real.settle(turnId, outcome, sessionId, journal))
})))
/** The first Turn's row is queued for a Session that does not exist: its create fails in the real store (a foreign key). */
const failingFirstCreateServices = Layer.unwrap(Effect.map(Ref.make(0), (creates) =>
  turnsOver(storeWith((real) => ({
    queueCreate: (turn) =>
      Effect.flatMap(Ref.getAndUpdate(creates, (n) => n + 1), (n) => real.queueCreate(n === 0 ? { ...turn, sessionId: "gone" } : turn))
  })))))
/** Every journal write of the store in order: `append` or `settle`, with the types of the entries it carried. */
const journalWrites: Array<string> = []
const recordWrite = (kind: string, events: ReadonlyArray<{ readonly type: string }>) =>
  Effect.sync(() => journalWrites.push(`${kind} ${events.map((e) => e.type).join(",")}`))
const recordedWritesServices = turnsOver(storeWith((real) => ({
  appendEvents: (turnId, events, options) => Effect.andThen(recordWrite("append", events), real.appendEvents(turnId, events, options)),
  settle: (turnId, outcome, sessionId, journal) =>
    Effect.andThen(recordWrite("settle", journal?.events ?? []), real.settle(turnId, outcome, sessionId, journal))
})))

/** How many times `SessionStore.get` was asked. */
class SessionReads extends Context.Service<SessionReads, Ref.Ref<number>>()("test/core/dev/SessionReads") {}
const countedSessions = Layer.effect(
  SessionStore,
  Effect.gen(function* () {
    const real = yield* SessionStore
    const reads = yield* SessionReads
    return SessionStore.of({ ...real, get: (sessionId) => Effect.andThen(Ref.update(reads, (n) => n + 1), real.get(sessionId)) })
  })
)
const countedSessionServices = Turns.layer({ retryDelay: "1 second", maxRetryDelay: "4 seconds", shutdownGrace: "1 second" }).pipe(
  Layer.provideMerge(TurnJournal.layer),
  Layer.provideMerge(countedSessions),
  Layer.provideMerge(Layer.effect(SessionReads, Ref.make(0))),
  Layer.provideMerge(gateway),
  Layer.provideMerge(store)
)

/** A store outage: while `down`, every journal append fails (nothing is written); `appends` counts attempts. */
class Outage extends Context.Service<Outage, { readonly down: Ref.Ref<boolean>; readonly appends: Ref.Ref<number> }>()(
  "test/core/dev/Outage"
) {
  static readonly layer = Layer.effect(Outage, Effect.map(Effect.all([Ref.make(false), Ref.make(0)]), ([down, appends]) => Outage.of({ down, appends })))
}
const flakyTurnStore = Layer.effect(
  TurnStore,
  Effect.gen(function* () {
    const real = yield* TurnStore
    const outage = yield* Outage
    return TurnStore.of({
      ...real,
      appendEvent: (turnId, event) =>
        Effect.gen(function* () {
          yield* Ref.update(outage.appends, (n) => n + 1)
          if (yield* Ref.get(outage.down)) return yield* new StoreFailed({ operation: "append_event" })
          return yield* real.appendEvent(turnId, event)
        }),
      appendEvents: (turnId, events, options) =>
        Effect.gen(function* () {
          yield* Ref.update(outage.appends, (n) => n + 1)
          if (yield* Ref.get(outage.down)) return yield* new StoreFailed({ operation: "append_event" })
          return yield* real.appendEvents(turnId, events, options)
        }),
      // A settle can carry the Turn's last journal entries: it goes away with the journal.
      settle: (turnId, outcome, sessionId, journal) =>
        Effect.gen(function* () {
          if (yield* Ref.get(outage.down)) return yield* new StoreFailed({ operation: "complete_turn" })
          return yield* real.settle(turnId, outcome, sessionId, journal)
        })
    })
  })
).pipe(Layer.provide(store))
/** Default shutdown grace (20 s), explicit store retry tunables (their defaults). */
const flakyServices = Turns.layer({
  retryDelay: "1 second",
  storeRetryDelay: "100 millis",
  maxStoreRetryDelay: "5 seconds",
  journalStallBudget: "30 seconds"
}).pipe(
  Layer.provideMerge(TurnJournal.layer),
  Layer.provideMerge(flakyTurnStore),
  Layer.provideMerge(gateway),
  Layer.provideMerge(store),
  Layer.provideMerge(Outage.layer)
)
const appends = Effect.gen(function* () {
  return yield* Ref.get((yield* Outage).appends)
})
const setDown = (down: boolean) =>
  Effect.gen(function* () {
    yield* Ref.set((yield* Outage).down, down)
  })

/** A store whose journal write of a `tool_call` frame with call id `poison` dies (a defect, not a StoreFailed). */
const poisonedTurnStore = Layer.effect(
  TurnStore,
  Effect.gen(function* () {
    const real = yield* TurnStore
    return TurnStore.of({
      ...real,
      appendEvent: (turnId, event) =>
        event.type === "tool_call" && event.bodyJson.includes("poison")
          ? Effect.die(new RangeError("Maximum call stack size exceeded"))
          : real.appendEvent(turnId, event),
      appendEvents: (turnId, events, options) =>
        events.some((event) => event.type === "tool_call" && event.bodyJson.includes("poison"))
          ? Effect.die(new RangeError("Maximum call stack size exceeded"))
          : real.appendEvents(turnId, events, options)
    })
  })
).pipe(Layer.provide(store))
const poisonedServices = Turns.layer({ retryDelay: "1 second", shutdownGrace: "1 second" }).pipe(
  Layer.provideMerge(TurnJournal.layer),
  Layer.provideMerge(poisonedTurnStore),
  Layer.provideMerge(gateway),
  Layer.provideMerge(store)
)

/**
 * Turns over a TurnStore whose `method` counts its calls in `counter`'s Ref (store reads a test expects to be
 * spared).
 */
const countingServices = <Self>(
  counter: Context.Key<Self, Ref.Ref<number>>,
  method: "lastSeq" | "startChecks"
) =>
  Layer.unwrap(Effect.gen(function* () {
    const reads = yield* Ref.make(0)
    const counted = Layer.effect(TurnStore, Effect.map(Effect.service(TurnStore), (real) => {
      const read = real[method] as (id: string) => Effect.Effect<unknown, unknown>
      return TurnStore.of({ ...real, [method]: (id: string) => Effect.andThen(Ref.update(reads, (n) => n + 1), read(id)) })
    })).pipe(Layer.provide(store))
    return Turns.layer({ retryDelay: "1 second", shutdownGrace: "1 second" }).pipe(
      Layer.provideMerge(TurnJournal.layer),
      Layer.provideMerge(counted),
      Layer.provideMerge(gateway),
      Layer.provideMerge(store),
      Layer.provideMerge(Layer.succeed(counter, reads))
    )
  }))

/** Counts the store reads of where a Turn's journal ends (`lastSeq`). */
class SeqReads extends Context.Service<SeqReads, Ref.Ref<number>>()("test/core/dev/SeqReads") {}
const seqReadsServices = countingServices(SeqReads, "lastSeq")

/** Counts the store reads of a Turn start's checks (`startChecks`). */
class CheckReads extends Context.Service<CheckReads, Ref.Ref<number>>()("test/core/dev/CheckReads") {}
const checkReadsServices = countingServices(CheckReads, "startChecks")

/** A connected scripted Runtime declaring the scripted kind, and a Session. */
const setup = Effect.gen(function* () {
  yield* (yield* DeviceStore).issueCredential("dev-1")
  const connection = yield* connectMemory(device("dev-1"))
  yield* connection.runtime.send(heartbeat([kind("scripted")]))
  yield* flush
  yield* (yield* SessionStore).create({ sessionId: "s1", agentKind: "scripted", environmentType: "none", configuration: {}, deviceId: undefined })
  return connection.runtime
})

const expectType = <T extends Messages.CoreToRuntimeType>(message: Messages.CoreToRuntime, type: T) => {
  assert.strictEqual(message.type, type)
  return message as Messages.MessageOfType<T>
}

const turnStatus = Effect.gen(function* () {
  const turn = Option.getOrThrow(yield* (yield* TurnStore).get("turn-1"))
  return [turn.status, turn.attempt] as const
})

/** Answers an execution_prepare with preparing + ready. */
const ready = (request: string) => [
  frames.status(request, { state: "preparing", revision: 1, handle: Ids.unsafeMake.admissionHandle("h1"), executor_id: Ids.unsafeMake.executorId("x1") }),
  frames.status(request, {
    state: "ready",
    revision: 2,
    handle: Ids.unsafeMake.admissionHandle("h1"),
    executor_id: Ids.unsafeMake.executorId("x1"),
    expires_at: 300_000
  })
]

/** Starts turn-1 of Session s1 and plays the Runtime up to `execution_start`: the Turn is then delivered. */
const startDelivered = (runtime: Effect.Success<typeof setup>) =>
  Effect.gen(function* () {
    const turns = yield* Turns.Turns
    yield* turns.start("s1", MessageInput.text("hello"))
    const prepare = expectType(yield* runtime.receive, "execution_prepare")
    for (const status of ready(prepare.id)) yield* runtime.send(status)
    return expectType(yield* runtime.receive, "execution_start")
  })

describe("Turns", () => {
  it.effect("retries a Turn refused with preparation_capacity only after the backoff, then completes it", () =>
    Effect.gen(function* () {
      const runtime = yield* setup
      const turns = yield* Turns.Turns
      const started = yield* turns.start("s1", MessageInput.text("hello"))
      assert.deepStrictEqual([started.turn_id, started.run_id, started.device_id], ["turn-1", "run-1", "dev-1"])
      const first = expectType(yield* runtime.receive, "execution_prepare")
      yield* runtime.send(frames.status(first.id, { state: "rejected", revision: 0, operation: "execution_prepare", error_code: "preparation_capacity" }))
      yield* flush
      assert.deepStrictEqual(yield* turnStatus, ["queued", 1])
      // one millisecond before the backoff: nothing is sent again
      yield* TestClock.adjust("999 millis")
      yield* flush
      assert.isTrue(Option.isNone(yield* runtime.poll))
      yield* TestClock.adjust("1 millis")
      const second = expectType(yield* runtime.receive, "execution_prepare")
      assert.notStrictEqual(second.id, first.id)
      assert.deepStrictEqual(yield* turnStatus, ["running", 2])
      for (const status of ready(second.id)) yield* runtime.send(status)
      const start = expectType(yield* runtime.receive, "execution_start")
      assert.strictEqual(start.payload.run_id, "run-1")
      yield* runtime.send(frames.delta("run-1", "hel", 1))
      yield* runtime.send(frames.done("run-1", "hello"))
      const record = yield* turns.awaitOutcome("turn-1")
      assert.deepStrictEqual([record.status, record.outcome?.content, record.attempt], ["completed", "hello", 2])
      // the journal holds both attempts' facts, the Run frames as received, in one sequence
      const events = yield* (yield* TurnStore).events("turn-1", 0)
      assert.deepStrictEqual(events.map((e) => e.seq), events.map((_, i) => i + 1))
      assert.deepStrictEqual(events.filter((e) => e.kind === "frame").map((e) => e.type), ["delta", "done"])
      assert.deepStrictEqual([...new Set(events.map((e) => e.attempt))], [1, 2])
    }).pipe(Effect.provide(services)))

  it.effect("a Turn's first attempt writes its journal from seq 1 without reading where it ends; a later attempt reads it", () =>
    Effect.gen(function* () {
      const runtime = yield* setup
      const reads = yield* SeqReads
      yield* (yield* Turns.Turns).start("s1", MessageInput.text("hello"))
      const first = expectType(yield* runtime.receive, "execution_prepare")
      yield* flush
      assert.strictEqual(yield* Ref.get(reads), 0)
      yield* runtime.send(frames.status(first.id, { state: "rejected", revision: 0, operation: "execution_prepare", error_code: "preparation_capacity" }))
      yield* flush
      yield* TestClock.adjust("1 second")
      const second = expectType(yield* runtime.receive, "execution_prepare")
      assert.strictEqual(yield* Ref.get(reads), 1)
      for (const status of ready(second.id)) yield* runtime.send(status)
      expectType(yield* runtime.receive, "execution_start")
      yield* runtime.send(frames.done("run-1", "hello"))
      const record = yield* (yield* Turns.Turns).awaitOutcome("turn-1")
      assert.deepStrictEqual([record.status, record.attempt], ["completed", 2])
      const events = yield* (yield* TurnStore).events("turn-1", 0)
      assert.deepStrictEqual(events.map((e) => e.seq), events.map((_, i) => i + 1))
      assert.deepStrictEqual([...new Set(events.map((e) => e.attempt))], [1, 2])
    }).pipe(Effect.provide(seqReadsServices)))

  it.effect("one node on SQLite: a start after the Session's last Turn settled here reads no checks; what it knows is that settle's", () =>
    Effect.gen(function* () {
      const runtime = yield* setup
      const reads = yield* CheckReads
      const turns = yield* Turns.Turns
      /** Plays a started Turn to its `execution_start`, ends it with `done` (and a native Session id); its configuration. */
      const deliver = (run: string, native?: string) =>
        Effect.gen(function* () {
          const prepare = expectType(yield* runtime.receive, "execution_prepare")
          for (const status of ready(prepare.id)) yield* runtime.send(status)
          expectType(yield* runtime.receive, "execution_start")
          const done = frames.done(run, "ok")
          yield* runtime.send(native === undefined ? done : { ...done, payload: { content: "ok", metadata: { agent_session_id: native } } })
          return prepare.payload.configuration
        })
      yield* turns.start("s1", MessageInput.text("one"))
      assert.strictEqual(yield* Ref.get(reads), 1)
      const first = yield* deliver("run-1", "native-1")
      assert.isUndefined(first.agent_session_id)
      assert.strictEqual((yield* turns.awaitOutcome("turn-1")).status, "completed")
      // Settled here: the next start knows the Session (bound, dispatched, its native id) without a read.
      yield* turns.start("s1", MessageInput.text("two"))
      assert.strictEqual(yield* Ref.get(reads), 1)
      // While turn-2 is unfinished a start reads the store, which refuses it (as without the cache).
      const refused = yield* Effect.flip(turns.start("s1", MessageInput.text("three")))
      assert.strictEqual((refused as OperatorConflict).reason, "turn_active")
      assert.strictEqual(yield* Ref.get(reads), 2)
      const second = yield* deliver("run-2")
      assert.strictEqual(second.agent_session_id, "native-1")
      assert.strictEqual((yield* turns.awaitOutcome("turn-2")).status, "completed")
      // The refused start took what was known: the next one reads again, and still resumes the native Session.
      yield* turns.start("s1", MessageInput.text("four"))
      assert.strictEqual(yield* Ref.get(reads), 3)
      const third = yield* deliver("run-3")
      assert.strictEqual(third.agent_session_id, "native-1")
      assert.strictEqual((yield* turns.awaitOutcome("turn-3")).status, "completed")
      yield* turns.start("s1", MessageInput.text("five"))
      assert.strictEqual(yield* Ref.get(reads), 3)
    }).pipe(Effect.provide(checkReadsServices)))

  it.effect("abandons a queued Turn on cancel without sending anything more", () =>
    Effect.gen(function* () {
      const runtime = yield* setup
      const turns = yield* Turns.Turns
      yield* turns.start("s1", MessageInput.text("hello"))
      const prepare = expectType(yield* runtime.receive, "execution_prepare")
      yield* runtime.send(frames.status(prepare.id, { state: "rejected", revision: 0, operation: "execution_prepare", error_code: "preparation_capacity" }))
      yield* flush
      const cancel = yield* turns.cancel("turn-1")
      assert.deepStrictEqual(cancel, { status: "cancelled", delivery_id: null, abandoned: true })
      yield* TestClock.adjust("10 seconds")
      yield* flush
      assert.isTrue(Option.isNone(yield* runtime.poll))
      const record = yield* turns.awaitOutcome("turn-1")
      assert.strictEqual(record.status, "cancelled")
    }).pipe(Effect.provide(services)))

  it.effect("a queued Turn whose device went offline waits on the gateway's Connected event, not a timer", () =>
    Effect.gen(function* () {
      const runtime = yield* setup
      const turns = yield* Turns.Turns
      yield* turns.start("s1", MessageInput.text("hello"))
      const first = expectType(yield* runtime.receive, "execution_prepare")
      yield* runtime.send(frames.status(first.id, { state: "rejected", revision: 0, operation: "execution_prepare", error_code: "preparation_capacity" }))
      yield* runtime.close(1006, "dropped")
      yield* flush
      // offline for a minute, far past every retry delay: the Turn stays queued and no attempt begins
      yield* TestClock.adjust("1 minute")
      yield* flush
      assert.deepStrictEqual(yield* turnStatus, ["queued", 1])
      // the device comes back: its Connected event (no clock tick) starts the next attempt at once; without a
      // heartbeat yet its capabilities are undeclared, so the Turn stays unclaimed for the next backoff (2 s)
      const back = yield* connectMemory(device("dev-1"))
      yield* flush
      assert.deepStrictEqual(yield* turnStatus, ["queued", 2])
      yield* back.runtime.send(heartbeat([kind("scripted")]))
      yield* TestClock.adjust("1999 millis")
      yield* flush
      assert.isTrue(Option.isNone(yield* back.runtime.poll))
      yield* TestClock.adjust("1 millis")
      const second = expectType(yield* back.runtime.receive, "execution_prepare")
      for (const status of ready(second.id)) yield* back.runtime.send(status)
      expectType(yield* back.runtime.receive, "execution_start")
      yield* back.runtime.send(frames.done("run-1", "hello"))
      const record = yield* turns.awaitOutcome("turn-1")
      assert.deepStrictEqual([record.status, record.attempt], ["completed", 3])
    }).pipe(Effect.provide(services)))

  it.effect("records interactions from the Run and answers a permission request with its receipt", () =>
    Effect.gen(function* () {
      const runtime = yield* setup
      const turns = yield* Turns.Turns
      yield* startDelivered(runtime)
      yield* runtime.send(frames.permissionRequest("run-1", "perm-1"))
      yield* flush
      const pending = yield* turns.get("turn-1")
      assert.deepStrictEqual(pending.interactions.map((i) => [i.kind, i.interaction_id, i.status]), [["permission", "perm-1", "pending"]])
      const answering = yield* Effect.forkChild(turns.answerPermission("turn-1", "perm-1", { approved: true }))
      const decision = expectType(yield* runtime.receive, "permission_decision")
      assert.deepStrictEqual([decision.id, decision.payload.approved, decision.payload.delivery_id], ["perm-1", true, "delivery-1"])
      yield* runtime.send(frames.decisionAck("perm-1", "delivery-1"))
      assert.deepStrictEqual(yield* Fiber.join(answering), { interaction_id: "perm-1", delivery_id: "delivery-1", outcome: "applied" })
      // a second answer is a conflict: nothing is sent
      const again = yield* Effect.flip(turns.answerPermission("turn-1", "perm-1", { approved: false }))
      assert.deepStrictEqual(again, new OperatorConflict({ reason: "interaction_not_pending", detail: "interaction perm-1 is not pending" }))
      yield* runtime.send(frames.done("run-1", "ok"))
      yield* turns.awaitOutcome("turn-1")
      const done = yield* turns.get("turn-1")
      assert.deepStrictEqual(done.interactions.map((i) => [i.status, i.outcome, i.delivery_id]), [["answered", "applied", "delivery-1"]])
    }).pipe(Effect.provide(services)))

  it.effect("a Turn's last frame is stored in its outcome's transaction; a follower gets it, then the outcome", () =>
    Effect.gen(function* () {
      journalWrites.length = 0
      const runtime = yield* setup
      const turns = yield* Turns.Turns
      yield* startDelivered(runtime)
      yield* flush
      const follower = yield* Effect.forkChild(Stream.runCollect((yield* TurnJournal.TurnJournal).follow("turn-1", 0)))
      yield* flush
      yield* runtime.send(frames.done("run-1", "ok"))
      const record = yield* turns.awaitOutcome("turn-1")
      assert.strictEqual(record.status, "completed")
      // Settled by `done`: the frame is not appended on its own; it rides the settle.
      const withDone = journalWrites.filter((w) => w.includes("done"))
      assert.strictEqual(withDone.length, 1)
      assert.match(withDone[0]!, /^settle (\w+,)*done$/)
      assert.isTrue(journalWrites.at(-1)!.startsWith("settle"))
      const events = yield* (yield* TurnStore).events("turn-1", 0)
      assert.deepStrictEqual(events.map((e) => e.seq), events.map((_, i) => i + 1))
      assert.strictEqual(events.at(-1)!.type, "done")
      const items = yield* Fiber.join(follower)
      assert.deepStrictEqual(items.slice(-2).map((i) => i._tag === "entry" ? i.type : i._tag), ["done", "outcome"])
    }).pipe(Effect.provide(recordedWritesServices)))

  it.effect("a cancel while the outcome is being recorded is turn_not_running, never a cancelled completed Turn", () =>
    Effect.gen(function* () {
      const runtime = yield* setup
      const turns = yield* Turns.Turns
      yield* startDelivered(runtime)
      yield* runtime.send(frames.done("run-1", "ok"))
      yield* yieldTimes(20) // the runner is inside the (slow) settle now
      const cancel = yield* Effect.flip(turns.cancel("turn-1"))
      assert.deepStrictEqual(cancel, new OperatorConflict({ reason: "turn_not_running", detail: "turn turn-1 is not running" }))
      const record = yield* turns.awaitOutcome("turn-1")
      assert.strictEqual(record.status, "completed")
    }).pipe(Effect.provide(slowSettleServices)))

  it.effect("a permission request is answerable the moment a follower sees its frame", () =>
    Effect.gen(function* () {
      const runtime = yield* setup
      const turns = yield* Turns.Turns
      yield* startDelivered(runtime)
      // A follower that answers as soon as the frame reaches it, as an operator client reacting to the SSE event.
      const answered = yield* turns.follow("turn-1", 0).pipe(
        Stream.filter((item) => item._tag === "entry" && item.type === "permission_request"),
        Stream.take(1),
        Stream.mapEffect(() => Effect.exit(turns.answerPermission("turn-1", "perm-1", { approved: true }))),
        Stream.runHead,
        Effect.forkChild
      )
      yield* flush
      // The Runtime acknowledges a decision when one comes (none comes when the answer was refused).
      yield* Effect.forkChild(Effect.gen(function* () {
        const decision = expectType(yield* runtime.receive, "permission_decision")
        yield* runtime.send(frames.decisionAck(decision.id, decision.payload.delivery_id))
      }))
      yield* runtime.send(frames.permissionRequest("run-1", "perm-1"))
      const exit = Option.getOrThrow(yield* Fiber.join(answered))
      assert.isTrue(Exit.isSuccess(exit), String(exit))
    }).pipe(Effect.provide(slowInteractionServices)))

  it.effect("answers a function call with its result and records the receipt; an unknown call is 404", () =>
    Effect.gen(function* () {
      const runtime = yield* setup
      const turns = yield* Turns.Turns
      yield* startDelivered(runtime)
      yield* runtime.send({
        type: "function_call",
        id: Ids.unsafeMake.runId("run-1"),
        payload: { call_id: Ids.unsafeMake.callId("call-1"), name: "lookup", arguments: { q: "x" } }
      })
      yield* flush
      const missing = yield* Effect.flip(turns.functionResult("turn-1", "call-9", { output: "nothing" }))
      assert.deepStrictEqual(missing, new OperatorNotFound({ resource: "interaction", id: "call-9" }))
      const answering = yield* Effect.forkChild(turns.functionResult("turn-1", "call-1", { output: "42" }))
      const result = expectType(yield* runtime.receive, "function_result")
      assert.deepStrictEqual(result.payload, {
        delivery_id: Ids.unsafeMake.deliveryId("delivery-1"),
        call_id: Ids.unsafeMake.callId("call-1"),
        success: true,
        content: [{ type: "input_text", text: "42" }]
      })
      yield* runtime.send(frames.decisionAck("run-1", "delivery-1"))
      assert.deepStrictEqual(yield* Fiber.join(answering), { interaction_id: "call-1", delivery_id: "delivery-1", outcome: "applied" })
      const detail = yield* turns.get("turn-1")
      assert.deepStrictEqual(detail.interactions.map((i) => [i.kind, i.status, i.outcome]), [["function_call", "answered", "applied"]])
    }).pipe(Effect.provide(services)))

  it.effect("an answer without its receipt within 15 s is unknown, never applied", () => {
    const logs = captureLogs()
    return Effect.gen(function* () {
      const runtime = yield* setup
      const turns = yield* Turns.Turns
      yield* startDelivered(runtime)
      yield* runtime.send(frames.permissionRequest("run-1", "perm-1"))
      yield* flush
      const answering = yield* Effect.forkChild(turns.answerPermission("turn-1", "perm-1", { approved: true }))
      expectType(yield* runtime.receive, "permission_decision")
      yield* TestClock.adjust("14999 millis")
      yield* flush
      assert.isUndefined(answering.pollUnsafe())
      yield* TestClock.adjust("1 millis")
      assert.deepStrictEqual(yield* Fiber.join(answering), {
        interaction_id: "perm-1",
        delivery_id: "delivery-1",
        outcome: "unknown",
        reason: "no_receipt"
      })
      // The operator's line says the receipt ended unknown, as a warning (issue #20), never with the answer.
      const lines = logs.lines.map((l) => JSON.parse(l)).filter((l) => l.message.includes("turn permission answer"))
      assert.deepStrictEqual(
        lines.map((l) => [l.level, l.annotations.turn_id, l.annotations.interaction_id, l.annotations.outcome, l.annotations.reason]),
        [["Warn", "turn-1", "perm-1", "unknown", "no_receipt"]]
      )
    }).pipe(Effect.provide(Layer.merge(services, logs.layer)))
  })

  it.effect("records a lost connection as event_stream_incomplete and never as completed", () =>
    Effect.gen(function* () {
      const runtime = yield* setup
      const turns = yield* Turns.Turns
      yield* startDelivered(runtime)
      yield* runtime.send(frames.delta("run-1", "partial", 1))
      yield* flush
      yield* runtime.close(1006, "dropped")
      const record = yield* turns.awaitOutcome("turn-1")
      assert.deepStrictEqual(
        [record.status, record.errorCode, record.observationReason],
        ["failed", "event_stream_incomplete", "disconnected"]
      )
    }).pipe(Effect.provide(services)))

  it.effect("refuses Run frames nested 6,000 deep at decode: each settles its Turn, and the Session accepts the next", () => {
    const logs = captureLogs()
    return Effect.gen(function* () {
      const runtime = yield* setup
      const turns = yield* Turns.Turns
      const deep = "[".repeat(6000) + "]".repeat(6000)
      const cases: ReadonlyArray<readonly [string, (run: string) => string, ReadonlyArray<unknown>]> = [
        ["tool_call args", (run) => `{"type":"tool_call","id":"${run}","payload":{"id":"t1","name":"sh","stage":"before","args":{"a":${deep}}}}`, ["failed", "event_stream_incomplete", "invalid_run_frame"]],
        ["permission_request payload", (run) => `{"type":"permission_request","id":"${run}","payload":{"request_id":"p1","tool":"sh","title":"t","payload":{"a":${deep}}}}`, ["failed", "event_stream_incomplete", "invalid_run_frame"]],
        ["function_call arguments", (run) => `{"type":"function_call","id":"${run}","payload":{"call_id":"c1","name":"f","arguments":${deep}}}`, ["failed", "event_stream_incomplete", "invalid_run_frame"]],
        // A malformed usage is dropped (the next snapshot or done supersedes it): the Turn completes.
        ["usage raw", (run) => `{"type":"usage","id":"${run}","payload":{"input_tokens":1,"raw":{"a":${deep}}}}`, ["completed", undefined, undefined]]
      ]
      let n = 0
      for (const [label, frame, expected] of cases) {
        n++
        const started = yield* turns.start("s1", MessageInput.text("hello"))
        // (The previous Turn's best-effort prompt_cancel may come first.)
        let next = yield* runtime.receive
        while (next.type === "prompt_cancel") next = yield* runtime.receive
        const prepare = expectType(next, "execution_prepare")
        for (const status of ready(prepare.id)) yield* runtime.send(status)
        const start = expectType(yield* runtime.receive, "execution_start")
        const run = start.payload.run_id
        yield* runtime.sendRaw(frame(run))
        yield* runtime.send(frames.done(run, "ok"))
        const record = yield* turns.awaitOutcome(started.turn_id)
        assert.deepStrictEqual([record.status, record.errorCode, record.observationReason], expected, label)
        assert.strictEqual(yield* turns.listBySession("s1").pipe(Effect.map((list) => list.length)), n)
      }
      // Nothing of the nested payloads reached a log line; every refusal named its code.
      assert.isFalse(logs.lines.some((line) => line.includes("[[[[")))
      assert.strictEqual(logs.lines.filter((line) => line.includes("too_deep")).length, cases.length)
    }).pipe(Effect.provide(Layer.merge(services, logs.layer)))
  })

  it.effect("a runner that dies on a fact settles its Turn from the journal, logs it, and the Session accepts new Turns", () => {
    const logs = captureLogs()
    return Effect.gen(function* () {
      const runtime = yield* setup
      const turns = yield* Turns.Turns
      yield* startDelivered(runtime)
      yield* runtime.send(frames.delta("run-1", "partial", 1))
      // Stored on its own (a group containing the poisoned frame is stored as a whole or not at all).
      yield* flush
      // The journal write of this frame dies (a defect, as a stack overflow in an encoder would).
      yield* runtime.send({ type: "tool_call", id: Ids.unsafeMake.runId("run-1"), payload: { id: "poison", name: "sh", stage: "before" } })
      const record = yield* turns.awaitOutcome("turn-1")
      assert.deepStrictEqual(
        [record.status, record.errorCode, record.observationReason],
        ["failed", "event_stream_incomplete", "journal_unavailable"]
      )
      const errors = logs.lines.map((l) => JSON.parse(l)).filter((l) => l.level === "Error")
      assert.deepStrictEqual(errors.map((l) => [l.message, l.annotations.turn_id, l.annotations.failure]), [
        [["turn runner failed; settling the turn from its journal"], "turn-1", "RangeError"]
      ])
      assert.isFalse(logs.lines.some((l) => l.includes("Maximum call stack")))
      // The Run gets a best-effort abort; a cancel is a conflict (the Turn is over), never an empty 503.
      assert.deepStrictEqual(expectType(yield* runtime.receive, "prompt_cancel").id, "run-1")
      const cancel = yield* Effect.flip(turns.cancel("turn-1"))
      assert.strictEqual(cancel._tag, "OperatorConflict")
      // The Session takes the next Turn.
      const next = yield* turns.start("s1", MessageInput.text("again"))
      assert.strictEqual(next.turn_id, "turn-2")
      expectType(yield* runtime.receive, "execution_prepare")
    }).pipe(Effect.provide(Layer.merge(poisonedServices, logs.layer)))
  })

  it.effect("on shutdown records a running Turn with the observation gateway_shutdown, and leaves a queued one queued", () =>
    Effect.gen(function* () {
      const runtime = yield* setup
      const turns = yield* Turns.Turns
      yield* startDelivered(runtime)
      yield* runtime.send(frames.delta("run-1", "partial", 1))
      yield* flush
      yield* turns.shutdown
      const record = Option.getOrThrow(yield* (yield* TurnStore).get("turn-1"))
      assert.deepStrictEqual(
        [record.status, record.errorCode, record.observationReason],
        ["failed", "event_stream_incomplete", "gateway_shutdown"]
      )
    }).pipe(Effect.provide(services)))

  it.effect("sends execution_prepare only once its Dispatching fact is stored, retrying the write with capped backoff", () =>
    Effect.gen(function* () {
      const runtime = yield* setup
      const turns = yield* Turns.Turns
      yield* setDown(true)
      yield* turns.start("s1", MessageInput.text("hello"))
      yield* flush
      assert.strictEqual(yield* appends, 1)
      assert.isTrue(Option.isNone(yield* runtime.poll)) // the boundary is not journaled: nothing leaves
      // retries 100 ms, then 200, 400, 800, 1600, 3200 after each failure (6300 ms in all)
      yield* TestClock.adjust("99 millis")
      yield* flush
      assert.strictEqual(yield* appends, 1)
      yield* TestClock.adjust("1 millis")
      yield* flush
      assert.strictEqual(yield* appends, 2)
      yield* TestClock.adjust("6199 millis") // t = 6299
      yield* flush
      assert.strictEqual(yield* appends, 6)
      yield* TestClock.adjust("1 millis") // t = 6300
      yield* flush
      assert.strictEqual(yield* appends, 7)
      // the next delay is capped at 5 s (not 6.4 s)
      yield* TestClock.adjust("4999 millis")
      yield* flush
      assert.strictEqual(yield* appends, 7)
      yield* TestClock.adjust("1 millis") // t = 11300
      yield* flush
      assert.strictEqual(yield* appends, 8)
      assert.isTrue(Option.isNone(yield* runtime.poll))
      // the store is back: the fact is stored at the next retry, then the request leaves
      yield* setDown(false)
      yield* TestClock.adjust("5 seconds")
      const prepare = expectType(yield* runtime.receive, "execution_prepare")
      for (const status of ready(prepare.id)) yield* runtime.send(status)
      expectType(yield* runtime.receive, "execution_start")
      yield* runtime.send(frames.done("run-1", "hello"))
      const record = yield* turns.awaitOutcome("turn-1")
      assert.deepStrictEqual(record.outcome, { status: "completed", content: "hello" })
      const events = yield* (yield* TurnStore).events("turn-1", 0)
      assert.deepStrictEqual(events.map((e) => e.type).slice(0, 2), ["Dispatching", "Dispatched"])
      assert.deepStrictEqual(events.map((e) => e.seq), events.map((_, i) => i + 1))
    }).pipe(Effect.provide(flakyServices)))

  it.effect("one node: a create that fails withdraws the runner launched before its commit; nothing is stored or sent", () =>
    Effect.gen(function* () {
      const runtime = yield* setup
      const turns = yield* Turns.Turns
      const failed = yield* Effect.flip(turns.start("s1", MessageInput.text("hello")))
      assert.deepStrictEqual(failed, new OperatorUnavailable({ operation: "create_turn" }))
      // Past every retry a runner would make (the stall budget is 30 s): it is gone, and its first append never committed.
      yield* flush
      yield* TestClock.adjust("40 seconds")
      yield* flush
      assert.isTrue(Option.isNone(yield* runtime.poll))
      assert.isTrue(Option.isNone(yield* (yield* TurnStore).get("turn-1")))
      assert.deepStrictEqual(yield* (yield* TurnStore).events("turn-1", 0), [])
      // The Session takes its next Turn (nothing of the failed one is left unfinished), which is delivered.
      const next = yield* turns.start("s1", MessageInput.text("again"))
      const prepare = expectType(yield* runtime.receive, "execution_prepare")
      for (const status of ready(prepare.id)) yield* runtime.send(status)
      expectType(yield* runtime.receive, "execution_start")
      yield* runtime.send(frames.done(next.run_id, "again"))
      const record = yield* turns.awaitOutcome(next.turn_id)
      assert.deepStrictEqual(record.outcome, { status: "completed", content: "again" })
    }).pipe(Effect.provide(failingFirstCreateServices)))

  it.effect("ends the Turn's observation when a write keeps failing for the stall budget, and records the outcome once stored", () => {
    const logs = captureLogs()
    return Effect.gen(function* () {
      const runtime = yield* setup
      const turns = yield* Turns.Turns
      yield* setDown(true)
      yield* turns.start("s1", MessageInput.text("hello"))
      const outcome = yield* Effect.forkChild(turns.awaitOutcome("turn-1"))
      yield* flush
      // one millisecond before the budget: still waiting, nothing sent, nothing claimed
      yield* TestClock.adjust("29999 millis")
      yield* flush
      assert.isUndefined(outcome.pollUnsafe())
      assert.isFalse(logs.lines.some((l) => l.includes("store stays unavailable")))
      // a fresh Turn's attempt is begun with its first stored fact (issue 18): none is stored yet
      assert.deepStrictEqual(yield* turnStatus, ["queued", 0])
      // at the budget: an error names the Turn, and its observation ends (nothing was sent: the boundary is refused)
      yield* TestClock.adjust("1 millis")
      yield* flush
      const errors = logs.lines.map((l) => JSON.parse(l)).filter((l) => l.level === "Error")
      assert.deepStrictEqual(errors.map((l) => [l.message, l.annotations.turn_id, l.annotations.observation]), [
        [["turn record not persisted: the store stays unavailable; observation of the turn ends"], "turn-1", "journal_unavailable"]
      ])
      assert.isTrue(Option.isNone(yield* runtime.poll))
      // the outcome is not claimed while its facts are not stored
      assert.isUndefined(outcome.pollUnsafe())
      assert.deepStrictEqual(yield* turnStatus, ["queued", 0])
      // the store comes back: every held fact is stored in order, then the outcome
      yield* setDown(false)
      yield* TestClock.adjust("5 seconds")
      const record = yield* Fiber.join(outcome)
      assert.deepStrictEqual(record.outcome, { status: "failed", error_code: "delivery_failed", detail: "journal_unavailable" })
      const events = yield* (yield* TurnStore).events("turn-1", 0)
      assert.deepStrictEqual(events.map((e) => e.type), ["Dispatching", "NotDispatched"])
      assert.deepStrictEqual(events.map((e) => e.attempt), [1, 1])
      assert.deepStrictEqual(yield* turnStatus, ["failed", 1])
      assert.isTrue(Option.isNone(yield* runtime.poll))
    }).pipe(Effect.provide(Layer.merge(flakyServices, logs.layer)))
  })

  it.effect("waits the 20 s shutdown grace for running Turns to record, and not a millisecond longer", () =>
    Effect.gen(function* () {
      const runtime = yield* setup
      const turns = yield* Turns.Turns
      yield* startDelivered(runtime)
      yield* flush
      // the store goes away: the runner cannot record the Turn's outcome
      yield* setDown(true)
      const shutdown = yield* Effect.forkChild(turns.shutdown)
      yield* flush
      yield* TestClock.adjust("19999 millis")
      yield* flush
      assert.isUndefined(shutdown.pollUnsafe())
      yield* TestClock.adjust("1 millis")
      yield* flush
      assert.deepStrictEqual(yield* Fiber.await(shutdown), Exit.void)
      // not recorded: the next start reconciles it from the journal
      assert.deepStrictEqual(yield* turnStatus, ["running", 1])
    }).pipe(Effect.provide(flakyServices)))

  it.effect("of two concurrent starts on one Session exactly one is recorded; another Session starts meanwhile", () =>
    Effect.gen(function* () {
      yield* setup
      yield* (yield* SessionStore).create({ sessionId: "s2", agentKind: "scripted", environmentType: "none", configuration: {}, deviceId: undefined })
      const turns = yield* Turns.Turns
      const results = yield* Effect.all(
        [turns.start("s1", MessageInput.text("a")), turns.start("s1", MessageInput.text("b")), turns.start("s2", MessageInput.text("c"))],
        { concurrency: "unbounded", mode: "result" }
      )
      const tags = results.map((r) => (r._tag === "Success" ? "started" : (r.failure as { reason?: string }).reason))
      assert.deepStrictEqual([...tags.slice(0, 2)].sort(), ["started", "turn_active"])
      assert.strictEqual(tags[2], "started")
      const store = yield* TurnStore
      assert.strictEqual((yield* store.listBySession("s1")).length, 1)
      assert.strictEqual((yield* store.listBySession("s2")).length, 1)
      assert.isTrue(Option.isSome(yield* store.unfinishedOf("s1")))
    }).pipe(Effect.provide(services)))

  it.effect("one node: a start reads the Session once, under its locks; an unknown Session is not found", () =>
    Effect.gen(function* () {
      yield* setup
      const turns = yield* Turns.Turns
      const reads = yield* Ref.get(yield* SessionReads)
      const missing = yield* Effect.flip(turns.start("nope", MessageInput.text("a")))
      assert.deepStrictEqual(missing, new OperatorNotFound({ resource: "session", id: "nope" }))
      yield* turns.start("s1", MessageInput.text("a"))
      // `startChecks` read it (with the two Turn probes); `SessionStore.get` was not asked before the locks.
      assert.strictEqual(yield* Ref.get(yield* SessionReads), reads)
    }).pipe(Effect.provide(countedSessionServices)))

  it.effect("refuses a Turn the capability policy does not admit, recording and sending nothing", () =>
    Effect.gen(function* () {
      yield* setup
      yield* (yield* SessionStore).create({ sessionId: "s2", agentKind: "codex", environmentType: "none", configuration: {}, deviceId: undefined })
      const turns = yield* Turns.Turns
      const refused = yield* Effect.flip(turns.start("s2", MessageInput.text("hello")))
      assert.deepStrictEqual(refused, new HarnessUnavailable({ kind: "codex", reason: "not_advertised" }))
      assert.deepStrictEqual(yield* (yield* TurnStore).listBySession("s2"), [])
      const invalid = yield* Effect.flip(turns.start("s1", []))
      assert.deepStrictEqual(invalid, new OperatorRequestInvalid({ detail: "input: empty_input" }))
      assert.deepStrictEqual(yield* (yield* TurnStore).listBySession("s1"), [])
    }).pipe(Effect.provide(services)))
})
