/**
 * The Runtime's view of one physical connection to Core. The daemon loop (Daemon.ts) builds one Transport per
 * connection (WebSocketTransport in production, test/support/runtimeMemoryTransport.ts in unit tests) and the
 * per-connection logic (Connection.ts, Dispatcher.ts) consumes it. Nothing here imports `ws`: transport/internal/ws.ts
 * does.
 *
 * Malformed-frame rule for this direction (Core → Runtime): a frame that fails either decode step is handed to
 * the dispatcher as an `InvalidFrame`, which answers with the family's documented reply when the frame's type
 * and id are known (for example a `rejected` preparation status or an `invalid_input` steer receipt) and
 * otherwise drops it with a log line carrying code, type, id and size, never the payload. The connection stays
 * open.
 */
import { Context, Duration, Effect, Result, Schema, type Stream } from "effect"
import { isEncoded, type Outgoing } from "../../proto/EncodedFrame.js"
import { Envelope, Messages } from "../../proto/index.js"
import type { DeviceId } from "../../proto/Ids.js"
import { attach, detach } from "./ChunkData.js"
import { decodeChunkFrame } from "../../proto/ChunkFrame.js"
import { decodeLongTokens } from "../../proto/LongTokens.js"

/** The connection ended. `code` is the WebSocket close code when one was received. */
export class TransportClosed extends Schema.TaggedError<TransportClosed>()("TransportClosed", {
  reason: Schema.Literals(["closed_by_peer", "closed_locally", "read_failed", "write_failed", "liveness"]),
  code: Schema.optionalKey(Schema.Int),
  /**
   * Set on the failure of a send made after the connection had already ended: nothing of it was handed to the
   * socket (definite). Without it, a failed send's frame may or may not have left.
   */
  unsent: Schema.optionalKey(Schema.Literal(true))
}) {
  override get message() {
    return `connection closed (${this.reason}${this.code === undefined ? "" : `, code ${this.code}`})`
  }
}

/** The failure of a send refused because the connection had already ended `closed`: nothing was handed over. */
export const refusedAfterEnd = (closed: TransportClosed): TransportClosed =>
  new TransportClosed({ reason: closed.reason, ...(closed.code === undefined ? {} : { code: closed.code }), unsent: true })

/** One inbound item: a decoded Core → Runtime message, or the typed refusal of a frame that failed decoding. */
export type Inbound =
  | { readonly _tag: "Message"; readonly message: Messages.CoreToRuntime; readonly bytes: number }
  | { readonly _tag: "Invalid"; readonly error: Envelope.InvalidFrame }

export class Transport extends Context.Service<Transport, {
  /**
   * Encodes and writes one frame. Resolves only when the WebSocket write of this frame completed locally (the
   * `ws` send callback fired without error): it proves nothing about Core receiving, accepting or acting on it.
   * Sends are ordered. Fails with `OutgoingFrameRejected` (nothing was written: invalid message or over
   * 4 MiB) or `TransportClosed` (the write did not complete; the frame may or may not have left — except with
   * `unsent`: the connection had already ended and nothing was handed over).
   */
  readonly send: (
    message: Messages.RuntimeToCore
  ) => Effect.Effect<void, TransportClosed | Messages.OutgoingFrameRejected>
  /**
   * Encodes a batch of frames (those not encoded earlier: `EncodedFrame`) and writes them in order, in one go
   * (no round trip between frames). Every frame is encoded first: when one is refused (`OutgoingFrameRejected`:
   * invalid message or over 4 MiB), nothing of the batch is written. Resolves when the write of the batch's last frame completed locally; writes complete
   * in call order, so that proves every frame of the batch was written locally (and nothing about Core). One
   * 10 s write deadline covers the whole batch. Fails with `TransportClosed` when a write did not complete (any
   * frame of the batch may or may not have left). Ordered with `send`: a frame sent after the call is written
   * after the whole batch.
   */
  readonly sendAll: (
    frames: ReadonlyArray<Outgoing>
  ) => Effect.Effect<void, TransportClosed | Messages.OutgoingFrameRejected>
  /**
   * `send` (or, for a frame encoded earlier, `sendAll` of it alone) within `budget`: `"written"` when the write
   * completed locally in time, `"late"` when `budget` passed first. Late, the frame stays handed over (it may or may
   * not leave) and its 10 s write deadline still applies: a write that then fails or misses it ends the connection
   * (as `post`'s does). Fails like `send`. The budget costs no fiber or timer of its own over a socket (issue 18).
   */
  readonly sendWithin: (
    frame: Outgoing,
    budget: Duration.Duration
  ) => Effect.Effect<"written" | "late", TransportClosed | Messages.OutgoingFrameRejected>
  /**
   * Encodes one frame (unless encoded earlier: `EncodedFrame`) and hands it to the socket in order with `send` and
   * `sendAll`, without waiting for its write: resolves once the frame is handed over, which proves nothing about
   * the write. Fails like `send` when nothing was handed over (`OutgoingFrameRejected`, or `TransportClosed` with
   * `unsent`). When the write then fails or misses the 10 s write deadline, the socket is destroyed (as after any
   * failed write) and `unconfirmed` is called once (the frame may or may not have left); it is never called for a
   * write that completed. For a frame whose write nobody needs to wait for: the write's completion is known only
   * when the event loop next wakes (often the next frame from Core), so a wait for it holds its caller a round trip.
   */
  readonly post: (
    frame: Outgoing,
    unconfirmed: () => void
  ) => Effect.Effect<void, TransportClosed | Messages.OutgoingFrameRejected>
  /** Inbound frames in arrival order. Ends (fails with `TransportClosed`) when the connection ends. */
  readonly inbound: Stream.Stream<Inbound, TransportClosed>
  /** Closes the connection with a WebSocket close code; idempotent. Settles nothing. */
  readonly close: (code: number, reason: string) => Effect.Effect<void>
}>()("agentwire/runtime/Transport") {}

