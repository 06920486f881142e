import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Option } from "effect"
import { TestClock } from "effect/testing"
import type { Admitted } from "../../../src/core/CapabilityPolicy.js"
import * as Functions from "../../../src/core/Functions.js"
import * as Outcome from "../../../src/core/Outcome.js"
import { type ErrorCodes, Ids, type Messages } from "../../../src/proto/index.js"
import { allSupported, descriptor } from "../../support/capabilities.js"
import { type CoreHarness, makeFake, makeReal, RealLayer } from "../../support/coreFakeSession.js"
import { engine, fn, KIND } from "../policy/fixtures.js"

const RUN = Ids.unsafeMake.runId("run-1")
const CALL = Ids.unsafeMake.callId("call_01")
const DELIVERY = Ids.unsafeMake.deliveryId("function:run-1:call_01")
const admitted: Admitted = { kind: KIND, capabilities: allSupported(), required: [] }
const PNG = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAAC0lEQVR4nGNgAAIAAAUAAXpeqz8AAAAASUVORK5CYII="

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

const answer = (h: CoreHarness, output: Functions.FunctionOutput = { output: "Ticket T-12 is open." }, options: Partial<Functions.FunctionsOptions> = {}) =>
  Effect.gen(function*() {
    const functions = yield* Functions.make(h.session, RUN, { admitted, engine: engine(), ...options })
    const fiber = yield* Effect.forkChild(functions.answer(CALL, output))
    const sent = yield* h.receive
    yield* h.flush
    return { functions, fiber, sent }
  })

const ids = { run_id: RUN, call_id: CALL, delivery_id: DELIVERY }

