/**
 * The envelope `{type, id?, payload?, trace?}` and step one of the two-step decode: frame size, JSON, and
 * the outer shape. Step two (the payload schema that `type` selects) lives in Messages.ts.
 *
 * Rules: a frame is at most 4 MiB and its JSON nests at most 128 deep with at most 131,072 values (checked on
 * the text before parsing, JsonBounds.ts); unknown envelope members are ignored (later protocol versions add some);
 * a non-string or oversized `trace` is dropped, never rejected; nothing from a bad frame is echoed: an
 * `InvalidFrame` carries a finite code, the frame size, and the type and id only once they are known to be
 * a defined type and a bounded id.
 */
import { Result, Schema } from "effect"
import { fitsUtf8Bytes, utf8ByteLength } from "./Checks.js"
import { scanJsonText } from "./JsonBounds.js"
import { MaxCorrelationIdBytes, MaxEchoedTraceChars, MaxFrameBytes } from "./Limits.js"
import { plainTokenEnd } from "./PlainText.js"

/** The outer envelope as sent. `payload` is decoded in step two, by `type`. */
export const Envelope = Schema.Struct({
  type: Schema.String,
  id: Schema.optionalKey(Schema.String),
  payload: Schema.optionalKey(Schema.Unknown),
  trace: Schema.optionalKey(Schema.String)
})
export type Envelope = typeof Envelope.Type

/** Why a frame was refused. */
export const InvalidFrameCode = Schema.Literals([
  "frame_too_large", // over 4 MiB
  "not_json", // not valid JSON text
  "not_an_envelope", // JSON, but not an object with a non-empty string `type` and a string `id` when present
  "unknown_type", // a type this direction does not define
  "missing_id", // the type requires an id and none (or a blank one) was sent
  "id_too_large", // the id exceeds 128 bytes: never echoed
  "invalid_id", // the id fails its type's rule
  "payload_too_large", // the encoded payload exceeds its family's request bound
  "too_deep", // the frame's JSON nests deeper than 128 arrays / objects (Limits.MaxJsonDepth)
  "too_many_nodes", // the frame's JSON holds more than 131,072 values (Limits.MaxJsonNodes)
  "invalid_payload" // the payload does not decode strictly with its type's schema
])
export type InvalidFrameCode = typeof InvalidFrameCode.Type

/** A peer frame that failed decoding. Safe to log: it never contains peer text beyond a known type and a bounded id. */
export class InvalidFrame extends Schema.TaggedError<InvalidFrame>()("InvalidFrame", {
  code: InvalidFrameCode,
  /** Present only when it is a type this direction defines. */
  type: Schema.optionalKey(Schema.String),
  /** Present only when it fits the 128-byte correlation bound. */
  id: Schema.optionalKey(Schema.String),
  /** Size of the frame in bytes (a lower bound for frames refused as too large). */
  bytes: Schema.Int,
  /**
   * A `function_result` whose payload failed decoding (`invalid_payload`): its call and delivery ids, present
   * only when both are valid ids (not blank, at most 128 bytes), so the Runtime can answer `invalid_result`.
   */
  call_id: Schema.optionalKey(Schema.String),
  delivery_id: Schema.optionalKey(Schema.String)
}) {
  override get message() {
    return `invalid frame (${this.code})${this.type === undefined ? "" : ` type=${this.type}`} bytes=${this.bytes}`
  }
}

/** Step one's output: a well-formed envelope plus its size. */
export interface RawEnvelope {
  readonly type: string
  readonly id?: string | undefined
  readonly payload?: unknown
  readonly trace?: string | undefined
  /** Exact frame size in bytes. */
  readonly bytes: number
  /**
   * Set when the frame exceeds a structural bound (JsonBounds.ts). The text was then not parsed: `payload` is
   * absent and `type` / `id` are the top-level strings the scan found; step two refuses the frame with this
   * code once it has checked them, so the family's documented reply can still be sent.
   */
  readonly violation?: "too_deep" | "too_many_nodes" | undefined
}

// ignoreBOM keeps a leading byte-order mark in the text, so JSON.parse refuses it exactly as it refuses a text
// frame that starts with one (and as Go's decoder does).
const textDecoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true })

/** Byte size of a frame, counting at most up to the 4 MiB bound for long strings. */
const frameBytes = (text: string): number =>
  text.length <= MaxFrameBytes / 3 ? utf8ByteLength(text) : fitsUtf8Bytes(text, MaxFrameBytes) ? utf8ByteLength(text) : MaxFrameBytes + 1

/**
 * Step one: size, JSON and outer shape. Accepts text or bytes (bytes must be UTF-8). `knownBytes` is the frame
 * size when the transport already knows it (a WebSocket message buffer); otherwise it is computed, exactly, only
 * when the text could be near the bound or when it is asked for. Never throws and never echoes input.
 */
export const decodeEnvelope = (
  frame: string | Uint8Array,
  knownBytes?: number
): Result.Result<RawEnvelope, InvalidFrame> =>
  (typeof frame === "string" && frame.length >= LongContent ? decodeLongDone(frame, knownBytes) : undefined) ??
    decodeAny(frame, knownBytes)

