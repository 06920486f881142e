/**
 * Runtime → Core frames encoded once, where they are produced, and handed to a transport as text. Two ways to
 * get one, both with the guarantees of `Messages.encodeMessage` (a valid frame of at most 4 MiB):
 *
 * - `encodeFrame(message)`: the codec itself (bounds, schema validation, size).
 * - `deltaEncoder(runId, trace)`: the Run's `delta` frames built directly as JSON text. The envelope's constant
 *   part (type, Run id, trace) goes through `encodeMessage` once, when the encoder is made; per frame only the
 *   payload varies, and its schema (`RunEvents.DeltaPayload`: `item_id` an optional string, `delta` a string,
 *   `sequence` a non-negative integer; no other member) is checked in full by three `typeof` tests and an integer
 *   test, then each string is escaped by `JSON.stringify`, exactly as `encodeMessage` would (or, when nothing in it
 *   needs escaping, placed between quotes as it is, which is the same text), members in the same order, so the text
 *   is byte-identical (`test/proto/EncodedFrame.test.ts`). The frame is kept as its parts (`EncodedDelta`) and its
 *   UTF-8 bytes written from them into a batch's buffer, the same bytes as the text's. A delta payload has depth 2 and
 *   at most 4 values, far inside the JSON bounds (`JsonBounds.ts`); the 4 MiB frame bound is checked per frame.
 *   Anything the direct path does not cover (a payload that fails a check) is answered by the codec's own
 *   verdict, so a refusal carries the same reason.
 * - `encodeChunkFrame(message, bytes)`: a frame whose payload carries one chunk of bytes as base64 `data` (a
 *   `workspace_write` or `runtime_prepare` chunk, a `workspace_export_result` chunk, a `workspace_read_result`),
 *   without passing the 87 KiB base64 text of a 64 KiB chunk through `JSON.stringify` (about 110 µs per chunk on
 *   Node 24, the largest single cost of sending one). The message with an empty `data` goes through
 *   `encodeMessage` (every rule of the codec), and the base64 text, made here from `bytes` (so only the characters
 *   `A–Z a–z 0–9 + / =`, none of which JSON escapes), takes the empty string's place: the text is byte-identical to
 *   `encodeMessage` of the message with its data (`test/proto/EncodedFrame.test.ts`, every chunk family). The
 *   frame's UTF-8 bytes are built at the same time (`bytes`: the base64 text is written into them once), so a
 *   transport hands them to the socket without flattening, measuring or converting the 87 KiB text again.
 */
import { Result } from "effect"
import { utf8ByteLength } from "./Checks.js"
import type { RunId } from "./Ids.js"
import { encode as encodeBase64 } from "./internal/base64.js"
import { MaxFrameBytes } from "./Limits.js"
import { encodeMessage, type Message, OutgoingFrameRejected, type RuntimeToCore } from "./Messages.js"
import { aroundEmpty, isPlain, spliceBytes, spliceOf } from "./PlainText.js"

const utf8 = new TextEncoder()

/** One frame's text, already encoded and valid, with the type and correlation id a log line may carry. */
export interface EncodedFrame {
  readonly type: string
  readonly id: string | undefined
  /** The frame's JSON text (one WebSocket text frame). */
  readonly encoded: string
  /**
   * The same frame as its UTF-8 bytes, when the encoder built them directly (`encodeChunkFrame`): a transport
   * sends these (as a text frame) instead of converting `encoded`, which then is never flattened or copied.
   */
  readonly bytes?: Uint8Array
}

/** A frame to send: a message the transport encodes, or a frame encoded earlier. */
export type Outgoing = RuntimeToCore | EncodedFrame

/** True for a frame encoded earlier. */
export const isEncoded = (frame: Outgoing): frame is EncodedFrame => "encoded" in frame

const idOf = (message: Message): string | undefined => ("id" in message ? message.id : undefined)

/** A `done` content at least this long is placed as it is when nothing in it needs escaping (`encodeFrame`). */
const LongContent = 4096

// The empty `content` member of a `done` probe (`PlainText.aroundEmpty`).
const EmptyContent = `"content":""`

/**
 * A `done` frame whose long content needs no escaping (`PlainText.isPlain`), given as its consecutive `parts`, or
 * `undefined` to use the codec: the message with an empty content goes through `encodeMessage` (every rule of the
 * codec; `content` is any string), and the content takes the empty string's place (`PlainText.aroundEmpty`), which is
 * the text `encodeMessage` writes for the whole message. Testing the content costs about half of `JSON.stringify`'s
 * escaping of it (issue 18, relay: 0.1 µs per delta of a Turn). The frame's UTF-8 bytes are written from the parts
 * and the two ends of the probe (`PlainText.spliceBytes`), so neither the frame's text nor (from several parts) the
 * content is ever made one string: a flat copy of a 430 KB frame was a fresh large-object allocation per Turn, page
 * faults included (issue 18, relay: the one-frame batch of the `done` was 7 % of the daemon's relay samples). The
 * text (`encoded`) is made when first read.
 */
