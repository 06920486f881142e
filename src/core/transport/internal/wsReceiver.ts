/**
 * `ws`'s frame parser (`Receiver`, ws 8.23.0, pinned: `test/core/gateway/WsReceiverConsume.test.ts` checks the
 * version) as the gateway's sockets run it (`TrackedWebSocket` in `webSocket.ts`; issue 18, per-frame CPU): the same
 * frames, errors and close codes as `ws`, with fewer objects and calls per frame.
 *
 * - `consume` takes a frame's payload from the socket read's chunk by an offset, and the header steps and a mask
 *   whose payload is buffered read into scratch buffers (no view of the chunk per step).
 * - A socket read's chunk is one `SocketReads` bracket (what the read side batched per read runs at its end).
 * - A whole unfragmented, uncompressed text frame goes straight to the socket's one `message` listener when the
 *   transport registered it (`directMessages`): unmasked a word at a time, checked as UTF-8 as `ws` checks it, and
 *   handed over without `ws`'s fragment list, its `dataMessage` step and its two `message` events (the parser's and
 *   the socket's). Anything else (binary, control, fragmented or compressed frames, a socket with other `message`
 *   listeners, events deferred by `allowSynchronousEvents: false`) takes `ws`'s own step.
 */
import { isUtf8 } from "node:buffer"
import * as SocketReads from "../SocketReads.js"

