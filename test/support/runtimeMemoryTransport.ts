/**
 * An in-memory `Transport` for unit tests of the Runtime: the per-connection logic (Connection.run and the
 * dispatcher) and the daemon loop. It plays Core's end of one physical connection.
 *
 * Frames go through the real codec in both directions, so a test sees exactly what a WebSocket peer would:
 * - `toRuntime(message)` encodes the message with `Messages.encodeMessage` and decodes the text with the same
 *   `decodeInbound` the WebSocket transport uses; `toRuntime(text)` delivers raw frame text (for invalid frames),
 *   which arrives as an `Invalid` item when it does not decode.
 * - `send` on the Runtime side encodes with `Messages.encodeMessage` (so an invalid or > 4 MiB frame is refused
 *   with `OutgoingFrameRejected` before anything is "written") and Core's strict decode reads it back; a frame
 *   Core could not decode is a defect of the code under test and dies loudly.
 *
 * `send` resolves when the frame is queued for Core (the in-memory "local write"); `sendAll` encodes the whole
 * batch first (one refused frame: nothing is written) and resolves when its last frame is queued. `holdWrites` /
 * `releaseWrites` model a slow local write: while held, sends wait (in order) and nothing becomes visible to
 * `fromRuntime`.
 * Time is never involved: pair it with TestClock freely.
 *
 * Usage:
 * ```ts
 * const core = yield* MemoryTransport.make()
 * const fiber = yield* Connection.run.pipe(Effect.provide(core.layer), …, Effect.forkScoped)
 * const first = yield* core.fromRuntime            // e.g. the heartbeat
 * yield* core.toRuntime({ type: "prompt_cancel", id: runId, payload: {} })
 * yield* core.close(4001)                          // Core closes: inbound fails with TransportClosed{closed_by_peer, 4001}
 * ```
 */
import { Deferred, Effect, Layer, Queue, Ref, Result, Semaphore, Stream } from "effect"
import { frameText, type Outgoing } from "../../src/proto/EncodedFrame.js"
import { Messages } from "../../src/proto/index.js"
import { decodeInbound, type Inbound, refusedAfterEnd, sendWithinBy, Transport, TransportClosed } from "../../src/runtime/transport/Transport.js"

/** What the Runtime passed to `Transport.close`. */
export interface LocalClose {
  readonly code: number
  readonly reason: string
}

export interface MemoryTransport {
  /** Provides `Transport` backed by this connection. */
  readonly layer: Layer.Layer<Transport>
  /** The same service, for code that provides it directly (`Effect.provideService(Transport, core.transport)`). */
  readonly transport: Transport["Service"]
  /**
   * Core sends one frame. A message goes through encode + the Runtime's decode; a string is delivered as raw
   * frame text. Dies if the connection is already closed (a test bug: Core cannot send after closing).
   */
  readonly toRuntime: (frame: Messages.CoreToRuntime | string) => Effect.Effect<void>
  /** Takes the next frame the Runtime sent, waiting for one. */
  readonly fromRuntime: Effect.Effect<Messages.RuntimeToCore>
  /** Number of frames the Runtime sent that `fromRuntime` has not taken yet (0 = silence so far). */
  readonly pending: Effect.Effect<number>
  /** Every frame the Runtime sent on this connection, in order (taken or not). */
  readonly sent: Effect.Effect<ReadonlyArray<Messages.RuntimeToCore>>
  /** The size of each `sendAll` batch, in call order (single `send`s are not listed). */
  readonly batches: Effect.Effect<ReadonlyArray<number>>
  /**
   * Core closes the connection with a WebSocket close code (default 1000). Buffered inbound frames are still
   * delivered, then `inbound` fails with `TransportClosed{closed_by_peer, code}`; sends fail the same way.
   * Idempotent.
   */
  readonly close: (code?: number) => Effect.Effect<void>
  /** Completes when the Runtime called `Transport.close`, with its code and reason. */
  readonly closedByRuntime: Effect.Effect<LocalClose>
  /** Holds local writes: later sends wait, in order, until `releaseWrites`. */
  readonly holdWrites: Effect.Effect<void>
  readonly releaseWrites: Effect.Effect<void>
}

