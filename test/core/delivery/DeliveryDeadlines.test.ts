/**
 * One timer for many preparation budgets (DeliveryDeadlines.ts) on TestClock: budgets fire at their due time in
 * order, a disarmed or out-of-scope one never fires, one due before an armed one is not taken (its caller falls
 * back to a timer fiber), a budget armed there starts no fiber; and a prepared Turn delivered with shared deadlines
 * still ends `preparation_timeout` at exactly 10 min (and at 60 s after a cleanup-unconfirmed failure, the
 * deadline that moves earlier and so falls back).
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Exit, Scope } from "effect"
import { TestClock } from "effect/testing"
import * as Delivery from "../../../src/core/Delivery.js"
import { armDeadline, makeDeadlines } from "../../../src/core/DeliveryDeadlines.js"
import { Signal } from "../../../src/core/internal/turnWait.js"
import * as Outcome from "../../../src/core/Outcome.js"
import { Ids, MessageInput, type Messages } from "../../../src/proto/index.js"
import { allSupported, descriptor } from "../../support/capabilities.js"
import { makeReal, RealLayerWith } from "../../support/coreFakeSession.js"
import { KIND, spec } from "../policy/fixtures.js"

const REQ = Ids.unsafeMake.preparationRequestId("prep-1")
const RUN = Ids.unsafeMake.runId("run-1")
const HANDLE = Ids.unsafeMake.admissionHandle("handle-1")
const EXECUTOR = Ids.unsafeMake.executorId("executor-1")
const kinds = [descriptor(KIND, allSupported())]
const plan: Delivery.PreparedPlan = { request_id: REQ, run_id: RUN, spec: spec(), input: MessageInput.text("hello") }
type Msg<T extends Messages.RuntimeToCoreType> = Messages.MessageOfType<T>
const status = (payload: Msg<"preparation_status">["payload"]): Msg<"preparation_status"> => ({ type: "preparation_status", id: REQ, payload })
const preparing = status({ handle: HANDLE, executor_id: EXECUTOR, revision: 1, state: "preparing" })
const quietDevice = RealLayerWith({ livenessTimeout: Duration.hours(1) })

describe("DeliveryDeadlines", () => {
  it.effect("fires each armed budget at its due time, in order; a disarmed one never; an earlier one is not taken", () =>
    Effect.gen(function* () {
      const deadlines = yield* makeDeadlines
      const a = new Signal()
      const b = new Signal()
      const c = new Signal()
      assert.isDefined(deadlines.arm(10_000, a))
      assert.isDefined(deadlines.arm(15_000, b))
      const disarmC = deadlines.arm(15_000, c)
      assert.isDefined(disarmC)
      // Due before the latest armed: not taken here (the caller keeps its own timer).
      assert.isUndefined(deadlines.arm(12_000, new Signal()))
      disarmC!()
      yield* TestClock.adjust("9999 millis")
      assert.deepStrictEqual([a.fired, b.fired, c.fired], [false, false, false])
      yield* TestClock.adjust("1 millis")
      assert.deepStrictEqual([a.fired, b.fired, c.fired], [true, false, false])
      yield* TestClock.adjust("5 seconds")
      assert.deepStrictEqual([a.fired, b.fired, c.fired], [true, true, false])
      yield* TestClock.adjust("1 minute")
      assert.isFalse(c.fired)
      // Idle, the ticker is woken by the next budget.
      const d = new Signal()
      assert.isDefined(deadlines.arm(80_000, d))
      yield* TestClock.adjust("4999 millis")
      assert.isFalse(d.fired)
      yield* TestClock.adjust("1 millis")
      assert.isTrue(d.fired)
    }).pipe(Effect.scoped))

  it.effect("a budget armed on shared deadlines starts no fiber and is disarmed with its scope; without them it runs on a fiber", () =>
    Effect.gen(function* () {
      const deadlines = yield* makeDeadlines
      // Fiber ids are sequential: a probe fork before and after shows how many fibers arming made.
      const probe = Effect.map(Effect.forkChild(Effect.void), (fiber) => fiber.id)
      const shared = new Signal()
      const scope = yield* Scope.make()
      const before = yield* probe
      yield* armDeadline(deadlines, 10_000, shared).pipe(Scope.provide(scope))
      assert.strictEqual((yield* probe) - before, 1)
      yield* Scope.close(scope, Exit.void)
      yield* TestClock.adjust("1 minute")
      assert.isFalse(shared.fired)
      const alone = new Signal()
      const start = yield* probe
      const stop = yield* armDeadline(undefined, 70_000, alone)
      assert.strictEqual((yield* probe) - start, 2)
      yield* TestClock.adjust("10 seconds")
      assert.isTrue(alone.fired)
      yield* stop
    }).pipe(Effect.scoped))

  it.effect("a prepared Turn on shared deadlines that stays preparing ends preparation_interrupted after 10 min", () =>
    Effect.gen(function* () {
      const deadlines = yield* makeDeadlines
      const real = yield* makeReal(kinds)
      const turn = yield* Delivery.deliverPrepared(real.session, plan, { deadlines })
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
      assert.strictEqual((yield* real.receive).type, "execution_release")
    }).pipe(Effect.provide(quietDevice)))

  it.effect("on shared deadlines, failed with cleanup unconfirmed and no release ends cleanup_unconfirmed at 60 s", () =>
    Effect.gen(function* () {
      const deadlines = yield* makeDeadlines
      const real = yield* makeReal(kinds)
      const turn = yield* Delivery.deliverPrepared(real.session, plan, { deadlines })
      assert.strictEqual((yield* real.receive).type, "execution_prepare")
      yield* real.emit(preparing)
      yield* real.emit(status({ handle: HANDLE, executor_id: EXECUTOR, revision: 2, state: "failed", error_code: "cleanup_unconfirmed" }))
      yield* TestClock.adjust("59999 millis")
      yield* real.flush
      assert.deepStrictEqual((yield* turn.snapshot).resolution, { _tag: "Pending" })
      yield* TestClock.adjust("1 millis")
      assert.deepStrictEqual((yield* turn.resolution)._tag, "Settled")
      assert.deepStrictEqual((yield* turn.snapshot).resolution, {
        _tag: "Settled",
        outcome: { status: "failed", error_code: "cleanup_unconfirmed", preparation_error_code: "cleanup_unconfirmed", observation: "preparation_timeout" },
        error: new Outcome.PreparationCleanupUnconfirmed({ code: "cleanup_unconfirmed", reason: "preparation_timeout" })
      })
    }).pipe(Effect.provide(quietDevice)))
})
