/**
 * The only module that imports `ws`. Opens a client WebSocket with the Bearer header and adapts it to
 * `FrameSocket`. A refused upgrade surfaces with its status and (at most 64 KiB of) its body, which Effect's own
 * `Socket` cannot give us; a send reports completion from `ws.send`'s callback, i.e. when the write completed
 * locally. A batch is framed here and written to the TCP socket in one write while `ws`'s sender is idle
 * (`clientFrames.ts`, `directOf`), and completes with that write's callback. Single frames sent with `joinTurn`
 * within one turn of the event loop reach the kernel in one write (`coalesce`).
 *
 * Never: follows redirects (a Bearer header must not travel to another origin), compresses (no
 * permessage-deflate), or keeps the Authorization value anywhere but the request it is written into.
 */
import { Effect } from "effect"
import WebSocket from "ws"
import { EncodedFrame } from "../../../proto/index.js"
import { systemErrorCode } from "../ConnectError.js"
import { type FramePayload, maskedTextFrames } from "./clientFrames.js"
import type { FrameListener, FrameSocket, FrameSocketEnd } from "./frameSocket.js"

export interface DialOptions {
  /** The full URL to dial, query parameters included (never a credential). */
  readonly url: string
  /** The value of the Authorization header. */
  readonly authorization: string
  readonly userAgent: string
  /** Sent as `X-Agentwire-Connection-Id` (the attempt's id both sides log; never a secret). */
  readonly connectionId?: string
  /** Largest inbound message accepted; a larger one fails the connection (close 1009). */
  readonly maxPayload: number
  /** At most this many bytes of a refused upgrade's body are kept. */
  readonly maxRefusalBody: number
}

/** Why the dial did not produce an open socket. */
export type DialError =
  | { readonly _tag: "Refused"; readonly status: number; readonly body: Uint8Array | undefined }
  | { readonly _tag: "Failed"; readonly reason: "network" | "handshake"; readonly detail: string | undefined }

type Buffered =
  | { readonly _tag: "frame"; readonly data: Uint8Array | string; readonly isBinary: boolean }
  | { readonly _tag: "pong" }
  | { readonly _tag: "end"; readonly end: FrameSocketEnd }

const toBytes = (data: WebSocket.RawData): Uint8Array =>
  Array.isArray(data) ? Buffer.concat(data) : data instanceof ArrayBuffer ? new Uint8Array(data) : data

const textFrame = { binary: false } as const

// Long texts go to `ws` as UTF-8 bytes (EncodedFrame.textFramePayload).
const payloadOf = (payload: FramePayload): string | Uint8Array =>
  EncodedFrame.textFramePayload(payload instanceof EncodedFrame.EncodedDelta ? payload.encoded : payload)

/**
 * The TCP socket under an open `ws` client (`ws` keeps it as `_socket`; its typings do not declare it), used
 * only to cork a batch. Undefined when absent: sends then simply are not coalesced.
 */
const tcpOf = (ws: WebSocket): { readonly cork: () => void; readonly uncork: () => void } | undefined => {
  const socket: unknown = (ws as unknown as { readonly _socket?: unknown })._socket
  return typeof socket === "object" && socket !== null && "cork" in socket && "uncork" in socket &&
      typeof socket.cork === "function" && typeof socket.uncork === "function"
    ? (socket as { readonly cork: () => void; readonly uncork: () => void })
    : undefined
}

/** A TCP socket's write, as a batch written directly needs it. */
interface DirectWrite {
  readonly write: (data: Uint8Array, done: (error?: Error | null) => void) => boolean
}

/**
 * The TCP socket under an open `ws` client when a batch may be written to it directly, already framed
 * (`clientFrames.ts`): `ws`'s sender holds nothing back, i.e. it is idle (it queues frames only while compressing
 * or reading a Blob, neither of which this client does) and not inside a fragmented message. Undefined otherwise,
 * or when `ws`'s internals are not the ones this was written against (ws 8: `_sender._state` 0 is idle): the batch
 * then goes through `ws.send`. Frames written either way reach the socket in call order, whole, so they interleave
 * with `ws`'s own control frames (ping, close) only between frames.
 */