const placeContent = (
  message: RuntimeToCore & { readonly type: "done" },
  parts: ReadonlyArray<string>
): Result.Result<EncodedFrame, OutgoingFrameRejected> | undefined => {
  let units = 0
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i]
    if (typeof part !== "string") return undefined
    units += part.length
  }
  if (units < LongContent) return undefined
  for (let i = 0; i < parts.length; i++) if (!isPlain(parts[i]!)) return undefined
  const probe = encodeMessage({ ...message, payload: { ...message.payload, content: "" } })
  if (Result.isFailure(probe)) return Result.fail(probe.failure)
  const around = aroundEmpty(probe.success, EmptyContent)
  if (around === undefined) return undefined
  const splice = spliceOf(around, [parts], true)
  if (splice.size > MaxFrameBytes) {
    return Result.fail(new OutgoingFrameRejected({ type: "done", reason: "frame_too_large", bytes: splice.size }))
  }
  const bytes = spliceBytes(splice)
  const [before, after] = around
  let text: string | undefined = parts.length === 1 ? `${before}"${parts[0]!}"${after}` : undefined
  return Result.succeed({
    type: "done",
    id: message.id,
    get encoded() {
      return (text ??= `${before}"${parts.join("")}"${after}`)
    },
    bytes
  })
}

/**
 * Encodes one message with the codec (`Messages.encodeMessage`); a `done` with a long content that needs no
 * escaping is placed in the codec's text of the rest (`placeContent`, the same text).
 */
export const encodeFrame = (message: RuntimeToCore): Result.Result<EncodedFrame, OutgoingFrameRejected> => {
  const done = message.type === "done" && typeof message.payload.content === "string"
    ? placeContent(message, [message.payload.content])
    : undefined
  if (done !== undefined) return done
  const text = encodeMessage(message)
  return Result.isFailure(text)
    ? Result.fail(text.failure)
    : Result.succeed({ type: message.type, id: idOf(message), encoded: text.success })
}

/**
 * Encodes a `done` whose content is the concatenation of `parts` (its own `content` is ignored), with the guarantees
 * of `encodeFrame` of that message and the same text: a harness that keeps a Turn's text in pieces hands them over
 * without making them one string first (`placeContent`). Parts that need escaping go the codec's way, joined.
 */
export const encodeDoneParts = (
  message: RuntimeToCore & { readonly type: "done" },
  parts: ReadonlyArray<string>
): Result.Result<EncodedFrame, OutgoingFrameRejected> =>
  placeContent(message, parts) ?? encodeFrame({ ...message, payload: { ...message.payload, content: parts.join("") } })

/** The text of a frame to send: the earlier encoding, or the codec's. */
export const frameText = (frame: Outgoing): Result.Result<string, OutgoingFrameRejected> =>
  isEncoded(frame) ? Result.succeed(frame.encoded) : encodeMessage(frame)

/**
 * What a transport writes for a frame to send (one text frame either way): its UTF-8 bytes when the encoder built
 * them (`EncodedFrame.bytes`), otherwise its text (`frameText`).
 */
export const frameData = (frame: Outgoing): Result.Result<string | Uint8Array, OutgoingFrameRejected> =>
  isEncoded(frame) && frame.bytes !== undefined ? Result.succeed(frame.bytes) : frameText(frame)

/** `JSON.stringify(text)` of a string, without the call when nothing in it is escaped (`isPlain`). */
const jsonString = (text: string): string => (isPlain(text) ? `"${text}"` : JSON.stringify(text))

/**
 * Encodes one `delta` frame of a Run: `item_id` only when the Run observes messages. The frame, or the codec's
 * refusal as the value itself (no `Result` per delta: issue 18, relay).
 */
export type DeltaEncoder = (
  delta: string,
  sequence: number,
  itemId: string | undefined
) => EncodedFrame | OutgoingFrameRejected

/** The constant text of one Run's delta frames, as text and as UTF-8 bytes. */
interface DeltaShape {
  readonly id: string
  /** Up to the payload's first member. */
  readonly head: string
  /** After the sequence's digits, to the end (`}}`, or the trace member then `}`). */
  readonly tail: string
  readonly headBytes: Uint8Array
  readonly tailBytes: Uint8Array
  /** The item id of the Run's frames of one output message (a shape per item: `deltaEncoder`). */
  readonly itemId?: string | undefined
}

const ItemKeyBytes = utf8.encode(`"item_id":`)
const DeltaKeyBytes = utf8.encode(`"delta":`)
const SequenceKeyBytes = utf8.encode(`,"sequence":`)
/** Bytes of a delta frame besides its envelope and its strings' characters: keys, quotes, comma, 16 digits. */
const DeltaFixedBytes = ItemKeyBytes.length + DeltaKeyBytes.length + SequenceKeyBytes.length + 4 + 1 + 16

