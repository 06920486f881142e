/**
 * Core's suspension driver against the gateway's real DeviceSession over an in-memory socket (scripted
 * Runtime frames, TestClock): the exact frames, waiter before send, at most 2 outstanding per connection, the
 * reply read even when the close follows at once, the identity check, the 15 s budget before and at its
 * boundary, and no replay on a new connection.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Option } from "effect"
import { TestClock } from "effect/testing"
import * as SuspensionDriver from "../../src/core/SuspensionDriver.js"
import { Ids, type Messages } from "../../src/proto/index.js"
import { type CoreHarness, makeReal, RealLayer } from "../support/coreFakeSession.js"

const ENV = "5c2f7b7e-1a0b-4e7e-9d55-6b1f0a2c3d4e"
const op = (n: number) => Ids.unsafeMake.operationId(`5a1b0000-1234-4abc-9def-${String(n).padStart(12, "0")}`)
const req = (n: number, operation: SuspensionDriver.SuspensionOperation, extra: Partial<SuspensionDriver.SuspensionRequest> = {}) => ({
  operation,
  requestId: op(n),
  environmentId: ENV,
  suspendId: "susp-0007",
  ...extra
})
const quiesced = (n: number, payload: Messages.MessageOfType<"environment_quiesced">["payload"]): Messages.RuntimeToCore => ({
  type: "environment_quiesced",
  id: op(n),
  payload
})
const resumed = (n: number, payload: Messages.MessageOfType<"environment_resumed">["payload"]): Messages.RuntimeToCore => ({
  type: "environment_resumed",
  id: op(n),
  payload
})
const accepted = { environment_id: ENV, suspend_id: "susp-0007", accepted: true }

const errorOf = <A, E>(exit: Exit.Exit<A, E>): unknown =>
  Exit.isSuccess(exit) ? "success" : Option.getOrUndefined(Exit.findErrorOption(exit))

const started = <A, E>(h: CoreHarness, effect: Effect.Effect<A, E>) =>
  Effect.gen(function*() {
    const fiber = yield* Effect.forkChild(effect)
    const sent = yield* h.receive
    const { trace: _trace, ...rest } = sent as Messages.CoreToRuntime & { trace?: string }
    return { fiber, sent: rest }
  })

describe("SuspensionDriver", () => {
  it.effect("quiesce: registers before sending the exact frame; the reply is read although the close follows at once", () =>
    Effect.gen(function*() {
      const h = yield* makeReal()
      const { fiber, sent } = yield* started(h, SuspensionDriver.request(h.session, req(1, "quiesce")))
      assert.deepStrictEqual(sent, {
        type: "environment_quiesce",
        id: op(1),
        payload: { environment_id: ENV, suspend_id: Ids.unsafeMake.suspensionId("susp-0007") }
      })
      assert.deepStrictEqual((yield* h.calls).slice(0, 2), [
        { op: "expectReplies", family: "environment_quiesced", key: op(1) },
        { op: "send", type: "environment_quiesce", id: op(1) }
      ])
      yield* h.emitThenClose([quiesced(1, accepted)], 1000)
      assert.strictEqual(errorOf(yield* Fiber.await(fiber)), "success")
    }).pipe(Effect.provide(RealLayer)))

  it.effect("resume: rollback is sent; a definite refusal is SuspensionRejected with its code", () =>
    Effect.gen(function*() {
      const h = yield* makeReal()
      const { fiber, sent } = yield* started(h, SuspensionDriver.request(h.session, req(2, "resume", { rollback: true })))
      assert.deepStrictEqual(sent, {
        type: "environment_resume",
        id: op(2),
        payload: { environment_id: ENV, suspend_id: Ids.unsafeMake.suspensionId("susp-0007"), rollback: true }
      })
      yield* h.emit(resumed(2, { environment_id: ENV, suspend_id: "susp-0007", accepted: false, error_code: "not_suspended" }))
      assert.deepStrictEqual(errorOf(yield* Fiber.await(fiber)), new SuspensionDriver.SuspensionRejected({ code: "not_suspended" }))
    }).pipe(Effect.provide(RealLayer)))

  it.effect("a reply with another suspend id or Environment is unknown (invalid_reply), never a refusal", () =>
    Effect.gen(function*() {
      const h = yield* makeReal()
      const a = yield* started(h, SuspensionDriver.request(h.session, req(3, "quiesce")))
      yield* h.emit(quiesced(3, { ...accepted, suspend_id: "susp-other" }))
      assert.deepStrictEqual(errorOf(yield* Fiber.await(a.fiber)), new SuspensionDriver.SuspensionUnknown({ reason: "invalid_reply" }))
      const b = yield* started(h, SuspensionDriver.request(h.session, req(4, "resume")))
      yield* h.emit(resumed(4, { environment_id: "other", suspend_id: "susp-0007", accepted: false, error_code: "invalid_request" }))
      assert.deepStrictEqual(errorOf(yield* Fiber.await(b.fiber)), new SuspensionDriver.SuspensionUnknown({ reason: "invalid_reply" }))
    }).pipe(Effect.provide(RealLayer)))

  it.effect("at most 2 outstanding per connection: a third is refused before sending; a slot frees with its reply", () =>
    Effect.gen(function*() {
      const h = yield* makeReal()
      const a = yield* started(h, SuspensionDriver.request(h.session, req(5, "quiesce")))
      const b = yield* started(h, SuspensionDriver.request(h.session, req(6, "resume")))
      const third = yield* Effect.exit(SuspensionDriver.request(h.session, req(7, "resume")))
      assert.deepStrictEqual(errorOf(third), new SuspensionDriver.SuspensionRefused({ reason: "capacity" }))
      assert.isTrue(Option.isNone(yield* h.poll), "nothing was sent for the third")
      yield* h.emit(quiesced(5, { ...accepted, accepted: false, error_code: "resource_busy" }))
      assert.deepStrictEqual(errorOf(yield* Fiber.await(a.fiber)), new SuspensionDriver.SuspensionRejected({ code: "resource_busy" }))
      const c = yield* started(h, SuspensionDriver.request(h.session, req(8, "resume")))
      assert.strictEqual((c.sent as { readonly id?: string }).id, op(8))
      yield* h.emit(resumed(6, accepted))
      yield* h.emit(resumed(8, accepted))
      assert.strictEqual(errorOf(yield* Fiber.await(b.fiber)), "success")
      assert.strictEqual(errorOf(yield* Fiber.await(c.fiber)), "success")
    }).pipe(Effect.provide(RealLayer)))

  it.effect("invalid requests are refused before sending: rollback on quiesce, a blank or oversized suspend id", () =>
    Effect.gen(function*() {
      const h = yield* makeReal()
      for (const bad of [req(9, "quiesce", { rollback: true }), req(10, "resume", { suspendId: "" }), req(11, "quiesce", { suspendId: "x".repeat(129) })]) {
        const exit = yield* Effect.exit(SuspensionDriver.request(h.session, bad))
        assert.deepStrictEqual(errorOf(exit), new SuspensionDriver.SuspensionRefused({ reason: "invalid_request" }))
      }
      assert.isTrue(Option.isNone(yield* h.poll))
    }).pipe(Effect.provide(RealLayer)))

  it.effect("no reply: unknown at 15 s, not 1 ms before; a loss while waiting is unknown (connection_lost); nothing replayed", () =>
    Effect.gen(function*() {
      const h = yield* makeReal()
      const a = yield* started(h, SuspensionDriver.request(h.session, req(12, "quiesce")))
      yield* TestClock.adjust(14_999)
      yield* h.flush
      assert.isUndefined(a.fiber.pollUnsafe())
      yield* TestClock.adjust(1)
      yield* h.flush
      assert.deepStrictEqual(errorOf(yield* Fiber.await(a.fiber)), new SuspensionDriver.SuspensionUnknown({ reason: "budget_exceeded" }))

      const b = yield* started(h, SuspensionDriver.request(h.session, req(13, "quiesce")))
      yield* h.disconnect
      assert.deepStrictEqual(errorOf(yield* Fiber.await(b.fiber)), new SuspensionDriver.SuspensionUnknown({ reason: "connection_lost" }))
      assert.isTrue(Option.isNone(yield* h.poll), "nothing was sent again")
    }).pipe(Effect.provide(RealLayer)))
})
