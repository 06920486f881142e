import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Latch } from "effect"
import { TestClock } from "effect/testing"
import type { Admitted } from "../../../src/core/CapabilityPolicy.js"
import { NotSent } from "../../../src/core/Errors.js"
import * as Outcome from "../../../src/core/Outcome.js"
import * as Steering from "../../../src/core/Steering.js"
import { ErrorCodes, Ids, MessageInput, type Messages } from "../../../src/proto/index.js"
import { allSupported, descriptor } from "../../support/capabilities.js"
import { type CoreHarness, makeFake, makeReal, RealLayer } from "../../support/coreFakeSession.js"
import { engine, KIND } from "../policy/fixtures.js"

const RUN = Ids.unsafeMake.runId("run-1")
const ONE = Ids.unsafeMake.inputId("1")
const admitted: Admitted = { kind: KIND, capabilities: allSupported(), required: [] }
const input = MessageInput.text("also add tests")
/** A 1×1 PNG in the public inline image profile. */
const PNG = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAAC0lEQVR4nGNgAAIAAAUAAXpeqz8AAAAASUVORK5CYII="

const receipt = (
  inputId: string,
  payload: Partial<Messages.MessageOfType<"prompt_steer_ack">["payload"]>,
  run: string = RUN
): Messages.MessageOfType<"prompt_steer_ack"> => ({
  type: "prompt_steer_ack",
  id: Ids.unsafeMake.runId(run),
  payload: { input_id: inputId, accepted: false, ...payload }
})
const written = (id = "1") => receipt(id, { written: true })
const accepted = (id = "1") => receipt(id, { accepted: true })
const code = (c: ErrorCodes.SteerErrorCode, id = "1") => receipt(id, { error_code: c })

const channel = (h: CoreHarness, options: Partial<Steering.SteeringOptions> = {}) =>
  Steering.make(h.session, RUN, { admitted, engine: engine(), ...options })

/** Forks one delivery and waits until its prompt_steer entered the send queue. */
const deliver = (h: CoreHarness, options: Partial<Steering.SteeringOptions> = {}, id = ONE, payload = input) =>
  Effect.gen(function*() {
    const steering = yield* channel(h, options)
    const fiber = yield* Effect.forkChild(steering.deliver(id, payload))
    const sent = yield* h.receive
    yield* h.flush
    return { fiber, sent }
  })

const accepted1 = { run_id: RUN, input_id: ONE, advance_cursor_to: ONE }

