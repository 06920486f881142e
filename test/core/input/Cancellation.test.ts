import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { TestClock } from "effect/testing"
import * as Cancellation from "../../../src/core/Cancellation.js"
import * as Outcome from "../../../src/core/Outcome.js"
import { type ErrorCodes, Ids, type Messages } from "../../../src/proto/index.js"
import { allSupported, descriptor } from "../../support/capabilities.js"
import { type CoreHarness, makeFake, makeReal, RealLayer } from "../../support/coreFakeSession.js"
import { KIND } from "../policy/fixtures.js"

const RUN = Ids.unsafeMake.runId("run-1")
const DELIVERY = Ids.unsafeMake.deliveryId("cancel-1")

const ack = (
  subject: string,
  delivery: string,
  applied: boolean,
  extra: Partial<Messages.MessageOfType<"interaction_decision_ack">["payload"]> = {}
): Messages.MessageOfType<"interaction_decision_ack"> => ({
  type: "interaction_decision_ack",
  id: Ids.unsafeMake.ackSubjectId(subject),
  payload: { delivery_id: Ids.unsafeMake.deliveryId(delivery), applied, ...extra }
})

const start = (h: CoreHarness) =>
  Effect.gen(function*() {
    const fiber = yield* Effect.forkChild(Cancellation.cancel(h.session, RUN, DELIVERY))
    const sent = yield* h.receive
    yield* h.flush
    return { fiber, sent }
  })

const unconfirmed = (reason: Outcome.CancelUnconfirmed["reason"], code?: ErrorCodes.CancelErrorCode) =>
  new Outcome.CancelUnconfirmed({ run_id: RUN, delivery_id: DELIVERY, reason, ...(code === undefined ? {} : { code }) })

describe("Cancellation", () => {
  it.effect("registers for the receipt, then sends prompt_cancel with the delivery id", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake()
      const { sent } = yield* start(fake)
      assert.deepStrictEqual(sent, { type: "prompt_cancel", id: RUN, payload: { delivery_id: DELIVERY } })
      assert.deepStrictEqual(yield* fake.calls, [
        { op: "expectReplies", family: "interaction_decision_ack", key: "cancel-1" },
        { op: "send", type: "prompt_cancel", id: RUN }
      ])
    }))

  it.effect("is confirmed by an applied receipt under the Run id, with its continuity snapshot", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake()
      const { fiber } = yield* start(fake)
      const outcome = { content: "partial", metadata: { agent_session_id: "native-session" } }
      yield* fake.emit(ack(RUN, "cancel-1", true, { outcome }))
      assert.deepStrictEqual(yield* Fiber.join(fiber), { run_id: RUN, delivery_id: DELIVERY, outcome })
    }))

  it.effect("waits 15 s for the receipt: pending 1 ms before, unconfirmed at the deadline", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake()
      const { fiber } = yield* start(fake)
      yield* TestClock.adjust("14999 millis")
      yield* fake.flush
      assert.isUndefined(fiber.pollUnsafe())
      yield* TestClock.adjust("1 millis")
      assert.deepStrictEqual(yield* Effect.flip(Fiber.join(fiber)), unconfirmed("no_receipt"))
    }))

  it.effect("lets a receipt that arrives at the deadline instant win", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake()
      // Registered before the waiter's timer: at 15 s the receipt lands first, then the deadline fires.
      yield* Effect.forkChild(Effect.andThen(Effect.sleep("15 seconds"), fake.emit(ack(RUN, "cancel-1", true))))
      const { fiber } = yield* start(fake)
      yield* TestClock.adjust("15 seconds")
      assert.strictEqual((yield* Fiber.join(fiber)).delivery_id, DELIVERY)
    }))

  it.effect("a receipt without the required correlation establishes nothing", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake()
      const { fiber } = yield* start(fake)
      yield* fake.emit(ack("perm_1", "cancel-1", true)) // right delivery id, wrong envelope id
      yield* fake.emit(ack(RUN, "cancel-2", true)) // right Run, another delivery
      yield* TestClock.adjust("15 seconds")
      assert.deepStrictEqual(yield* Effect.flip(Fiber.join(fiber)), unconfirmed("no_receipt"))
    }))

  it.effect("is rejected definitely when the Runtime has no such active Run", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake()
      const { fiber } = yield* start(fake)
      yield* fake.emit(ack(RUN, "cancel-1", false, { error_code: "run_inactive" }))
      assert.deepStrictEqual(
        yield* Effect.flip(Fiber.join(fiber)),
        new Outcome.CancelRejected({ run_id: RUN, delivery_id: DELIVERY, code: "run_inactive" })
      )
    }))

  it.effect("fails definitely on cancel_failed (a receipt, not a missing one)", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake()
      const { fiber } = yield* start(fake)
      yield* fake.emit(ack(RUN, "cancel-1", false, { error_code: "cancel_failed" }))
      assert.deepStrictEqual(
        yield* Effect.flip(Fiber.join(fiber)),
        new Outcome.CancelFailed({ run_id: RUN, delivery_id: DELIVERY, code: "cancel_failed" })
      )
    }))

  for (const code of ["cancel_timeout", "cancel_output_unavailable", "cancel_outcome_unavailable", "not_ready"] as const) {
    it.effect(`stays unconfirmed on ${code} (never success)`, () =>
      Effect.gen(function*() {
        const fake = yield* makeFake()
        const { fiber } = yield* start(fake)
        yield* fake.emit(ack(RUN, "cancel-1", false, { error_code: code }))
        assert.deepStrictEqual(yield* Effect.flip(Fiber.join(fiber)), unconfirmed("not_applied", code))
      }))
  }

  it.effect("leaves the outcome unconfirmed when the connection drops mid-receipt", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake()
      const { fiber } = yield* start(fake)
      yield* fake.disconnect
      assert.deepStrictEqual(yield* Effect.flip(Fiber.join(fiber)), unconfirmed("connection_lost"))
    }))

  it.effect("refuses a duplicate pending delivery id before sending", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake()
      yield* start(fake)
      const error = yield* Effect.flip(Cancellation.cancel(fake.session, RUN, DELIVERY))
      assert.isTrue(error._tag === "SubscriptionRejected" && error.reason === "duplicate")
    }))

  it.effect("is definite when prompt_cancel never entered the send queue", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake()
      yield* fake.lose("replaced")
      const error = yield* Effect.flip(Cancellation.cancel(fake.session, RUN, DELIVERY))
      assert.isTrue(error._tag === "SubscriptionRejected" || error._tag === "NotSent")
    }))

  it.effect("over the real session: no receipt within 15 s is unconfirmed", () =>
    Effect.gen(function*() {
      const real = yield* makeReal([descriptor(KIND, allSupported())])
      const { fiber } = yield* start(real)
      yield* TestClock.adjust("14999 millis")
      yield* real.flush
      assert.isUndefined(fiber.pollUnsafe())
      yield* TestClock.adjust("1 millis")
      assert.deepStrictEqual(yield* Effect.flip(Fiber.join(fiber)), unconfirmed("no_receipt"))
    }).pipe(Effect.provide(RealLayer)))
})