/** Creates one in-memory connection. Not scoped: nothing to release. */
export const make: Effect.Effect<MemoryTransport> = Effect.gen(function* () {
  const inbound = yield* Queue.unbounded<Inbound, TransportClosed>()
  const outbound = yield* Queue.unbounded<Messages.RuntimeToCore>()
  const log = yield* Ref.make<ReadonlyArray<Messages.RuntimeToCore>>([])
  const closed = yield* Ref.make<TransportClosed | undefined>(undefined)
  const localClose = yield* Deferred.make<LocalClose>()
  const writeOrder = yield* Semaphore.make(1)
  let held: Deferred.Deferred<void> | undefined
  const batches: Array<number> = []

  const endWith = (error: TransportClosed) =>
    Ref.modify(closed, (current) => [current === undefined, current ?? error]).pipe(
      Effect.flatMap((first) => (first ? Queue.fail(inbound, error) : Effect.void)),
      Effect.asVoid
    )

  /** Encodes every frame first (a refused one means nothing is written), then writes them in order. */
  const write = (messages: ReadonlyArray<Outgoing>) =>
    Effect.gen(function* () {
      const texts: Array<string> = []
      for (const message of messages) {
        const text = frameText(message)
        if (Result.isFailure(text)) return yield* text.failure
        texts.push(text.success)
      }
      // Already ended: nothing is handed over (definite). Ended while the write was held: it may have left.
      const ended = yield* Ref.get(closed)
      if (ended !== undefined) return yield* refusedAfterEnd(ended)
      yield* writeOrder.withPermit(
        Effect.gen(function* () {
          if (held !== undefined) yield* Deferred.await(held)
          const state = yield* Ref.get(closed)
          if (state !== undefined) return yield* state
          for (let i = 0; i < texts.length; i++) {
            const seen = Messages.decodeRuntimeToCore(texts[i]!)
            if (Result.isFailure(seen)) {
              return yield* Effect.die(
                new Error(`Core could not decode a ${messages[i]!.type} frame the Runtime sent: ${seen.failure.message}`)
              )
            }
            yield* Ref.update(log, (frames) => [...frames, seen.success])
            yield* Queue.offer(outbound, seen.success)
          }
        })
      )
    })
  const send = (message: Messages.RuntimeToCore) => write([message])
  const sendAll = (messages: ReadonlyArray<Outgoing>) =>
    Effect.andThen(Effect.sync(() => batches.push(messages.length)), write(messages))

  /**
   * Hands the frame over without waiting for its write: refusals are known at once; the write itself runs in
   * order with every other send (held by `holdWrites` like them) on a fiber of its own.
   */
  const post = (frame: Outgoing, unconfirmed: () => void) =>
    Effect.gen(function* () {
      const text = frameText(frame)
      if (Result.isFailure(text)) return yield* text.failure
      const ended = yield* Ref.get(closed)
      if (ended !== undefined) return yield* refusedAfterEnd(ended)
      yield* Effect.forkDetach(write([frame]).pipe(Effect.catch(() => Effect.sync(unconfirmed))), { startImmediately: true })
    })

  const transport = Transport.of({
    send,
    sendAll,
    sendWithin: sendWithinBy(send, sendAll),
    post,
    inbound: Stream.fromQueue(inbound),
    close: (code, reason) =>
      Deferred.succeed(localClose, { code, reason }).pipe(
        Effect.andThen(endWith(new TransportClosed({ reason: "closed_locally" })))
      )
  })

  return {
    layer: Layer.succeed(Transport, transport),
    transport,
    toRuntime: (frame) =>
      Effect.gen(function* () {
        if ((yield* Ref.get(closed)) !== undefined) {
          return yield* Effect.die(new Error("MemoryTransport: Core sent a frame after the connection closed"))
        }
        let text: string
        if (typeof frame === "string") text = frame
        else {
          const encoded = Messages.encodeMessage(frame)
          if (Result.isFailure(encoded)) {
            return yield* Effect.die(new Error(`MemoryTransport: the test's ${frame.type} frame does not encode`))
          }
          text = encoded.success
        }
        yield* Queue.offer(inbound, decodeInbound(text))
      }),
    fromRuntime: Queue.take(outbound),
    pending: Queue.size(outbound),
    sent: Ref.get(log),
    batches: Effect.sync(() => [...batches]),
    close: (code = 1000) => endWith(new TransportClosed({ reason: "closed_by_peer", code })),
    closedByRuntime: Deferred.await(localClose),
    holdWrites: Effect.gen(function* () {
      if (held === undefined) held = yield* Deferred.make<void>()
    }),
    releaseWrites: Effect.suspend(() => {
      const gate = held
      held = undefined
      return gate === undefined ? Effect.void : Deferred.succeed(gate, undefined)
    })
  }
})

export const MemoryTransport = { make } as const
