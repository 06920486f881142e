/**
 * The `ws` server socket of an upgraded request as a session's `DeviceTransport` (reference §1.7), without
 * `effect/socket`'s wrapper and without a fiber per connection (issue 18, per-connection cost and per-frame
 * CPU):
 *
 * - Reading: each `ws` message event hands its frame to `onFrame` synchronously (a text frame decoded from
 *   UTF-8 once, no other copy), after offering a text frame's bytes to `onTextBytes` (the read side takes a Run's
 *   delta from them without the frame's text). `pause` / `resume` pause the socket (backpressure). A frame over
 *   4 MiB closes the connection with 1009 (the WebSocket server enforces `maxPayload` first; this check keeps the
 *   bound when a host server forgot it). `ws`'s frame parser runs with the steps of `wsReceiver.ts`
 *   (`TrackedWebSocket`; issue 18): each frame's payload taken from the socket read's chunk by an offset, its header
 *   and mask through scratch buffers, a whole text frame handed to this listener without `ws`'s two `message`
 *   events, and each socket read's frames inside a `SocketReads` bracket (what the read side batched per read runs
 *   at its end).
 * - Writing: a bounded queue (64 envelopes by default) flushed into `ws.send` at the end of the current
 *   microtask, or at once when a chunk frame (given as its bytes) is queued, a batch of several frames inside one
 *   cork of the TCP socket (one `writev`); `offer` never waits: a full queue answers "full" at once. A failed
 *   write closes the connection with 1011 and ends the transport. `ws.send` hands a frame over synchronously,
 *   so, as with `effect/socket`'s writer before, the write deadline only bounds that local hand-over.
 *
 * The route finds the `ws` socket of its request through `WebSocketServerOptions.WebSocket`
 * (`TrackedWebSocket` records each upgraded socket by its TCP socket), after `effect/socket` completed the
 * handshake; `effect/socket`'s own message listener is removed then, so frames are read only here.
 */
import { Effect } from "effect"
// `ws` through the platform package (a peer of the library), never imported directly: the gateway library
// leaves package imports to its host, which has `@effect/platform-node` and, through it, `ws`.
import { WebSocket } from "@effect/platform-node/NodeWS"
import type { RawData } from "@effect/platform-node/NodeWS"
import type { Socket } from "node:net"
import { EncodedFrame, Limits } from "../../../proto/index.js"
import { type DeviceTransport, type InboundHandlers, type OfferResult, TransportEnded } from "../DeviceTransport.js"
import { directMessages, type ReceiverBuffers, useOffsetConsume } from "./wsReceiver.js"

const textFrame = { binary: false } as const
// Long texts go to `ws` as UTF-8 bytes (EncodedFrame.textFramePayload).
const payloadOf = EncodedFrame.textFramePayload

/** Upgraded `ws` sockets by the TCP socket they run on (entries go with the TCP socket). */
const upgraded = new WeakMap<object, WebSocket>()

/**
 * The `ws` socket class for `WebSocketServerOptions.WebSocket`: records each upgraded socket for `upgradedWebSocket`,
 * and reads its frames with the parser steps of `wsReceiver.ts` (the parser is made in `setSocket`, before any data).
 */
export class TrackedWebSocket extends WebSocket {
  setSocket(socket: object, head: Buffer, options: object): void {
    ;(WebSocket.prototype as unknown as { setSocket: (s: object, h: Buffer, o: object) => void }).setSocket.call(
      this,
      socket,
      head,
      options
    )
    const receiver = (this as unknown as { readonly _receiver?: ReceiverBuffers })._receiver
    if (receiver !== undefined && Array.isArray(receiver._buffers) && receiver._buffers.length === 0) {
      useOffsetConsume(receiver)
    }
    upgraded.set(socket, this)
  }
}

/** The `ws` socket upgraded on this TCP socket, once the handshake completed (`TrackedWebSocket` servers only). */
export const upgradedWebSocket = (socket: unknown): WebSocket | undefined =>
  typeof socket === "object" && socket !== null ? upgraded.get(socket) : undefined

export interface WebSocketTransportOptions {
  /** Envelopes the send queue holds. */
  readonly capacity: number
  /** Inbound frame bound in bytes (default 4 MiB). */
  readonly maxFrameBytes?: number
}

const asBytes = (data: RawData): Uint8Array =>
  Array.isArray(data) ? Buffer.concat(data) : data instanceof ArrayBuffer ? new Uint8Array(data) : data

const byteLength = (data: RawData): number =>
  Array.isArray(data) ? data.reduce((n, b) => n + b.byteLength, 0) : data.byteLength

/**
 * Removes every listener added to `ws` through its EventTarget API (`addEventListener`, which marks its wrappers
 * with ws's `kListener` symbol): effect/socket's reader registers its `message`, `error` and `close` handlers
 * that way, and once the transport reads the socket they would only keep the reader, its closures and the
 * context it captured alive for the connection's lifetime (issue 18). Listeners added with `on` (the transport's,
 * the WebSocket server's client tracking) stay.
 */
export const dropReaderListeners = (ws: WebSocket): void => {
  for (const type of ["message", "error", "close", "open"] as const) {
    for (const listener of ws.listeners(type)) {
      if (Object.getOwnPropertySymbols(listener).some((symbol) => symbol.description === "kListener")) {
        ws.removeListener(type, listener as (...args: Array<unknown>) => void)
      }
    }
  }
}

/**
 * The transport over an open `ws` socket. Every other reader of its messages must be gone (the route removes
 * `effect/socket`'s); nothing is read until `listen`.
 */
