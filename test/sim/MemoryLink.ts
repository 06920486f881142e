/**
 * One in-memory physical connection between the real Runtime (a `Transport`) and the real Core gateway (an
 * `effect/socket` Socket that `fromSocket` turns into the session's `DeviceTransport`), with the simulator's
 * network faults. Frames cross as text through the real codecs in both directions: the Runtime's `send`
 * encodes with `Messages.encodeMessage`, Core's socket reads the text; Core's writer writes text, the Runtime
 * decodes it with the same `decodeInbound` its WebSocket transport uses.
 *
 * Faults (all keep the ordering of one connection; nothing ever overtakes an earlier frame of its direction):
 * - `drop()`: the connection breaks at once (1006 on both sides); frames held back are lost.
 * - `dropAtFrame(n, deliver)`: the n-th frame from now (either direction) breaks it, delivered first or lost.
 * - `hold(direction)` / `release(direction)`: frames of one direction wait (a slow network), then arrive in order.
 *
 * `observe` sees every frame that crossed (delivered) or was lost, with its direction; the simulator records
 * them in the trace and feeds the invariants. Time is never involved.
 */
import { Cause, Effect, Queue, Result, Stream } from "effect"
import { Socket } from "effect/socket"
import { frameText, type Outgoing } from "../../src/proto/EncodedFrame.js"
import { Messages } from "../../src/proto/index.js"
import { decodeInbound, type Inbound, refusedAfterEnd, sendWithinBy, Transport, TransportClosed } from "../../src/runtime/transport/Transport.js"

export type Direction = "toCore" | "toRuntime"

export interface FrameEvent {
  readonly connection: number
  readonly direction: Direction
  readonly text: string
  readonly delivered: boolean
}

export interface LinkOptions {
  readonly connection: number
  readonly observe: (event: FrameEvent) => void
  /** Called once when the connection ended, with who ended it and the code. */
  readonly onEnd?: (by: "runtime" | "core" | "fault", code: number) => void
}

export interface MemoryLink {
  readonly connection: number
  /** The Runtime's end. */
  readonly transport: Transport["Service"]
  /** Core's end, for `fromSocket`. */
  readonly socket: Socket.Socket
  readonly isOpen: () => boolean
  /** Breaks the connection now (close code 1006 on both sides). */
  readonly drop: () => void
  /** Breaks the connection at the n-th frame from now (n >= 1), delivering that frame first when `deliver`. */
  readonly dropAtFrame: (n: number, deliver: boolean) => void
  readonly hold: (direction: Direction) => void
  readonly release: (direction: Direction) => void
  /** Puts a Core frame on the wire as if Core's writer had written it (an operator's `device_shutdown`). */
  readonly inject: (text: string) => void
}