/** A `done` content at least this long (UTF-16 units) is read without `JSON.parse` copying it (`decodeLongDone`). */
const LongContent = 16_384
const DoneHead = `{"type":"done","id":"`
const ContentHead = `,"payload":{"content":`
/**
 * A Run's `done` with a long content, as the daemon writes it (`EncodedFrame.encodeFrame`: the content is the
 * payload's first member), decoded without `JSON.parse` making a second copy of the content (issue 18, relay: the
 * done of a 10,000-delta Turn carries 430 KB, and on this VM a new string of that size costs about 1 ms, most of
 * it page faults of a fresh large-object page). It applies only to a text that starts exactly
 * `{"type":"done","id":"<id>","payload":{"content":"<content>"` where both strings have no escape and no raw
 * control character (`PlainText.plainTokenEnd`), and whose rest (after the content's closing quote) has no
 * backslash and neither `"content"` nor `"payload"` (so no later member can replace either: every key in it is
 * written as it reads). The text with
 * `""` in the content's place then goes through the generic decode with the frame's own size: JSON is context-free
 * and both texts differ only inside one string token, so it is valid, within the JSON bounds and of the same
 * envelope exactly when the frame is, and its payload differs only in that member, which gets the content back (the
 * frame's characters between the quotes: what `JSON.parse` reads for a token without escapes). Anything else, and
 * any refusal, is `undefined`: the generic decode of the whole frame answers (`test/proto/Envelope.test.ts`).
 */
const decodeLongDone = (text: string, knownBytes: number | undefined): Result.Result<RawEnvelope, InvalidFrame> | undefined => {
  if (!text.startsWith(DoneHead)) return undefined
  const idClose = plainTokenEnd(text, DoneHead.length - 1)
  if (idClose < 0 || !text.startsWith(ContentHead, idClose + 1)) return undefined
  const open = idClose + 1 + ContentHead.length
  if (text.charCodeAt(open) !== 0x22) return undefined
  const close = plainTokenEnd(text, open)
  if (close - open - 1 < LongContent) return undefined
  const rest = text.slice(close)
  if (rest.includes("\\") || rest.includes(`"content"`) || rest.includes(`"payload"`)) return undefined
  const raw = decodeAny(text.slice(0, open + 1) + rest, knownBytes ?? frameBytes(text))
  if (Result.isFailure(raw) || raw.success.violation !== undefined) return undefined
  ;(raw.success.payload as { content: string }).content = text.slice(open + 1, close)
  return raw
}

/** Step one for any frame (`decodeEnvelope`). */
const decodeAny = (frame: string | Uint8Array, knownBytes: number | undefined): Result.Result<RawEnvelope, InvalidFrame> => {
  let text: string
  let size: number | undefined = knownBytes
  if (typeof frame === "string") {
    text = frame
    // A string of at most MaxFrameBytes/3 UTF-16 units cannot exceed the bound; skip counting on the hot path.
    if (size === undefined && frame.length > MaxFrameBytes / 3) size = frameBytes(frame)
  } else {
    size = frame.byteLength
    if (size > MaxFrameBytes) return Result.fail(new InvalidFrame({ code: "frame_too_large", bytes: size }))
    try {
      text = textDecoder.decode(frame)
    } catch {
      return Result.fail(new InvalidFrame({ code: "not_json", bytes: size }))
    }
  }
  const bytesOf = () => (size ??= utf8ByteLength(text))
  if (size !== undefined && size > MaxFrameBytes) return Result.fail(new InvalidFrame({ code: "frame_too_large", bytes: size }))
  const scan = scanJsonText(text)
  if (scan.violation !== undefined) {
    const type = stringToken(scan.typeToken)
    const id = stringToken(scan.idToken)
    if (type === undefined || type.length === 0) {
      return Result.fail(new InvalidFrame({ code: scan.violation, bytes: bytesOf() }))
    }
    return Result.succeed(new Raw(type, id === "" ? undefined : id, undefined, undefined, size, text, scan.violation))
  }
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    return Result.fail(new InvalidFrame({ code: "not_json", bytes: bytesOf() }))
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return Result.fail(new InvalidFrame({ code: "not_an_envelope", bytes: bytesOf() }))
  }
  const record = value as Record<string, unknown>
  const type = record["type"]
  const id = record["id"]
  if (typeof type !== "string" || type.length === 0 || (id !== undefined && typeof id !== "string")) {
    return Result.fail(new InvalidFrame({ code: "not_an_envelope", bytes: bytesOf() }))
  }
  const trace = record["trace"]
  const payload = record["payload"]
  return Result.succeed(
    new Raw(
      type,
      // Go omits empty ids; an empty string means "no id".
      id === undefined || id === "" ? undefined : id,
      payload === null ? undefined : payload,
      typeof trace === "string" && trace !== "" && trace.length <= MaxEchoedTraceChars ? trace : undefined,
      size,
      text
    )
  )
}

/** The value of a raw JSON string token the scan kept (at most 1024 characters), or undefined. */
const stringToken = (token: string | undefined): string | undefined => {
  if (token === undefined) return undefined
  try {
    const value: unknown = JSON.parse(token)
    return typeof value === "string" ? value : undefined
  } catch {
    return undefined
  }
}

/** A step-one envelope whose exact byte size is computed on first use. */
class Raw implements RawEnvelope {
  constructor(
    readonly type: string,
    readonly id: string | undefined,
    readonly payload: unknown,
    readonly trace: string | undefined,
    private size: number | undefined,
    private readonly text: string,
    readonly violation?: "too_deep" | "too_many_nodes"
  ) {}
  get bytes(): number {
    return (this.size ??= utf8ByteLength(this.text))
  }
}

/**
 * A binary WebSocket frame: the protocol carries one envelope per *text* frame, so both sides refuse a binary
 * frame as `not_json` without decoding it.
 */
export const refuseBinaryFrame = (frame: Uint8Array): Result.Result<never, InvalidFrame> =>
  Result.fail(new InvalidFrame({ code: "not_json", bytes: frame.byteLength }))

/** True when an id may appear in an error, a log line or a reply (at most 128 bytes). */
export const isEchoableId = (id: string | undefined): id is string =>
  id !== undefined && fitsUtf8Bytes(id, MaxCorrelationIdBytes)
