/**
 * An optional observer of every frame the gateway sends or receives (the demo's live view, diagnostics). The
 * default is a no-op that costs nothing per frame. A tap sees decoded messages, so it must never log or
 * persist credentials or payload bodies it does not own.
 *
 * The tap never slows or blocks the read loop: the gateway hands each frame to a bounded per-connection
 * buffer (`GatewayConfig.tapBuffer`) drained by its own fiber; when the tap falls behind, further frames are
 * dropped for the tap only (routing is unaffected). A tap failure or defect is logged and ignored.
 *
 * Sent frames are tapped when they enter the send queue (the moment `DeviceSession.send` succeeds), received
 * frames when the read loop decodes them, including frames that fail decoding (`invalid` set, no message).
 */
import { Context, Effect, Layer, Queue } from "effect"
import type { Envelope, Ids, Messages } from "../proto/index.js"

export type FrameDirection = "core→runtime" | "runtime→core"

export interface TappedFrame {
  readonly direction: FrameDirection
  readonly deviceId: Ids.DeviceId
  /** The gateway-wide number of the physical connection. */
  readonly connectionNumber: number
  /** The message type; for a frame that failed decoding, its type when it is a defined one, else "invalid". */
  readonly type: string
  /** Envelope.id, when known and bounded. */
  readonly id?: string
  /** Encoded size in bytes (UTF-8). */
  readonly bytes: number
  /** Core's clock (Unix ms). */
  readonly at: number
  /** The decoded message; absent for a frame that failed decoding. */
  readonly message?: Messages.Message
  /** Why a received frame failed decoding. */
  readonly invalid?: Envelope.InvalidFrameCode
}

export interface FrameTapShape {
  /** False for the default no-op tap: the gateway then skips all tap work. */
  readonly enabled: boolean
  /** Receives one frame. Runs on the tap's own fiber, never on the read loop. */
  readonly onFrame: (frame: TappedFrame) => Effect.Effect<void>
}

const disabled: FrameTapShape = { enabled: false, onFrame: () => Effect.void }

/** The current frame tap; a no-op unless a layer provides one. */
export const FrameTap = Context.Reference<FrameTapShape>("agentwire/core/FrameTap", { defaultValue: () => disabled })

/** A tap calling `onFrame` for every frame. */
export const layer = (onFrame: (frame: TappedFrame) => Effect.Effect<void>): Layer.Layer<never> =>
  Layer.succeed(FrameTap, { enabled: true, onFrame })

/** A tap offering every frame to a queue (tests, live views that consume a stream). */
export const layerQueue = (queue: Queue.Enqueue<TappedFrame>): Layer.Layer<never> =>
  layer((frame) => Effect.asVoid(Queue.offer(queue, frame)))
