/**
 * A long string that needs (almost) no JSON escaping, spliced into the codec's JSON text of the rest of a message
 * instead of going through `JSON.stringify` (write side: `EncodedFrame` for a `done`'s content, `InputFrame` for long
 * input texts), or read out of a frame without `JSON.parse` copying it (read side: `Envelope`'s long `done`). The
 * codec encodes the message with a placeholder in the string's place (an empty string, or `Marker`); the frame is
 * that text with the placeholder's token replaced by the string's token, written as UTF-8 bytes once (`spliceBytes`).
 */
import { utf8ByteLength } from "./Checks.js"

/**
 * A string `JSON.stringify` writes as it is between its quotes: no quote, backslash or control character (the only
 * characters it escapes besides lone surrogates) and no surrogate at all, so its UTF-8 size is exact and
 * `TextEncoder.encodeInto` writes all of it. Testing this is much cheaper than `JSON.stringify` of a short string
 * (issue 18, relay: about 0.1 µs per delta); the text is the same.
 */
const Plain = /^[^"\\\u0000-\u001f\ud800-\udfff]*$/

/** True for a string `JSON.stringify` writes as it is between its quotes (`Plain`). */
export const isPlain = (text: string): boolean => Plain.test(text)

/**
 * What `JSON.stringify` writes differently from the text itself, besides a quote: a backslash, a control character,
 * a lone surrogate (escaped as `\udXXX`); every surrogate is refused here, so a paired one takes the codec's path
 * too. Everything else, U+2028 and U+2029 included, is written as it is.
 */
const EscapedButQuote = /[\\\u0000-\u001f\ud800-\udfff]/

/** True for a string `JSON.stringify` writes as it is between its quotes but for a backslash before each quote. */
export const isPlainButQuotes = (text: string): boolean => !EscapedButQuote.test(text)

/** Read side: a JSON string token's characters when it has no escape and no raw control character, then its quote. */
const PlainToken = /[^"\\\u0000-\u001f]*"/y

/** The closing quote of the JSON string token without escapes whose opening quote is at `open`, or -1. */
export const plainTokenEnd = (text: string, open: number): number => {
  PlainToken.lastIndex = open + 1
  return PlainToken.test(text) ? PlainToken.lastIndex - 1 : -1
}

/** A placeholder string (one NUL) that the codec writes as `MarkerToken`, which no other string's token contains. */
export const Marker = "\u0000"
const MarkerToken = `"\\u0000"`

/** The codec's text of a probe around its `Marker` tokens, when there are exactly `count` of them. */
export const aroundMarkers = (text: string, count: number): ReadonlyArray<string> | undefined => {
  const pieces = text.split(MarkerToken)
  return pieces.length === count + 1 ? pieces : undefined
}

/**
 * The codec's text of a probe around the empty string token of `member` (`"key":""`), when it occurs exactly once.
 * Outside a JSON string a quote is structural and inside one it is escaped, so this text occurs once per such member.
 */
export const aroundEmpty = (text: string, member: string): readonly [string, string] | undefined => {
  const at = text.indexOf(member)
  if (at < 0 || text.indexOf(member, at + member.length) >= 0) return undefined
  const cut = at + member.length - 2
  return [text.slice(0, cut), text.slice(cut + 2)]
}

/** Number of quotes in a text. */
export const quotesIn = (text: string): number => {
  let n = 0
  for (let at = text.indexOf('"'); at >= 0; at = text.indexOf('"', at + 1)) n++
  return n
}

/**
 * A frame as JSON text pieces around string tokens: `pieces[0]`, the token of `tokens[0]`, `pieces[1]`, … Each token
 * is a string given as its consecutive parts, each `isPlainButQuotes`, with `quotes[i]` quotes in all (each written
 * `\"`); `size` is the frame's exact UTF-8 size.
 */
export interface Splice {
  readonly pieces: ReadonlyArray<string>
  readonly tokens: ReadonlyArray<ReadonlyArray<string>>
  readonly quotes: ReadonlyArray<number>
  readonly size: number
}

/** The splice of `tokens` between `pieces`, counting quotes (or none, for tokens known to be `isPlain`). */
export const spliceOf = (
  pieces: ReadonlyArray<string>,
  tokens: ReadonlyArray<ReadonlyArray<string>>,
  plain = false
): Splice => {
  const quotes: Array<number> = []
  let size = 0
  for (const piece of pieces) size += utf8ByteLength(piece)
  for (const parts of tokens) {
    let q = 0
    for (const part of parts) {
      if (!plain) q += quotesIn(part)
      size += utf8ByteLength(part)
    }
    quotes.push(q)
    size += q + 2
  }
  return { pieces, tokens, quotes, size }
}

const QUOTE = 0x22
const BACKSLASH = 0x5c
const utf8 = new TextEncoder()

/** The frame's UTF-8 bytes, each token's parts written once (no joined string, no flat copy of the frame's text). */
export const spliceBytes = ({ pieces, quotes, size, tokens }: Splice): Uint8Array => {
  const out = new Uint8Array(size)
  let at = utf8.encodeInto(pieces[0]!, out).written
  for (let i = 0; i < tokens.length; i++) {
    out[at++] = QUOTE
    // The token's bytes go to the end of its slot, then move forward with a backslash before each quote: the write
    // position never passes the read position.
    const from = at + quotes[i]!
    let end = from
    for (const part of tokens[i]!) end += utf8.encodeInto(part, out.subarray(end)).written
    if (from === at) at = end
    else {
      for (let read = from; read < end; read++) {
        const byte = out[read]!
        if (byte === QUOTE) out[at++] = BACKSLASH
        out[at++] = byte
      }
    }
    out[at++] = QUOTE
    at += utf8.encodeInto(pieces[i + 1]!, out.subarray(at)).written
  }
  return out
}
