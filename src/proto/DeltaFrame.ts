/**
 * A fast path for the frame Core reads most during a Turn (issue 18, relay): a Run's `delta`, as the daemon writes
 * it (`EncodedFrame.deltaEncoder`), with or without an `item_id`, untraced or with the Run's trace:
 *
 *     {"type":"delta","id":<the Run id>,"payload":{"delta":<JSON string>,"sequence":<integer>}}
 *     {"type":"delta","id":<the Run id>,"payload":{"item_id":<JSON string>,"delta":<JSON string>,"sequence":<integer>}}
 *     either one with ,"trace":<trace> before its last brace
 *
 * `layout(id, trace)` is the text around the delta's string and sequence for a Run id and trace (or none) that the
 * generic decoder (`Envelope.decodeEnvelope` then `Messages.decodeRuntimeToCoreEnvelope`) already returned for a
 * delta of this connection. `match(layout, text)` accepts a frame only when it is exactly the layout's head, then
 * optionally `"item_id":`, one JSON string token and `,`, then `"delta":` and one JSON string token, then `,"sequence":`, then a plain decimal non-negative integer of at most 15 digits (`0` or
 * `[1-9][0-9]*`: a safe integer), then the layout's suffix (`}}`, or `},"trace":<the trace's JSON string>}`) and
 * nothing else, and the frame is at most `MaxChars` long; anything else is `undefined` and goes through the generic
 * decoder, which gives its own verdict (this path never refuses a frame).
 *
 * Why a match is exactly what the generic decoder returns: such a text is valid JSON with no whitespace and no
 * repeated member, of depth 2 and at most 7 values (far inside the JSON bounds) and far under 4 MiB; its envelope
 * has type `delta`, an id the generic decoder accepted for `delta` (the same characters: the id token is made by
 * `JSON.stringify`, and a differently escaped id is not a match), the trace the generic decoder returned from the
 * same token (kept as it is: a non-empty string of at most 256 characters; a trace it dropped is never learned, as
 * the decoded message has none, and its frames end in another suffix) or none, and a payload whose only members are
 * an optional string `item_id`, a string `delta` and a non-negative integer `sequence`, which is what
 * `RunEvents.DeltaPayload` requires (no rule across members). Each string token is read as `JSON.parse` reads it: as is when it has no escape, through
 * `JSON.parse` when it has one; a raw control character (which JSON refuses) is not a match.
 * `test/proto/DeltaFrame.test.ts` checks it against the generic decoder.
 */
import type { MessageOfType } from "./Messages.js"

/** A decoded delta message. */
export type Delta = MessageOfType<"delta">

/** The longest frame (UTF-16 units) this path reads; longer ones take the generic decoder. */
export const MaxChars = 16_384

/** The text around a delta frame's string and sequence, for one Run id and trace (see the header). */
export interface Layout {
  readonly id: string
  readonly trace: string | undefined
  /** Up to the payload's first member. */
  readonly head: string
  /** Up to the delta's string, for a payload without `item_id`. */
  readonly prefix: string
  /** After the sequence's digits, to the end. */
  readonly suffix: string
  /** `head`, `prefix` and `suffix` as UTF-8 bytes (`matchBytes`). */
  readonly headBytes: Uint8Array
  readonly prefixBytes: Uint8Array
  readonly suffixBytes: Uint8Array
}

const Sequence = `,"sequence":`
const DeltaKey = `"delta":`
const ItemKey = `"item_id":`
const utf8 = new TextEncoder()
const SequenceBytes = utf8.encode(Sequence)
const DeltaKeyBytes = utf8.encode(DeltaKey)
const ItemKeyBytes = utf8.encode(ItemKey)

/** The layout of Run `id`'s delta frames with `trace` (undefined: untraced), as the daemon writes them. */
export const layout = (id: string, trace: string | undefined): Layout => {
  const head = `{"type":"delta","id":${JSON.stringify(id)},"payload":{`
  const prefix = `${head}${DeltaKey}`
  const suffix = trace === undefined ? "}}" : `},"trace":${JSON.stringify(trace)}}`
  return {
    id,
    trace,
    head,
    prefix,
    suffix,
    headBytes: utf8.encode(head),
    prefixBytes: utf8.encode(prefix),
    suffixBytes: utf8.encode(suffix)
  }
}

/**
 * A JSON string token's characters when it has no escape and no raw control character, then its closing quote
 * (sticky: matched at `lastIndex` only). One native scan instead of a loop of `charCodeAt`s; a token it does not
 * match is read by `stringAt`'s loop.
 */
