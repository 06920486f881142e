/**
 * The narrow view of an open WebSocket that WebSocketTransport builds on. `ws.ts` adapts the `ws` package to it;
 * tests implement it directly to control exactly when a local write completes. Callback-based on purpose: it is
 * the boundary to Node's event emitters, and everything above it is Effect.
 */

import type { FramePayload } from "./clientFrames.js"

/** How the connection ended, as the socket saw it. */
export interface FrameSocketEnd {
  /** The close code of a close frame the peer sent (absent: no close frame, or one without a code). */
  readonly code?: number
  /** True when the connection failed (socket error, protocol violation, abnormal closure) rather than closed. */
  readonly error: boolean
  /** True when it failed because the peer sent a frame over the socket's maximum size (refused unread). */
  readonly frameTooLarge?: boolean
}

export interface FrameListener {
  /** One received data frame. `data` is the frame's bytes (or text); `isBinary` is false for a text frame. */
  readonly onFrame: (data: Uint8Array | string, isBinary: boolean) => void
  /** A pong (or any other proof the peer is reading and answering). */
  readonly onPong: () => void
  /** The connection is gone; called once. */
  readonly onEnd: (end: FrameSocketEnd) => void
}

export interface FrameSocket {
  /**
   * Queues one text frame (its text or its UTF-8 bytes). `written` fires once: without an error when the write completed locally (handed to the
   * operating system), with one when it did not. Frames are written in call order. `joinTurn`: the frame may wait for
   * the rest of this turn of the event loop, so that the frames sent meanwhile leave in the same write (without it,
   * it is handed to the kernel now, unless an earlier frame of this turn holds the socket).
   */
  readonly send: (text: string | Uint8Array, written: (error?: Error) => void, joinTurn?: boolean) => void
  /**
   * Queues several text frames in order, in one go, each given as its text or as its UTF-8 bytes (still a text
   * frame), or as a Run's delta kept as its parts (`EncodedDelta`, written from them). `written` fires once, after the last frame's write finished: without an error only when every frame
   * of the batch was written locally. Returns the UTF-8 size of the batch's payloads (what the transport counts as
   * sent), which the socket measures while it frames them. `texts` is read before it returns (the caller may
   * reuse the array afterwards).
   */
  readonly sendAll: (texts: ReadonlyArray<FramePayload>, written: (error?: Error) => void) => number
  /** Starts the closing handshake with a close frame (sent after every queued frame). */
  readonly close: (code: number, reason: string) => void
  /** Destroys the connection at once, without a closing handshake. */
  readonly terminate: () => void
  /** Stops reading from the network (backpressure); `resume` starts again. */
  readonly pause: () => void
  readonly resume: () => void
  /** Sends a ping; the peer's pong arrives as `onPong`. */
  readonly ping: () => void
  /** Starts delivering events. Events that happened earlier are delivered first, in order. Call once. */
  readonly listen: (listener: FrameListener) => void
}
