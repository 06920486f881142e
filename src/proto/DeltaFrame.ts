/**
 * A fast path for the frame Core reads most during a Turn (issue 18, relay): a Run's `delta`, as the daemon writes
 * it (`EncodedFrame.deltaEncoder`, without `item_id`), untraced or with the Run's trace:
 *
 *     {"type":"delta","id":<the Run id>,"payload":{"delta":<JSON string>,"sequence":<integer>}}
 *     {"type":"delta","id":<the Run id>,"payload":{"delta":<JSON string>,"sequence":<integer>},"trace":<trace>}
 *
 * `layout(id, trace)` is the text around the delta's string and sequence for a Run id and trace (or none) that the
 * generic decoder (`Envelope.decodeEnvelope` then `Messages.decodeRuntimeToCoreEnvelope`) already returned for a
 * delta of this connection. `match(layout, text)` accepts a frame only when it is exactly the layout's prefix, then
 * one JSON string token, then `,"sequence":`, then a plain decimal non-negative integer of at most 15 digits (`0` or
 * `[1-9][0-9]*`: a safe integer), then the layout's suffix (`}}`, or `},"trace":<the trace's JSON string>}`) and
 * nothing else, and the frame is at most `MaxChars` long; anything else is `undefined` and goes through the generic
 * decoder, which gives its own verdict (this path never refuses a frame).
 *
 * Why a match is exactly what the generic decoder returns: such a text is valid JSON with no whitespace and no
 * repeated member, of depth 2 and at most 6 values (far inside the JSON bounds) and far under 4 MiB; its envelope
 * has type `delta`, an id the generic decoder accepted for `delta` (the same characters: the id token is made by
 * `JSON.stringify`, and a differently escaped id is not a match), the trace the generic decoder returned from the
 * same token (kept as it is: a non-empty string of at most 256 characters; a trace it dropped is never learned, as
 * the decoded message has none, and its frames end in another suffix) or none, and a payload whose only members are
 * a string `delta` and a non-negative integer `sequence`, which is what `RunEvents.DeltaPayload` requires (no rule
 * across members). The string token is read as `JSON.parse` reads it: as is when it has no escape, through
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
  /** Up to the delta's string. */
  readonly prefix: string
  /** After the sequence's digits, to the end. */
  readonly suffix: string
}

/** The layout of Run `id`'s delta frames with `trace` (undefined: untraced), as the daemon writes them. */
export const layout = (id: string, trace: string | undefined): Layout => ({
  id,
  trace,
  prefix: `{"type":"delta","id":${JSON.stringify(id)},"payload":{"delta":`,
  suffix: trace === undefined ? "}}" : `},"trace":${JSON.stringify(trace)}}`
})

const Sequence = `,"sequence":`

/**
 * A JSON string token's characters when it has no escape and no raw control character, then its closing quote
 * (sticky: matched at `lastIndex` only). One native scan instead of a loop of `charCodeAt`s; a token it does not
 * match is read by the loop below.
 */
const PlainString = /[^"\\\u0000-\u001f]*"/y

/** The delta message `text` encodes when it has the exact shape above for `layout`; otherwise `undefined`. */
export const match = (layout: Layout, text: string): Delta | undefined => {
  const n = text.length
  const prefixText = layout.prefix
  const open = prefixText.length
  // `slice` + `===` compares the prefix natively; `startsWith` compared it several times slower (issue 18).
  if (n > MaxChars || text.slice(0, open) !== prefixText || text.charCodeAt(open) !== 0x22) return undefined
  let close: number
  let delta: string
  PlainString.lastIndex = open + 1
  if (PlainString.test(text)) {
    close = PlainString.lastIndex - 1
    delta = text.slice(open + 1, close)
  } else {
    let i = open + 1
    while (true) {
      if (i >= n) return undefined
      const c = text.charCodeAt(i)
      if (c === 0x22) break
      if (c < 0x20) return undefined
      i += c === 0x5c ? 2 : 1
    }
    close = i
    try {
      delta = JSON.parse(text.slice(open, close + 1)) as string
    } catch {
      return undefined
    }
  }
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
  const payload = { delta, sequence }
  return (layout.trace === undefined
    ? { type: "delta", id: layout.id, payload }
    : { type: "delta", id: layout.id, payload, trace: layout.trace }) as Delta
}