describe("Steering", () => {
  it.effect("registers for receipts before sending prompt_steer with durable_receipt", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake()
      const { sent } = yield* deliver(fake)
      assert.deepStrictEqual(sent, { type: "prompt_steer", id: RUN, payload: { input_id: ONE, input, durable_receipt: true } })
      assert.deepStrictEqual(yield* fake.calls, [
        { op: "expectReplies", family: "prompt_steer_ack", key: `${RUN}\u00001` },
        { op: "send", type: "prompt_steer", id: RUN }
      ])
    }))

  it.effect("advances the cursor only on accepted, not on written", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake()
      const progress: Array<Steering.InputProgress> = []
      const { fiber } = yield* deliver(fake, { observe: (p) => Effect.sync(() => void progress.push(p)) })
      yield* fake.emit(written())
      yield* fake.flush
      assert.isUndefined(fiber.pollUnsafe())
      // accepted arrives under the Turn's lifetime: long after the 30 s written window.
      yield* TestClock.adjust("5 minutes")
      assert.isUndefined(fiber.pollUnsafe())
      yield* fake.emit(accepted())
      assert.deepStrictEqual(yield* Fiber.join(fiber), accepted1)
      assert.deepStrictEqual(progress, [
        { _tag: "Dispatched", input_id: ONE },
        { _tag: "Written", input_id: ONE }
      ])
    }))

  it.effect("waits 30 s from delivery for written: pending 1 ms before, unknown at the deadline", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake()
      const { fiber } = yield* deliver(fake)
      yield* TestClock.adjust("29999 millis")
      yield* fake.flush
      assert.isUndefined(fiber.pollUnsafe())
      yield* TestClock.adjust("1 millis")
      assert.deepStrictEqual(
        yield* Effect.flip(Fiber.join(fiber)),
        new Outcome.InputOutcomeUnknown({ run_id: RUN, input_id: ONE, reason: "written_ack_timeout" })
      )
    }))

  it.effect("lets a written receipt that arrives at the deadline instant win", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake()
      // Registered before the waiter's timer: at 30 s the receipt lands first, then the deadline fires.
      yield* Effect.forkChild(Effect.andThen(Effect.sleep("30 seconds"), fake.emit(written())))
      const { fiber } = yield* deliver(fake)
      yield* TestClock.adjust("30 seconds")
      yield* fake.flush
      assert.isUndefined(fiber.pollUnsafe())
      yield* fake.emit(accepted())
      assert.deepStrictEqual(yield* Fiber.join(fiber), accepted1)
    }))

  it.effect("lets an accepted receipt that arrives at the deadline instant win", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake()
      yield* Effect.forkChild(Effect.andThen(Effect.sleep("30 seconds"), fake.emit(accepted())))
      const { fiber } = yield* deliver(fake)
      yield* TestClock.adjust("30 seconds")
      assert.deepStrictEqual(yield* Fiber.join(fiber), accepted1)
    }))

  for (const retryable of ["not_ready", "busy"] as const) {
    it.effect(`resends the identical payload after ${retryable}`, () =>
      Effect.gen(function*() {
        const fake = yield* makeFake()
        const { fiber, sent } = yield* deliver(fake)
        yield* fake.emit(code(retryable))
        yield* fake.flush
        yield* TestClock.adjust("249 millis")
        yield* fake.flush
        assert.isTrue((yield* fake.queued) === 0)
        yield* TestClock.adjust("1 millis")
        assert.deepStrictEqual(yield* fake.receive, sent)
        yield* fake.emit(written())
        yield* fake.emit(accepted())
        assert.deepStrictEqual(yield* Fiber.join(fiber), accepted1)
      }))
  }

  it.effect("reports a definite, retryable rejection when not_ready leaves no time for a resend", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake()
      const { fiber } = yield* deliver(fake)
      yield* TestClock.adjust("29800 millis")
      yield* fake.emit(code("not_ready"))
      const error = yield* Effect.flip(Fiber.join(fiber))
      assert.deepStrictEqual(error, new Outcome.InputRejected({ run_id: RUN, input_id: ONE, code: "not_ready" }))
      assert.isTrue(error._tag === "InputRejected" && error.isRetryable)
    }))

  const terminal: ReadonlyArray<ErrorCodes.SteerErrorCode> = [
    "invalid_input",
    "run_inactive",
    "input_conflict",
    "input_limit",
    "unsupported",
    "contract_violation",
    "rejected"
  ]
  for (const c of terminal) {
    it.effect(`rejects definitely on ${c}, without advancing the cursor`, () =>
      Effect.gen(function*() {
        const fake = yield* makeFake()
        const { fiber } = yield* deliver(fake)
        yield* fake.emit(code(c))
        const error = yield* Effect.flip(Fiber.join(fiber))
        assert.deepStrictEqual(error, new Outcome.InputRejected({ run_id: RUN, input_id: ONE, code: c }))
        assert.isFalse(error._tag === "InputRejected" && error.isRetryable)
      }))
  }

  it.effect("keeps the outcome unknown when the Runtime reports outcome_unknown", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake()
      const { fiber } = yield* deliver(fake)
      yield* fake.emit(written())
      yield* fake.emit(code("outcome_unknown"))
      assert.deepStrictEqual(
        yield* Effect.flip(Fiber.join(fiber)),
        new Outcome.InputOutcomeUnknown({ run_id: RUN, input_id: ONE, reason: "runtime_outcome_unknown" })
      )
    }))

  it.effect("ignores in_flight and a receipt that proves nothing", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake()
      const { fiber } = yield* deliver(fake)
      yield* fake.emit(code("in_flight"))
      yield* fake.emit(receipt("1", {}))
      yield* fake.flush
      assert.isUndefined(fiber.pollUnsafe())
      yield* fake.emit(accepted())
      assert.deepStrictEqual(yield* Fiber.join(fiber), accepted1)
    }))

  it.effect("ignores receipts of another input id or another Run (ids never interchange)", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake()
      const { fiber } = yield* deliver(fake)
      yield* fake.emit(accepted("2"))
      yield* fake.emit(receipt("1", { accepted: true }, "run-2"))
      yield* fake.emit({ type: "interaction_decision_ack", id: Ids.unsafeMake.ackSubjectId(RUN), payload: { delivery_id: Ids.unsafeMake.deliveryId("1"), applied: true } })
      yield* TestClock.adjust("30 seconds")
      assert.deepStrictEqual(
        yield* Effect.flip(Fiber.join(fiber)),
        new Outcome.InputOutcomeUnknown({ run_id: RUN, input_id: ONE, reason: "written_ack_timeout" })
      )
    }))

  it.effect("leaves the outcome unknown when the connection drops mid-receipt", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake()
      const { fiber } = yield* deliver(fake)
      yield* fake.emit(written())
      yield* fake.disconnect
      assert.deepStrictEqual(
        yield* Effect.flip(Fiber.join(fiber)),
        new Outcome.InputOutcomeUnknown({ run_id: RUN, input_id: ONE, reason: "connection_lost" })
      )
    }))

  it.effect("is definite when the prompt_steer never entered the send queue", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake({ sendQueueCapacity: 1 })
      yield* fake.session.send({ type: "device_shutdown", payload: {} })
      const steering = yield* channel(fake)
      const error = yield* Effect.flip(steering.deliver(ONE, input))
      assert.deepStrictEqual(error, new NotSent({ type: "prompt_steer", reason: "queue_full" }))
    }))

  it.effect("refuses a duplicate pending input id (no transport-wide deduplication)", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake()
      yield* deliver(fake)
      const other = yield* channel(fake)
      const error = yield* Effect.flip(other.deliver(ONE, input))
      assert.deepStrictEqual(error._tag, "SubscriptionRejected")
      assert.isTrue(error._tag === "SubscriptionRejected" && error.reason === "duplicate")
    }))

  it.effect("delivers one input at a time per Run", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake()
      const steering = yield* channel(fake)
      const first = yield* Effect.forkChild(steering.deliver(ONE, input))
      const second = yield* Effect.forkChild(steering.deliver(Ids.unsafeMake.inputId("2"), MessageInput.text("next")))
      const first1 = yield* fake.receive
      assert.isTrue(first1.type === "prompt_steer" && first1.payload.input_id === "1")
      yield* fake.flush
      assert.strictEqual(yield* fake.queued, 0)
      yield* fake.emit(written())
      yield* fake.flush
      assert.strictEqual(yield* fake.queued, 0) // written is not the end of the first input
      yield* fake.emit(accepted())
      assert.deepStrictEqual(yield* Fiber.join(first), accepted1)
      const next = yield* fake.receive
      assert.isTrue(next.type === "prompt_steer" && next.payload.input_id === "2")
      yield* fake.emit(accepted("2"))
      assert.strictEqual((yield* Fiber.join(second)).advance_cursor_to, "2")
    }))

  it.effect("refuses images without message_images before sending, and invalid input", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake()
      const steering = yield* Steering.make(fake.session, RUN, {
        admitted: { kind: KIND, capabilities: { ...allSupported(), message_images: false }, required: [] },
        engine: engine()
      })
      const image = [{ content: [{ type: "input_image" as const, image_url: PNG }] }]
      assert.deepStrictEqual(
        yield* Effect.flip(steering.deliver(ONE, image)),
        new Outcome.CapabilityUnsupported({ kind: KIND, capability: "message_images", source: "declaration" })
      )
      assert.deepStrictEqual(
        yield* Effect.flip(steering.deliver(ONE, [])),
        new Outcome.InputInvalid({ run_id: RUN, input_id: ONE, issue: "input_empty_input" })
      )
      assert.deepStrictEqual(yield* fake.calls, [])
    }))

  it.effect("refuses an image outside the public inline profile before sending, with a finite issue code", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake()
      const steering = yield* channel(fake)
      const cases = [
        ["https://example.com/cat.png", "input_image_media_type"],
        ["data:image/png;base64,not base64!", "input_image_base64"],
        ["data:image/png;base64,AAAA", "input_image_format_mismatch"]
      ] as const
      for (const [url, issue] of cases) {
        const image = [{ content: [{ type: "input_text" as const, text: "see" }, { type: "input_image" as const, image_url: url }] }]
        assert.deepStrictEqual(yield* Effect.flip(steering.deliver(ONE, image)), new Outcome.InputInvalid({ run_id: RUN, input_id: ONE, issue }))
      }
      assert.deepStrictEqual(yield* fake.calls, [])
    }))

  it.effect("gives receipts a grace after the Turn ended, then reports turn_ended", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake()
      const ended = yield* Latch.make(false)
      const { fiber } = yield* deliver(fake, { turnEnded: ended.await })
      yield* fake.emit(written())
      yield* fake.flush
      yield* ended.open
      yield* fake.flush
      yield* TestClock.adjust("999 millis")
      yield* fake.flush
      assert.isUndefined(fiber.pollUnsafe())
      yield* TestClock.adjust("1 millis")
      assert.deepStrictEqual(
        yield* Effect.flip(Fiber.join(fiber)),
        new Outcome.InputOutcomeUnknown({ run_id: RUN, input_id: ONE, reason: "turn_ended" })
      )
    }))

  it.effect("over the real session: written then accepted", () =>
    Effect.gen(function*() {
      const real = yield* makeReal([descriptor(KIND, allSupported())])
      const { fiber } = yield* deliver(real)
      yield* real.emit(written())
      yield* real.emit(accepted())
      assert.deepStrictEqual(yield* Fiber.join(fiber), accepted1)
    }).pipe(Effect.provide(RealLayer)))

  it.effect("over the real session: a lost connection leaves the input unknown", () =>
    Effect.gen(function*() {
      const real = yield* makeReal([descriptor(KIND, allSupported())])
      const { fiber } = yield* deliver(real)
      yield* real.emit(written())
      yield* real.disconnect
      assert.deepStrictEqual(
        yield* Effect.flip(Fiber.join(fiber)),
        new Outcome.InputOutcomeUnknown({ run_id: RUN, input_id: ONE, reason: "connection_lost" })
      )
    }).pipe(Effect.provide(RealLayer)))
})