const copyBytes = (out: Uint8Array, o: number, bytes: Uint8Array): number => {
  for (let i = 0; i < bytes.length; i++) out[o++] = bytes[i]!
  return o
}

/**
 * Writes the JSON string token of `text` at `o` as UTF-8, exactly as `JSON.stringify` writes it; returns the offset
 * after it. A text of printable ASCII without quote or backslash (a relay's usual delta) is copied a unit at a time;
 * any other text is written from its token (`jsonString`) by `TextEncoder.encodeInto`, whose only replacement (a
 * lone surrogate) never occurs in a token, where `JSON.stringify` escapes them.
 */
const writeToken = (out: Uint8Array, o: number, text: string): number => {
  const start = o
  out[o++] = 0x22
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c < 0x20 || c >= 0x80 || c === 0x22 || c === 0x5c) return start + utf8.encodeInto(jsonString(text), out.subarray(start)).written
    out[o++] = c
  }
  out[o++] = 0x22
  return o
}

/** Writes the decimal digits of a safe non-negative integer at `o`; returns the offset after them. */
const writeDigits = (out: Uint8Array, o: number, value: number): number => {
  let digits = 1
  for (let v = value; v >= 10; v = Math.floor(v / 10)) digits++
  let v = value
  for (let k = o + digits - 1; k >= o; k--) {
    out[k] = 0x30 + (v % 10)
    v = Math.floor(v / 10)
  }
  return o + digits
}

/**
 * One `delta` frame of a Run kept as its parts (the Run's constant text with the item id, the delta's text, its
 * sequence), already checked as `deltaEncoder` describes: no text per frame. Three fields (48 B on Node's heap; the
 * item id in a fourth was 56 B per delta, issue 18, relay): the item id is the shape's, one per output message. A transport writes its UTF-8 bytes straight
 * into a batch's buffer (`writeUtf8`, issue 18, relay: the frame's text, its concatenations and the batch framer's
 * join of 64 such texts were about 300 of the ≈ 950 bytes allocated per delta); `encoded` makes the same frame's
 * text each time it is read (a log line, a test, a single send).
 */
export class EncodedDelta implements EncodedFrame {
  constructor(
    private readonly shape: DeltaShape,
    readonly delta: string,
    readonly sequence: number
  ) {}
  get itemId(): string | undefined {
    return this.shape.itemId
  }
  get type(): string {
    return "delta"
  }
  get id(): string {
    return this.shape.id
  }
  get encoded(): string {
    const { head, itemId, tail } = this.shape
    return itemId === undefined
      ? `${head}"delta":${jsonString(this.delta)},"sequence":${this.sequence}${tail}`
      : `${head}"item_id":${jsonString(itemId)},"delta":${jsonString(this.delta)},"sequence":${this.sequence}${tail}`
  }
  /** At most the bytes `writeUtf8` writes: 6 per UTF-16 unit of its strings (`\u001f`), the rest exactly. */
  get room(): number {
    const { headBytes, itemId, tailBytes } = this.shape
    return headBytes.length + tailBytes.length + DeltaFixedBytes + 6 * (this.delta.length + (itemId?.length ?? 0))
  }
  /** Writes the frame's UTF-8 bytes (those of `encoded`) at `o`, with `room` bytes free there; returns the end. */
  writeUtf8(out: Uint8Array, o: number): number {
    const { itemId } = this.shape
    o = copyBytes(out, o, this.shape.headBytes)
    if (itemId !== undefined) {
      o = writeToken(out, copyBytes(out, o, ItemKeyBytes), itemId)
      out[o++] = 0x2c
    }
    o = writeToken(out, copyBytes(out, o, DeltaKeyBytes), this.delta)
    o = writeDigits(out, copyBytes(out, o, SequenceKeyBytes), this.sequence)
    return copyBytes(out, o, this.shape.tailBytes)
  }
}

/**
 * The `delta` encoder of one Run (its id and its already validated trace). `undefined` when the codec refuses
 * the envelope itself (an id or trace a frame cannot carry): every delta of that Run would be refused, so the
 * caller uses `encodeFrame` and reports each refusal as it does for any other frame. A frame is an `EncodedDelta`:
 * checked here, written later from its parts.
 */
