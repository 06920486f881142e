import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Result } from "effect"
import { TestClock } from "effect/testing"
import * as Interactions from "../../../src/core/Interactions.js"
import * as Outcome from "../../../src/core/Outcome.js"
import { type ErrorCodes, Ids, type Interaction, type Messages } from "../../../src/proto/index.js"
import { allSupported, descriptor } from "../../support/capabilities.js"
import { type CoreHarness, makeFake, makeReal, RealLayer } from "../../support/coreFakeSession.js"
import { KIND } from "../policy/fixtures.js"

const RUN = Ids.unsafeMake.runId("run-1")
const PERM = Ids.unsafeMake.interactionId("perm_1a2b3c4d")
const ASK = Ids.unsafeMake.interactionId("ask_5e6f7a8b")
const D1 = Ids.unsafeMake.deliveryId("d-1")

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

const ask: Interaction.UserChoicePayload = {
  ask_id: ASK,
  questions: [
    { id: "q1", header: "Target", question: "Which branch?", options: [{ label: "main" }, { label: "dev" }] },
    { id: "q2", question: "Run tests?", options: [{ label: "yes" }, { label: "no" }] }
  ]
}

const approve = (h: CoreHarness, delivery = D1) =>
  Effect.gen(function*() {
    const fiber = yield* Effect.forkChild(
      Interactions.answerPermission(h.session, { interaction_id: PERM, delivery_id: delivery, approved: true })
    )
    const sent = yield* h.receive
    yield* h.flush
    return { fiber, sent }
  })

const unknown = (reason: Outcome.AckUnknownReason) =>
  new Outcome.InteractionAckUnknown({ interaction_id: PERM, delivery_id: D1, reason })