const directOf = (ws: WebSocket): DirectWrite | undefined => {
  const sender: unknown = (ws as unknown as { readonly _sender?: unknown })._sender
  if (typeof sender !== "object" || sender === null) return undefined
  const { _firstFragment, _queue, _state } = sender as { readonly _state?: unknown; readonly _queue?: unknown; readonly _firstFragment?: unknown }
  if (_state !== 0 || _firstFragment !== true || !Array.isArray(_queue) || _queue.length !== 0) return undefined
  const socket: unknown = (ws as unknown as { readonly _socket?: unknown })._socket
  return typeof socket === "object" && socket !== null && "write" in socket && typeof socket.write === "function"
    ? (socket as DirectWrite)
    : undefined
}

/** The UTF-8 size of a batch's payloads, measured (the framed path counts it while encoding). */
const payloadBytes = (texts: ReadonlyArray<FramePayload>): number => {
  let bytes = 0
  for (const text of texts) {
    const data = text instanceof EncodedFrame.EncodedDelta ? text.encoded : text
    bytes += typeof data === "string" ? Buffer.byteLength(data, "utf8") : data.byteLength
  }
  return bytes
}

/** Adapts an open `ws` client to FrameSocket; events before `listen` are buffered. */
const adapt = (ws: WebSocket): FrameSocket => {
  let listener: FrameListener | undefined
  let buffered: Array<Buffered> = []
  let failed = false
  let tooLarge = false
  let ended = false
  /**
   * Issue 18, Turns: with many Turns in flight, the statuses of several Turns are sent within one turn of the event
   * loop, and each write of its own woke Core's event loop for one frame. The first `joinTurn` send of a turn corks the
   * TCP socket and `setImmediate` uncorks it, after this turn's I/O callbacks and the fibers they resumed; any frame or
   * batch written meanwhile joins, after it. Order and write callbacks are unchanged (a callback fires once its bytes
   * were written, after the uncork); a frame waits at most for the rest of its turn (`WsCoalesce.live.test.ts`).
   */
  let corked = false
  const coalesce = () => {
    if (corked) return
    const tcp = tcpOf(ws)
    if (tcp === undefined) return
    corked = true
    tcp.cork()
    setImmediate(() => {
      corked = false
      tcp.uncork()
    })
  }
  const deliver = (event: Buffered) => {
    if (listener === undefined) {
      buffered.push(event)
      return
    }
    if (event._tag === "frame") listener.onFrame(event.data, event.isBinary)
    else if (event._tag === "pong") listener.onPong()
    else listener.onEnd(event.end)
  }
  ws.on("message", (data, isBinary) => deliver({ _tag: "frame", data: toBytes(data), isBinary }))
  ws.on("pong", () => deliver({ _tag: "pong" }))
  ws.on("error", (error: { readonly code?: unknown }) => {
    failed = true
    // `ws` enforces `maxPayload` itself: an oversized frame is this error, then a 1009 close.
    if (error.code === "WS_ERR_UNSUPPORTED_MESSAGE_LENGTH") tooLarge = true
  })
  ws.on("close", (code) => {
    if (ended) return
    ended = true
    // 1006: no close frame (abnormal); 1005: a close frame without a code.
    const end: FrameSocketEnd = failed || code === 1006
      ? (tooLarge ? { error: true, frameTooLarge: true } : { error: true })
      : code === 1005
      ? { error: false }
      : { code, error: false }
    deliver({ _tag: "end", end })
  })
  return {
    send: (text, written, joinTurn) => {
      if (ws.readyState !== WebSocket.OPEN) {
        written(new Error("socket not open"))
        return
      }
      if (joinTurn === true) coalesce()
      ws.send(payloadOf(text), textFrame, (error) => written(error ?? undefined))
    },
    sendAll: (texts, written) => {
      if (ws.readyState !== WebSocket.OPEN) {
        written(new Error("socket not open"))
        return payloadBytes(texts)
      }
      const last = texts.length - 1
      if (last < 0) {
        written()
        return 0
      }
      // The batch as one write of frames framed here (see `directOf`): its callback proves every frame of it.
      const direct = directOf(ws)
      if (direct !== undefined) {
        const batch = maskedTextFrames(texts)
        direct.write(batch.frames, (error) => written(error ?? undefined))
        return batch.bytes
      }
      // Write callbacks fire in call order, so an earlier failure is known when the last callback fires.
      let failure: Error | undefined
      const each = (error?: Error | null) => {
        if (error) failure ??= error
      }
      // Corking the TCP socket around the batch lets Node hand all its frames to the kernel in one writev
      // instead of one system call per frame; the order and the per-frame callbacks are unchanged.
      const tcp = tcpOf(ws)
      tcp?.cork()
      try {
        for (let i = 0; i < last; i++) ws.send(payloadOf(texts[i]!), textFrame, each)
        ws.send(payloadOf(texts[last]!), textFrame, (error) => written(failure ?? error ?? undefined))
      } finally {
        tcp?.uncork()
      }
      return payloadBytes(texts)
    },
    close: (code, reason) => {
      if (ws.readyState === WebSocket.OPEN) ws.close(code, reason)
    },
    terminate: () => ws.terminate(),
    pause: () => ws.pause(),
    resume: () => ws.resume(),
    ping: () => {
      if (ws.readyState === WebSocket.OPEN) ws.ping()
    },
    listen: (next) => {
      listener = next
      const earlier = buffered
      buffered = []
      for (const event of earlier) deliver(event)
    }
  }
}