const PlainString = /[^"\\\u0000-\u001f]*"/y

/** The closing quote of the last token `stringAt` read. */
let tokenClose = 0

/**
 * The value of the JSON string token whose opening quote is at `open`, read as `JSON.parse` reads it (undefined when
 * there is none, or a raw control character); `tokenClose` is set to its closing quote.
 */
const stringAt = (text: string, open: number): string | undefined => {
  if (text.charCodeAt(open) !== 0x22) return undefined
  PlainString.lastIndex = open + 1
  if (PlainString.test(text)) {
    tokenClose = PlainString.lastIndex - 1
    return text.slice(open + 1, tokenClose)
  }
  const n = text.length
  let i = open + 1
  while (true) {
    if (i >= n) return undefined
    const c = text.charCodeAt(i)
    if (c === 0x22) break
    if (c < 0x20) return undefined
    i += c === 0x5c ? 2 : 1
  }
  tokenClose = i
  try {
    return JSON.parse(text.slice(open, i + 1)) as string
  } catch {
    return undefined
  }
}

/** The delta message `text` encodes when it has the exact shape above for `layout`; otherwise `undefined`. */
export const match = (layout: Layout, text: string): Delta | undefined => {
  const n = text.length
  if (n > MaxChars) return undefined
  // `slice` + `===` compares natively; `startsWith` compared the prefix several times slower (issue 18).
  let open: number
  let itemId: string | undefined
  if (text.slice(0, layout.prefix.length) === layout.prefix) open = layout.prefix.length
  else {
    const head = layout.head.length
    if (text.slice(0, head) !== layout.head || !text.startsWith(ItemKey, head)) return undefined
    itemId = stringAt(text, head + ItemKey.length)
    if (itemId === undefined || text.charCodeAt(tokenClose + 1) !== 0x2c || !text.startsWith(DeltaKey, tokenClose + 2)) {
      return undefined
    }
    open = tokenClose + 2 + DeltaKey.length
  }
  const delta = stringAt(text, open)
  if (delta === undefined) return undefined
  const close = tokenClose
  if (!text.startsWith(Sequence, close + 1)) return undefined
  const start = close + 1 + Sequence.length
  // The digits, then exactly the suffix at the end.
  const suffix = layout.suffix
  const end = n - suffix.length
  const digits = end - start
  if (digits < 1 || digits > 15 || text.slice(end) !== suffix) return undefined
  if (digits > 1 && text.charCodeAt(start) === 0x30) return undefined
  let sequence = 0
  for (let k = start; k < end; k++) {
    const d = text.charCodeAt(k) - 0x30
    if (d < 0 || d > 9) return undefined
    sequence = sequence * 10 + d
  }
  return deltaOf(layout, itemId, delta, sequence)
}

/** The decoded delta message (the same shape from `match` and `matchBytes`). */
const deltaOf = (layout: Layout, itemId: string | undefined, delta: string, sequence: number): Delta => {
  const payload = itemId === undefined ? { delta, sequence } : { item_id: itemId, delta, sequence }
  return (layout.trace === undefined
    ? { type: "delta", id: layout.id, payload }
    : { type: "delta", id: layout.id, payload, trace: layout.trace }) as Delta
}

/** The text of UTF-8 bytes `start` to `end` of a frame (a complete, valid sequence: Node's `Buffer#toString`). */
export type Utf8Text = (bytes: Uint8Array, start: number, end: number) => string

/** True when `bytes` holds `part` at `at`. */
const bytesAt = (bytes: Uint8Array, part: Uint8Array, at: number): boolean => {
  const n = part.length
  if (at + n > bytes.length) return false
  for (let k = 0; k < n; k++) if (bytes[at + k] !== part[k]) return false
  return true
}

/**
 * The closing quote of the JSON string token whose opening quote is at `open` when the token has no escape and no raw
 * control character (its value is then its bytes' text); -1 otherwise (`matchBytes` leaves such a frame to `match`).
 */
const plainTokenEnd = (bytes: Uint8Array, open: number): number => {
  if (bytes[open] !== 0x22) return -1
  const n = bytes.length
  for (let i = open + 1; i < n; i++) {
    const c = bytes[i]!
    if (c === 0x22) return i
    if (c === 0x5c || c < 0x20) return -1
  }
  return -1
}

/**
 * `match` over a text frame's UTF-8 bytes, as a WebSocket delivers them (valid UTF-8: `ws` refuses anything else
 * with 1007), without the frame's text: only the delta's (and an `item_id`'s) text is made, by `text` (issue 18:
 * the frame's string, about 136 bytes, and the scan of it per relayed delta). It accepts a subset of what `match`
 * accepts, and answers what `match` answers for the frame's text: the same shape with the layout's bytes in place of
 * its texts, at most `MaxChars` bytes (so at most that many UTF-16 units), and string tokens without an escape or a
 * raw control character (their value is their text; `"`, `\` and control characters are single bytes in UTF-8,
 * never inside a multi-byte character, and a token's quotes bound whole characters). Anything else is `undefined`:
 * the caller reads the frame's text with `match`, then the generic decoder (`test/proto/DeltaFrame.test.ts`
 * compares both on every case).
 */
export const matchBytes = (layout: Layout, bytes: Uint8Array, text: Utf8Text): Delta | undefined => {
  const n = bytes.length
  if (n > MaxChars) return undefined
  let open: number
  let itemId: string | undefined
  if (bytesAt(bytes, layout.prefixBytes, 0)) open = layout.prefixBytes.length
  else {
    const head = layout.headBytes.length
    if (!bytesAt(bytes, layout.headBytes, 0) || !bytesAt(bytes, ItemKeyBytes, head)) return undefined
    const itemOpen = head + ItemKeyBytes.length
    const itemClose = plainTokenEnd(bytes, itemOpen)
    if (itemClose < 0 || bytes[itemClose + 1] !== 0x2c || !bytesAt(bytes, DeltaKeyBytes, itemClose + 2)) return undefined
    itemId = text(bytes, itemOpen + 1, itemClose)
    open = itemClose + 2 + DeltaKeyBytes.length
  }
  const close = plainTokenEnd(bytes, open)
  if (close < 0 || !bytesAt(bytes, SequenceBytes, close + 1)) return undefined
  const start = close + 1 + SequenceBytes.length
  const suffix = layout.suffixBytes
  const end = n - suffix.length
  const digits = end - start
  if (digits < 1 || digits > 15 || !bytesAt(bytes, suffix, end)) return undefined
  if (digits > 1 && bytes[start] === 0x30) return undefined
  let sequence = 0
  for (let k = start; k < end; k++) {
    const d = bytes[k]! - 0x30
    if (d < 0 || d > 9) return undefined
    sequence = sequence * 10 + d
  }
  return deltaOf(layout, itemId, text(bytes, open + 1, close), sequence)
}
