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

/**
 * One physical connection as the session uses it. `transport/internal/socket.ts` builds it over an upgraded
 * WebSocket; tests build it over in-memory sockets. The transport owns the bounded send queue and its writer.
 */
export interface DeviceTransport {
  /** The next batch of inbound frames, in order. Fails with `TransportEnded` once the connection ended. */
  readonly pull: Effect.Effect<ReadonlyArray<string | Uint8Array>, TransportEnded>
  /**
   * Puts one encoded frame in the bounded send queue without waiting. "queued" proves only that; "full" and
   * "closed" mean nothing will be sent.
   */
  readonly offer: (frame: string) => OfferResult
  /** Completes when the write side ended (a failed or late write, or `close`). */
  readonly ended: Effect.Effect<TransportEnded>
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
