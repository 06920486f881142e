/**
 * The production `Transport`: step 3 of connecting (protocol "Ownership and connection"; reference §1.5, §1.7)
 * and the frame layer of one physical connection.
 *
 * Owns: the dial (`device_id` and `version` query parameters, the Bearer header, a 10 s handshake budget, 4 MiB
 * inbound limit, a refused upgrade's status → `ConnectRejected` / `ConnectFailed`), ordered sends (one frame or a
 * batch) that resolve when the WebSocket write completed locally (10 s deadline per frame or per batch, a frame
 * over 4 MiB refused before anything is written), the inbound stream (text frames only, both decode steps, a
 * bounded buffer that pauses the socket when full), ws-level ping liveness, and the courtesy close 1000
 * "client closing" when the connection scope closes.
 *
 * Never: replays or re-sends a frame, echoes a frame's text, logs payloads, or decides what a close means for
 * the daemon (the loop in Daemon.ts classifies 4001 as permanent).
 */
import { Cause, Duration, Effect, Latch, Queue, type Redacted, Result, type Scope, Stream } from "effect"
import type { DeviceId } from "../../proto/Ids.js"
import { InvalidFrame } from "../../proto/Envelope.js"
import { CloseNormal, FrameWriteDeadline, HandshakeTimeout, MaxFrameBytes } from "../../proto/Limits.js"
import { EncodedDelta, frameData, isEncoded, type Outgoing, textFramePayload } from "../../proto/EncodedFrame.js"
import { encodeMessage, type OutgoingFrameRejected, type RuntimeToCore } from "../../proto/Messages.js"
import { ProtocolVersion } from "../../proto/Version.js"
import { classifyStatus, errorCodeOf } from "./Bootstrap.js"
import { ConnectFailed, type ConnectRejected } from "./ConnectError.js"
import { bearerAuthorization } from "./internal/credential.js"
import type { FramePayload } from "./internal/clientFrames.js"
import type { FrameSocket, FrameSocketEnd } from "./internal/frameSocket.js"
import * as PendingWrites from "./internal/pendingWrites.js"
import type { WaitOutcome } from "./internal/pendingWrites.js"
import * as Ws from "./internal/ws.js"
import { decodeInbound, type Inbound, refusedAfterEnd, Transport, TransportClosed } from "./Transport.js"
import * as RuntimeMetrics from "../RuntimeMetrics.js"

/**
 * A frame as the UTF-8 bytes the socket writes (still one text frame). Converted here once, the metrics count its
 * bytes by `byteLength` and `ws` neither measures nor converts the text again: a short string sent as text cost
 * two UTF-8 length passes (ours and `ws`'s) besides `ws`'s conversion (issue 18, relay). Short texts by Node's
 * pooled `Buffer.from`, long ones by `TextEncoder` (`EncodedFrame.textFramePayload`); bytes pass as they are.
 */
const wireBytes = (data: string | Uint8Array): Uint8Array =>
  typeof data !== "string" ? data : data.length < 2048 ? Buffer.from(data, "utf8") : textFramePayload(data) as Uint8Array

export type { FrameListener, FrameSocket, FrameSocketEnd } from "./internal/frameSocket.js"

/** Tunables of one connection (protocol constants come from proto/Limits and are not here). */
export interface TransportOptions {
  /** Pause reading when this many bytes of decoded-but-unconsumed frames are buffered (default 8 MiB). */
  readonly inboundHighWaterBytes?: number
  /** …or this many frames (default 256). Reading resumes once the consumer has drained the buffer. */
  readonly inboundHighWaterFrames?: number
  /** Interval of ws-level pings (default 15 s). */
  readonly pingInterval?: Duration.Input
  /**
   * Close the connection as `liveness` after this long without any frame or pong from Core (default 45 s,
   * i.e. three missed pings). `undefined` keeps the default; `false` disables the check.
   */
  readonly livenessTimeout?: Duration.Input | false
  /** How long the courtesy close waits for Core's closing handshake before destroying the socket (default 1 s). */
  readonly closeGrace?: Duration.Input
}

