/**
 * A FrameSocket a test controls (when a local write completes, when Core closes, when a pong arrives), and the
 * helpers the WebSocketTransport tests share: an inbound reader and a delta message.
 */
import { Effect, Stream } from "effect"
import { EncodedDelta } from "../../src/proto/EncodedFrame.js"
import { Ids, type Messages } from "../../src/proto/index.js"
import type { FramePayload } from "../../src/runtime/transport/internal/clientFrames.js"
import type { Inbound, TransportClosed } from "../../src/runtime/transport/Transport.js"
import type { FrameListener, FrameSocket, TransportOptions } from "../../src/runtime/transport/WebSocketTransport.js"

export interface Write {
  readonly text: string
  readonly written: (error?: Error) => void
}

/** A FrameSocket whose every effect is recorded and whose events the test fires. */
export const makeSocket = (options: { readonly answersClose?: boolean } = {}) => {
  let listener: FrameListener | undefined
  let ended = false
  const endOnce = (end: { readonly code?: number; readonly error: boolean }) => {
    if (ended) return
    ended = true
    listener?.onEnd(end)
  }
  // Like ws: once Core's close frame arrived, writes fail at once and the close event carries Core's code.
  let closeFrameCode: number | undefined
  const writes: Array<Write> = []
  /** Each `sendAll` call: its frames, and the callback the socket fires after the last one was written. */
  const batches: Array<{ readonly texts: ReadonlyArray<string>; readonly written: (error?: Error) => void }> = []
  /** Each `sendAll` call's array itself, as the socket was given it. */
  const handed: Array<ReadonlyArray<FramePayload>> = []
  /** Every frame handed to the socket, in order, whichever way. */
  const order: Array<string> = []
  const calls: Array<string> = []
  // A frame handed over as its UTF-8 bytes (a chunk frame) or as a delta's parts is recorded as its text.
  const asText = (frame: FramePayload) =>
    typeof frame === "string" ? frame : frame instanceof EncodedDelta ? frame.encoded : new TextDecoder().decode(frame)
  const socket: FrameSocket = {
    send: (frame, written) => {
      if (closeFrameCode !== undefined) written(new Error("socket not open"))
      else {
        const text = asText(frame)
        writes.push({ text, written })
        order.push(text)
      }
    },
    sendAll: (frames, written) => {
      if (closeFrameCode !== undefined) written(new Error("socket not open"))
      else {
        const texts = frames.map(asText)
        handed.push(frames)
        batches.push({ texts, written })
        order.push(...texts)
      }
      return frames.reduce((n, frame) => n + Buffer.byteLength(asText(frame)), 0)
    },
    close: (code, reason) => {
      calls.push(`close ${code} ${reason}`)
      if (options.answersClose !== false) endOnce({ code, error: false })
    },
    terminate: () => {
      calls.push("terminate")
      // like ws: destroying the socket emits close, with Core's code when its close frame already arrived
      endOnce(closeFrameCode === undefined ? { error: true } : { code: closeFrameCode, error: false })
    },
    pause: () => {
      calls.push("pause")
    },
    resume: () => {
      calls.push("resume")
    },
    ping: () => {
      calls.push("ping")
    },
    listen: (l) => {
      listener = l
    }
  }
  return {
    socket,
    writes,
    batches,
    handed,
    order,
    calls,
    frame: (text: string) => listener!.onFrame(Buffer.from(text, "utf8"), false),
    binary: (bytes: Uint8Array) => listener!.onFrame(bytes, true),
    pong: () => listener!.onPong(),
    closeFrame: (code: number) => {
      closeFrameCode = code
    },
    end: (code?: number, error = false) => endOnce(code === undefined ? { error } : { code, error })
  }
}

/** Pulls inbound items one at a time (the stream hands out everything buffered per pull). */
export const reader = (inbound: Stream.Stream<Inbound, TransportClosed>) =>
  Effect.map(Stream.toPull(inbound), (pull) => {
    let buffer: Array<Inbound> = []
    return Effect.suspend(() => {
      const head = buffer.shift()
      if (head !== undefined) return Effect.succeed(head)
      return Effect.map(pull, (chunk) => {
        buffer = chunk.slice(1)
        return chunk[0]!
      })
    })
  })

export const noLiveness: TransportOptions = { livenessTimeout: false }
export const runId = Ids.unsafeMake.runId("run-1")
export const delta = (text: string, sequence = 1): Messages.RuntimeToCore => ({
  type: "delta",
  id: runId,
  payload: { delta: text, sequence }
})