export const make = (options: LinkOptions): Effect.Effect<MemoryLink> =>
  Effect.gen(function* () {
    const runtimeInbound = yield* Queue.unbounded<Inbound, TransportClosed>()
    const coreInbound = yield* Queue.unbounded<string | Uint8Array, Socket.SocketError>()
    let open = true
    let dropCountdown: { n: number; deliver: boolean } | undefined
    const held: Record<Direction, Array<string> | undefined> = { toCore: undefined, toRuntime: undefined }
    let closed: TransportClosed | undefined

    const end = (by: "runtime" | "core" | "fault", code: number, reason: string) => {
      if (!open) return
      open = false
      for (const direction of ["toCore", "toRuntime"] as const) {
        for (const text of held[direction] ?? []) options.observe({ connection: options.connection, direction, text, delivered: false })
        held[direction] = undefined
      }
      closed = by === "runtime"
        ? new TransportClosed({ reason: "closed_locally" })
        : new TransportClosed({ reason: "closed_by_peer", code })
      Queue.failCauseUnsafe(runtimeInbound, Cause.fail(closed))
      Queue.failCauseUnsafe(
        coreInbound,
        Cause.fail(new Socket.SocketError({ reason: new Socket.SocketCloseError({ code, closeReason: reason }) }))
      )
      options.onEnd?.(by, code)
    }

    const arrive = (direction: Direction, text: string) => {
      options.observe({ connection: options.connection, direction, text, delivered: true })
      if (direction === "toCore") Queue.offerUnsafe(coreInbound, text)
      else Queue.offerUnsafe(runtimeInbound, decodeInbound(text))
    }

    /** One frame enters the network (the sender's write completed locally). */
    const carry = (direction: Direction, text: string) => {
      if (!open) {
        options.observe({ connection: options.connection, direction, text, delivered: false })
        return
      }
      if (dropCountdown !== undefined && --dropCountdown.n <= 0) {
        const deliver = dropCountdown.deliver
        dropCountdown = undefined
        if (deliver && held[direction] === undefined) arrive(direction, text)
        else options.observe({ connection: options.connection, direction, text, delivered: false })
        end("fault", 1006, "")
        return
      }
      const queue = held[direction]
      if (queue !== undefined) queue.push(text)
      else arrive(direction, text)
    }

    const write = (
      messages: ReadonlyArray<Outgoing>
    ): Effect.Effect<void, TransportClosed | Messages.OutgoingFrameRejected> =>
      Effect.suspend((): Effect.Effect<void, TransportClosed | Messages.OutgoingFrameRejected> => {
        const texts: Array<string> = []
        for (const message of messages) {
          const text = frameText(message)
          if (Result.isFailure(text)) return Effect.fail(text.failure)
          texts.push(text.success)
        }
        if (!open) return Effect.fail(refusedAfterEnd(closed ?? new TransportClosed({ reason: "closed_by_peer", code: 1006 })))
        for (const text of texts) carry("toCore", text)
        return Effect.void
      })

    const transport = Transport.of({
      send: (message) => write([message]),
      sendAll: write,
      sendWithin: sendWithinBy((message) => write([message]), write),
      // A write here completes as it is handed over: nothing is left to wait for.
      post: (frame) => write([frame]),
      inbound: Stream.fromQueue(runtimeInbound),
      close: (code, reason) => Effect.sync(() => end("runtime", code, reason))
    })

    const coreWrite = (chunk: Uint8Array | string | Socket.CloseEvent): Effect.Effect<void, Socket.SocketError> =>
      Effect.suspend(() => {
        if (Socket.isCloseEvent(chunk)) {
          end("core", chunk.code, chunk.reason ?? "")
          return Effect.void
        }
        if (!open) {
          return Effect.fail(new Socket.SocketError({ reason: new Socket.SocketWriteError({ cause: new Error("connection closed") }) }))
        }
        carry("toRuntime", typeof chunk === "string" ? chunk : new TextDecoder().decode(chunk))
        return Effect.void
      })

    const socket = Socket.make({
      reader: Effect.gen(function* () {
        yield* Effect.addFinalizer(() => Effect.sync(() => end("core", 1006, "")))
        return { pull: Queue.takeAll(coreInbound), upgrade: Socket.SocketUpgradeError.unsupported }
      }),
      writer: Effect.succeed({
        write: coreWrite,
        writeAll: (chunks) => Effect.forEach(chunks, coreWrite, { discard: true })
      })
    })

    return {
      connection: options.connection,
      transport,
      socket,
      isOpen: () => open,
      drop: () => end("fault", 1006, ""),
      dropAtFrame: (n, deliver) => {
        if (open) dropCountdown = { n: Math.max(1, n), deliver }
      },
      hold: (direction) => {
        if (open && held[direction] === undefined) held[direction] = []
      },
      release: (direction) => {
        const queue = held[direction]
        held[direction] = undefined
        if (queue !== undefined && open) for (const text of queue) arrive(direction, text)
      },
      inject: (text) => carry("toRuntime", text)
    } satisfies MemoryLink
  })
