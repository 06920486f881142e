/**
 * The send side of a device session (`DeviceSession.send`): validate, encode and put one envelope in the
 * transport's bounded send queue. Success proves only that the envelope entered that local queue. A
 * gateway-wide function of the connection's state record (SessionServices.ts), not a per-connection service.
 */
import { Effect, Result } from "effect"
import type { EncodedMessage } from "../proto/EncodedFrame.js"
import { InputFrame, Messages, Trace } from "../proto/index.js"
import * as CoreMetrics from "./CoreMetrics.js"
import { NotSent } from "./Errors.js"
import type { SessionState } from "./SessionServices.js"

// A request without a trace carries the caller's current span, so the Runtime's handler joins it.
const withCallerTrace = (message: Messages.CoreToRuntime): Effect.Effect<Messages.CoreToRuntime> =>
  message.trace !== undefined
    ? Effect.succeed(message)
    : Effect.map(Trace.currentTraceparent, (trace) => (trace === undefined ? message : { ...message, trace }))

/** A frame encoded earlier (`EncodedFrame.encodeChunkFrame`), with the message it encodes. */
export type EncodedCoreFrame = EncodedMessage<Messages.CoreToRuntime>

const enqueue = (state: SessionState, message: Messages.CoreToRuntime, earlier?: string | Uint8Array): Effect.Effect<void, NotSent> => {
  if (state.ended !== undefined) {
    return Effect.fail(new NotSent({ type: message.type, reason: "connection_closed" }))
  }
  const encoded: Result.Result<string | Uint8Array, Messages.OutgoingFrameRejected> = earlier === undefined
    ? InputFrame.encodeMessageBytes(message) // a long input text (a Run's start) as its bytes, same frame
    : Result.succeed(earlier)
  if (Result.isFailure(encoded)) {
    return Effect.fail(new NotSent({ type: message.type, reason: encoded.failure.reason }))
  }
  const offered = state.transport.offer(encoded.success)
  if (offered !== "queued") {
    return Effect.fail(
      new NotSent({ type: message.type, reason: offered === "full" ? "queue_full" : "connection_closed" })
    )
  }
  const bytes = typeof encoded.success === "string" ? Buffer.byteLength(encoded.success, "utf8") : encoded.success.byteLength
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
 * A frame encoded earlier is queued as it is: its encoder validated it, and its trace (if any) is the one it was
 * encoded with (the caller's current span is not added).
 */
export const send = (state: SessionState, message: Messages.CoreToRuntime | EncodedCoreFrame): Effect.Effect<void, NotSent> =>
  "encoded" in message
    ? Effect.suspend(() => enqueue(state, message.message, message.bytes ?? message.encoded))
    : Effect.flatMap(withCallerTrace(message), (message) => Effect.suspend(() => enqueue(state, message)))