describe("Interactions", () => {
  describe("permission decisions", () => {
    it.effect("registers for the ack, then sends the decision under the interaction id", () =>
      Effect.gen(function*() {
        const fake = yield* makeFake()
        const { fiber, sent } = yield* approve(fake)
        assert.deepStrictEqual(sent, { type: "permission_decision", id: PERM, payload: { delivery_id: D1, approved: true } })
        assert.deepStrictEqual(yield* fake.calls, [
          { op: "expectReplies", family: "interaction_decision_ack", key: "d-1" },
          { op: "send", type: "permission_decision", id: PERM }
        ])
        yield* fake.emit(ack(PERM, "d-1", true))
        assert.deepStrictEqual(yield* Fiber.join(fiber), { interaction_id: PERM, delivery_id: D1 })
      }))

    it.effect("waits 15 s for the ack: pending 1 ms before, unknown at the deadline", () =>
      Effect.gen(function*() {
        const fake = yield* makeFake()
        const { fiber } = yield* approve(fake)
        yield* TestClock.adjust("14999 millis")
        yield* fake.flush
        assert.isUndefined(fiber.pollUnsafe())
        yield* TestClock.adjust("1 millis")
        assert.deepStrictEqual(yield* Effect.flip(Fiber.join(fiber)), unknown("no_receipt"))
      }))

    it.effect("lets an ack that arrives at the deadline instant win", () =>
      Effect.gen(function*() {
        const fake = yield* makeFake()
        // Registered before the waiter's timer: at 15 s the ack lands first, then the deadline fires.
        yield* Effect.forkChild(Effect.andThen(Effect.sleep("15 seconds"), fake.emit(ack(PERM, "d-1", true))))
        const { fiber } = yield* approve(fake)
        yield* TestClock.adjust("15 seconds")
        assert.deepStrictEqual(yield* Fiber.join(fiber), { interaction_id: PERM, delivery_id: D1 })
      }))

    it.effect("an ack must match the delivery id and the interaction id", () =>
      Effect.gen(function*() {
        const fake = yield* makeFake()
        const { fiber } = yield* approve(fake)
        yield* fake.emit(ack(RUN, "d-1", true)) // the Run id is not this decision's correlation
        yield* fake.emit(ack(PERM, "d-2", true)) // another resolve attempt
        yield* TestClock.adjust("15 seconds")
        assert.deepStrictEqual(yield* Effect.flip(Fiber.join(fiber)), unknown("no_receipt"))
      }))

    const codes: ReadonlyArray<ErrorCodes.DecisionErrorCode> = [
      "not_pending",
      "not_ready",
      "unsupported",
      "contract_violation",
      "runtime_error",
      "decision_conflict",
      "invalid_decision"
    ]
    for (const code of codes) {
      it.effect(`is rejected definitely on applied:false with ${code}`, () =>
        Effect.gen(function*() {
          const fake = yield* makeFake()
          const { fiber } = yield* approve(fake)
          yield* fake.emit(ack(PERM, "d-1", false, { error_code: code }))
          const error = yield* Effect.flip(Fiber.join(fiber))
          assert.deepStrictEqual(error, new Outcome.InteractionRejected({ interaction_id: PERM, delivery_id: D1, code }))
          assert.strictEqual(error._tag === "InteractionRejected" && error.isRetryable, code === "not_ready" || code === "runtime_error")
        }))
    }

    it.effect("leaves the outcome unknown when the connection drops mid-receipt", () =>
      Effect.gen(function*() {
        const fake = yield* makeFake()
        const { fiber } = yield* approve(fake)
        yield* fake.disconnect
        assert.deepStrictEqual(yield* Effect.flip(Fiber.join(fiber)), unknown("connection_lost"))
      }))

    it.effect("refuses a duplicate pending delivery id; a retry with a new delivery id is allowed", () =>
      Effect.gen(function*() {
        const fake = yield* makeFake()
        yield* approve(fake)
        const duplicate = yield* Effect.flip(
          Interactions.answerPermission(fake.session, { interaction_id: PERM, delivery_id: D1, approved: false })
        )
        assert.isTrue(duplicate._tag === "SubscriptionRejected" && duplicate.reason === "duplicate")
        const retry = yield* approve(fake, Ids.unsafeMake.deliveryId("d-2"))
        yield* fake.emit(ack(PERM, "d-2", false, { error_code: "decision_conflict" }))
        assert.deepStrictEqual(
          yield* Effect.flip(Fiber.join(retry.fiber)),
          new Outcome.InteractionRejected({ interaction_id: PERM, delivery_id: Ids.unsafeMake.deliveryId("d-2"), code: "decision_conflict" })
        )
      }))

    it.effect("over the real session", () =>
      Effect.gen(function*() {
        const real = yield* makeReal([descriptor(KIND, allSupported())])
        const { fiber } = yield* approve(real)
        yield* real.emit(ack(PERM, "d-1", true))
        assert.deepStrictEqual(yield* Fiber.join(fiber), { interaction_id: PERM, delivery_id: D1 })
      }).pipe(Effect.provide(RealLayer)))
  })

  describe("user-choice decisions", () => {
    const valid: ReadonlyArray<[string, Interaction.UserChoiceDecisionPayload]> = [
      ["answers by question id, in any order", { delivery_id: D1, question_answers: [{ question_id: "q2", answers: ["yes"] }, { question_id: "q1", answers: ["main"] }] }],
      ["an omitted question stays unanswered", { delivery_id: D1, question_answers: [{ question_id: "q1", answers: ["dev"] }] }],
      ["an empty array is an explicit non-answer", { delivery_id: D1, question_answers: [{ question_id: "q1", answers: [] }] }],
      ["cancellation without answers", Interactions.cancelledDecision(D1, "timeout")]
    ]
    for (const [name, decision] of valid) {
      it.effect(`sends ${name}`, () =>
        Effect.gen(function*() {
          const fake = yield* makeFake()
          const fiber = yield* Effect.forkChild(Interactions.answerUserChoice(fake.session, ask, decision))
          assert.deepStrictEqual(yield* fake.receive, { type: "prompt_for_user_choice_decision", id: ASK, payload: decision })
          yield* fake.flush
          yield* fake.emit(ack(ASK, "d-1", true))
          assert.deepStrictEqual(yield* Fiber.join(fiber), { interaction_id: ASK, delivery_id: D1 })
        }))
    }

    const invalid: ReadonlyArray<[string, unknown, Outcome.DecisionInvalid["issue"]]> = [
      ["answers together with cancelled", { delivery_id: D1, cancelled: true, question_answers: [{ question_id: "q1", answers: ["main"] }] }, "cancelled_with_answers"],
      ["a blank question id", { delivery_id: D1, question_answers: [{ question_id: "  ", answers: ["main"] }] }, "blank_question_id"],
      ["a repeated question id", { delivery_id: D1, question_answers: [{ question_id: "q1", answers: ["main"] }, { question_id: "q1", answers: ["dev"] }] }, "duplicate_question_id"],
      ["a question id that was not emitted", { delivery_id: D1, question_answers: [{ question_id: "Target", answers: ["main"] }] }, "unknown_question_id"],
      ["answers missing", { delivery_id: D1, question_answers: [{ question_id: "q1" }] }, "invalid_shape"],
      ["answers null", { delivery_id: D1, question_answers: [{ question_id: "q1", answers: null }] }, "invalid_shape"],
      ["answers not an array", { delivery_id: D1, question_answers: [{ question_id: "q1", answers: "main" }] }, "invalid_shape"],
      ["a header instead of a question id", { delivery_id: D1, question_answers: [{ header: "Target", answers: ["main"] }] }, "invalid_shape"],
      ["the legacy single answer member", { delivery_id: D1, question_answers: [{ question_id: "q1", answers: ["main"], answer: "main" }] }, "invalid_shape"],
      ["top-level legacy answers", { delivery_id: D1, answers: ["main"] }, "invalid_shape"],
      ["no delivery id", { question_answers: [{ question_id: "q1", answers: ["main"] }] }, "invalid_shape"],
      ["question_answers not an array", { delivery_id: D1, question_answers: { q1: ["main"] } }, "invalid_shape"]
    ]
    for (const [name, decision, issue] of invalid) {
      it.effect(`refuses ${name} before any send`, () =>
        Effect.gen(function*() {
          const fake = yield* makeFake()
          assert.deepStrictEqual(
            Interactions.validateDecision(ask, decision),
            Result.fail(new Outcome.DecisionInvalid({ interaction_id: ASK, issue }))
          )
          const error = yield* Effect.flip(
            Interactions.answerUserChoice(fake.session, ask, decision as Interaction.UserChoiceDecisionPayload)
          )
          assert.deepStrictEqual(error, new Outcome.DecisionInvalid({ interaction_id: ASK, issue }))
          assert.deepStrictEqual(yield* fake.calls, [])
        }))
    }

    it.effect("waits 15 s for the user-choice ack and reports unknown after", () =>
      Effect.gen(function*() {
        const fake = yield* makeFake()
        const fiber = yield* Effect.forkChild(Interactions.answerUserChoice(fake.session, ask, Interactions.cancelledDecision(D1)))
        yield* fake.receive
        yield* fake.flush
        yield* TestClock.adjust("14999 millis")
        yield* fake.flush
        assert.isUndefined(fiber.pollUnsafe())
        yield* TestClock.adjust("1 millis")
        assert.deepStrictEqual(
          yield* Effect.flip(Fiber.join(fiber)),
          new Outcome.InteractionAckUnknown({ interaction_id: ASK, delivery_id: D1, reason: "no_receipt" })
        )
      }))
  })

  describe("pending interactions", () => {
    it("tracks requests and asks and forgets a withdrawn permission", () => {
      let pending: ReadonlyMap<string, Interactions.PendingInteraction> = new Map()
      pending = Interactions.trackInteractions(pending, {
        type: "permission_request",
        id: RUN,
        payload: { request_id: PERM, tool: "Bash", title: "rm -rf build" }
      })
      pending = Interactions.trackInteractions(pending, { type: "prompt_for_user_choice", id: RUN, payload: ask })
      assert.deepStrictEqual([...pending.keys()], [PERM, ASK])
      pending = Interactions.trackInteractions(pending, { type: "permission_cancel", id: PERM })
      assert.deepStrictEqual([...pending.keys()], [ASK])
    })
  })
})
