/**
 * The device transport contract (reference §1.7): one physical Runtime connection as a device session uses
 * it, why it ended, and the close code Core uses for each way it ends a connection itself.
 *
 * This module sits below the session: `DeviceSession` and `Gateway` depend on it, never the reverse. It
 * imports nothing from `src/core` but the connection-level error reasons (`Errors.ts`).
 * `internal/socket.ts` builds a `DeviceTransport` over an upgraded WebSocket; tests build it over in-memory
 * sockets.
 */
import { type Effect, Schema } from "effect"
import type { ObservationLostReason } from "../Errors.js"

/** Why a transport ended. The session reports every one as `ObservationLost("disconnected")`. */
export class TransportEnded extends Schema.TaggedError<TransportEnded>()("TransportEnded", {
  reason: Schema.Literals([
    "closed_by_peer", // the peer closed (or the socket dropped); `code` is the close code when known
    "read_failed",
    "write_failed", // a socket write failed: the connection was closed
    "write_timeout", // a socket write missed its deadline: the connection was closed
    "frame_too_large", // an inbound frame exceeded 4 MiB: the connection was closed with 1009
    "closed_locally"
  ]),
  code: Schema.optionalKey(Schema.Int)
}) {
  override get message() {
    return `transport ended (${this.reason}${this.code === undefined ? "" : `, code ${this.code}`})`
  }
}

/** Result of offering an encoded frame to the bounded send queue. */
export type OfferResult = "queued" | "full" | "closed"

/** Where a transport delivers what it reads (the session's read side). */
export interface InboundHandlers {
  /**
   * One inbound frame, in order. Called synchronously from the socket's events (no fiber of the connection).
   * `bytes` is the frame's exact size in bytes when the transport read it as bytes (a validated UTF-8 text frame
   * of a WebSocket): the read side then does not count the text's UTF-8 length again (issue 18).
   */
  readonly onFrame: (frame: string | Uint8Array, bytes?: number) => void
  /**
   * Optional: a text frame as its validated UTF-8 bytes (a `Buffer` a WebSocket transport read), before its text is
   * made. True: the read side took the frame (a Run's delta read from the bytes, `DeltaFrame.matchBytes`), and the
   * transport hands it over no further; false: it hands the frame's text to `onFrame` as usual. The bytes are the
   * transport's, valid during the call only (issue 18: no string of the whole frame per relayed delta).
   */
  readonly onTextBytes?: (frame: Buffer) => boolean
  /**
   * The transport ended (the peer closed, a read or write failed, an oversized frame, or `close`). Called once;
   * no frame follows it.
   */
  readonly onEnd: (error: TransportEnded) => void
}

/**
 * One physical connection as the session uses it. `transport/internal/webSocket.ts` builds it over the `ws`
 * server socket of an upgraded request (reads are `ws` message callbacks, writes `ws.send`: no fiber per
 * connection); `transport/internal/socket.ts` over an `effect/socket` Socket (in-memory sockets in tests). The
 * transport owns the bounded send queue.
 */
export interface DeviceTransport {
  /**
   * Starts delivering inbound frames and the end to `handlers` (once; frames that arrived before are delivered
   * then, and an end that happened before is reported at once).
   */
  readonly listen: (handlers: InboundHandlers) => void
  /** Stops reading from the socket until `resume` (backpressure). Frames already read may still arrive. */
  readonly pause: () => void
  readonly resume: () => void
  /**
   * Puts one encoded frame in the bounded send queue without waiting. "queued" proves only that; "full" and
   * "closed" mean nothing will be sent.
   */
  readonly offer: (frame: string | Uint8Array) => OfferResult
  /** Closes the connection with a close code. Idempotent; queued frames not yet written are dropped. */
  readonly close: (code: number, reason: string) => Effect.Effect<void>
}

/** The WebSocket close code Core uses for each way it ends a connection itself. */
export const closeCodeFor = (reason: ObservationLostReason): number => {
  switch (reason) {
    case "replaced":
      return 4000
    case "liveness_timeout":
      return 4002
    case "invalid_heartbeat":
      return 1008
    case "gateway_shutdown":
      return 1001
    default:
      return 1000
  }
}
