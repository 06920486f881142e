/**
 * The send side of a device session (`DeviceSession.send`): validate, encode and put one envelope in the
 * transport's bounded send queue. Success proves only that the envelope entered that local queue.
 */
import { Context, Effect, Layer, Result } from "effect"
import { Messages, Trace } from "../proto/index.js"
import * as CoreMetrics from "./CoreMetrics.js"
import { NotSent } from "./Errors.js"
import { SessionEnd, SessionInfo, SessionTap } from "./SessionServices.js"

// A request without a trace carries the caller's current span, so the Runtime's handler joins it.
const withCallerTrace = (message: Messages.CoreToRuntime): Effect.Effect<Messages.CoreToRuntime> =>
  message.trace !== undefined
    ? Effect.succeed(message)
    : Effect.map(Trace.currentTraceparent, (trace) => (trace === undefined ? message : { ...message, trace }))

export class SessionOutbound extends Context.Service<SessionOutbound, {
  /**
   * Puts one envelope in this connection's bounded send queue. Fails with `NotSent` (definite: nothing will be
   * sent) when the queue is full or closed, the connection has ended, or the message is invalid or over 4 MiB.
   */
  readonly send: (message: Messages.CoreToRuntime) => Effect.Effect<void, NotSent>
}>()("agentwire/core/SessionOutbound") {
  static readonly layer = Layer.effect(
    SessionOutbound,
    Effect.gen(function*() {
      const { transport } = yield* SessionInfo
      const end = yield* SessionEnd
      const tap = yield* SessionTap
      const metricContext = yield* Effect.context<never>()
      const send = (message: Messages.CoreToRuntime): Effect.Effect<void, NotSent> =>
        Effect.flatMap(withCallerTrace(message), (message) =>
          Effect.suspend(() => {
            if (end.ended() !== undefined) {
              return Effect.fail(new NotSent({ type: message.type, reason: "connection_closed" }))
            }
            const encoded = Messages.encodeMessage(message)
            if (Result.isFailure(encoded)) {
              return Effect.fail(new NotSent({ type: message.type, reason: encoded.failure.reason }))
            }
            const offered = transport.offer(encoded.success)
            if (offered === "queued") CoreMetrics.frameUnsafe(metricContext, "out", Buffer.byteLength(encoded.success, "utf8"))
            if (offered !== "queued") {
              return Effect.fail(
                new NotSent({ type: message.type, reason: offered === "full" ? "queue_full" : "connection_closed" })
              )
            }
            if (tap.enabled) {
              const id = "id" in message ? message.id : undefined
              tap.frame({
                direction: "core→runtime",
                type: message.type,
                ...(id === undefined ? {} : { id }),
                bytes: Buffer.byteLength(encoded.success, "utf8"),
                message
              })
            }
            return Effect.void
          }))
      return SessionOutbound.of({ send })
    })
  )
}