export const fromWebSocket = (ws: WebSocket, options: WebSocketTransportOptions): DeviceTransport =>
  new WsTransport(ws, options.capacity, options.maxFrameBytes ?? Limits.MaxFrameBytes)

/** A class, not an object of closures: one per connection (issue 18). */
class WsTransport implements DeviceTransport {
  private handlers: InboundHandlers | undefined = undefined
  private endedWith: TransportEnded | undefined = undefined
  private closeSent = false
  private queue: Array<string | Uint8Array> = []
  private flushScheduled = false
  private readonly flush = () => this.flushQueue()

  constructor(private readonly ws: WebSocket, private readonly capacity: number, private readonly maxFrameBytes: number) {
    ws.on("close", (code: number) => this.end(new TransportEnded({ reason: "closed_by_peer", code })))
    // `ws` enforces the server's `maxPayload` itself: it reports an oversized frame as this error, then closes 1009.
    ws.on("error", (error: { readonly code?: unknown } | undefined) =>
      this.end(
        error?.code === "WS_ERR_UNSUPPORTED_MESSAGE_LENGTH"
          ? new TransportEnded({ reason: "frame_too_large", code: 1009 })
          : new TransportEnded({ reason: "read_failed" })
      ))
    // Nothing is read before `listen`.
    ws.pause()
  }

  listen(handlers: InboundHandlers): void {
    if (this.handlers !== undefined) return
    this.handlers = handlers
    if (this.endedWith !== undefined) return handlers.onEnd(this.endedWith)
    const onTextBytes = handlers.onTextBytes
    const onMessage = (data: RawData, isBinary: boolean) => {
      if (this.endedWith !== undefined) return
      const bytes = byteLength(data)
      if (bytes > this.maxFrameBytes) {
        this.sendClose(1009, "frame too large")
        return this.end(new TransportEnded({ reason: "frame_too_large", code: 1009 }))
      }
      // `ws` refuses a text frame that is not valid UTF-8 (1007), so the text's UTF-8 size is the frame's.
      if (isBinary) handlers.onFrame(asBytes(data))
      else if (!(onTextBytes !== undefined && Buffer.isBuffer(data) && onTextBytes(data))) {
        handlers.onFrame(data.toString(), bytes)
      }
    }
    this.ws.on("message", onMessage)
    // A whole text frame comes straight from the parser while this is the socket's only `message` listener.
    directMessages(this.ws, onMessage)
    this.ws.resume()
  }

  pause(): void {
    if (this.endedWith === undefined) this.ws.pause()
  }

  resume(): void {
    if (this.endedWith === undefined && this.handlers !== undefined) this.ws.resume()
  }

  offer(frame: string | Uint8Array): OfferResult {
    if (this.endedWith !== undefined) return "closed"
    if (this.queue.length >= this.capacity) return "full"
    this.queue.push(frame)
    // A frame given as its bytes is a chunk (`EncodedFrame.encodeChunkFrame`: up to 64 KiB of data, whose sender
    // waits for its receipt): written at once, with whatever was queued before it, instead of after the rest of
    // the caller's turn (about 40 µs of a waiting driver's work per chunk, on the round trip of every chunk).
    if (typeof frame !== "string") {
      this.flushQueue()
      return "queued"
    }
    if (!this.flushScheduled) {
      this.flushScheduled = true
      queueMicrotask(this.flush)
    }
    return "queued"
  }

  close(code: number, reason: string): Effect.Effect<void> {
    return Effect.sync(() => {
      this.end(new TransportEnded({ reason: "closed_locally", code }))
      this.sendClose(code, reason)
    })
  }

  private flushQueue(): void {
    // A flush scheduled earlier finds the queue empty (or only what came after) and writes nothing twice.
    this.flushScheduled = false
    const batch = this.queue
    if (this.endedWith !== undefined || batch.length === 0) return
    this.queue = []
    // Several frames: the TCP socket (`ws` keeps it as `_socket`) is corked around them, so the batch leaves in one
    // `writev` (issue 18: `ws` corks each frame's header and payload alone, i.e. one syscall per frame otherwise).
    const socket = batch.length > 1 ? (this.ws as unknown as { readonly _socket?: Socket | null })._socket : undefined
    socket?.cork()
    try {
      for (let i = 0; i < batch.length - 1; i++) this.ws.send(payloadOf(batch[i]!), textFrame)
      // One callback per batch: a failed socket write ends the connection.
      this.ws.send(payloadOf(batch[batch.length - 1]!), textFrame, (error) => {
        if (error !== undefined && error !== null) this.writeFailed()
      })
    } catch {
      // Not from inside `offer` (a caller's send): the connection's end is reported after the caller's turn.
      queueMicrotask(() => this.writeFailed())
    } finally {
      socket?.uncork()
    }
  }

  private writeFailed(): void {
    if (this.endedWith !== undefined) return
    // Close first so the peer sees 1011 before the session reacts to the end.
    this.sendClose(1011, "write failed")
    this.end(new TransportEnded({ reason: "write_failed" }))
  }

  private sendClose(code: number, reason: string): void {
    if (this.closeSent) return
    this.closeSent = true
    try {
      this.ws.close(code, reason)
    } catch {
      this.ws.terminate()
    }
  }

  private end(error: TransportEnded): void {
    if (this.endedWith !== undefined) return
    this.endedWith = error
    this.queue = []
    this.handlers?.onEnd(error)
  }
}
