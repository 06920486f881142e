/**
 * An `effect/socket` Socket (the upgraded WebSocket of the ws route, or an in-memory socket in tests) as a
 * session's `DeviceTransport` (reference §1.7).
 *
 * - Reading: batches of frames from the socket's pull. A frame over 4 MiB closes the connection with 1009
 *   (the WebSocket server also enforces `maxPayload`; this check keeps the bound when a host server forgot it).
 * - Writing: a bounded queue (64 envelopes by default) drained by one writer fiber. `offer` never waits: a
 *   full queue answers "full" at once. Each socket write (the frames taken from the queue together) has a
 *   deadline (10 s by default); a failed or late write closes the connection and ends the transport.
 *
 * Effect's WebSocket writer hands a frame to `ws` synchronously, so for a real WebSocket the deadline bounds
 * the local hand-over; the gateway's send contract ("entered the local queue") does not depend on it.
 */
import { Deferred, Duration, Effect, Exit, Queue, type Scope } from "effect"
import { Socket } from "effect/socket"
import { Limits } from "../../../proto/index.js"
import { type DeviceTransport, type OfferResult, TransportEnded } from "../DeviceTransport.js"

export interface SocketTransportOptions {
  /** Envelopes the send queue holds. */
  readonly capacity: number
  /** Deadline of each socket write. */
  readonly writeDeadline: Duration.Duration
  /** Inbound frame bound in bytes (default 4 MiB). */
  readonly maxFrameBytes?: number
}

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
 * the connection closed before the handshake. The scope owns the connection: closing it stops the writer
 * and releases the socket.
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
    const endedSignal = yield* Deferred.make<TransportEnded>()
    let ended = false
    let closeSent = false

    const end = (error: TransportEnded) => {
      if (ended) return
      ended = true
      Queue.shutdownUnsafe(queue)
      Deferred.doneUnsafe(endedSignal, Exit.succeed(error))
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

    const pull: Effect.Effect<ReadonlyArray<string | Uint8Array>, TransportEnded> = reader.pull.pipe(
      Effect.mapError(fromSocketError),
      Effect.flatMap((frames) => {
        for (let i = 0; i < frames.length; i++) {
          if (tooLarge(frames[i]!, maxFrameBytes)) {
            const error = new TransportEnded({ reason: "frame_too_large", code: 1009 })
            return sendClose(1009, "frame too large").pipe(
              Effect.andThen(Effect.sync(() => end(error))),
              Effect.andThen(Effect.fail(error))
            )
          }
        }
        return Effect.succeed(frames)
      })
    )

    return {
      pull,
      offer: (frame: string): OfferResult => ended ? "closed" : Queue.offerUnsafe(queue, frame) ? "queued" : "full",
      ended: Deferred.await(endedSignal),
      close: (code: number, reason: string) =>
        Effect.andThen(
          Effect.sync(() => end(new TransportEnded({ reason: "closed_locally", code }))),
          sendClose(code, reason)
        )
    } satisfies DeviceTransport
  })