/** The fields of `ws`'s frame parser (`Receiver`, ws 8.23.0, pinned) that its `consume` reads and writes. */
export interface ReceiverBuffers {
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

/** The socket's `message` listener a parser hands whole text frames to (`directMessages`), and the socket. */
interface Direct {
  readonly ws: { readonly listenerCount: (type: string) => number }
  readonly listener: (data: Buffer, isBinary: boolean) => void
}

/** The fields of `ws`'s parser its data steps read and write (`getData`, `dataMessage`, ws 8.23.0). */
interface ReceiverData extends ReceiverBuffers {
  _direct: Direct | undefined
  _state: number
  _opcode: number
  _fin: boolean
  _compressed: boolean
  _masked: boolean
  _mask: Buffer | undefined
  _payloadLength: number
  _totalPayloadLength: number
  _messageLength: number
  _fragmented: number
  _numFragments: number
  _maxFragments: number
  _fragments: Array<Buffer>
  _allowSynchronousEvents: boolean
  _skipUTF8Validation: boolean
  consume: (n: number) => Buffer
  createError: (type: ErrorConstructor, message: string, prefix: boolean, status: number, code: string) => Error
}

/** `ws`'s parser state after a message (`GET_INFO`). */
const GetInfo = 0

/** 32-bit words over the last socket read's memory, for unmasking four bytes at a time (one per read, not per frame). */
let words: Uint32Array | undefined

/** True on a little-endian host (the word masks below assume it; a big-endian one unmasks byte by byte). */
const littleEndian = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1

/**
 * XORs `data` with the 4-byte `mask` in place, as `ws`'s `unmask` does (`data[i] ^= mask[i & 3]`), the 4-byte-aligned
 * middle a 32-bit word at a time: `ws` without its native add-on (Node 24's `http` has none) unmasks byte by byte.
 */
export const unmaskInPlace = (data: Uint8Array, mask: Uint8Array): void => {
  const n = data.length
  let i = 0
  if (littleEndian && n >= 16) {
    // Bytes up to the first aligned word, then words (byte j takes mask[j & 3]: the word at aligned byte j holds
    // bytes j..j+3, least significant first), then the tail.
    const at = data.byteOffset
    const head = (4 - (at & 3)) & 3
    for (; i < head; i++) data[i] = data[i]! ^ mask[i & 3]!
    const buffer = data.buffer
    let view = words
    if (view === undefined || view.buffer !== buffer) view = words = new Uint32Array(buffer, 0, buffer.byteLength >>> 2)
    const m = mask[head]! | (mask[(head + 1) & 3]! << 8) | (mask[(head + 2) & 3]! << 16) | (mask[(head + 3) & 3]! << 24)
    const first = (at + head) >>> 2
    const count = (n - head) >>> 2
    for (let w = first, end = first + count; w < end; w++) view[w] = view[w]! ^ m
    i = head + count * 4
  }
  for (; i < n; i++) data[i] = data[i]! ^ mask[i & 3]!
}

/**
 * `ws`'s `getData`, with a whole text frame handed straight to the registered `message` listener (see the header).
 * What `ws`'s steps do for such a frame, in order: take the payload (`consume`), unmask it unless the mask is zero,
 * drop the mask, reset the message counters (`dataMessage`), refuse invalid UTF-8 with 1007 unless told to skip the
 * check, then go back to reading a header and emit `message` (the parser's listener re-emits it on the socket).
 * A frame past `maxFragments` is left to `ws`'s step, which refuses it.
 */
const dataStep = (step: (this: object, cb: unknown) => void) =>
  function(this: ReceiverData, cb: (error: Error) => void): void {
    const direct = this._direct
    const n = this._payloadLength
    if (
      direct === undefined || this._opcode !== 1 || !this._fin || this._compressed || n === 0 || this._bufferedBytes < n ||
      this._fragments.length !== 0 || !this._allowSynchronousEvents ||
      (this._maxFragments > 0 && this._numFragments >= this._maxFragments) || direct.ws.listenerCount("message") !== 1
    ) return step.call(this, cb)
    const data = this.consume(n)
    const mask = this._mask
    if (this._masked && mask !== undefined && (mask[0]! | mask[1]! | mask[2]! | mask[3]!) !== 0) unmaskInPlace(data, mask)
    this._mask = undefined
    this._totalPayloadLength = 0
    this._messageLength = 0
    this._fragmented = 0
    this._numFragments = 0
    if (!this._skipUTF8Validation && !isUtf8(data)) {
      cb(this.createError(Error, "invalid UTF-8 sequence", true, 1007, "WS_ERR_INVALID_UTF8"))
      return
    }
    this._state = GetInfo
    direct.listener(data, false)
  }

/**
 * Lets the parser of `ws` (a `TrackedWebSocket`'s) hand whole text frames straight to `listener`, the socket's
 * `message` listener, while it is the socket's only one (otherwise the frame is emitted as `ws` does).
 */
export const directMessages = (ws: object, listener: (data: Buffer, isBinary: boolean) => void): void => {
  const receiver = (ws as { readonly _receiver?: ReceiverData })._receiver
  if (receiver !== undefined && offsetReceiver !== undefined && Object.getPrototypeOf(receiver) === offsetReceiver) {
    receiver._direct = { ws: ws as Direct["ws"], listener }
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
 * `ws`'s parser prototype with `consume` above, the header, mask and data steps above and the bracketed `_write`
 * (made from the first parser seen: `ws`'s class is not typed).
 */
let offsetReceiver: object | undefined

/** Gives a fresh parser (nothing buffered yet) the offset `consume` and reads bracketed as socket reads. */
export const useOffsetConsume = (receiver: object): void => {
  const proto = Object.getPrototypeOf(receiver) as {
    readonly _write: WriteChunk
    readonly getInfo: (this: object, cb: unknown) => void
    readonly getPayloadLength16: (this: object, cb: unknown) => void
    readonly getPayloadLength64: (this: object, cb: unknown) => void
    readonly getMask: (this: object) => void
    readonly getData: (this: object, cb: unknown) => void
  }
  const own = (value: unknown) => ({ value, writable: true, configurable: true })
  offsetReceiver ??= Object.create(proto, {
    consume: own(consume),
    _write: own(bracketedWrite(proto._write)),
    getInfo: own(headerStep(proto.getInfo)),
    getPayloadLength16: own(headerStep(proto.getPayloadLength16)),
    getPayloadLength64: own(headerStep(proto.getPayloadLength64)),
    getMask: own(maskStep(proto.getMask)),
    getData: own(dataStep(proto.getData))
  }) as object
  // Only `ws`'s parser of the class the prototype was made from (the one `TrackedWebSocket` extends).
  if (Object.getPrototypeOf(receiver) !== Object.getPrototypeOf(offsetReceiver)) return
  ;(receiver as ReceiverBuffers)._consumed = 0
  Object.setPrototypeOf(receiver, offsetReceiver)
}
