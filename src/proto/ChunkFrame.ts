/**
 * A dedicated decoder for the frames that carry an upload's bytes: the `chunk` steps of `runtime_prepare` and
 * `workspace_write` (Core → Runtime, one per 64 KiB, each answered before the next is sent), read straight from
 * the received frame's bytes. The generic path (`Envelope.decodeEnvelope`, then `Messages` step two, then the
 * strict base64 of `data`) turns the 87 KiB frame into text, scans it for the JSON bounds, parses it (a second
 * 87 KiB string for `data`) and decodes `data`: about 47 µs of the daemon's time on every chunk's round trip.
 *
 * This decoder recognizes exactly one layout, the one Core's encoder writes (`EncodedFrame.encodeChunkFrame` over
 * `Messages.encodeMessage`, members in this order, no whitespace):
 *
 *     {"type":"<runtime_prepare|workspace_write>","id":"<id>","payload":{"step":"chunk"[,"offset":<n>],"data":"<base64>"}[,"trace":"<trace>"]}
 *
 * where `<id>` and `<trace>` are printable ASCII without `"` or `\` (so their JSON value is their text; a trace of
 * 1..256 characters, as the envelope keeps), `<n>` a JSON integer of at most 15 digits, and `<base64>` canonical
 * padded base64 (`internal/base64.ts`, decoded from the bytes without making the frame a string). The frame is
 * within 4 MiB and within its family's payload bound. The envelope then goes through the same step two as any
 * frame (`Messages.decodeCoreToRuntimeEnvelope`: the id's rule, the payload schema) with `data: ""`: the schemas
 * constrain `data` only to be a string, so the answer is the one the full text gets.
 *
 * Anything else — another member order, whitespace, escapes, another step or type, bad base64, a frame step two
 * refuses — is `undefined`: the caller decodes that frame the generic way, which gives every refusal its usual
 * typed error. So the fast path never changes an answer: when it succeeds, the generic decoder succeeds with the
 * same message and the same data (`test/proto/ChunkFrame.property.test.ts` checks both on valid and broken frames).
 */
import { Result } from "effect"
import { decodeStrictAscii } from "./internal/base64.js"
import { MaxEchoedTraceChars, MaxFrameBytes, MaxRuntimePrepareBeginBytes, MaxTransferFramePayloadBytes } from "./Limits.js"
import { type CoreToRuntime, decodeCoreToRuntimeEnvelope } from "./Messages.js"

/** A chunk frame decoded by the fast path: the message (its `data` is `""`), the chunk's bytes, the frame size. */
export interface DecodedChunkFrame {
  readonly message: Extract<CoreToRuntime, { readonly type: "runtime_prepare" | "workspace_write" }>
  readonly data: Uint8Array
  readonly bytes: number
}

const bytesOf = (text: string): Uint8Array => Uint8Array.from(text, (c) => c.charCodeAt(0))

const TypeHead = bytesOf(`{"type":"`)
const IdHead = bytesOf(`","id":"`)
const PayloadHead = bytesOf(`","payload":{"step":"chunk",`)
const OffsetHead = bytesOf(`"offset":`)
const DataHead = bytesOf(`"data":"`)
const TraceHead = bytesOf(`,"trace":"`)

/** The two families, with the payload bound of each (`Messages`' catalogue: the frame must be within it). */
const families = [
  { type: "runtime_prepare" as const, name: bytesOf("runtime_prepare"), maxPayloadBytes: MaxRuntimePrepareBeginBytes },
  { type: "workspace_write" as const, name: bytesOf("workspace_write"), maxPayloadBytes: MaxTransferFramePayloadBytes }
]

const Quote = 0x22
const Backslash = 0x5c
const Comma = 0x2c
const Close = 0x7d

const matches = (frame: Uint8Array, at: number, literal: Uint8Array): boolean => {
  if (at + literal.length > frame.length) return false
  for (let i = 0; i < literal.length; i++) if (frame[at + i] !== literal[i]) return false
  return true
}

/** The end of a run of printable ASCII other than `"` and `\` starting at `at` (at most `max` long), or -1. */
const plainEnd = (frame: Uint8Array, at: number, max: number): number => {
  const limit = Math.min(frame.length, at + max + 1)
  for (let i = at; i < limit; i++) {
    const b = frame[i]!
    if (b === Quote) return i
    if (b < 0x20 || b > 0x7e || b === Backslash) return -1
  }
  return -1
}

/** The text of a short run of ASCII bytes (an id, a trace, digits): one character per byte. */
const ascii = (frame: Uint8Array, start: number, end: number): string => {
  let text = ""
  for (let i = start; i < end; i++) text += String.fromCharCode(frame[i]!)
  return text
}

/**
 * The chunk frame in `frame` (a received text frame's bytes), or undefined when it is not exactly the layout above
 * or is not valid (decode it the generic way then). Never throws; reads nothing beyond the frame.
 */
export const decodeChunkFrame = (frame: Uint8Array): DecodedChunkFrame | undefined => {
  const n = frame.length
  if (n > MaxFrameBytes || !matches(frame, 0, TypeHead)) return undefined
  let at = TypeHead.length
  const family = families.find((f) => matches(frame, at, f.name))
  if (family === undefined || n > family.maxPayloadBytes) return undefined
  at += family.name.length
  if (!matches(frame, at, IdHead)) return undefined
  at += IdHead.length
  // Longer ids are refused by step two anyway (128 bytes); the generic path gives that answer.
  const idEnd = plainEnd(frame, at, 128)
  if (idEnd <= at) return undefined
  const id = ascii(frame, at, idEnd)
  at = idEnd
  if (!matches(frame, at, PayloadHead)) return undefined
  at += PayloadHead.length
  let offset: number | undefined
  if (matches(frame, at, OffsetHead)) {
    at += OffsetHead.length
    const start = at
    while (at < n && at - start <= 15 && frame[at]! >= 0x30 && frame[at]! <= 0x39) at++
    const digits = at - start
    // JSON: no leading zero; at most 15 digits (a safe integer).
    if (digits === 0 || digits > 15 || (digits > 1 && frame[start] === 0x30) || frame[at] !== Comma) return undefined
    offset = Number(ascii(frame, start, at))
    at++
  }
  if (!matches(frame, at, DataHead)) return undefined
  at += DataHead.length
  const dataStart = at
  const dataEnd = frame.indexOf(Quote, dataStart)
  if (dataEnd < 0 || frame[dataEnd + 1] !== Close) return undefined
  at = dataEnd + 2
  let trace: string | undefined
  if (matches(frame, at, TraceHead)) {
    at += TraceHead.length
    const traceEnd = plainEnd(frame, at, MaxEchoedTraceChars)
    // An empty or longer trace is dropped by the envelope: left to the generic path.
    if (traceEnd <= at) return undefined
    trace = ascii(frame, at, traceEnd)
    at = traceEnd + 1
  }
  if (at !== n - 1 || frame[at] !== Close) return undefined
  const data = decodeStrictAscii(frame, dataStart, dataEnd)
  if (data === undefined) return undefined
  const payload = offset === undefined ? { step: "chunk", data: "" } : { step: "chunk", offset, data: "" }
  const decoded = decodeCoreToRuntimeEnvelope({ type: family.type, id, payload, trace, bytes: n })
  if (Result.isFailure(decoded)) return undefined
  return { message: decoded.success as DecodedChunkFrame["message"], data, bytes: n }
}
