/**
 * One physical WebSocket connection as a scripted peer sees it (server or client end), on the `ws` package:
 * ordered text frames in, ordered text frames out, a ping/pong barrier, an abrupt drop and a courtesy close.
 * The only conformance file that touches `ws` sockets directly besides the two peers' listeners/dialers.
 *
 * Listeners are attached synchronously when the link is made, so no frame that arrives before the first
 * `take` is lost. Inbound frames are kept in arrival order without bound: a scripted peer reads every frame of
 * a short scenario.
 */
import { Effect, Option, Schema } from "effect"
import type { IncomingMessage } from "node:http"
import WebSocket from "ws"
import { MaxFrameBytes } from "../../proto/Limits.js"

/** What the real side delivered next: a text frame, a binary frame (never valid on this wire) or the close. */
export type Incoming =
  | { readonly _tag: "Frame"; readonly text: string }
  | { readonly _tag: "Binary"; readonly bytes: number }
  | { readonly _tag: "Closed"; readonly code: number; readonly reason: string }

/** The link is closed; nothing more can be sent or awaited on it. */
export class LinkClosed extends Schema.TaggedError<LinkClosed>()("LinkClosed", {
  code: Schema.Int
}) {
  override get message() {
    return `connection closed (code ${this.code})`
  }
}

export interface Link {
  /** Local number of this connection (1 for the first the peer saw). */
  readonly number: number
  /** Writes one text frame; resolves once `ws` reports the write completed. */
  readonly send: (text: string) => Effect.Effect<void, LinkClosed>
  /** The next inbound event; after the close it keeps returning the `Closed` event. */
  readonly take: Effect.Effect<Incoming>
  /** The next inbound event if one is already buffered. */
  readonly poll: Effect.Effect<Option.Option<Incoming>>
  /**
   * A ping/pong round trip: every frame the real side wrote before it answered the ping has then arrived.
   * Fails when the link closes first.
   */
  readonly barrier: Effect.Effect<void, LinkClosed>
  /** Destroys the socket without a close handshake (the real side sees an abnormal closure). */
  readonly drop: Effect.Effect<void>
  /** Starts a close handshake with a code. */
  readonly close: (code: number, reason: string) => Effect.Effect<void>
  /** Whether the socket is still open. */
  readonly isOpen: Effect.Effect<boolean>
}

/** Wraps an open `ws` socket. */
export const makeLink = (socket: WebSocket, number: number): Link => {
  const items: Array<Incoming> = []
  const waiters: Array<(i: Incoming) => void> = []
  const pongs: Array<(ok: boolean) => void> = []
  let closedEvent: Incoming | undefined
  const push = (incoming: Incoming) => {
    const waiter = waiters.shift()
    if (waiter !== undefined) waiter(incoming)
    else items.push(incoming)
  }
  socket.on("message", (data, isBinary) => {
    if (isBinary) {
      const bytes = Array.isArray(data) ? data.reduce((n, b) => n + b.byteLength, 0) : (data as ArrayBuffer).byteLength
      push({ _tag: "Binary", bytes })
    } else push({ _tag: "Frame", text: Buffer.isBuffer(data) ? data.toString("utf8") : String(data) })
  })
  socket.on("pong", () => pongs.shift()?.(true))
  socket.on("error", () => {})
  socket.on("close", (code, reason) => {
    closedEvent = { _tag: "Closed", code, reason: reason.toString("utf8").slice(0, 123) }
    push(closedEvent)
    for (const settle of pongs.splice(0)) settle(false)
  })
  const closedCode = () => (closedEvent?._tag === "Closed" ? closedEvent.code : 1006)
  const take: Effect.Effect<Incoming> = Effect.callback<Incoming>((resume) => {
    const next = items.shift()
    if (next !== undefined) return resume(Effect.succeed(next))
    if (closedEvent !== undefined) return resume(Effect.succeed(closedEvent))
    const waiter = (i: Incoming) => resume(Effect.succeed(i))
    waiters.push(waiter)
    return Effect.sync(() => {
      const at = waiters.indexOf(waiter)
      if (at >= 0) waiters.splice(at, 1)
    })
  })
  return {
    number,
    send: (text) =>
      Effect.callback<void, LinkClosed>((resume) => {
        if (socket.readyState !== WebSocket.OPEN) return resume(Effect.fail(new LinkClosed({ code: closedCode() })))
        socket.send(text, (error) => resume(error === undefined || error === null ? Effect.void : Effect.fail(new LinkClosed({ code: closedCode() }))))
      }),
    take,
    poll: Effect.sync(() => {
      const next = items.shift()
      return next !== undefined ? Option.some(next) : closedEvent !== undefined ? Option.some(closedEvent) : Option.none()
    }),
    barrier: Effect.callback<void, LinkClosed>((resume) => {
      if (socket.readyState !== WebSocket.OPEN) return resume(Effect.fail(new LinkClosed({ code: closedCode() })))
      pongs.push((ok) => resume(ok ? Effect.void : Effect.fail(new LinkClosed({ code: closedCode() }))))
      socket.ping()
    }),
    drop: Effect.sync(() => socket.terminate()),
    close: (code, reason) => Effect.sync(() => socket.close(code, reason)),
    isOpen: Effect.sync(() => socket.readyState === WebSocket.OPEN)
  }
}

