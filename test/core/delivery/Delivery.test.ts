import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Fiber, Option, Queue, Stream } from "effect"
import { TestClock } from "effect/testing"
import * as Delivery from "../../../src/core/Delivery.js"
import { makeDeadlines } from "../../../src/core/DeliveryDeadlines.js"
import * as Outcome from "../../../src/core/Outcome.js"
import { Ids, MessageInput, type Messages } from "../../../src/proto/index.js"
import { allSupported, alwaysRequiredOnly, descriptor } from "../../support/capabilities.js"
import { type CoreHarness, type Fake, makeFake, makeReal, RealLayer, RealLayerWith } from "../../support/coreFakeSession.js"
import { KIND, spec } from "../policy/fixtures.js"

const REQ = Ids.unsafeMake.preparationRequestId("prep-1")
const RUN = Ids.unsafeMake.runId("run-1")
const HANDLE = Ids.unsafeMake.admissionHandle("handle-1")
const EXECUTOR = Ids.unsafeMake.executorId("executor-1")
const kinds = [descriptor(KIND, allSupported())]

const plan: Delivery.PreparedPlan = { request_id: REQ, run_id: RUN, spec: spec(), input: MessageInput.text("hello") }

type Msg<T extends Messages.RuntimeToCoreType> = Messages.MessageOfType<T>
const status = (payload: Msg<"preparation_status">["payload"]): Msg<"preparation_status"> => ({
  type: "preparation_status",
  id: REQ,
  payload
})
const preparing = status({ handle: HANDLE, executor_id: EXECUTOR, revision: 1, state: "preparing" })
const ready = status({ handle: HANDLE, executor_id: EXECUTOR, revision: 2, state: "ready", expires_at: 1_760_000_300_000 })
const starting = status({ handle: HANDLE, executor_id: EXECUTOR, revision: 3, state: "starting", run_id: RUN })
const startedStatus = status({ handle: HANDLE, executor_id: EXECUTOR, revision: 4, state: "started", run_id: RUN })
const delta = (text: string, sequence: number): Msg<"delta"> => ({ type: "delta", id: RUN, payload: { delta: text, sequence } })
const done = (content = "", extra: Partial<Msg<"done">["payload"]> = {}): Msg<"done"> => ({
  type: "done",
  id: RUN,
  payload: { content, ...extra }
})
const ack = (subject: string, delivery: string, applied: boolean, extra: Partial<Msg<"interaction_decision_ack">["payload"]> = {}): Msg<"interaction_decision_ack"> => ({
  type: "interaction_decision_ack",
  id: Ids.unsafeMake.ackSubjectId(subject),
  payload: { delivery_id: Ids.unsafeMake.deliveryId(delivery), applied, ...extra }
})

const fakeWithKinds = (options: Parameters<typeof makeFake>[0] = {}) =>
  Effect.tap(makeFake(options), (fake) => fake.heartbeat(kinds))

/** Drives steps 1–3 up to the execution_start Core sends. */
const prepareAndStart = (h: CoreHarness) =>
  Effect.gen(function*() {
    const prepare = yield* h.receive
    assert.strictEqual(prepare.type, "execution_prepare")
    yield* h.emit(preparing)
    yield* h.emit(ready)
    const start = yield* h.receive
    assert.strictEqual(start.type, "execution_start")
    return { prepare, start }
  })

const expectNothingSent = (h: CoreHarness) =>
  Effect.gen(function*() {
    yield* h.flush
    assert.deepStrictEqual(yield* h.poll, Option.none())
  })