/**
 * Dials once. Succeeds with an open socket (the upgrade returned 101); the caller owns it and must close or
 * terminate it. Fails with `Refused` (any other HTTP status, with its bounded body) or `Failed`. Interrupting
 * the dial destroys the half-open connection. No timeout here: the caller bounds it on the Effect clock.
 */
export const dial = (options: DialOptions): Effect.Effect<FrameSocket, DialError> =>
  Effect.callback<FrameSocket, DialError>((resume) => {
    let settled = false
    const settle = (effect: Effect.Effect<FrameSocket, DialError>) => {
      if (settled) return
      settled = true
      resume(effect)
    }
    const ws = new WebSocket(options.url, {
      headers: {
        Authorization: options.authorization,
        "User-Agent": options.userAgent,
        ...(options.connectionId === undefined ? {} : { "X-Agentwire-Connection-Id": options.connectionId })
      },
      maxPayload: options.maxPayload,
      perMessageDeflate: false,
      followRedirects: false
    })
    // Errors after settling are reported through `close`; this listener keeps them from becoming uncaught.
    ws.on("error", (error) => {
      const message = error instanceof Error ? error.message : ""
      const detail = systemErrorCode(error)
      settle(Effect.fail({
        _tag: "Failed",
        reason: detail !== undefined || /ECONN|ENOTFOUND|EAI_AGAIN|socket hang up/.test(message) ? "network" : "handshake",
        detail
      }))
    })
    ws.on("unexpected-response", (_request, response) => {
      const chunks: Array<Buffer> = []
      let size = 0
      let truncated = false
      const finish = () => {
        const body = truncated ? undefined : new Uint8Array(Buffer.concat(chunks))
        settle(Effect.fail({ _tag: "Refused", status: response.statusCode ?? 0, body }))
        ws.terminate()
      }
      response.on("data", (chunk: Buffer) => {
        if (truncated) return
        size += chunk.byteLength
        if (size > options.maxRefusalBody) {
          truncated = true
          finish()
        } else chunks.push(chunk)
      })
      response.on("end", finish)
      response.on("error", finish)
    })
    ws.on("open", () => settle(Effect.succeed(adapt(ws))))
    return Effect.sync(() => {
      if (!settled) {
        settled = true
        ws.terminate()
      }
    })
  })
