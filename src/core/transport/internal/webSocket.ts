/**
 * The `ws` server socket of an upgraded request as a session's `DeviceTransport` (reference §1.7), without
 * `effect/socket`'s wrapper and without a fiber per connection (issue 18, per-connection cost and per-frame
 * CPU):
 *
 * - Reading: each `ws` message event hands its frame to `onFrame` synchronously (a text frame decoded from
 *   UTF-8 once, no other copy), after offering a text frame's bytes to `onTextBytes` (the read side takes a Run's
 *   delta from them without the frame's text). `pause` / `resume` pause the socket (backpressure). A frame over
 *   4 MiB closes the connection with 1009 (the WebSocket server enforces `maxPayload` first; this check keeps the
 *   bound when a host server forgot it). `ws`'s frame parser takes each frame's payload from the socket read's chunk
 *   by an offset and its header and mask through scratch buffers (`TrackedWebSocket`; issue 18: five buffer objects
 *   fewer per frame), and each socket read's frames are handed over inside a `SocketReads` bracket (what the read
 *   side batched per read runs at its end).
 * - Writing: a bounded queue (64 envelopes by default) flushed into `ws.send` at the end of the current
 *   microtask, or at once when a chunk frame (given as its bytes) is queued; `offer` never waits: a full queue
 *   answers "full" at once. A failed write closes the
 *   connection with 1011 and ends the transport. `ws.send` hands a frame over synchronously, so, as with
 *   `effect/socket`'s writer before, the write deadline only bounds that local hand-over.
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
import { EncodedFrame, Limits } from "../../../proto/index.js"
import { type DeviceTransport, type InboundHandlers, type OfferResult, TransportEnded } from "../DeviceTransport.js"
import * as SocketReads from "../SocketReads.js"

const textFrame = { binary: false } as const
// Long texts go to `ws` as UTF-8 bytes (EncodedFrame.textFramePayload).
const payloadOf = EncodedFrame.textFramePayload

/** Upgraded `ws` sockets by the TCP socket they run on (entries go with the TCP socket). */
const upgraded = new WeakMap<object, WebSocket>()

/** The fields of `ws`'s frame parser (`Receiver`, ws 8.23.0, pinned) that its `consume` reads and writes. */
interface ReceiverBuffers {
  _buffers: Array<Buffer>
  _bufferedBytes: number
  /** Bytes of `_buffers[0]` already consumed (ours; ws re-slices the chunk instead). */
  _consumed: number
}

/** The class `ws` allocates its buffer views with (`Buffer[Symbol.species]`, as `ws` itself takes it). */
const FastBuffer = (Buffer as unknown as { readonly [Symbol.species]: unknown })[Symbol.species] as new(
  buffer: ArrayBufferLike,
  byteOffset: number,
  length: number
) => Buffer

/**
 * `ws`'s `Receiver.consume(n)` (the next `n` buffered bytes, as one buffer; the caller checked that they are
 * buffered) without a new view of the rest of the chunk per call: `ws` re-slices the socket read's chunk each time it
 * takes a frame's header, mask or payload, two views per step, three steps per frame (issue 18: about 60 ns and six
 * buffer objects per small frame). Here the consumed bytes of the first chunk are an offset. What it returns is what
 * `ws`'s returns: the same bytes, a view of the chunk when they lie in one chunk, the chunk itself when they are the
 * whole of it, else a new buffer. `consume` is the only reader of `_buffers[0]` in `ws` 8.23.0 (pinned).
 */
function consume(this: ReceiverBuffers, n: number): Buffer {
  if (smallRead) {
    // One read per step, its first: whatever runs later in the step (an error's callback) reads as `ws` does.
    smallRead = false
    const out = n === 2 ? scratch2 : n === 4 ? scratch4 : n === 8 ? scratch8 : undefined
    if (out !== undefined) return consumeSmall(this, n, out)
  }
  this._bufferedBytes -= n
  const buffers = this._buffers
  const first = buffers[0]!
  const at = this._consumed
  const left = first.length - at
  if (n < left) {
    this._consumed = at + n
    return new FastBuffer(first.buffer, first.byteOffset + at, n)
  }
  if (n === left) {
    buffers.shift()
    this._consumed = 0
    return at === 0 ? first : new FastBuffer(first.buffer, first.byteOffset + at, n)
  }
  const out = Buffer.allocUnsafe(n)
  out.set(new Uint8Array(first.buffer, first.byteOffset + at, left), 0)
  buffers.shift()
  this._consumed = 0
  let written = left
  while (written < n) {
    const buf = buffers[0]!
    const need = n - written
    if (need >= buf.length) {
      out.set(buf, written)
      written += buf.length
      buffers.shift()
    } else {
      out.set(new Uint8Array(buf.buffer, buf.byteOffset, need), written)
      this._consumed = need
      written = n
    }
  }
  return out
}

/**
 * Set only while one of `ws`'s header steps (`getInfo`, `getPayloadLength16`, `getPayloadLength64`) or a `getMask`
 * whose payload is already buffered runs (`maskStep`): its first `consume` answers a scratch buffer of this module
 * instead of a new view of the chunk (issue 18: two buffer objects fewer per frame, the header's and the mask's).
 */
