/**
 * The Transport built over a controlled FrameSocket: here a test decides exactly when a local write completes,
 * when Core closes and when a pong arrives. Real-socket behaviour is in WebSocketDial.test.ts.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Metric, Scope, Stream } from "effect"
import { PrometheusMetrics } from "effect/observability"
import { TestClock } from "effect/testing"
import { deltaEncoder, EncodedDelta } from "../../../src/proto/EncodedFrame.js"
import { InvalidFrame } from "../../../src/proto/Envelope.js"
import { Ids, Messages } from "../../../src/proto/index.js"
import { TransportClosed } from "../../../src/runtime/transport/Transport.js"
import { fromSocket } from "../../../src/runtime/transport/WebSocketTransport.js"
import { delta, makeSocket, noLiveness, reader, runId } from "../../support/fakeFrameSocket.js"
import { parsePrometheusText, sumOf } from "../../support/prometheusText.js"

describe("WebSocketTransport.fromSocket", () => {
  it.effect("send resolves only after the socket reports the write completed locally", () =>
    Effect.gen(function* () {
      const fake = makeSocket()
      const transport = yield* fromSocket(fake.socket, noLiveness)
      const fiber = yield* Effect.forkChild(transport.send(delta("hello")))
      yield* Effect.yieldNow
      assert.strictEqual(fake.writes.length, 1)
      assert.isUndefined(fiber.pollUnsafe())
      fake.writes[0]!.written()
      assert.deepStrictEqual(yield* Fiber.await(fiber), Exit.void)
      assert.deepStrictEqual(JSON.parse(fake.writes[0]!.text), { type: "delta", id: "run-1", payload: { delta: "hello", sequence: 1 } })
    }))

  it.effect("writes frames in the order send was called, without waiting for earlier callbacks", () =>
    Effect.gen(function* () {
      const fake = makeSocket()
      const transport = yield* fromSocket(fake.socket, noLiveness)
      const fibers = yield* Effect.forEach([1, 2, 3], (n) => Effect.forkChild(transport.send(delta(`d${n}`, n))))
      yield* Effect.yieldNow
      assert.deepStrictEqual(fake.writes.map((w) => JSON.parse(w.text).payload.sequence), [1, 2, 3])
      for (const w of fake.writes) w.written()
      for (const f of fibers) assert.deepStrictEqual(yield* Fiber.await(f), Exit.void)
    }))

  it.effect("sendAll hands the whole batch to the socket at once and resolves only when its last write completed", () =>
    Effect.gen(function* () {
      const fake = makeSocket()
      const transport = yield* fromSocket(fake.socket, noLiveness)
      const fiber = yield* Effect.forkChild(transport.sendAll([delta("a", 1), delta("b", 2), delta("c", 3)]))
      yield* Effect.yieldNow
      assert.strictEqual(fake.batches.length, 1)
      assert.deepStrictEqual(fake.batches[0]!.texts.map((t) => JSON.parse(t).payload.sequence), [1, 2, 3])
      assert.isUndefined(fiber.pollUnsafe())
      // A later single send is written after the whole batch.
      const after = yield* Effect.forkChild(transport.send(delta("d", 4)))
      yield* Effect.yieldNow
      assert.deepStrictEqual(fake.order.map((t) => JSON.parse(t).payload.sequence), [1, 2, 3, 4])
      fake.batches[0]!.written()
      assert.deepStrictEqual(yield* Fiber.await(fiber), Exit.void)
      fake.writes[0]!.written()
      assert.deepStrictEqual(yield* Fiber.await(after), Exit.void)
    }))

  it.effect("sendAll hands a batch of deltas only to the socket as it is, and copies a mixed batch in order", () =>
    Effect.gen(function* () {
      const fake = makeSocket()
      const transport = yield* fromSocket(fake.socket, noLiveness)
      const encode = deltaEncoder(runId, undefined)!
      const deltas = [encode("a", 1, undefined), encode("b", 2, undefined)] as Array<EncodedDelta>
      yield* Effect.forkChild(transport.sendAll(deltas))
      yield* Effect.yieldNow
      // The same array, no copy (issue 18, relay): the socket reads it before `sendAll` returns.
      assert.strictEqual(fake.handed[0], deltas)
      const mixed = [deltas[0]!, delta("m", 3), deltas[1]!]
      yield* Effect.forkChild(transport.sendAll(mixed))
      yield* Effect.yieldNow
      assert.notStrictEqual<unknown>(fake.handed[1], mixed)
      assert.strictEqual(fake.handed[1]![0], deltas[0])
      assert.strictEqual(fake.handed[1]![2], deltas[1])
      assert.deepStrictEqual(fake.batches[1]!.texts.map((t) => JSON.parse(t).payload.delta), ["a", "m", "b"])
    }))

  it.effect("sendAll writes nothing when one frame of the batch is refused", () =>
    Effect.gen(function* () {
      const fake = makeSocket()
      const transport = yield* fromSocket(fake.socket, noLiveness)
      const refused = yield* Effect.flip(
        transport.sendAll([delta("a", 1), { type: "delta", id: runId, payload: { delta: "x", sequence: -1 } }, delta("c", 3)])
      )
      assert.deepStrictEqual(refused, new Messages.OutgoingFrameRejected({ type: "delta", reason: "invalid_message" }))
      const big = yield* Effect.flip(transport.sendAll([delta("a", 1), delta("x".repeat(4 * 1024 * 1024), 2)]))
      assert.deepStrictEqual(
        big,
        new Messages.OutgoingFrameRejected({ type: "delta", reason: "frame_too_large", bytes: 4 * 1024 * 1024 + 54 })
      )
      assert.deepStrictEqual(fake.order, [])
    }))

  it.effect("one 10 s write deadline covers a batch: pending at 9999 ms, write_failed at 10 s", () =>
    Effect.gen(function* () {
      const fake = makeSocket()
      const transport = yield* fromSocket(fake.socket, noLiveness)
      const fiber = yield* Effect.forkChild(transport.sendAll([delta("a", 1), delta("b", 2)]))
      yield* Effect.yieldNow
      yield* TestClock.adjust("9999 millis")
      assert.isUndefined(fiber.pollUnsafe())
      assert.deepStrictEqual(fake.calls, [])
      yield* TestClock.adjust("1 millis")
      assert.deepStrictEqual(yield* Effect.flip(Fiber.join(fiber)), new TransportClosed({ reason: "write_failed" }))
      assert.deepStrictEqual(fake.calls, ["terminate"])
    }))

  it.effect("a batch whose write the socket reports as failed fails sendAll and ends the transport", () =>
    Effect.gen(function* () {
      const fake = makeSocket()
      const transport = yield* fromSocket(fake.socket, noLiveness)
      const fiber = yield* Effect.forkChild(transport.sendAll([delta("a", 1), delta("b", 2)]))
      yield* Effect.yieldNow
      fake.batches[0]!.written(new Error("EPIPE"))
      assert.deepStrictEqual(yield* Effect.flip(Fiber.join(fiber)), new TransportClosed({ reason: "write_failed" }))
      assert.deepStrictEqual(fake.calls, ["terminate"])
    }))

  it.effect("a write that does not complete within 10 s fails as write_failed and destroys the socket", () =>
    Effect.gen(function* () {
      const fake = makeSocket()
      const transport = yield* fromSocket(fake.socket, noLiveness)
      const next = yield* reader(transport.inbound)
      const fiber = yield* Effect.forkChild(transport.send(delta("stuck")))
      yield* Effect.yieldNow
      yield* TestClock.adjust("9999 millis")
      assert.isUndefined(fiber.pollUnsafe())
      assert.deepStrictEqual(fake.calls, [])
      yield* TestClock.adjust("1 millis")
      assert.deepStrictEqual(yield* Effect.flip(Fiber.join(fiber)), new TransportClosed({ reason: "write_failed" }))
      assert.deepStrictEqual(fake.calls, ["terminate"])
      assert.deepStrictEqual(yield* Effect.flip(next), new TransportClosed({ reason: "write_failed" }))
      // A send after the end is refused before anything is handed over: definite, marked `unsent`.
      assert.deepStrictEqual(
        yield* Effect.flip(transport.send(delta("after"))),
        new TransportClosed({ reason: "write_failed", unsent: true })
      )
      assert.strictEqual(fake.writes.length, 1)
    }))

  it.effect("each write keeps its own 10 s deadline (one watchdog per connection, no timer per write)", () =>
    Effect.gen(function* () {
      const fake = makeSocket()
      const transport = yield* fromSocket(fake.socket, noLiveness)
      const first = yield* Effect.forkChild(transport.send(delta("a", 1)))
      yield* Effect.yieldNow
      yield* TestClock.adjust("5 seconds")
      const second = yield* Effect.forkChild(transport.sendAll([delta("b", 2), delta("c", 3)]))
      yield* Effect.yieldNow
      yield* TestClock.adjust("1 second")
      fake.writes[0]!.written()
      assert.deepStrictEqual(yield* Fiber.await(first), Exit.void)
      // The first write's deadline (10 s) passes: the second, still pending, is not failed by it.
      yield* TestClock.adjust("8999 millis")
      assert.isUndefined(second.pollUnsafe())
      assert.deepStrictEqual(fake.calls, [])
      yield* TestClock.adjust("1 millis")
      assert.deepStrictEqual(yield* Effect.flip(Fiber.join(second)), new TransportClosed({ reason: "write_failed" }))
      assert.deepStrictEqual(fake.calls, ["terminate"])
    }))

  it.effect("an interrupted send stops waiting and its deadline no longer applies", () =>
    Effect.gen(function* () {
      const fake = makeSocket()
      const transport = yield* fromSocket(fake.socket, noLiveness)
      const waiting = yield* Effect.forkChild(transport.send(delta("a", 1)))
      yield* Effect.yieldNow
      yield* Fiber.interrupt(waiting)
      yield* TestClock.adjust("30 seconds")
      assert.deepStrictEqual(fake.calls, [])
      const later = yield* Effect.forkChild(transport.send(delta("b", 2)))
      yield* Effect.yieldNow
      fake.writes[0]!.written()
      fake.writes[1]!.written()
      assert.deepStrictEqual(yield* Fiber.await(later), Exit.void)
    }))

  it.effect("closing the transport's scope ends a wait whose write never completed (no hang)", () =>
    Effect.gen(function* () {
      const fake = makeSocket()
      const scope = yield* Scope.make()
      const transport = yield* fromSocket(fake.socket, noLiveness).pipe(Scope.provide(scope))
      const waiting = yield* Effect.forkChild(transport.send(delta("a", 1)))
      yield* Effect.yieldNow
      yield* Scope.close(scope, Exit.void)
      assert.deepStrictEqual(yield* Effect.flip(Fiber.join(waiting)), new TransportClosed({ reason: "write_failed" }))
    }))

  it.effect("a write the socket reports as failed fails the send and ends the transport", () =>
    Effect.gen(function* () {
      const fake = makeSocket()
      const transport = yield* fromSocket(fake.socket, noLiveness)
      const fiber = yield* Effect.forkChild(transport.send(delta("x")))
      yield* Effect.yieldNow
      fake.writes[0]!.written(new Error("EPIPE"))
      assert.deepStrictEqual(yield* Effect.flip(Fiber.join(fiber)), new TransportClosed({ reason: "write_failed" }))
      assert.deepStrictEqual(fake.calls, ["terminate"])
    }))

  it.effect("post hands the frame over at once, in order with send, and does not wait for its write", () =>
    Effect.gen(function* () {
      const fake = makeSocket()
      const transport = yield* fromSocket(fake.socket, noLiveness)
      let unconfirmed = 0
      const first = yield* Effect.forkChild(transport.send(delta("a", 1)))
      yield* Effect.yieldNow
      // Returns although neither its own write nor the earlier one completed.
      yield* transport.post(delta("b", 2), () => unconfirmed++)
      const third = yield* Effect.forkChild(transport.send(delta("c", 3)))
      yield* Effect.yieldNow
      assert.deepStrictEqual(fake.writes.map((w) => JSON.parse(w.text).payload.delta), ["a", "b", "c"])
      for (const w of fake.writes) w.written()
      assert.deepStrictEqual(yield* Fiber.await(first), Exit.void)
      assert.deepStrictEqual(yield* Fiber.await(third), Exit.void)
      // A write that completed never reports unconfirmed, and the 10 s deadline no longer applies to it.
      yield* TestClock.adjust("20 seconds")
      assert.strictEqual(unconfirmed, 0)
      assert.deepStrictEqual(fake.calls, [])
    }))

  it.effect("a posted frame whose write fails or misses the 10 s deadline reports unconfirmed once and ends the transport", () =>
    Effect.gen(function* () {
      const failed = makeSocket()
      const t1 = yield* fromSocket(failed.socket, noLiveness)
      const next = yield* reader(t1.inbound)
      let unconfirmed = 0
      yield* t1.post(delta("x"), () => unconfirmed++)
      failed.writes[0]!.written(new Error("EPIPE"))
      assert.strictEqual(unconfirmed, 1)
      assert.deepStrictEqual(failed.calls, ["terminate"])
      assert.deepStrictEqual(yield* Effect.flip(next), new TransportClosed({ reason: "write_failed" }))
      // After the end nothing is handed over (definite); unconfirmed is not called for it.
      assert.deepStrictEqual(
        yield* Effect.flip(t1.post(delta("y"), () => unconfirmed++)),
        new TransportClosed({ reason: "write_failed", unsent: true })
      )
      assert.strictEqual(unconfirmed, 1)

      const stuck = makeSocket()
      const t2 = yield* fromSocket(stuck.socket, noLiveness)
      let late = 0
      yield* t2.post(delta("z"), () => late++)
      yield* TestClock.adjust("9999 millis")
      assert.strictEqual(late, 0)
      assert.deepStrictEqual(stuck.calls, [])
      yield* TestClock.adjust("1 millis")
      assert.strictEqual(late, 1)
      assert.deepStrictEqual(stuck.calls, ["terminate"])
      stuck.writes[0]!.written()
      assert.strictEqual(late, 1)
    }))

  it.effect("post refuses an invalid message before handing anything over", () =>
    Effect.gen(function* () {
      const fake = makeSocket()
      const transport = yield* fromSocket(fake.socket, noLiveness)
      const invalid = yield* Effect.flip(transport.post({ type: "delta", id: runId, payload: { delta: "x", sequence: -1 } }, () => {}))
      assert.deepStrictEqual(invalid, new Messages.OutgoingFrameRejected({ type: "delta", reason: "invalid_message" }))
      assert.strictEqual(fake.writes.length, 0)
    }))

  it.effect("refuses a frame over 4 MiB, and an invalid message, before writing anything", () =>
    Effect.gen(function* () {
      const fake = makeSocket()
      const transport = yield* fromSocket(fake.socket, noLiveness)
      const big = yield* Effect.flip(transport.send(delta("x".repeat(4 * 1024 * 1024))))
      assert.strictEqual(big._tag, "OutgoingFrameRejected")
      assert.deepStrictEqual(
        big,
        new Messages.OutgoingFrameRejected({ type: "delta", reason: "frame_too_large", bytes: 4 * 1024 * 1024 + 54 })
      )
      const invalid = yield* Effect.flip(transport.send({ type: "delta", id: runId, payload: { delta: "x", sequence: -1 } }))
      assert.deepStrictEqual(invalid, new Messages.OutgoingFrameRejected({ type: "delta", reason: "invalid_message" }))
      assert.strictEqual(fake.writes.length, 0)
    }))

  it.effect("decodes text frames; an invalid or binary frame arrives as Invalid without its text", () =>
    Effect.gen(function* () {
      const fake = makeSocket()
      const transport = yield* fromSocket(fake.socket, noLiveness)
      const next = yield* reader(transport.inbound)
      const cancel = JSON.stringify({ type: "prompt_cancel", id: "run-9", payload: {} })
      const garbage = "{\"type\": SECRET-PAYLOAD-TEXT"
      const unknownMember = JSON.stringify({ type: "prompt_cancel", id: "run-9", payload: { nope: "SECRET-PAYLOAD-TEXT" } })
      fake.frame(cancel)
      fake.frame(garbage)
      fake.frame(unknownMember)
      fake.binary(new TextEncoder().encode(cancel))
      assert.deepStrictEqual(yield* next, {
        _tag: "Message",
        message: { type: "prompt_cancel", id: Ids.unsafeMake.runId("run-9"), payload: {} },
        bytes: cancel.length
      })
      const notJson = yield* next
      assert.deepStrictEqual(notJson, { _tag: "Invalid", error: new InvalidFrame({ code: "not_json", bytes: garbage.length }) })
      const badPayload = yield* next
      assert.deepStrictEqual(badPayload, {
        _tag: "Invalid",
        error: new InvalidFrame({ code: "invalid_payload", type: "prompt_cancel", id: "run-9", bytes: unknownMember.length })
      })
      assert.notInclude(JSON.stringify(badPayload), "SECRET")
      assert.notInclude(String(badPayload._tag === "Invalid" ? badPayload.error.message : ""), "SECRET")
      assert.deepStrictEqual(yield* next, {
        _tag: "Invalid",
        error: new InvalidFrame({ code: "not_json", bytes: cancel.length })
      })
    }))

  it.effect("counts frames and bytes each way, and each inbound decode failure by its reason (issue #22 metrics)", () =>
    Effect.gen(function* () {
      const fake = makeSocket()
      const transport = yield* fromSocket(fake.socket, noLiveness)
      const next = yield* reader(transport.inbound)
      const scrape = Effect.map(PrometheusMetrics.format(), parsePrometheusText)
      assert.strictEqual(sumOf(yield* scrape, "agentwire_daemon_decode_failures_total"), 0)
      const cancel = JSON.stringify({ type: "prompt_cancel", id: "run-9", payload: {} })
      const frames = [cancel, "{\"type\": nope", JSON.stringify({ type: "prompt_cancel", id: "run-9", payload: { nope: 1 } }), JSON.stringify({ type: "no_such_type" })]
      for (const frame of frames) fake.frame(frame)
      fake.binary(new TextEncoder().encode(cancel))
      for (let i = 0; i < 5; i++) yield* next
      const sent = yield* Effect.forkChild(transport.send(delta("hello")))
      yield* Effect.yieldNow
      fake.writes[0]!.written()
      yield* Fiber.join(sent)
      const after = yield* scrape
      const failures = (labels: Record<string, string>) => sumOf(after, "agentwire_daemon_decode_failures_total", labels)
      assert.strictEqual(failures({ reason: "not_json" }), 2) // the garbage text and the binary frame
      assert.strictEqual(failures({ reason: "invalid_payload" }), 1)
      assert.strictEqual(failures({ reason: "unknown_type" }), 1)
      assert.strictEqual(failures({}), 4)
      assert.strictEqual(sumOf(after, "agentwire_daemon_frames_total", { direction: "in" }), 5)
      const inBytes = frames.reduce((n, f) => n + f.length, 0) + cancel.length
      assert.strictEqual(sumOf(after, "agentwire_daemon_frame_bytes_total", { direction: "in" }), inBytes)
      assert.strictEqual(sumOf(after, "agentwire_daemon_frames_total", { direction: "out" }), 1)
      assert.strictEqual(sumOf(after, "agentwire_daemon_frame_bytes_total", { direction: "out" }), fake.writes[0]!.text.length)
    }).pipe(Effect.provideService(Metric.MetricRegistry, new Map())))

  it.effect("pauses the socket when the inbound buffer is full and resumes once it is drained", () =>
    Effect.gen(function* () {
      const fake = makeSocket()
      const transport = yield* fromSocket(fake.socket, { ...noLiveness, inboundHighWaterFrames: 2 })
      const pull = yield* Stream.toPull(transport.inbound)
      const cancel = JSON.stringify({ type: "prompt_cancel", id: "run-9", payload: {} })
      fake.frame(cancel)
      assert.deepStrictEqual(fake.calls, [])
      fake.frame(cancel)
      assert.deepStrictEqual(fake.calls, ["pause"])
      fake.frame(cancel) // already in flight when the socket paused: still buffered, never dropped
      const chunk = yield* pull
      assert.strictEqual(chunk.length, 3)
      assert.deepStrictEqual(fake.calls, ["pause", "resume"])
    }))

  it.effect("Core's close code ends inbound after the buffered frames; later sends fail the same way", () =>
    Effect.gen(function* () {
      const fake = makeSocket()
      const transport = yield* fromSocket(fake.socket, noLiveness)
      const next = yield* reader(transport.inbound)
      fake.frame(JSON.stringify({ type: "prompt_cancel", id: "run-9", payload: {} }))
      fake.end(4001)
      assert.strictEqual((yield* next)._tag, "Message")
      const closed = new TransportClosed({ reason: "closed_by_peer", code: 4001 })
      assert.deepStrictEqual(yield* Effect.flip(next), closed)
      assert.deepStrictEqual(yield* Effect.flip(transport.send(delta("late"))), closed)
      assert.strictEqual(fake.writes.length, 0)
    }))

  it.effect("Core's close code wins over a write that failed because the close frame arrived first", () =>
    Effect.gen(function* () {
      const fake = makeSocket()
      const transport = yield* fromSocket(fake.socket, noLiveness)
      fake.closeFrame(4001)
      assert.deepStrictEqual(
        yield* Effect.flip(transport.send(delta("heartbeat-ish"))),
        new TransportClosed({ reason: "write_failed" })
      )
      assert.deepStrictEqual(
        yield* Effect.flip(Stream.runDrain(transport.inbound)),
        new TransportClosed({ reason: "closed_by_peer", code: 4001 })
      )
    }))

  it.effect("a connection that fails (no close frame) ends as read_failed", () =>
    Effect.gen(function* () {
      const fake = makeSocket()
      const transport = yield* fromSocket(fake.socket, noLiveness)
      fake.end(undefined, true)
      assert.deepStrictEqual(
        yield* Effect.flip(Stream.runDrain(transport.inbound)),
        new TransportClosed({ reason: "read_failed" })
      )
    }))

  it.effect("close sends the given code once; inbound then ends as closed_locally", () =>
    Effect.gen(function* () {
      const fake = makeSocket({ answersClose: false })
      const transport = yield* fromSocket(fake.socket, noLiveness)
      yield* transport.close(4000, "going away")
      yield* transport.close(4000, "again")
      assert.deepStrictEqual(fake.calls, ["close 4000 going away"])
      assert.deepStrictEqual(
        yield* Effect.flip(Stream.runDrain(transport.inbound)),
        new TransportClosed({ reason: "closed_locally" })
      )
      fake.end(4000)
    }))

  it.effect("closing the connection scope sends the courtesy close 1000 \"client closing\"", () =>
    Effect.gen(function* () {
      const fake = makeSocket()
      const scope = yield* Scope.make()
      yield* fromSocket(fake.socket, noLiveness).pipe(Scope.provide(scope))
      yield* Scope.close(scope, Exit.void)
      assert.deepStrictEqual(fake.calls, ["close 1000 client closing"])
    }))

  it.effect("destroys the socket when Core does not answer the courtesy close within 1 s", () =>
    Effect.gen(function* () {
      const fake = makeSocket({ answersClose: false })
      const scope = yield* Scope.make()
      yield* fromSocket(fake.socket, noLiveness).pipe(Scope.provide(scope))
      const closing = yield* Effect.forkChild(Scope.close(scope, Exit.void))
      yield* Effect.yieldNow
      yield* TestClock.adjust("999 millis")
      assert.isUndefined(closing.pollUnsafe())
      assert.deepStrictEqual(fake.calls, ["close 1000 client closing"])
      yield* TestClock.adjust("1 millis")
      yield* Fiber.join(closing)
      assert.deepStrictEqual(fake.calls, ["close 1000 client closing", "terminate"])
    }))

  it.effect("pings every 15 s and ends as liveness after 45 s without a pong or frame", () =>
    Effect.gen(function* () {
      const fake = makeSocket()
      const transport = yield* fromSocket(fake.socket)
      yield* TestClock.adjust("15 seconds")
      assert.deepStrictEqual(fake.calls, ["ping"])
      fake.pong()
      yield* TestClock.adjust("15 seconds")
      yield* TestClock.adjust("15 seconds")
      assert.deepStrictEqual(fake.calls, ["ping", "ping", "ping"])
      yield* TestClock.adjust("29999 millis")
      assert.deepStrictEqual(fake.calls, ["ping", "ping", "ping", "ping"])
      yield* TestClock.adjust("1 millis")
      assert.deepStrictEqual(fake.calls, ["ping", "ping", "ping", "ping", "terminate"])
      assert.deepStrictEqual(
        yield* Effect.flip(Stream.runDrain(transport.inbound)),
        new TransportClosed({ reason: "liveness" })
      )
    }))
})
