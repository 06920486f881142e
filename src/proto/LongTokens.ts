/**
 * Step one (`Envelope.decodeEnvelope`) of a frame received as bytes that holds long string values, without the frame's
 * text or any of those strings ever being one large new string before the value is read (issue 18, relay: each
 * Turn's `execution_start` carries the scripted harness's 560 KB script; decoding its 600 KB of bytes to text and
 * `JSON.parse` of that text made two new strings of that size per Turn, and on this VM each such string is a fresh
 * large-object mapping whose pages all fault: about 280 minor faults and 3.9 ms per Turn in isolation).
 *
 * The bytes are read once as JSON string tokens (`tokensOf`: outside a string every quote opens one, inside one a
 * backslash escapes the next byte and a quote closes it). Each string value of at least `LongToken` bytes is
 * replaced by a marker (`"\u0000<k>"`) in the frame's text, which goes through the generic step one with the
 * frame's own size; its contents are read in slices of about `Slice` bytes (each one `JSON.parse` of the slice
 * between quotes, cut where no escape and no UTF-8 character spans the cut), and the value is their concatenation.
 * JSON is context-free and the texts differ only inside string tokens, each replaced by another valid string token
 * (the slices parse exactly when the token's contents do; a token never counts towards the JSON bounds but as one
 * value), so the probe is valid, within the bounds and of the same envelope exactly when the frame is. The markers
 * are put back into the decoded payload; the answer is the generic decode's, payload and all. Anything else (no long
 * value, a long key, a marker-like text elsewhere in the frame, a marker not found in the payload exactly once, bytes
 * that are not UTF-8 or not a complete token, a refusal) is `undefined`: the generic decode of the whole frame
 * answers (`test/proto/LongTokens.test.ts`).
 */
import { Result } from "effect"
import { decodeEnvelope, type InvalidFrame, type RawEnvelope } from "./Envelope.js"
import { MaxFrameBytes } from "./Limits.js"

/** A string token whose contents take at least this many bytes is read in slices. */
export const LongToken = 16_384
/** About this many bytes per slice: each slice's string stays well below V8's large-object size (128 KiB). */
export const Slice = 32_768

const QUOTE = 0x22
const BACKSLASH = 0x5c
const COLON = 0x3a

// Fatal and keeping a byte-order mark, as `Envelope` decodes a frame's bytes.
const textDecoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true })

/** The slice being read, between quotes (`valueOf`): one per process, reused. */
let scratch = new Uint8Array(Slice + 128)

const isSpace = (b: number): boolean => b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09

/**
 * The opening and closing quotes of the long string values in `bytes`, in order (`[open0, close0, open1, …]`), or
 * undefined when there is none, a long string is a key, or a string is not closed.
 */
const tokensOf = (bytes: Uint8Array): Array<number> | undefined => {
  const n = bytes.length
  const found: Array<number> = []
  let i = bytes.indexOf(QUOTE)
  while (i >= 0) {
    const open = i++
    for (;;) {
      if (i >= n) return undefined
      const b = bytes[i]!
      if (b === QUOTE) break
      i += b === BACKSLASH ? 2 : 1
    }
    const close = i++
    if (close - open - 1 >= LongToken) {
      let after = i
      while (after < n && isSpace(bytes[after]!)) after++
      if (after < n && bytes[after] === COLON) return undefined
      found.push(open, close)
    }
    i = bytes.indexOf(QUOTE, i)
  }
  return found.length === 0 ? undefined : found
}

/** Where a slice starting at `from` ends: about `Slice` bytes on, where no escape and no UTF-8 character spans it. */
const sliceEnd = (bytes: Uint8Array, from: number, to: number): number => {
  let at = from + Slice
  if (at >= to) return to
  const limit = Math.min(to, at + 64)
  for (; at < limit; at++) {
    if ((bytes[at]! & 0xc0) === 0x80) continue
    let escape = false
    for (let k = at - 6; k < at; k++) if (bytes[k] === BACKSLASH) escape = true
    if (!escape) return at
  }
  return -1
}

/** The value of the string token whose contents are `bytes[from, to)`, read in slices; undefined when it is not one. */
const valueOf = (bytes: Uint8Array, from: number, to: number): string | undefined => {
  let value = ""
  while (from < to) {
    const end = sliceEnd(bytes, from, to)
    if (end < 0) return undefined
    // The slice between quotes in a scratch buffer: decoded to the JSON text of a string, parsed (no joined copy).
    const length = end - from
    if (scratch.length < length + 2) scratch = new Uint8Array(Math.max(length + 2, Slice + 128))
    scratch[0] = QUOTE
    scratch.set(bytes.subarray(from, end), 1)
    scratch[length + 1] = QUOTE
    const parsed: unknown = JSON.parse(textDecoder.decode(scratch.subarray(0, length + 2)))
    if (typeof parsed !== "string") return undefined
    value += parsed
    from = end
  }
  return value
}

const MarkerEscape = "\\u0000"
const isMarker = (value: string): boolean => value.length > 1 && value.charCodeAt(0) === 0

/** Puts the long values back in place of their markers; the number of markers put back. */
const putBack = (node: unknown, values: ReadonlyArray<string>, seen: Array<boolean>): number => {
  if (typeof node !== "object" || node === null) return 0
  let count = 0
  const record = node as Record<string, unknown>
  for (const key of Object.keys(record)) {
    const member = record[key]
    if (typeof member === "string") {
      if (!isMarker(member)) continue
      const k = Number(member.slice(1))
      if (!Number.isInteger(k) || k < 0 || k >= values.length || seen[k] === true || member !== `\u0000${k}`) return -1
      seen[k] = true
      record[key] = values[k]!
      count++
    } else {
      const inner = putBack(member, values, seen)
      if (inner < 0) return -1
      count += inner
    }
  }
  return count
}

/**
 * Step one of a frame received as bytes with long string values (module comment), or `undefined` when the generic
 * `Envelope.decodeEnvelope` must answer. When it answers, the answer is the generic decode's.
 */
export const decodeLongTokens = (bytes: Uint8Array): Result.Result<RawEnvelope, InvalidFrame> | undefined => {
  if (bytes.length < LongToken || bytes.length > MaxFrameBytes) return undefined
  const tokens = tokensOf(bytes)
  if (tokens === undefined) return undefined
  let probe = ""
  const values: Array<string> = []
  try {
    let from = 0
    for (let t = 0; t < tokens.length; t += 2) {
      const open = tokens[t]!
      const close = tokens[t + 1]!
      const piece = textDecoder.decode(bytes.subarray(from, open))
      if (piece.includes(MarkerEscape)) return undefined
      const value = valueOf(bytes, open + 1, close)
      if (value === undefined) return undefined
      probe += `${piece}"${MarkerEscape}${values.length}"`
      values.push(value)
      from = close + 1
    }
    const rest = textDecoder.decode(bytes.subarray(from))
    if (rest.includes(MarkerEscape)) return undefined
    probe += rest
  } catch {
    return undefined
  }
  const raw = decodeEnvelope(probe, bytes.length)
  if (Result.isFailure(raw) || raw.success.violation !== undefined) return undefined
  if (putBack(raw.success.payload, values, []) !== values.length) return undefined
  return raw
}
