/**
 * The send side of a device session (`DeviceSession.send`): validate, encode and put one envelope in the
 * transport's bounded send queue. Success proves only that the envelope entered that local queue. A
 * gateway-wide function of the connection's state record (SessionServices.ts), not a per-connection service.
 */
import { Effect, Result } from "effect"
import { Messages, Trace } from "../proto/index.js"
import * as CoreMetrics from "./CoreMetrics.js"
import { NotSent } from "./Errors.js"
import type { SessionState } from "./SessionServices.js"

// A request without a trace carries the caller's current span, so the Runtime's handler joins it.
const withCallerTrace = (message: Messages.CoreToRuntime): Effect.Effect<Messages.CoreToRuntime> =>
  message.trace !== undefined
    ? Effect.succeed(message)
    : Effect.map(Trace.currentTraceparent, (trace) => (trace === undefined ? message : { ...message, trace }))

const enqueue = (state: SessionState, message: Messages.CoreToRuntime): Effect.Effect<void, NotSent> => {
  if (state.ended !== undefined) {
    return Effect.fail(new NotSent({ type: message.type, reason: "connection_closed" }))
  }
  const encoded = Messages.encodeMessage(message)
  if (Result.isFailure(encoded)) {
    return Effect.fail(new NotSent({ type: message.type, reason: encoded.failure.reason }))
  }
  const offered = state.transport.offer(encoded.success)
  if (offered !== "queued") {
    return Effect.fail(
      new NotSent({ type: message.type, reason: offered === "full" ? "queue_full" : "connection_closed" })
    )
  }
  const bytes = Buffer.byteLength(encoded.success, "utf8")
  CoreMetrics.frameUnsafe(state.metricContext, "out", bytes)
  if (state.tapQueue !== undefined) {
    const id = "id" in message ? message.id : undefined
    state.tapFrame({ direction: "core→runtime", type: message.type, ...(id === undefined ? {} : { id }), bytes, message })
  }
  return Effect.void
}

/**
 * Puts one envelope in this connection's bounded send queue. Fails with `NotSent` (definite: nothing will be
 * sent) when the queue is full or closed, the connection has ended, or the message is invalid or over 4 MiB.
 */
export const send = (state: SessionState, message: Messages.CoreToRuntime): Effect.Effect<void, NotSent> =>
  Effect.flatMap(withCallerTrace(message), (message) => Effect.suspend(() => enqueue(state, message)))
