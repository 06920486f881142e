/**
 * The per-connection send side used by every family: the raw ordered send of the Transport plus a bounded
 * variant that reports what is known instead of failing. A completed send proves only that the WebSocket
 * write completed locally (protocol "What each acknowledgement proves"); a timeout or a closed transport
 * after the frame was handed over is unknown, never a failure of the operation it reports; a send refused
 * before anything was handed over (codec refusal, connection already ended) is `NotSent`, never `Unknown`. Logs carry type,
 * id and size, never payloads.
 */
import { Context, Duration, Effect, Layer } from "effect"
import { isEncoded, type Outgoing } from "../proto/EncodedFrame.js"
import type { Messages } from "../proto/index.js"
import { echo } from "../proto/Trace.js"
import { Transport } from "./transport/Transport.js"

/** What a bounded send established. */
export type SendOutcome =
  | { readonly _tag: "Sent" }
  /**
   * Nothing was written (definite): the message was invalid or over 4 MiB (`refused`), or the connection had
   * already ended before it was handed over (`connection_closed`).
   */
  | { readonly _tag: "NotSent"; readonly reason: "refused" | "connection_closed" }
  /** Handed to the transport without proof of a completed write (timeout or connection loss). */
  | { readonly _tag: "Unknown"; readonly reason: "timeout" | "connection_lost" }

export interface OutboundShape {
  /** Ordered send; resolves when the write of this frame completed locally. */
  readonly send: Transport["Service"]["send"]
  /**
   * Ordered send of a batch in one go; resolves when the write of its last frame completed locally (so of every
   * frame of the batch). One refused frame: nothing of the batch is written.
   */
  readonly sendAll: Transport["Service"]["sendAll"]
  /**
   * `send` within `budget`; never fails, logs anything but `Sent`. Takes a message, or a frame encoded earlier
   * (`EncodedFrame`, e.g. a chunk built by `encodeChunkFrame`), which is written as it is.
   */
  readonly sendWithin: (message: Outgoing, budget: Duration.Duration) => Effect.Effect<SendOutcome>
  /**
   * Hands one frame to the transport in order with every other send and returns without waiting for its write
   * (`Transport.post`): for a reply whose outcome nobody acts on, such as a chunk's `received` receipt. Never
   * fails; logs what `sendWithin` would report other than `Sent`: `NotSent` at once, and `Unknown`
   * (`connection_lost`) when the write later fails or misses the transport's 10 s write deadline (which ends the
   * connection). Nothing waits for the write, so no send budget applies.
   */
  readonly post: (message: Outgoing) => Effect.Effect<void>
}

const idOf = (message: Outgoing): string | undefined => (isEncoded(message) ? message.id : "id" in message ? message.id : undefined)

/** Logs an outcome other than `Sent` (type, id and outcome; never the payload). */
const logOutcome = (message: Outgoing, outcome: Exclude<SendOutcome, { _tag: "Sent" }>, budget: Duration.Duration | undefined) =>
  (outcome._tag === "NotSent"
    ? outcome.reason === "refused"
      ? Effect.logError("own frame refused by the codec; nothing sent")
      : Effect.logInfo("frame not sent: the connection had already ended")
    : Effect.logWarning("frame not confirmed written")).pipe(
      Effect.annotateLogs({
        type: message.type,
        id: idOf(message) ?? "",
        outcome: outcome._tag === "Unknown" ? outcome.reason : `not_sent_${outcome.reason}`,
        ...(budget === undefined ? {} : { budget_ms: Duration.toMillis(budget) })
      })
    )

const sent: SendOutcome = { _tag: "Sent" }
const late: SendOutcome = { _tag: "Unknown", reason: "timeout" }

export const make = (transport: Transport["Service"]): OutboundShape => ({
  send: transport.send,
  sendAll: transport.sendAll,
  // The budget is the transport's (no race, fiber or timer per send over a socket: issue 18).
  sendWithin: (message, budget) =>
    transport.sendWithin(message, budget).pipe(
      Effect.map((written): SendOutcome => (written === "written" ? sent : late)),
      Effect.catchTags({
        OutgoingFrameRejected: () => Effect.succeed<SendOutcome>({ _tag: "NotSent", reason: "refused" }),
        TransportClosed: (closed) =>
          Effect.succeed<SendOutcome>(
            closed.unsent === true ? { _tag: "NotSent", reason: "connection_closed" } : { _tag: "Unknown", reason: "connection_lost" }
          )
      }),
      Effect.tap((outcome) => (outcome._tag === "Sent" ? Effect.void : logOutcome(message, outcome, budget)))
    ),
  post: (message) =>
    Effect.withFiber((fiber) =>
      transport.post(message, () => {
        // Later, from the write's callback: logged with the poster's log context.
        Effect.runForkWith(fiber.context)(logOutcome(message, { _tag: "Unknown", reason: "connection_lost" }, undefined))
      }).pipe(
        Effect.catchTags({
          OutgoingFrameRejected: () => logOutcome(message, { _tag: "NotSent", reason: "refused" }, undefined),
          TransportClosed: (closed) =>
            logOutcome(
              message,
              closed.unsent === true ? { _tag: "NotSent", reason: "connection_closed" } : { _tag: "Unknown", reason: "connection_lost" },
              undefined
            )
        })
      )
    )
})

/** The connection's send side, built from its `Transport` (one per connection). */
export class Outbound extends Context.Service<Outbound, OutboundShape>()("agentwire/runtime/Outbound") {
  static readonly layer = Layer.effect(Outbound, Transport.useSync(make))
}

/**
 * Adds the request's trace to a reply when it is a valid traceparent (`Trace.echo`); a missing, oversized or
 * malformed value is never echoed. The trace never changes ownership and is never used as an id.
 */
export const withTrace = <M extends Messages.RuntimeToCore>(message: M, trace: string | undefined): M => {
  const t = echo(trace)
  return t === undefined ? message : { ...message, trace: t }
}