export const deltaEncoder = (runId: RunId, trace: string | undefined): DeltaEncoder | undefined => {
  const probe: RuntimeToCore = trace === undefined
    ? { type: "delta", id: runId, payload: { delta: "", sequence: 0 } }
    : { type: "delta", id: runId, payload: { delta: "", sequence: 0 }, trace }
  if (Result.isFailure(encodeMessage(probe))) return undefined
  const head = `{"type":"delta","id":${JSON.stringify(runId)},"payload":{`
  const tail = trace === undefined ? "}}" : `},"trace":${JSON.stringify(trace)}}`
  const shape: DeltaShape = { id: runId, head, tail, headBytes: utf8.encode(head), tailBytes: utf8.encode(tail) }
  // The shape of the last item id seen (an output message's deltas come in a row).
  let itemShape: DeltaShape = shape
  return (delta, sequence, itemId) => {
    if (typeof delta !== "string" || !Number.isSafeInteger(sequence) || sequence < 0 ||
      (itemId !== undefined && typeof itemId !== "string")) {
      const payload = itemId === undefined ? { delta, sequence } : { item_id: itemId, delta, sequence }
      const codec = encodeFrame(trace === undefined ? { type: "delta", id: runId, payload } : { type: "delta", id: runId, payload, trace })
      return Result.isSuccess(codec) ? codec.success : codec.failure
    }
    if (itemId !== itemShape.itemId) itemShape = itemId === undefined ? shape : { ...shape, itemId }
    const frame = new EncodedDelta(itemShape, delta, sequence)
    // The 4 MiB bound: measured only when the frame's room could exceed it.
    if (frame.room > MaxFrameBytes) {
      const bytes = utf8ByteLength(frame.encoded)
      if (bytes > MaxFrameBytes) return new OutgoingFrameRejected({ type: "delta", reason: "frame_too_large", bytes })
    }
    return frame
  }
}

/** A frame encoded earlier together with the message it encodes (for a frame tap or a log line that wants the value). */
export interface EncodedMessage<M extends Message> extends EncodedFrame {
  readonly message: M
}

/** A message whose payload may carry base64 chunk `data`. */
type ChunkCarrier = Message & { readonly payload: { readonly data?: string | undefined } }

// The empty `data` member of the probe. Outside a JSON string a quote is structural, and inside one it is escaped,
// so this text occurs exactly once per `data` member whose value is the empty string.
const EmptyData = `"data":""`

/**
 * Encodes `message` with `payload.data` set to the standard padded base64 of `bytes` (replacing any `data` it
 * had), with the guarantees of `encodeMessage` (a valid frame of at most 4 MiB; a refusal carries the codec's
 * reason). `message` of the result is the message as sent, data included.
 */
export const encodeChunkFrame = <M extends ChunkCarrier>(
  message: M,
  bytes: Uint8Array
): Result.Result<EncodedMessage<M>, OutgoingFrameRejected> => {
  const data = encodeBase64(bytes)
  const full = { ...message, payload: { ...message.payload, data } } as M
  const probe = encodeMessage({ ...message, payload: { ...message.payload, data: "" } } as M)
  if (Result.isFailure(probe)) return Result.fail(probe.failure)
  const text = probe.success
  const at = text.indexOf(EmptyData)
  // Another empty `data` member elsewhere in the message (none of the chunk families has one): the codec's way.
  if (at < 0 || text.indexOf(EmptyData, at + EmptyData.length) >= 0) {
    const encoded = encodeMessage(full)
    return Result.isFailure(encoded)
      ? Result.fail(encoded.failure)
      : Result.succeed({ type: message.type, id: idOf(message), encoded: encoded.success, message: full })
  }
  const cut = at + EmptyData.length - 1
  const head = utf8.encode(text.slice(0, cut))
  const tail = utf8.encode(text.slice(cut))
  const size = head.length + data.length + tail.length // base64 is ASCII: one byte per character
  if (size > MaxFrameBytes) return Result.fail(new OutgoingFrameRejected({ type: message.type, reason: "frame_too_large", bytes: size }))
  const utf8Frame = new Uint8Array(size)
  utf8Frame.set(head, 0)
  utf8.encodeInto(data, utf8Frame.subarray(head.length, head.length + data.length))
  utf8Frame.set(tail, head.length + data.length)
  return Result.succeed({
    type: message.type,
    id: idOf(message),
    encoded: text.slice(0, cut) + data + text.slice(cut),
    bytes: utf8Frame,
    message: full
  })
}

/**
 * What a WebSocket library gets to send one text frame (with `binary: false`, so still a text frame, byte for
 * byte the same): a long text as its UTF-8 bytes from `TextEncoder`, a short one as is. `ws` converts a string
 * with Node's UTF-8 conversion, about 140 µs for an 87 KiB chunk frame on Node 24 against 3–10 µs for
 * `TextEncoder`'s encoder; below 2 KiB the difference is lost in the rest of a send. Bytes (`frameData` of a frame
 * with `bytes`) pass as they are. Both sides' transports use it.
 */
export const textFramePayload = (text: string | Uint8Array): string | Uint8Array =>
  typeof text !== "string" || text.length < 2048 ? text : utf8.encode(text)