/**
 * `sendWithin` for a transport that has only `send` and `sendAll` (the in-memory ones of tests and the simulation):
 * the send raced against a sleep of `budget`.
 */
export const sendWithinBy = (
  send: Transport["Service"]["send"],
  sendAll: Transport["Service"]["sendAll"]
): Transport["Service"]["sendWithin"] =>
(frame, budget) =>
  (isEncoded(frame) ? sendAll([frame]) : send(frame)).pipe(
    Effect.as("written" as const),
    Effect.timeoutOrElse({ duration: budget, orElse: () => Effect.succeed("late" as const) })
  )

/** Facts about the current physical connection, fixed for its lifetime. */
export class ConnectionInfo extends Context.Service<ConnectionInfo, {
  readonly deviceId: DeviceId
  /** Local, monotonically increasing number of this physical connection (1 for the first). */
  readonly connectionNumber: number
  /** The heartbeat cadence bootstrap returned (15 s when it returned none or a value <= 0). */
  readonly heartbeatInterval: Duration.Duration
}>()("agentwire/runtime/ConnectionInfo") {}

/** The range bootstrap's `heartbeat_seconds` is clamped to (Core's own setting is a positive integer). */
export const MinHeartbeatSeconds = 1
export const MaxHeartbeatSeconds = 300

/**
 * The heartbeat cadence to use for a bootstrap value in seconds: 15 s when absent or <= 0, otherwise the value
 * clamped to [MinHeartbeatSeconds, MaxHeartbeatSeconds] (a peer's 1 ms would otherwise flood the connection).
 */
export const heartbeatIntervalFrom = (heartbeatSeconds: number | undefined): Duration.Duration =>
  heartbeatSeconds === undefined || !(heartbeatSeconds > 0)
    ? Duration.seconds(15)
    : Duration.seconds(Math.min(MaxHeartbeatSeconds, Math.max(MinHeartbeatSeconds, heartbeatSeconds)))

/**
 * Decodes one received frame into an `Inbound` item (both decode steps of `Messages`). Never throws and never
 * keeps the frame text: an `Invalid` item carries only the finite code, the size and a known type and bounded id.
 * Every Transport implementation uses it, so a frame means the same thing over a socket and in memory.
 */
export const decodeInbound = (frame: string | Uint8Array): Inbound => {
  // An upload's chunk frame in Core's layout is read from its bytes (ChunkFrame.ts); anything else, the generic way.
  if (typeof frame !== "string") {
    const chunk = decodeChunkFrame(frame)
    if (chunk !== undefined) {
      return { _tag: "Message", message: { ...chunk.message, payload: attach(chunk.message.payload, chunk.data) }, bytes: chunk.bytes }
    }
  }
  // A frame with long string values (a Turn's input) is read without a large new string per value (LongTokens.ts).
  const raw = (typeof frame === "string" ? undefined : decodeLongTokens(frame)) ?? Envelope.decodeEnvelope(frame)
  if (Result.isFailure(raw)) return { _tag: "Invalid", error: raw.failure }
  const decoded = Messages.decodeCoreToRuntimeEnvelope(raw.success)
  if (Result.isFailure(decoded)) return { _tag: "Invalid", error: decoded.failure }
  return { _tag: "Message", message: detachChunk(decoded.success), bytes: raw.success.bytes }
}

/** A chunk's base64 text is decoded here and dropped from the message (ChunkData.ts). */
const detachChunk = (message: Messages.CoreToRuntime): Messages.CoreToRuntime =>
  message.type === "workspace_write" || message.type === "runtime_prepare"
    ? { ...message, payload: detach(message.payload) } as Messages.CoreToRuntime
    : message