describe("Delivery", () => {
  describe("five-step execution Turn", () => {
    it.effect("subscribes before each send, transfers the input with the ready handle and completes on done", () =>
      Effect.gen(function*() {
        const fake = yield* fakeWithKinds()
        const turn = yield* Delivery.deliverPrepared(fake.session, plan)
        const { prepare, start } = yield* prepareAndStart(fake)
        assert.deepStrictEqual(yield* fake.calls, [
          { op: "subscribePreparation", requestId: REQ },
          { op: "send", type: "execution_prepare", id: REQ },
          { op: "subscribeDurable", runId: RUN },
          { op: "send", type: "execution_start", id: REQ }
        ])
        if (prepare.type === "execution_prepare") {
          assert.strictEqual(prepare.payload.configuration.run_id, "")
          assert.isUndefined(prepare.payload.configuration.input)
        }
        assert.deepStrictEqual(start.payload, { executor_id: EXECUTOR, handle: HANDLE, run_id: RUN, input: MessageInput.text("hello") })
        // Output can race `started`.
        yield* fake.emit(starting)
        yield* fake.emit(delta("Hi", 1))
        yield* fake.emit(startedStatus)
        yield* fake.emit(done("Hi", { metadata: { agent_session_id: "thread-9" } }))
        assert.deepStrictEqual(yield* turn.result, { status: "completed", content: "Hi", native_session_id: "thread-9" })
        const facts = yield* Stream.runCollect(turn.facts)
        // Statuses and Run events travel on two subscriptions: each keeps its own order.
        // Each Run-carrying request is announced (Dispatching) before it enters the send queue (Dispatched).
        assert.deepStrictEqual(
          facts.flatMap((f) => (f._tag === "Dispatching" || f._tag === "Dispatched" ? [`${f._tag} ${f.type}`] : [])),
          ["Dispatching execution_prepare", "Dispatched execution_prepare", "Dispatching execution_start", "Dispatched execution_start"]
        )
        assert.deepStrictEqual(
          facts.flatMap((f) => (f._tag === "PreparationStatus" ? [f.status.state] : [])),
          ["preparing", "ready", "starting", "started"]
        )
        assert.deepStrictEqual(facts.flatMap((f) => (f._tag === "RunEvent" ? [f.event.type] : [])), ["delta", "done"])
        assert.isFalse(facts.some((f) => f._tag === "PreparationObservationEnded" || f._tag === "RunObservationEnded"))
        assert.deepStrictEqual(Outcome.project(RUN, facts), yield* turn.resolution)
      }))

    it.effect("the same Turn over the gateway's real session", () =>
      Effect.gen(function*() {
        const real = yield* makeReal(kinds)
        const turn = yield* Delivery.deliverPrepared(real.session, plan)
        yield* prepareAndStart(real)
        const calls = yield* real.calls
        assert.deepStrictEqual(calls, [
          { op: "subscribePreparation", requestId: REQ },
          { op: "send", type: "execution_prepare", id: REQ },
          { op: "subscribeDurable", runId: RUN },
          { op: "send", type: "execution_start", id: REQ }
        ])
        yield* real.emit(delta("Hi", 1))
        yield* real.emit(starting)
        yield* real.emit(startedStatus)
        yield* real.emit(done("Hi"))
        assert.deepStrictEqual(yield* turn.result, { status: "completed", content: "Hi" })
      }).pipe(Effect.provide(RealLayer)))

    it.effect("abandons before start with execution_release and never sends execution_start", () =>
      Effect.gen(function*() {
        const fake = yield* fakeWithKinds()
        const turn = yield* Delivery.deliverPrepared(fake.session, plan)
        yield* fake.receive
        yield* fake.emit(preparing)
        yield* fake.flush
        assert.deepStrictEqual(yield* turn.cancel(Ids.unsafeMake.deliveryId("cancel-1")), { _tag: "Abandoned" })
        const release = yield* fake.receive
        assert.deepStrictEqual(release, { type: "execution_release", id: REQ, payload: { handle: HANDLE } })
        yield* fake.emit(ready) // too late: the admission is abandoned
        yield* fake.emit(status({ handle: HANDLE, revision: 3, state: "released" }))
        assert.deepStrictEqual(yield* turn.result, { status: "cancelled" })
        yield* expectNothingSent(fake)
      }))

    it.effect("abandons before any status and releases once the handle is known", () =>
      Effect.gen(function*() {
        const fake = yield* fakeWithKinds()
        const turn = yield* Delivery.deliverPrepared(fake.session, plan)
        yield* fake.receive
        assert.deepStrictEqual(yield* turn.cancel(Ids.unsafeMake.deliveryId("cancel-1")), { _tag: "Abandoned" })
        yield* expectNothingSent(fake)
        yield* fake.emit(ready)
        assert.deepStrictEqual(yield* fake.receive, { type: "execution_release", id: REQ, payload: { handle: HANDLE } })
        assert.strictEqual((yield* turn.settled)._tag, "Settled")
      }))

    it.effect("leaves the Turn unclaimed after preparation_capacity and sends nothing else", () =>
      Effect.gen(function*() {
        const fake = yield* fakeWithKinds()
        const turn = yield* Delivery.deliverPrepared(fake.session, plan)
        yield* fake.receive
        yield* fake.emit(status({ revision: 0, state: "rejected", operation: "execution_prepare", error_code: "preparation_capacity" }))
        assert.deepStrictEqual(yield* turn.resolution, { _tag: "Unclaimed", reason: "preparation_capacity", error: new Outcome.PreparationRejected({ operation: "execution_prepare", code: "preparation_capacity" }) })
        const error = yield* Effect.flip(turn.result)
        assert.deepStrictEqual(error, new Outcome.PreparationRejected({ operation: "execution_prepare", code: "preparation_capacity" }))
        assert.isTrue(error._tag === "PreparationRejected" && error.isRetrySafe)
        yield* expectNothingSent(fake)
      }))

    it.effect("retries a capacity-rejected Turn as a new delivery that succeeds", () =>
      Effect.gen(function*() {
        const fake = yield* fakeWithKinds()
        const first = yield* Delivery.deliverPrepared(fake.session, plan)
        yield* fake.receive
        yield* fake.emit(status({ revision: 0, state: "rejected", operation: "execution_prepare", error_code: "preparation_capacity" }))
        assert.deepStrictEqual(yield* first.resolution, { _tag: "Unclaimed", reason: "preparation_capacity", error: new Outcome.PreparationRejected({ operation: "execution_prepare", code: "preparation_capacity" }) })
        const retryPlan = { ...plan, request_id: Ids.unsafeMake.preparationRequestId("prep-2") }
        const second = yield* Delivery.deliverPrepared(fake.session, retryPlan)
        const prepare = yield* fake.receive
        assert.isTrue(prepare.type === "execution_prepare" && prepare.id === "prep-2")
        yield* fake.emit({ ...preparing, id: retryPlan.request_id })
        yield* fake.emit({ ...ready, id: retryPlan.request_id })
        assert.strictEqual((yield* fake.receive).type, "execution_start")
        yield* fake.emit(done("ok"))
        assert.strictEqual((yield* second.result).status, "completed")
      }))

    it.effect("fails on any other preparation rejection and authorizes no replay", () =>
      Effect.gen(function*() {
        const fake = yield* fakeWithKinds()
        const turn = yield* Delivery.deliverPrepared(fake.session, plan)
        yield* fake.receive
        yield* fake.emit(status({ revision: 0, state: "rejected", operation: "execution_prepare", error_code: "session_binding_conflict" }))
        const error = yield* Effect.flip(turn.result)
        assert.isTrue(error._tag === "PreparationRejected" && !error.isRetrySafe)
        yield* expectNothingSent(fake)
      }))

    it.effect("fails on a preparation failure without sending start", () =>
      Effect.gen(function*() {
        const fake = yield* fakeWithKinds()
        const turn = yield* Delivery.deliverPrepared(fake.session, plan)
        yield* fake.receive
        yield* fake.emit(preparing)
        yield* fake.emit(status({ handle: HANDLE, revision: 2, state: "failed", error_code: "preparation_failed" }))
        assert.deepStrictEqual(yield* Effect.flip(turn.result), new Outcome.PreparationFailed({ state: "failed", code: "preparation_failed" }))
        yield* expectNothingSent(fake)
      }))

    it.effect("fails definitely when a start rejection proves the Run never started", () =>
      Effect.gen(function*() {
        const fake = yield* fakeWithKinds()
        const turn = yield* Delivery.deliverPrepared(fake.session, plan)
        yield* prepareAndStart(fake)
        yield* fake.emit(status({ revision: 0, state: "rejected", operation: "execution_start", error_code: "start_conflict" }))
        assert.deepStrictEqual(yield* Effect.flip(turn.result), new Outcome.PreparationRejected({ operation: "execution_start", code: "start_conflict" }))
      }))
  })

  describe("the dispatch boundary", () => {
    it.effect("records delivery_failed when execution_prepare never entered the send queue", () =>
      Effect.gen(function*() {
        const fake = yield* fakeWithKinds({ sendQueueCapacity: 1 })
        yield* fake.session.send({ type: "device_shutdown", payload: {} }) // fills the queue
        const turn = yield* Delivery.deliverPrepared(fake.session, plan)
        assert.deepStrictEqual(yield* turn.resolution, {
          _tag: "Settled",
          outcome: { status: "failed", error_code: "delivery_failed", detail: "queue_full" },
          error: new Outcome.DeliveryRefused({ run_id: RUN, reason: "queue_full" })
        })
        assert.deepStrictEqual(yield* Effect.flip(turn.result), new Outcome.DeliveryRefused({ run_id: RUN, reason: "queue_full" }))
      }))

    it.effect("records delivery_unknown when the start was queued and the connection dropped before any event", () =>
      Effect.gen(function*() {
        const fake = yield* fakeWithKinds()
        const turn = yield* Delivery.deliverPrepared(fake.session, plan)
        yield* prepareAndStart(fake)
        yield* fake.disconnect
        assert.deepStrictEqual(yield* Effect.flip(turn.result), new Outcome.DeliveryUnknown({ run_id: RUN, reason: "disconnected" }))
      }))

    it.effect("records delivery_unknown over the real session when the Runtime drops after the start", () =>
      Effect.gen(function*() {
        const real = yield* makeReal(kinds)
        const turn = yield* Delivery.deliverPrepared(real.session, plan)
        yield* prepareAndStart(real)
        yield* real.disconnect
        assert.deepStrictEqual(yield* Effect.flip(turn.result), new Outcome.DeliveryUnknown({ run_id: RUN, reason: "disconnected" }))
      }).pipe(Effect.provide(RealLayer)))

    it.effect("records event_stream_incomplete when the subscription is lost after events, never an invented done", () =>
      Effect.gen(function*() {
        const fake = yield* fakeWithKinds()
        const turn = yield* Delivery.deliverPrepared(fake.session, plan)
        yield* prepareAndStart(fake)
        yield* fake.emit(delta("par", 1))
        yield* fake.disconnect
        const resolution = yield* turn.resolution
        assert.deepStrictEqual(resolution, {
          _tag: "Settled",
          outcome: { status: "failed", error_code: "event_stream_incomplete", observation: "disconnected" },
          error: new Outcome.ExecutionUnknown({ run_id: RUN, reason: "disconnected" })
        })
        const facts = yield* Stream.runCollect(turn.facts)
        assert.isFalse(facts.some((f) => f._tag === "RunEvent" && (f.event.type === "done" || f.event.type === "error")))
      }))

    it.effect("records event_stream_incomplete on overflow and aborts the unobserved Run without a receipt", () =>
      Effect.gen(function*() {
        const fake = yield* fakeWithKinds({ runBuffer: 2 })
        const turn = yield* Delivery.deliverPrepared(fake.session, plan)
        yield* prepareAndStart(fake)
        // Three events before the consumer runs: the third overflows the two-event buffer.
        yield* Effect.forEach([1, 2, 3, 4], (n) => fake.emit(delta(`d${n}`, n)), { discard: true })
        const resolution = yield* turn.resolution
        assert.deepStrictEqual(resolution, {
          _tag: "Settled",
          outcome: { status: "failed", error_code: "event_stream_incomplete", observation: "subscriber_overflow" },
          error: new Outcome.ExecutionUnknown({ run_id: RUN, reason: "subscriber_overflow" })
        })
        assert.deepStrictEqual(yield* fake.receive, { type: "prompt_cancel", id: RUN, payload: {} })
      }))

    it.effect("records engine_failed for an error followed by done", () =>
      Effect.gen(function*() {
        const fake = yield* fakeWithKinds()
        const turn = yield* Delivery.deliverPrepared(fake.session, plan)
        yield* prepareAndStart(fake)
        yield* fake.emit({ type: "error", id: RUN, payload: { error: "quota", code: "usage_limit_exceeded" } })
        yield* fake.emit(done())
        assert.deepStrictEqual(
          yield* Effect.flip(turn.result),
          new Outcome.ExecutionFailed({ run_id: RUN, engine_error_code: "usage_limit_exceeded" })
        )
      }))
  })

  describe("the durable dispatch boundary", () => {
    /** The consumer side of `facts`: take one fact at a time, confirm it when the test says so. */
    const factsOf = (turn: Delivery.Turn) =>
      Effect.gen(function*() {
        const queue = yield* Queue.unbounded<Outcome.TurnFact>()
        yield* Effect.forkChild(Stream.runForEach(turn.facts, (f) => Queue.offer(queue, f)))
        return { next: Queue.take(queue) }
      })

    it.effect("hands each Run-carrying request to the send queue only after its Dispatching fact is journaled", () =>
      Effect.gen(function*() {
        const fake = yield* fakeWithKinds()
        const turn = yield* Delivery.deliverPrepared(fake.session, plan, { durableDispatch: true })
        const facts = yield* factsOf(turn)
        assert.deepStrictEqual(yield* facts.next, { _tag: "Dispatching", type: "execution_prepare" })
        yield* expectNothingSent(fake)
        yield* turn.journaled
        assert.strictEqual((yield* fake.receive).type, "execution_prepare")
        assert.deepStrictEqual(yield* facts.next, { _tag: "Dispatched", type: "execution_prepare" })
        yield* turn.journaled
        yield* fake.emit(preparing)
        yield* fake.emit(ready)
        for (const state of ["preparing", "ready"]) {
          const fact = yield* facts.next
          assert.isTrue(fact._tag === "PreparationStatus" && fact.status.state === state)
          yield* turn.journaled
        }
        assert.deepStrictEqual(yield* facts.next, { _tag: "Dispatching", type: "execution_start" })
        yield* expectNothingSent(fake)
        yield* turn.journaled
        assert.strictEqual((yield* fake.receive).type, "execution_start")
        assert.deepStrictEqual(yield* facts.next, { _tag: "Dispatched", type: "execution_start" })
      }))

    it.effect("sends nothing when the consumer ends observation while a boundary waits: delivery_failed, definite", () =>
      Effect.gen(function*() {
        const fake = yield* fakeWithKinds()
        const turn = yield* Delivery.deliverPrepared(fake.session, plan, { durableDispatch: true })
        const facts = yield* factsOf(turn)
        assert.deepStrictEqual(yield* facts.next, { _tag: "Dispatching", type: "execution_prepare" })
        yield* turn.endObservation("journal_unavailable")
        const resolution = yield* turn.resolution
        assert.deepStrictEqual(resolution, {
          _tag: "Settled",
          outcome: { status: "failed", error_code: "delivery_failed", detail: "journal_unavailable" },
          error: new Outcome.DeliveryRefused({ run_id: RUN, reason: "journal_unavailable" })
        })
        // The refusal is a fact of its own, so the journal proves nothing left.
        assert.deepStrictEqual(yield* facts.next, { _tag: "NotDispatched", type: "execution_prepare", reason: "journal_unavailable" })
        assert.deepStrictEqual(
          Outcome.project(RUN, [{ _tag: "Dispatching", type: "execution_prepare" }, { _tag: "NotDispatched", type: "execution_prepare", reason: "journal_unavailable" }]),
          resolution
        )
        assert.deepStrictEqual(yield* fake.calls, [{ op: "subscribePreparation", requestId: REQ }])
        yield* turn.journaled // a late confirmation sends nothing either
        yield* expectNothingSent(fake)
      }))

    it.effect("ends observation of a started Turn by the consumer's decision and aborts the unobserved Run", () =>
      Effect.gen(function*() {
        const fake = yield* fakeWithKinds()
        const turn = yield* Delivery.deliverPrepared(fake.session, plan)
        yield* prepareAndStart(fake)
        yield* fake.emit(delta("par", 1))
        yield* fake.flush
        yield* turn.endObservation("journal_unavailable")
        assert.deepStrictEqual(
          yield* Effect.flip(turn.result),
          new Outcome.ExecutionUnknown({ run_id: RUN, reason: "journal_unavailable" })
        )
        assert.deepStrictEqual(yield* fake.receive, { type: "prompt_cancel", id: RUN, payload: {} })
        // Observation ended: a late done establishes nothing.
        yield* fake.emit(done("late"))
        yield* fake.flush
        assert.deepStrictEqual(yield* turn.resolution, {
          _tag: "Settled",
          outcome: { status: "failed", error_code: "event_stream_incomplete", observation: "journal_unavailable" },
          error: new Outcome.ExecutionUnknown({ run_id: RUN, reason: "journal_unavailable" })
        })
      }))

    it.effect("waits for room once factBuffer facts wait; a consumer that takes nothing for the 60 s stall budget is gone", () =>
      Effect.gen(function*() {
        const fake = yield* fakeWithKinds()
        // Six facts up to the start (Dispatching / Dispatched twice, preparing, ready), then room for two events.
        const turn = yield* Delivery.deliverPrepared(fake.session, plan, { factBuffer: 8 })
        yield* prepareAndStart(fake)
        for (let n = 1; n <= 10; n++) {
          yield* fake.emit(delta(`d${n}`, n))
          yield* fake.flush
        }
        // Just before the stall budget: the Turn waits (backpressure), nothing is decided.
        yield* TestClock.adjust("59999 millis")
        yield* fake.flush
        assert.deepStrictEqual((yield* turn.snapshot).resolution, { _tag: "Pending" })
        yield* TestClock.adjust("1 millis")
        assert.deepStrictEqual(yield* turn.resolution, {
          _tag: "Settled",
          outcome: { status: "failed", error_code: "event_stream_incomplete", observation: "subscriber_overflow" },
          error: new Outcome.ExecutionUnknown({ run_id: RUN, reason: "subscriber_overflow" })
        })
        assert.deepStrictEqual(yield* fake.receive, { type: "prompt_cancel", id: RUN, payload: {} })
        const facts = yield* Stream.runCollect(turn.facts)
        assert.deepStrictEqual(facts.flatMap((f) => (f._tag === "RunEvent" && f.event.type === "delta" ? [f.event.payload.delta] : [])), ["d1", "d2"])
        assert.deepStrictEqual(facts.slice(8).map((f) => f._tag), ["RunObservationEnded", "Dispatched"])
      }))

    it.effect("a slow consumer never fails the Turn: the connection waits, and every event arrives in order", () =>
      Effect.gen(function*() {
        const real = yield* makeReal(kinds)
        const turn = yield* Delivery.deliverPrepared(real.session, plan, { factBuffer: 8, durableDispatch: true })
        const facts: Array<Outcome.TurnFact> = []
        // A consumer that confirms one fact per yield, far slower than the burst below.
        const consumer = yield* Stream.runForEach(turn.facts, (fact) =>
          Effect.sync(() => void facts.push(fact)).pipe(Effect.andThen(Effect.yieldNow), Effect.andThen(turn.journaled))
        ).pipe(Effect.forkChild)
        yield* prepareAndStart(real)
        // 3,000 deltas in one burst: far more than the session's and the driver's buffers together.
        const burst: Array<Messages.RuntimeToCore> = []
        for (let n = 1; n <= 3000; n++) burst.push(delta(`d${n}`, n))
        burst.push(done("all"))
        yield* real.emitAll(burst)
        assert.deepStrictEqual(yield* turn.result, { status: "completed", content: "all" })
        yield* Fiber.join(consumer)
        const deltas = facts.flatMap((f) => (f._tag === "RunEvent" && f.event.type === "delta" ? [f.event.payload.sequence] : []))
        assert.deepStrictEqual(deltas, Array.from({ length: 3000 }, (_, i) => i + 1))
      }).pipe(Effect.provide(RealLayerWith({ runSubscriptionBuffer: 16 }))))
  })

  describe("bounded wait for preparation statuses", () => {
    const failedCleanup = (code: "cleanup_unconfirmed" | "executor_cleanup_unconfirmed") =>
      status({ handle: HANDLE, executor_id: EXECUTOR, revision: 2, state: "failed", error_code: code })
    const released = status({ handle: HANDLE, executor_id: EXECUTOR, revision: 3, state: "released" })
    // The device stays connected without heartbeats for the whole budget.
    const quietDevice = RealLayerWith({ livenessTimeout: Duration.hours(1) })

    for (const shared of [false, true]) {
    it.effect(`a preparation that stays preparing ends preparation_interrupted after 10 min, and is released (${shared ? "shared deadlines" : "own timer"})`, () =>
      Effect.gen(function*() {
        const real = yield* makeReal(kinds)
        const turn = yield* Delivery.deliverPrepared(real.session, plan, shared ? { deadlines: yield* makeDeadlines } : {})
        assert.strictEqual((yield* real.receive).type, "execution_prepare")
        yield* real.emit(preparing)
        yield* TestClock.adjust("599999 millis")
        yield* real.flush
        assert.deepStrictEqual((yield* turn.snapshot).resolution, { _tag: "Pending" })
        yield* TestClock.adjust("1 millis")
        assert.deepStrictEqual(yield* turn.resolution, {
          _tag: "Settled",
          outcome: { status: "failed", error_code: "preparation_interrupted", observation: "preparation_timeout" },
          error: new Outcome.PreparationUnknown({ reason: "preparation_timeout" })
        })
        const release = yield* real.receive
        assert.deepStrictEqual([release.type, "id" in release ? release.id : "", release.payload], ["execution_release", REQ, { handle: HANDLE }])
      }).pipe(Effect.provide(quietDevice)))
    }

    it.effect("failed with cleanup unconfirmed waits for the confirmed release: preparation_failed, cleanup_confirmed", () =>
      Effect.gen(function*() {
        const real = yield* makeReal(kinds)
        const turn = yield* Delivery.deliverPrepared(real.session, plan)
        assert.strictEqual((yield* real.receive).type, "execution_prepare")
        yield* real.emit(preparing)
        yield* real.emit(failedCleanup("executor_cleanup_unconfirmed"))
        yield* TestClock.adjust("30 seconds")
        yield* real.flush
        // Not a plain failure yet: the Runtime still owns the resource.
        assert.deepStrictEqual((yield* turn.snapshot).resolution, { _tag: "Pending" })
        yield* real.emit(released)
        assert.deepStrictEqual(yield* turn.resolution, {
          _tag: "Settled",
          outcome: {
            status: "failed",
            error_code: "preparation_failed",
            preparation_error_code: "executor_cleanup_unconfirmed",
            detail: "cleanup_confirmed"
          },
          error: new Outcome.PreparationFailed({ state: "failed", code: "executor_cleanup_unconfirmed" })
        })
      }).pipe(Effect.provide(quietDevice)))

    for (const shared of [false, true]) {
    it.effect(`failed with cleanup unconfirmed and no release within 60 s ends cleanup_unconfirmed (nothing released by Core) (${shared ? "shared deadlines" : "own timer"})`, () =>
      Effect.gen(function*() {
        const real = yield* makeReal(kinds)
        const turn = yield* Delivery.deliverPrepared(real.session, plan, shared ? { deadlines: yield* makeDeadlines } : {})
        assert.strictEqual((yield* real.receive).type, "execution_prepare")
        yield* real.emit(preparing)
        yield* real.emit(failedCleanup("cleanup_unconfirmed"))
        yield* TestClock.adjust("59999 millis")
        yield* real.flush
        assert.deepStrictEqual((yield* turn.snapshot).resolution, { _tag: "Pending" })
        yield* TestClock.adjust("1 millis")
        assert.deepStrictEqual(yield* turn.resolution, {
          _tag: "Settled",
          outcome: {
            status: "failed",
            error_code: "cleanup_unconfirmed",
            preparation_error_code: "cleanup_unconfirmed",
            observation: "preparation_timeout"
          },
          error: new Outcome.PreparationCleanupUnconfirmed({ code: "cleanup_unconfirmed", reason: "preparation_timeout" })
        })
        yield* expectNothingSent(real)
      }).pipe(Effect.provide(quietDevice)))
    }
  })

  describe("final admission check", () => {
    it.effect("leaves the Turn unclaimed before the first heartbeat and sends nothing", () =>
      Effect.gen(function*() {
        const fake = yield* makeFake()
        const turn = yield* Delivery.deliverPrepared(fake.session, plan)
        assert.deepStrictEqual(yield* turn.resolution, { _tag: "Unclaimed", reason: "capabilities_undeclared", error: new Outcome.CapabilitiesUndeclared({ kind: KIND }) })
        assert.deepStrictEqual(yield* fake.calls, [])
      }))

    it.effect("refuses an unsupported capability before the operation", () =>
      Effect.gen(function*() {
        const fake = yield* makeFake()
        yield* fake.heartbeat([descriptor(KIND, alwaysRequiredOnly({ environment_none: true }))])
        const turn = yield* Delivery.deliverPrepared(fake.session, plan)
        assert.deepStrictEqual(
          yield* Effect.flip(turn.result),
          new Outcome.CapabilityUnsupported({ kind: KIND, capability: "subagent_control", source: "declaration" })
        )
        assert.deepStrictEqual(yield* fake.calls, [])
        assert.isTrue(Option.isNone(turn.admitted))
      }))

    it.effect("refuses an invalid initial input before the operation", () =>
      Effect.gen(function*() {
        const fake = yield* fakeWithKinds()
        const turn = yield* Delivery.deliverPrepared(fake.session, { ...plan, input: [] })
        assert.deepStrictEqual(yield* Effect.flip(turn.result), new Outcome.ConfigurationRejected({ issue: "input_empty_input" }))
        assert.deepStrictEqual(yield* fake.calls, [])
      }))
  })

  describe("the inline image profile", () => {
    const remote = [{ content: [{ type: "input_image" as const, image_url: "https://example.com/cat.png" }] }]

    it.effect("refuses a prepared Turn whose input image is outside the profile, before anything is sent", () =>
      Effect.gen(function*() {
        const fake = yield* fakeWithKinds()
        const turn = yield* Delivery.deliverPrepared(fake.session, { ...plan, input: remote })
        assert.deepStrictEqual(yield* Effect.flip(turn.result), new Outcome.ConfigurationRejected({ issue: "input_image_media_type" }))
        assert.deepStrictEqual(yield* fake.calls, [])
      }))

    it.effect("refuses a direct prompt_request whose input image is outside the profile, before anything is sent", () =>
      Effect.gen(function*() {
        const fake = yield* fakeWithKinds()
        const turn = yield* Delivery.deliverDirect(fake.session, { run_id: RUN, spec: spec(), input: remote })
        assert.deepStrictEqual(yield* Effect.flip(turn.result), new Outcome.ConfigurationRejected({ issue: "input_image_media_type" }))
        assert.deepStrictEqual(yield* fake.calls, [])
      }))
  })

  describe("direct prompt_request", () => {
    it.effect("subscribes to the Run before sending prompt_request and completes on done", () =>
      Effect.gen(function*() {
        const fake = yield* fakeWithKinds()
        const turn = yield* Delivery.deliverDirect(fake.session, { run_id: RUN, spec: spec(), input: MessageInput.text("hi") })
        const request = yield* fake.receive
        assert.strictEqual(request.type, "prompt_request")
        assert.deepStrictEqual(yield* fake.calls, [
          { op: "subscribeDurable", runId: RUN },
          { op: "send", type: "prompt_request", id: RUN }
        ])
        yield* fake.emit(delta("a", 1))
        yield* fake.emit({ type: "usage", id: RUN, payload: { input_tokens: 4 } })
        yield* fake.emit(done("a"))
        assert.deepStrictEqual(yield* turn.result, { status: "completed", content: "a", usage: { input_tokens: 4 } })
      }))

    it.effect("over the real session", () =>
      Effect.gen(function*() {
        const real = yield* makeReal(kinds)
        const turn = yield* Delivery.deliverDirect(real.session, { run_id: RUN, spec: spec(), input: MessageInput.text("hi") })
        assert.strictEqual((yield* real.receive).type, "prompt_request")
        yield* real.emit(done("a"))
        assert.deepStrictEqual(yield* turn.result, { status: "completed", content: "a" })
      }).pipe(Effect.provide(RealLayer)))
  })

  describe("cancellation through the Turn", () => {
    const startedTurn = (fake: Fake) =>
      Effect.gen(function*() {
        const turn = yield* Delivery.deliverPrepared(fake.session, plan)
        yield* prepareAndStart(fake)
        yield* fake.emit(starting)
        yield* fake.emit(startedStatus)
        return turn
      })

    it.effect("lets the receipt own the outcome: a done before it closes the stream, the receipt cancels", () =>
      Effect.gen(function*() {
        const fake = yield* fakeWithKinds()
        const turn = yield* startedTurn(fake)
        const cancel = yield* Effect.forkChild(turn.cancel(Ids.unsafeMake.deliveryId("cancel-1")))
        assert.deepStrictEqual(yield* fake.receive, { type: "prompt_cancel", id: RUN, payload: { delivery_id: Ids.unsafeMake.deliveryId("cancel-1") } })
        yield* fake.emit(done())
        yield* fake.flush
        assert.strictEqual((yield* turn.snapshot).resolution._tag, "Pending")
        yield* fake.emit(ack(RUN, "cancel-1", true, { outcome: { content: "partial", metadata: { agent_session_id: "native-session" } } }))
        const result = yield* Fiber.join(cancel)
        assert.strictEqual(result._tag, "Confirmed")
        assert.deepStrictEqual(yield* turn.result, {
          status: "cancelled",
          cancel_delivery_id: "cancel-1",
          content: "partial",
          native_session_id: "native-session"
        })
      }))

    it.effect("records cancel_unconfirmed when no receipt arrives within 15 s, even after done", () =>
      Effect.gen(function*() {
        const fake = yield* fakeWithKinds()
        const turn = yield* startedTurn(fake)
        const cancel = yield* Effect.forkChild(turn.cancel(Ids.unsafeMake.deliveryId("cancel-1")))
        yield* fake.receive
        yield* fake.emit(done("all"))
        yield* TestClock.adjust("14999 millis")
        yield* fake.flush
        assert.isUndefined(cancel.pollUnsafe())
        yield* TestClock.adjust("1 millis")
        assert.deepStrictEqual(
          yield* Effect.flip(Fiber.join(cancel)),
          new Outcome.CancelUnconfirmed({ run_id: RUN, delivery_id: "cancel-1", reason: "no_receipt" })
        )
        assert.deepStrictEqual(yield* turn.resolution, {
          _tag: "Settled",
          outcome: { status: "failed", error_code: "cancel_unconfirmed", cancel_delivery_id: "cancel-1", content: "all" },
          error: new Outcome.CancelUnconfirmed({ run_id: RUN, delivery_id: "cancel-1", reason: "no_receipt" })
        })
      }))

    it.effect("keeps waiting for the receipt after the caller is interrupted (observer cancellation settles nothing)", () =>
      Effect.gen(function*() {
        const fake = yield* fakeWithKinds()
        const turn = yield* startedTurn(fake)
        const cancel = yield* Effect.forkChild(turn.cancel(Ids.unsafeMake.deliveryId("cancel-1")))
        yield* fake.receive
        yield* Fiber.interrupt(cancel)
        yield* fake.emit(ack(RUN, "cancel-1", true))
        yield* fake.emit(done())
        assert.strictEqual((yield* turn.result).status, "cancelled")
      }))

    it.effect("refuses to cancel a settled Turn", () =>
      Effect.gen(function*() {
        const fake = yield* fakeWithKinds()
        const turn = yield* startedTurn(fake)
        yield* fake.emit(done())
        yield* turn.resolution
        assert.deepStrictEqual(
          yield* Effect.flip(turn.cancel(Ids.unsafeMake.deliveryId("cancel-1"))),
          new Outcome.TurnNotActive({ run_id: RUN })
        )
        yield* expectNothingSent(fake)
      }))

    it.effect("over the real session: the receipt matched by Run id and delivery id cancels", () =>
      Effect.gen(function*() {
        const real = yield* makeReal(kinds)
        const turn = yield* Delivery.deliverPrepared(real.session, plan)
        yield* prepareAndStart(real)
        yield* real.emit(startedStatus)
        const cancel = yield* Effect.forkChild(turn.cancel(Ids.unsafeMake.deliveryId("cancel-1")))
        assert.strictEqual((yield* real.receive).type, "prompt_cancel")
        yield* real.emit(ack("other-run", "cancel-1", true)) // wrong subject: establishes nothing
        yield* real.emit(done())
        yield* real.emit(ack(RUN, "cancel-1", true, { outcome: { content: "p" } }))
        assert.strictEqual((yield* Fiber.join(cancel))._tag, "Confirmed")
        assert.strictEqual((yield* turn.result).status, "cancelled")
      }).pipe(Effect.provide(RealLayer)))
  })

  describe("active input through the Turn", () => {
    it.effect("journals written then accepted and completes", () =>
      Effect.gen(function*() {
        const fake = yield* fakeWithKinds()
        const turn = yield* Delivery.deliverPrepared(fake.session, plan)
        yield* prepareAndStart(fake)
        const steer = yield* Effect.forkChild(turn.steer(Ids.unsafeMake.inputId("1"), MessageInput.text("more")))
        const message = yield* fake.receive
        assert.deepStrictEqual(message, {
          type: "prompt_steer",
          id: RUN,
          payload: { input_id: Ids.unsafeMake.inputId("1"), input: MessageInput.text("more"), durable_receipt: true }
        })
        yield* fake.emit({ type: "prompt_steer_ack", id: RUN, payload: { input_id: "1", accepted: false, written: true } })
        yield* fake.emit({ type: "prompt_steer_ack", id: RUN, payload: { input_id: "1", accepted: true } })
        assert.deepStrictEqual(yield* Fiber.join(steer), { run_id: RUN, input_id: "1", advance_cursor_to: "1" })
        yield* fake.emit(done())
        assert.strictEqual((yield* turn.result).status, "completed")
        const tags = (yield* Stream.runCollect(turn.facts)).map((f) => f._tag)
        assert.includeMembers(tags, ["InputWritten", "InputAccepted"])
      }))

    it.effect("fails the Turn with input_outcome_unknown when done arrives with an input still unaccepted", () =>
      Effect.gen(function*() {
        const fake = yield* fakeWithKinds()
        const turn = yield* Delivery.deliverPrepared(fake.session, plan)
        yield* prepareAndStart(fake)
        const steer = yield* Effect.forkChild(turn.steer(Ids.unsafeMake.inputId("1"), MessageInput.text("more")))
        yield* fake.receive
        yield* fake.emit({ type: "prompt_steer_ack", id: RUN, payload: { input_id: "1", accepted: false, written: true } })
        yield* fake.emit(done())
        yield* fake.flush
        assert.strictEqual((yield* turn.snapshot).resolution._tag, "Pending")
        yield* TestClock.adjust("1 second")
        assert.deepStrictEqual(
          yield* Effect.flip(Fiber.join(steer)),
          new Outcome.InputOutcomeUnknown({ run_id: RUN, input_id: "1", reason: "turn_ended" })
        )
        assert.deepStrictEqual(
          yield* Effect.flip(turn.result),
          new Outcome.InputOutcomeUnknown({ run_id: RUN, input_id: "1", reason: "turn_ended" })
        )
      }))

    it.effect("over the real session", () =>
      Effect.gen(function*() {
        const real = yield* makeReal(kinds)
        const turn = yield* Delivery.deliverPrepared(real.session, plan)
        yield* prepareAndStart(real)
        const steer = yield* Effect.forkChild(turn.steer(Ids.unsafeMake.inputId("7"), MessageInput.text("more")))
        assert.strictEqual((yield* real.receive).type, "prompt_steer")
        yield* real.emit({ type: "prompt_steer_ack", id: RUN, payload: { input_id: "7", accepted: false, written: true } })
        yield* real.emit({ type: "prompt_steer_ack", id: RUN, payload: { input_id: "7", accepted: true } })
        assert.strictEqual((yield* Fiber.join(steer)).advance_cursor_to, "7")
        yield* real.emit(done())
        assert.strictEqual((yield* turn.result).status, "completed")
      }).pipe(Effect.provide(RealLayer)))
  })
})