/** The upgrade was refused with an HTTP status (the body's `error` code when it is the machine-route shape). */
export class DialRefused extends Schema.TaggedError<DialRefused>()("DialRefused", {
  status: Schema.Int,
  error: Schema.optionalKey(Schema.String)
}) {
  override get message() {
    return `upgrade refused with HTTP ${this.status}${this.error === undefined ? "" : ` (${this.error})`}`
  }
}

/** The connection could not be made (no HTTP answer). */
export class DialFailed extends Schema.TaggedError<DialFailed>()("DialFailed", {
  reason: Schema.String
}) {
  override get message() {
    return `dial failed (${this.reason})`
  }
}

/** Reads at most 64 KiB of a refusal body and extracts its `error` code. */
const readErrorCode = (res: IncomingMessage): Promise<string | undefined> =>
  new Promise((resolve) => {
    const chunks: Array<Buffer> = []
    let size = 0
    res.on("data", (chunk: Buffer) => {
      size += chunk.byteLength
      if (size <= 64 * 1024) chunks.push(chunk)
    })
    res.on("end", () => {
      try {
        const body: unknown = JSON.parse(Buffer.concat(chunks).toString("utf8"))
        const error = typeof body === "object" && body !== null ? (body as Record<string, unknown>)["error"] : undefined
        resolve(typeof error === "string" ? error.slice(0, 64) : undefined)
      } catch {
        resolve(undefined)
      }
    })
    res.on("error", () => resolve(undefined))
  })

/**
 * Dials a WebSocket URL with headers. Succeeds once the upgrade completed; fails with `DialRefused` (an HTTP
 * status answered the upgrade) or `DialFailed`. The caller owns the link and should drop it when done.
 */
export const dial = (url: string, headers: Record<string, string>, number: number): Effect.Effect<Link, DialRefused | DialFailed> =>
  Effect.callback<Link, DialRefused | DialFailed>((resume) => {
    const socket = new WebSocket(url, { headers, maxPayload: MaxFrameBytes, handshakeTimeout: 10_000 })
    let link: Link | undefined
    socket.once("open", () => {
      link = makeLink(socket, number)
      resume(Effect.succeed(link))
    })
    socket.once("unexpected-response", (_req, res) => {
      void readErrorCode(res).then((error) => {
        socket.terminate()
        resume(Effect.fail(new DialRefused(error === undefined ? { status: res.statusCode ?? 0 } : { status: res.statusCode ?? 0, error })))
      })
    })
    socket.once("error", (e) => {
      if (link === undefined) resume(Effect.fail(new DialFailed({ reason: e.name })))
    })
    return Effect.sync(() => {
      if (link === undefined) socket.terminate()
    })
  })
