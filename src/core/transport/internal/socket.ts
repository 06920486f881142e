/**
 * An `effect/socket` Socket (an in-memory socket in tests and the simulator, or an upgraded request whose `ws`
 * socket is not reachable) as a session's `DeviceTransport` (reference §1.7). The gateway's ws route uses
 * `webSocket.ts` instead (the `ws` socket directly: no fiber per connection).
 *
 * - Reading: one reader fiber pulls batches of frames from the socket and hands each to `onFrame`, while not
 *   paused. A frame over 4 MiB closes the connection with 1009
 *   (the WebSocket server also enforces `maxPayload`; this check keeps the bound when a host server forgot it).
 * - Writing: a bounded queue (64 envelopes by default) drained by one writer fiber. `offer` never waits: a
 *   full queue answers "full" at once. Each socket write (the frames taken from the queue together) has a
 *   deadline (10 s by default); a failed or late write closes the connection and ends the transport.
 *
 * Effect's WebSocket writer hands a frame to `ws` synchronously, so for a real WebSocket the deadline bounds
 * the local hand-over; the gateway's send contract ("entered the local queue") does not depend on it.
 */
import { type Duration, Effect, Latch, Queue, type Scope } from "effect"
import { Socket } from "effect/socket"
import { Limits } from "../../../proto/index.js"
import { type DeviceTransport, type InboundHandlers, type OfferResult, TransportEnded } from "../DeviceTransport.js"

export interface SocketTransportOptions {
  /** Envelopes the send queue holds. */
  readonly capacity: number
  /** Deadline of each socket write. */
  readonly writeDeadline: Duration.Duration
  /** Inbound frame bound in bytes (default 4 MiB). */
  readonly maxFrameBytes?: number
}

const utf8 = new TextDecoder()

const fromSocketError = (error: Socket.SocketError): TransportEnded => {
  const reason = error.reason
  return reason._tag === "SocketCloseError"
    ? new TransportEnded({ reason: "closed_by_peer", code: reason.code })
    : new TransportEnded({ reason: "read_failed" })
}

const tooLarge = (frame: string | Uint8Array, max: number): boolean =>
  typeof frame === "string"
    ? frame.length > max || (frame.length * 3 > max && Buffer.byteLength(frame, "utf8") > max)
    : frame.byteLength > max

/**
 * Acquires the socket's reader (for an upgraded HTTP request this completes the WebSocket handshake, the
 * `101`) and writer, and starts the writer fiber in the current scope. Fails with the socket's error when
 * the connection closed before the handshake. The scope owns the connection: closing it stops the reader and
 * writer and releases the socket.
 */
export const fromSocket = (
  socket: Socket.Socket,
  options: SocketTransportOptions
): Effect.Effect<DeviceTransport, Socket.SocketError, Scope.Scope> =>
  Effect.gen(function*() {
    const maxFrameBytes = options.maxFrameBytes ?? Limits.MaxFrameBytes
    const reader = yield* socket.reader
    const writer = yield* socket.writer
    const queue = yield* Queue.bounded<string>(options.capacity)
    /** Open while the session reads (after `listen`, between `pause` and `resume` closed). */
    const reading = Latch.makeUnsafe(false)
    let handlers: InboundHandlers | undefined
    let endedWith: TransportEnded | undefined
    let listening = false
    let closeSent = false

    const end = (error: TransportEnded) => {
      if (endedWith !== undefined) return
      endedWith = error
      Queue.shutdownUnsafe(queue)
      handlers?.onEnd(error)
    }

    const sendClose = (code: number, reason: string): Effect.Effect<void> =>
      Effect.suspend(() => {
        if (closeSent) return Effect.void
        closeSent = true
        return Effect.ignore(writer.write(new Socket.CloseEvent(code, reason)))
      })

    const writeTimeout = () => Effect.fail(new TransportEnded({ reason: "write_timeout" }))
    yield* Effect.gen(function*() {
      while (true) {
        const batch = yield* Queue.takeAll(queue)
        yield* writer.writeAll(batch).pipe(
          Effect.mapError(() => new TransportEnded({ reason: "write_failed" })),
          Effect.timeoutOrElse({ duration: options.writeDeadline, orElse: writeTimeout })
        )
      }
    }).pipe(
      // Close first so the peer sees 1011 before the session reacts to the end.
      Effect.catch((error) => Effect.andThen(sendClose(1011, "write failed"), Effect.sync(() => end(error)))),
      Effect.forkScoped
    )

    yield* Effect.gen(function*() {
      while (true) {
        yield* reading.await
        const frames = yield* Effect.mapError(reader.pull, fromSocketError)
        for (let i = 0; i < frames.length; i++) {
          if (endedWith !== undefined) return
          if (tooLarge(frames[i]!, maxFrameBytes)) {
            return yield* Effect.andThen(
              sendClose(1009, "frame too large"),
              Effect.fail(new TransportEnded({ reason: "frame_too_large", code: 1009 }))
            )
          }
          handlers!.onFrame(frames[i]!)
        }
      }
    }).pipe(
      Effect.catch((error) => Effect.sync(() => end(error))),
      Effect.forkScoped
    )

    return {
      listen: (next) => {
        if (listening) return
        listening = true
        handlers = next
        if (endedWith !== undefined) next.onEnd(endedWith)
        else reading.openUnsafe()
      },
      pause: () => void reading.closeUnsafe(),
      resume: () => {
        if (listening) reading.openUnsafe()
      },
      // `effect/socket` writes a byte array as a binary frame: a frame given as its UTF-8 bytes (a chunk frame,
      // `EncodedFrame.bytes`) is queued as its text, so it stays a text frame.
      offer: (frame: string | Uint8Array): OfferResult =>
        endedWith !== undefined
          ? "closed"
          : Queue.offerUnsafe(queue, typeof frame === "string" ? frame : utf8.decode(frame))
          ? "queued"
          : "full",
      close: (code: number, reason: string) =>
        Effect.andThen(
          Effect.sync(() => end(new TransportEnded({ reason: "closed_locally", code }))),
          sendClose(code, reason)
        )
    } satisfies DeviceTransport
  })