const defaults = {
  inboundHighWaterBytes: 8 * 1024 * 1024,
  inboundHighWaterFrames: 256,
  pingInterval: Duration.seconds(15),
  livenessTimeout: Duration.seconds(45),
  closeGrace: Duration.seconds(1)
}

/** Bytes a buffered item accounts for. */
const sizeOf = (item: Inbound): number => (item._tag === "Message" ? item.bytes : item.error.bytes)

/** How the socket's end maps to the transport's end. */
const endToClosed = (end: FrameSocketEnd): TransportClosed =>
  end.error
    ? new TransportClosed({ reason: "read_failed" })
    : new TransportClosed({ reason: "closed_by_peer", ...(end.code === undefined ? {} : { code: end.code }) })

/**
 * Builds the Transport over an open socket. The socket belongs to the current scope from here on: closing the
 * scope sends the courtesy close 1000 "client closing" (after every queued frame), waits up to `closeGrace` for
 * Core's answer and then destroys the socket. The returned service is valid until then.
 */
export const fromSocket = Effect.fnUntraced(function* (socket: FrameSocket, options: TransportOptions = {}) {
  const highBytes = options.inboundHighWaterBytes ?? defaults.inboundHighWaterBytes
  const highFrames = options.inboundHighWaterFrames ?? defaults.inboundHighWaterFrames
  const inbound = yield* Queue.unbounded<Inbound, TransportClosed>()
  const ended = Latch.makeUnsafe(false)
  let closed: TransportClosed | undefined
  let writeFailure: TransportClosed | undefined
  let bufferedBytes = 0
  let bufferedFrames = 0
  let paused = false
  let heard = true
  const metrics = yield* Effect.context<never>()
  const countIn = RuntimeMetrics.boundFrameCounter(metrics, "in")
  const countOut = RuntimeMetrics.boundFrameCounter(metrics, "out")

  /** Records the first reason the transport ended and ends the inbound stream with it. */
  const endWith = (reason: TransportClosed) => {
    if (closed !== undefined) return
    closed = reason
    Queue.failCauseUnsafe(inbound, Cause.fail(reason))
  }

  socket.listen({
    onFrame: (data, isBinary) => {
      heard = true
      if (closed !== undefined) return
      // The wire carries one JSON envelope per *text* frame; a binary frame is refused without decoding.
      const item: Inbound = isBinary
        ? {
          _tag: "Invalid",
          error: new InvalidFrame({ code: "not_json", bytes: typeof data === "string" ? data.length : data.byteLength })
        }
        : decodeInbound(data)
      countIn(1, sizeOf(item))
      if (item._tag === "Invalid") RuntimeMetrics.decodeFailureUnsafe(metrics, item.error.code)
      Queue.offerUnsafe(inbound, item)
      bufferedBytes += sizeOf(item)
      bufferedFrames += 1
      if (!paused && (bufferedBytes >= highBytes || bufferedFrames >= highFrames)) {
        paused = true
        socket.pause()
      }
    },
    onPong: () => {
      heard = true
    },
    onEnd: (end) => {
      if (end.frameTooLarge === true) RuntimeMetrics.decodeFailureUnsafe(metrics, "frame_too_large")
      endWith(!end.error && end.code !== undefined ? endToClosed(end) : writeFailure ?? endToClosed(end))
      ended.openUnsafe()
    }
  })

  const afterTake = (items: ReadonlyArray<Inbound>) =>
    Effect.sync(() => {
      for (const item of items) bufferedBytes -= sizeOf(item)
      bufferedFrames -= items.length
      if (paused && bufferedFrames === 0 && closed === undefined) {
        paused = false
        socket.resume()
      }
    })

  /**
   * A write failed or missed its deadline: the socket is unusable, so destroy it. The transport's end is still
   * decided by the socket's end event, because a write usually fails *because* Core's close frame arrived
   * first, and Core's close code (4001!) must win over our write failure.
   */
  const failed = (reason: TransportClosed) => {
    if (closed !== undefined) return
    writeFailure ??= reason
    socket.terminate()
  }
  // Every write handed to the socket until its callback fires, with its deadline, and the budgets of the waits
  // that have one (internal/pendingWrites.ts): no fiber, timer or race per write.
  const writes = yield* PendingWrites.make(FrameWriteDeadline, failed)

  /** `frame`'s wire bytes, counted as sent; or why it is not sent (the transport ended, the codec refused it). */
  const outgoing = (frame: Outgoing): Result.Result<Uint8Array, TransportClosed | OutgoingFrameRejected> => {
    if (closed !== undefined) return Result.fail(refusedAfterEnd(closed))
    const text = frameData(frame)
    if (Result.isFailure(text)) return Result.fail(text.failure)
    const data = wireBytes(text.success)
    countOut(1, data.byteLength)
    return Result.succeed(data)
  }

  const sendOne = (message: RuntimeToCore, budget?: Duration.Duration): Effect.Effect<WaitOutcome, TransportClosed | OutgoingFrameRejected> =>
    Effect.suspend(() => {
      const frame = outgoing(message)
      if (Result.isFailure(frame)) return Effect.fail(frame.failure)
      return writes.wait((done) => socket.send(frame.success, done, true), budget) // joins this turn's write (`post`: at once)
    })

  const sendBatch = (
    frames: ReadonlyArray<Outgoing>,
    budget?: Duration.Duration
  ): Effect.Effect<WaitOutcome, TransportClosed | OutgoingFrameRejected> =>
    Effect.suspend((): Effect.Effect<WaitOutcome, TransportClosed | OutgoingFrameRejected> => {
      if (closed !== undefined) return Effect.fail(refusedAfterEnd(closed))
      if (frames.length === 0) return Effect.succeed("written")
      // Encode everything first (frames encoded earlier are taken as they are): a refused frame means nothing of
      // the batch is written. Bytes (a chunk, `EncodedFrame.bytes`) stay bytes, a Run's delta its parts
      // (`EncodedDelta`), a text text: the socket writes each into the batch's buffer (`internal/clientFrames.ts`)
      // and reports the batch's UTF-8 size; a one-frame batch (a `done`) too (issue 18, relay). A batch of deltas
      // only is handed over as it is (`FrameSocket.sendAll` reads it before returning): no copy.
      let texts: Array<FramePayload> | undefined
      for (let i = 0; i < frames.length; i++) {
        const frame = frames[i]!
        if (frame instanceof EncodedDelta) {
          if (texts !== undefined) texts[i] = frame
          continue
        }
        const text = isEncoded(frame) ? Result.succeed(frame.bytes ?? frame.encoded) : encodeMessage(frame)
        if (Result.isFailure(text)) return Effect.fail(text.failure)
        texts ??= frames.slice(0, i) as Array<EncodedDelta>
        texts[i] = text.success
      }
      const payloads: ReadonlyArray<FramePayload> = texts ?? (frames as ReadonlyArray<EncodedDelta>)
      return writes.wait((done) => {
        const bytes = socket.sendAll(payloads, done)
        countOut(payloads.length, bytes)
      }, budget)
    })

  const post = (
    frame: Outgoing,
    unconfirmed: () => void
  ): Effect.Effect<void, TransportClosed | OutgoingFrameRejected> =>
    Effect.suspend((): Effect.Effect<void, TransportClosed | OutgoingFrameRejected> => {
      const data = outgoing(frame)
      if (Result.isFailure(data)) return Effect.fail(data.failure)
      // A failed write has already destroyed the socket (`failed`), as after a failed `send`.
      writes.handOver((done) => socket.send(data.success, done), (failure) => {
        if (failure !== undefined) unconfirmed()
      })
      return Effect.void
    })

  // Liveness: ping on an interval; Core's pong (or any frame) proves it is still reading and answering.
  const liveness = options.livenessTimeout === false ? undefined : Duration.fromInputUnsafe(options.livenessTimeout ?? defaults.livenessTimeout)
  if (liveness !== undefined) {
    const interval = Duration.fromInputUnsafe(options.pingInterval ?? defaults.pingInterval)
    let silentFor = Duration.zero
    yield* Effect.sync(() => {
      if (heard) silentFor = Duration.zero
      else silentFor = Duration.sum(silentFor, interval)
      heard = false
      if (Duration.isGreaterThanOrEqualTo(silentFor, liveness)) {
        endWith(new TransportClosed({ reason: "liveness" }))
        socket.terminate()
      } else socket.ping()
    }).pipe(
      Effect.delay(interval),
      Effect.repeat({ while: () => closed === undefined }),
      Effect.forkScoped
    )
  }

  const closeGrace = Duration.fromInputUnsafe(options.closeGrace ?? defaults.closeGrace)
  yield* Effect.addFinalizer(() =>
    Effect.gen(function* () {
      if (closed === undefined) {
        endWith(new TransportClosed({ reason: "closed_locally" }))
        socket.close(CloseNormal, "client closing")
      }
      yield* ended.await.pipe(
        Effect.timeoutOrElse({ duration: closeGrace, orElse: () => Effect.sync(() => socket.terminate()) })
      )
      // The socket is gone: a write whose callback never fired may or may not have left.
      writes.failAll()
    })
  )

  return Transport.of({
    send: (message) => Effect.asVoid(sendOne(message)),
    sendAll: (frames) => Effect.asVoid(sendBatch(frames)),
    sendWithin: (frame, budget) => (isEncoded(frame) ? sendBatch([frame], budget) : sendOne(frame, budget)),
    post,
    inbound: Stream.fromPull(Effect.succeed(Queue.takeAll(inbound).pipe(Effect.tap(afterTake)))),
    close: (code, reason) =>
      Effect.suspend(() => {
        if (closed !== undefined) return Effect.void
        // One step: ending the inbound queue wakes the connection loop, which may interrupt the caller before a
        // second step ran; the close frame must not depend on that race (the peer would see 1006 after the grace).
        return Effect.sync(() => {
          endWith(new TransportClosed({ reason: "closed_locally" }))
          socket.close(code, reason)
        })
      })
  })
})

