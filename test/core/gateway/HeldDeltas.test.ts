/**
 * Deltas that arrive while the read side holds (a full Run subscriber, issue 18): a transport that offers a text
 * frame's bytes (`InboundHandlers.onTextBytes`, as the `ws` transport does) has a Run's delta of the connection's
 * layout taken from its bytes even during a hold, and it is routed in order with the frames held as text, once the
 * consumer makes room. Anything else held (a `done`, a delta of another Run) still arrives as text. A hold that
 * only gives a backlogged consumer a turn (a yield) is one task on the connection's scheduler, not a fiber.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Layer, Option, Result, Scheduler } from "effect"
import { Gateway } from "../../../src/core/Gateway.js"
import type { DeviceTransport, InboundHandlers } from "../../../src/core/transport/DeviceTransport.js"
import { Messages } from "../../../src/proto/index.js"
import { yieldTimes } from "../../support/coreFakeSession.js"
import { device, deviceId, frames, runId } from "../../support/coreScriptedRuntime.js"
import { collect, gatewayLayer } from "./helpers.js"

const encode = (message: Messages.RuntimeToCore): string => {
  const encoded = Messages.encodeMessage(message)
  if (Result.isFailure(encoded)) throw new Error(`invalid message ${message.type}`)
  return encoded.success
}

/** A transport that hands over frames as the `ws` one does: bytes first, text only when they were not taken. */
const bytesFirstTransport = () => {
  let handlers: InboundHandlers | undefined
  const log = { takenAsBytes: 0, handedAsText: [] as Array<string>, pauses: 0, resumes: 0 }
  const transport: DeviceTransport = {
    listen: (h) => void (handlers = h),
    pause: () => void log.pauses++,
    resume: () => void log.resumes++,
    offer: () => "queued",
    close: () => Effect.sync(() => handlers?.onEnd({ reason: "closed_locally" } as never))
  }
  /** One socket read: every frame handed over synchronously, in order. */
  const read = (messages: ReadonlyArray<Messages.RuntimeToCore>) => {
    for (const message of messages) {
      const text = encode(message)
      const bytes = Buffer.from(text, "utf8")
      if (handlers!.onTextBytes?.(bytes) === true) log.takenAsBytes++
      else {
        log.handedAsText.push(message.type)
        handlers!.onFrame(text, bytes.length)
      }
    }
  }
  return { transport, read, log }
}

/** A connection of device dev-1 over `bytesFirstTransport`, with a durable subscriber of run-1. */
const openWithRun = Effect.gen(function*() {
  const gateway = yield* Gateway
  const { log, read, transport } = bytesFirstTransport()
  yield* gateway.open(device("dev-1"), transport)
  const session = Option.getOrThrow(yield* gateway.session(deviceId("dev-1")))
  const slow = yield* session.subscribeDurable(runId("run-1"))
  return { log, read, session, slow }
})

describe("deltas held while a Run subscriber is full", () => {
  it.effect("are taken from their bytes and routed in order with the text frames held beside them", () =>
    Effect.gen(function*() {
      const { log, read, session, slow } = yield* openWithRun
      const other = yield* session.subscribeDurable(runId("run-2"))
      // d1 sets the connection's delta layout (generic decode) and half fills the buffer of 2: the read side holds
      // (it gives the consumer a turn), so everything after d1 in this read arrives while it holds.
      read([
        frames.delta("run-1", "d1", 1),
        frames.delta("run-1", "d2", 2),
        frames.delta("run-1", "d3", 3),
        frames.delta("run-1", "d4", 4),
        frames.delta("run-2", "x1", 1),
        frames.delta("run-1", "d5", 5),
        frames.done("run-2"),
        frames.delta("run-1", "d6", 6),
        frames.done("run-1")
      ])
      assert.strictEqual(log.pauses, 1)
      // Without holding, d2 … d6 are read from their bytes; run-2's delta, the done frames and d1 arrive as text.
      assert.strictEqual(log.takenAsBytes, 5)
      assert.deepStrictEqual(log.handedAsText, ["delta", "delta", "done", "done"])
      const otherDone = yield* Effect.forkChild(collect(other))
      const events = yield* collect(slow)
      yield* yieldTimes(10)
      assert.deepStrictEqual(events.exit, Exit.void)
      assert.deepStrictEqual(events.items, [
        frames.delta("run-1", "d1", 1),
        frames.delta("run-1", "d2", 2),
        frames.delta("run-1", "d3", 3),
        frames.delta("run-1", "d4", 4),
        frames.delta("run-1", "d5", 5),
        frames.delta("run-1", "d6", 6),
        frames.done("run-1")
      ])
      assert.deepStrictEqual((yield* Fiber.join(otherDone)).items, [frames.delta("run-2", "x1", 1), frames.done("run-2")])
      assert.strictEqual(log.resumes, 1)
    }).pipe(Effect.scoped, Effect.provide(gatewayLayer({ runSubscriptionBuffer: 2 }))))
})

/** The default scheduler, counting the dispatchers made from it (every fiber that yields makes one). */
class CountingScheduler extends Scheduler.MixedScheduler {
  dispatchers = 0
  override makeDispatcher() {
    this.dispatchers++
    return super.makeDispatcher()
  }
}

describe("a yield of the read side", () => {
  const scheduler = new CountingScheduler()
  it.effect("is a task on one dispatcher of the connection, not a fiber per hold; frames keep their order", () =>
    Effect.gen(function*() {
      const { log, read, slow } = yield* openWithRun
      yield* yieldTimes(10)
      const before = scheduler.dispatchers
      // A buffer of 8 and no consumer yet: d4 … d7 each leave it at least half full, so each read yields once.
      for (let i = 1; i <= 7; i++) {
        read([frames.delta("run-1", `d${i}`, i)])
        yield* yieldTimes(10)
      }
      assert.strictEqual(log.pauses, 4)
      assert.strictEqual(log.resumes, 4)
      assert.isAtMost(scheduler.dispatchers - before, 1)
      read([frames.done("run-1")])
      const events = yield* collect(slow)
      assert.deepStrictEqual(events.exit, Exit.void)
      assert.deepStrictEqual(events.items.map((e) => e.type === "delta" ? e.payload.delta : e.type), [
        "d1", "d2", "d3", "d4", "d5", "d6", "d7", "done"
      ])
    }).pipe(
      Effect.scoped,
      Effect.provide(gatewayLayer({ runSubscriptionBuffer: 8 }).pipe(Layer.provide(Layer.succeed(Scheduler.Scheduler, scheduler))))
    ))
})