let smallRead = false

/** The scratch buffers by size: a header (2) or a 16-bit length, a mask (4), a 64-bit length (8). */
const scratch2 = Buffer.alloc(2)
const scratch4 = Buffer.alloc(4)
const scratch8 = Buffer.alloc(8)

/**
 * The next `n` buffered bytes copied into the scratch buffer of that size (n is 2, 4 or 8: a header step's read). Safe
 * because every reader of it is done with it before anything else runs: a header step reads its bytes before it
 * returns or reports an error, and a mask is used by the same parsing loop's next step (`getData` unmasks the payload
 * and drops `_mask` before emitting), which `maskStep` ensures by taking the scratch only when the payload is
 * already buffered; a mask whose payload has not arrived stays a view of the chunk, as `ws` makes it.
 */
const consumeSmall = (receiver: ReceiverBuffers, n: number, out: Buffer): Buffer => {
  receiver._bufferedBytes -= n
  const buffers = receiver._buffers
  let written = 0
  while (written < n) {
    const buf = buffers[0]!
    let at = receiver._consumed
    const end = Math.min(buf.length, at + n - written)
    while (at < end) out[written++] = buf[at++]!
    if (at === buf.length) {
      buffers.shift()
      receiver._consumed = 0
    } else receiver._consumed = at
  }
  return out
}

/** Runs one of `ws`'s header steps with its `consume` answering the scratch buffers (`consumeSmall`). */
const headerStep = (step: (this: object, cb: unknown) => void) =>
  function(this: object, cb: unknown): void {
    smallRead = true
    try {
      step.call(this, cb)
    } finally {
      smallRead = false
    }
  }

/** `ws`'s `getMask`, with the mask in the scratch buffer when the frame's payload is already buffered. */
const maskStep = (step: (this: object) => void) =>
  function(this: ReceiverBuffers & { readonly _payloadLength: number }): void {
    smallRead = this._bufferedBytes >= 4 + this._payloadLength
    try {
      step.call(this)
    } finally {
      smallRead = false
    }
  }

type WriteChunk = (this: object, chunk: Buffer, encoding: string, cb: (error?: Error | null) => void) => void

/**
 * `ws`'s `Receiver._write` (one socket read's chunk: every frame it completes is emitted synchronously) as one
 * socket read (`SocketReads`): what the read side batched for the end of the read (its inbound counts) runs when
 * the chunk's frames are handed over, in the same job, instead of in a microtask per read (issue 18).
 */
const bracketedWrite = (write: WriteChunk): WriteChunk =>
  function(chunk, encoding, cb) {
    SocketReads.begin()
    try {
      write.call(this, chunk, encoding, cb)
    } finally {
      SocketReads.end()
    }
  }

/**
 * `ws`'s parser prototype with `consume` above and the bracketed `_write` (made from the first parser seen: `ws`'s
 * class is not typed).
 */
let offsetReceiver: object | undefined

/** Gives a fresh parser (nothing buffered yet) the offset `consume` and reads bracketed as socket reads. */
const useOffsetConsume = (receiver: object): void => {
  const proto = Object.getPrototypeOf(receiver) as {
    readonly _write: WriteChunk
    readonly getInfo: (this: object, cb: unknown) => void
    readonly getPayloadLength16: (this: object, cb: unknown) => void
    readonly getPayloadLength64: (this: object, cb: unknown) => void
    readonly getMask: (this: object) => void
  }
  const own = (value: unknown) => ({ value, writable: true, configurable: true })
  offsetReceiver ??= Object.create(proto, {
    consume: own(consume),
    _write: own(bracketedWrite(proto._write)),
    getInfo: own(headerStep(proto.getInfo)),
    getPayloadLength16: own(headerStep(proto.getPayloadLength16)),
    getPayloadLength64: own(headerStep(proto.getPayloadLength64)),
    getMask: own(maskStep(proto.getMask))
  }) as object
  // Only `ws`'s parser of the class the prototype was made from (the one `TrackedWebSocket` extends).
  if (Object.getPrototypeOf(receiver) !== Object.getPrototypeOf(offsetReceiver)) return
  ;(receiver as ReceiverBuffers)._consumed = 0
  Object.setPrototypeOf(receiver, offsetReceiver)
}

/**
 * The `ws` socket class for `WebSocketServerOptions.WebSocket`: records each upgraded socket for `upgradedWebSocket`,
 * and reads its frames with the offset `consume` above (the parser is made in `setSocket`, before any data).
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
    this.ws.on("message", (data: RawData, isBinary: boolean) => {
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
    })
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
    try {
      for (let i = 0; i < batch.length - 1; i++) this.ws.send(payloadOf(batch[i]!), textFrame)
      // One callback per batch: a failed socket write ends the connection.
      this.ws.send(payloadOf(batch[batch.length - 1]!), textFrame, (error) => {
        if (error !== undefined && error !== null) this.writeFailed()
      })
    } catch {
      // Not from inside `offer` (a caller's send): the connection's end is reported after the caller's turn.
      queueMicrotask(() => this.writeFailed())
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