export interface DialRequest {
  /** bootstrap's ws_url (already sanitized: no credential, token or fragment). */
  readonly wsUrl: string
  readonly deviceId: DeviceId
  readonly credential: Redacted.Redacted<string>
  readonly userAgent: string
  /** This attempt's connection id (Connector.ts), sent as `X-Agentwire-Connection-Id`. */
  readonly connectionId?: string
  readonly transport?: TransportOptions
}

/** The URL actually dialled: ws_url plus `device_id` and `version` (any `token` parameter removed). */
export const dialUrl = (wsUrl: string, deviceId: string): string => {
  const url = new URL(wsUrl)
  url.searchParams.delete("token")
  url.searchParams.set("device_id", deviceId)
  url.searchParams.set("version", ProtocolVersion)
  url.hash = ""
  return url.toString()
}

const dialError = (error: Ws.DialError): ConnectRejected | ConnectFailed =>
  error._tag === "Refused"
    ? classifyStatus("upgrade", error.status, errorCodeOf(error.body))
    : new ConnectFailed({
      phase: "upgrade",
      reason: error.reason,
      ...(error.detail === undefined ? {} : { detail: error.detail })
    })

/**
 * Dials Core's WebSocket and builds the Transport in the current scope. Success proves the upgrade returned 101
 * (Core accepted the credential, the device and our wire version just now) and nothing more. Fails with
 * `ConnectRejected` for 401/403/426 (permanent) and `ConnectFailed` otherwise, including a handshake that takes
 * longer than 10 s. After success the scope owns the socket (see `fromSocket`).
 */
export const dial = Effect.fn("WebSocketTransport.dial")(function* (request: DialRequest) {
  const socket = yield* Effect.acquireRelease(
    Ws.dial({
      url: dialUrl(request.wsUrl, request.deviceId),
      authorization: bearerAuthorization(request.credential),
      userAgent: request.userAgent,
      ...(request.connectionId === undefined ? {} : { connectionId: request.connectionId }),
      maxPayload: MaxFrameBytes,
      maxRefusalBody: 64 * 1024
    }).pipe(
      Effect.mapError(dialError),
      Effect.timeoutOrElse({
        duration: HandshakeTimeout,
        orElse: () => Effect.fail(new ConnectFailed({ phase: "upgrade", reason: "timeout" }))
      })
    ),
    (s) => Effect.sync(() => s.terminate())
  )
  return yield* fromSocket(socket, request.transport)
}) as (request: DialRequest) => Effect.Effect<Transport["Service"], ConnectRejected | ConnectFailed, Scope.Scope>