describe("Functions", () => {
  describe("content", () => {
    it("builds content from a string, an array and an error", () => {
      assert.deepStrictEqual(Functions.resultContent({ output: "ok" }), {
        success: true,
        content: [{ type: "input_text", text: "ok" }]
      })
      assert.deepStrictEqual(Functions.resultContent({ output: [{ type: "input_image", image_url: PNG }] }), {
        success: true,
        content: [{ type: "input_image", image_url: PNG }]
      })
      assert.deepStrictEqual(Functions.resultContent({ output: "partial", error: "timed out" }), {
        success: false,
        content: [{ type: "input_text", text: "partial" }, { type: "input_text", text: "timed out" }]
      })
      assert.deepStrictEqual(Functions.resultContent({}), { success: true, content: [] })
    })

    it("refuses a call to an undeclared function", () => {
      const call = { call_id: CALL, name: "delete_all", arguments: {} }
      assert.deepStrictEqual(Functions.validateCall(call, [fn("lookup_ticket")]), Option.some("undeclared_function"))
      assert.deepStrictEqual(Functions.validateCall({ ...call, name: "lookup_ticket" }, [fn("lookup_ticket")]), Option.none())
    })
  })

  it.effect("registers for the ack, then sends function_result under the Run id with function:<run id>:<call id>", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake()
      const { fiber, sent } = yield* answer(fake)
      assert.deepStrictEqual(sent, {
        type: "function_result",
        id: RUN,
        payload: { delivery_id: DELIVERY, call_id: CALL, success: true, content: [{ type: "input_text", text: "Ticket T-12 is open." }] }
      })
      assert.deepStrictEqual(yield* fake.calls, [
        { op: "expectReplies", family: "interaction_decision_ack", key: DELIVERY },
        { op: "send", type: "function_result", id: RUN }
      ])
      yield* fake.emit(ack(RUN, DELIVERY, true))
      assert.deepStrictEqual(yield* Fiber.join(fiber), ids)
    }))

  it.effect("waits 15 s for the ack: pending 1 ms before, unknown at the deadline", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake()
      const { fiber } = yield* answer(fake)
      yield* TestClock.adjust("14999 millis")
      yield* fake.flush
      assert.isUndefined(fiber.pollUnsafe())
      yield* TestClock.adjust("1 millis")
      assert.deepStrictEqual(yield* Effect.flip(Fiber.join(fiber)), new Outcome.FunctionResultUnknown({ ...ids, reason: "no_receipt" }))
    }))

  it.effect("lets an ack that arrives at the deadline instant win", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake()
      // Registered before the waiter's timer: at 15 s the ack lands first, then the deadline fires.
      yield* Effect.forkChild(Effect.andThen(Effect.sleep("15 seconds"), fake.emit(ack(RUN, DELIVERY, true))))
      const { fiber } = yield* answer(fake)
      yield* TestClock.adjust("15 seconds")
      assert.deepStrictEqual(yield* Fiber.join(fiber), ids)
    }))

  it.effect("call ids, delivery ids and input ids never interchange", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake()
      const { fiber } = yield* answer(fake)
      yield* fake.emit(ack(RUN, CALL, true)) // the call id is not the delivery id
      yield* fake.emit(ack(CALL, DELIVERY, true)) // the call id is not the envelope id
      yield* fake.emit({ type: "prompt_steer_ack", id: RUN, payload: { input_id: DELIVERY, accepted: true } })
      yield* TestClock.adjust("15 seconds")
      assert.deepStrictEqual(yield* Effect.flip(Fiber.join(fiber)), new Outcome.FunctionResultUnknown({ ...ids, reason: "no_receipt" }))
    }))

  const codes: ReadonlyArray<ErrorCodes.FunctionResultErrorCode> = [
    "invalid_result",
    "not_ready",
    "unsupported",
    "contract_violation",
    "not_pending",
    "runtime_error",
    "decision_conflict"
  ]
  for (const code of codes) {
    it.effect(`is rejected definitely on applied:false with ${code}`, () =>
      Effect.gen(function*() {
        const fake = yield* makeFake()
        const { fiber } = yield* answer(fake)
        yield* fake.emit(ack(RUN, DELIVERY, false, { error_code: code }))
        assert.deepStrictEqual(yield* Effect.flip(Fiber.join(fiber)), new Outcome.FunctionResultRejected({ ...ids, code }))
      }))
  }

  it.effect("keeps at most one function_result outstanding per Run", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake()
      const { fiber, functions } = yield* answer(fake)
      const other = Ids.unsafeMake.callId("call_02")
      assert.deepStrictEqual(
        yield* Effect.flip(functions.answer(other, { output: "x" })),
        new Outcome.FunctionResultOutstanding({ run_id: RUN, call_id: other })
      )
      yield* fake.emit(ack(RUN, DELIVERY, true))
      yield* Fiber.join(fiber)
      const next = yield* Effect.forkChild(functions.answer(other, { output: "x" }))
      const sent = yield* fake.receive
      assert.isTrue(sent.type === "function_result" && sent.payload.call_id === other)
      yield* fake.flush
      yield* fake.emit(ack(RUN, "function:run-1:call_02", true))
      assert.strictEqual((yield* Fiber.join(next)).call_id, other)
    }))

  it.effect("refuses images without function_result_images and blank image references, before sending", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake()
      const noImages = yield* Functions.make(fake.session, RUN, {
        admitted: { kind: KIND, capabilities: { ...allSupported(), function_result_images: false }, required: [] },
        engine: engine()
      })
      assert.deepStrictEqual(
        yield* Effect.flip(noImages.answer(CALL, { output: [{ type: "input_image", image_url: PNG }] })),
        new Outcome.CapabilityUnsupported({ kind: KIND, capability: "function_result_images", source: "declaration" })
      )
      assert.deepStrictEqual(
        yield* Effect.flip(noImages.answer(CALL, { output: [{ type: "input_image", image_url: " " }] })),
        new Outcome.FunctionResultInvalid({ run_id: RUN, call_id: CALL, issue: "blank_image_url" })
      )
      assert.deepStrictEqual(yield* fake.calls, [])
    }))

  it.effect("refuses an image part outside the public inline profile before sending, with a finite issue code", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake()
      const functions = yield* Functions.make(fake.session, RUN, { admitted, engine: engine() })
      const cases = [
        ["https://example.com/chart.png", "image_media_type"],
        ["data:image/jpeg;base64,abc", "image_base64"],
        ["data:image/jpeg;base64," + PNG.slice("data:image/png;base64,".length), "image_format_mismatch"]
      ] as const
      for (const [url, issue] of cases) {
        assert.deepStrictEqual(
          yield* Effect.flip(functions.answer(CALL, { output: [{ type: "input_text", text: "chart" }, { type: "input_image", image_url: url }] })),
          new Outcome.FunctionResultInvalid({ run_id: RUN, call_id: CALL, issue })
        )
      }
      assert.deepStrictEqual(yield* fake.calls, [])
    }))

  it.effect("sends a failed result with the error text and an explicit delivery id", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake()
      const functions = yield* Functions.make(fake.session, RUN, { admitted, engine: engine() })
      const explicit = Ids.unsafeMake.deliveryId("function:core-call-9")
      const fiber = yield* Effect.forkChild(functions.answer(CALL, { error: "not found" }, { deliveryId: explicit }))
      assert.deepStrictEqual(yield* fake.receive, {
        type: "function_result",
        id: RUN,
        payload: { delivery_id: explicit, call_id: CALL, success: false, content: [{ type: "input_text", text: "not found" }] }
      })
      yield* fake.flush
      yield* fake.emit(ack(RUN, explicit, true))
      assert.strictEqual((yield* Fiber.join(fiber)).delivery_id, explicit)
    }))

  it.effect("leaves the outcome unknown when the connection drops mid-receipt", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake()
      const { fiber } = yield* answer(fake)
      yield* fake.disconnect
      assert.deepStrictEqual(yield* Effect.flip(Fiber.join(fiber)), new Outcome.FunctionResultUnknown({ ...ids, reason: "connection_lost" }))
    }))

  it.effect("over the real session", () =>
    Effect.gen(function*() {
      const real = yield* makeReal([descriptor(KIND, allSupported())])
      const { fiber } = yield* answer(real)
      yield* real.emit(ack(RUN, DELIVERY, true))
      assert.deepStrictEqual(yield* Fiber.join(fiber), ids)
    }).pipe(Effect.provide(RealLayer)))
})

describe("Functions.defaultDeliveryId", () => {
  it("differs for the same native call id in two Runs, and stays within the 128-byte id bound", () => {
    const a = Functions.defaultDeliveryId(Ids.unsafeMake.runId("run-a"), CALL)
    const b = Functions.defaultDeliveryId(Ids.unsafeMake.runId("run-b"), CALL)
    assert.notStrictEqual(a, b)
    const long = Functions.defaultDeliveryId(Ids.unsafeMake.runId("r".repeat(128)), Ids.unsafeMake.callId("c".repeat(128)))
    assert.isTrue(long.startsWith("function:") && long.length <= 128)
  })
})
