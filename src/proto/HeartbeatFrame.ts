/**
 * A fast path for the frame Core reads most (issue 18): the heartbeat a connected daemon repeats every 15 s, whose
 * text is, in practice, the previous heartbeat's text with new `ts` and `active_requests` numbers.
 *
 * `template(text, message)` takes a heartbeat the generic decoder (`Envelope.decodeEnvelope` then
 * `Messages.decodeRuntimeToCoreEnvelope`) accepted and splits its text around the value tokens of
 * `payload.ts` and `payload.active_requests`: a prefix, a middle and a suffix, kept verbatim. `match(template,
 * text)` accepts a later frame only when it is exactly prefix + number + middle + number + suffix, each number
 * a plain decimal non-negative integer of at most 15 digits (`0` or `[1-9][0-9]*`: always a safe integer, so
 * `NonNegativeInt`); anything else is `undefined` and goes through the generic decoder, which gives its own
 * verdict (so every refusal and typed error is the generic one: this path never refuses).
 *
 * Why a match is exactly what the generic decoder would return: the text differs from an accepted frame only
 * in two JSON number tokens that are replaced by other JSON number tokens (what follows a number in JSON is never
 * a digit, so the token boundaries are where they were). So it is valid JSON of the same structure (same depth,
 * same value count), under the 4 MiB bound (the template is made only from a frame of at most
 * `MaxTemplateChars`), with the same envelope members (type, ignored id, trace) and the same payload members
 * except these two values; the template is made only when `payload` and each of the two members occur once in
 * their object (so they are the values `JSON.parse` keeps). The payload schema has no rule across members, so
 * it holds for the new values when they are non-negative integers. The result is the template's message with
 * the two numbers replaced (`test/proto/HeartbeatFrame.test.ts` checks it against the generic decoder).
 */
import { utf8ByteLength } from "./Checks.js"
import type { MessageOfType } from "./Messages.js"
import * as SharedByKey from "./SharedByKey.js"

/** A decoded heartbeat message. */
export type Heartbeat = MessageOfType<"heartbeat">

/** The largest frame (UTF-16 units) a template is made from: a heartbeat with 32 kinds is about 32 KiB. */
export const MaxTemplateChars = 65_536

/** The most digits a matched number may have (every 15-digit decimal is a safe integer). */
const MaxDigits = 15

/** A heartbeat's text split around its two liveness numbers (see the module header). */
export interface HeartbeatTemplate {
  readonly prefix: string
  readonly middle: string
  readonly suffix: string
  /** True when `ts` comes before `active_requests` in the text. */
  readonly tsFirst: boolean
  /** UTF-8 bytes of prefix + middle + suffix (a frame's size is these plus one byte per digit). */
  readonly fixedBytes: number
  /** UTF-16 units of prefix + middle + suffix. */
  readonly fixedChars: number
  /** The accepted heartbeat this template was made from. */
  readonly message: Heartbeat
}

const isSpace = (c: number) => c === 32 || c === 9 || c === 10 || c === 13

const skipSpace = (text: string, i: number): number => {
  while (i < text.length && isSpace(text.charCodeAt(i))) i++
  return i
}

/** From a string token's opening quote to just after its closing quote (the text is valid JSON). */
const skipString = (text: string, i: number): number => {
  i++
  while (i < text.length) {
    const c = text.charCodeAt(i)
    if (c === 34) return i + 1
    i += c === 92 ? 2 : 1
  }
  return i
}

/** From the start of a value to just after it (iterative: never recursive on peer data; the text is valid JSON). */
const skipValue = (text: string, i: number): number => {
  let depth = 0
  while (i < text.length) {
    const c = text.charCodeAt(i)
    if (c === 34) i = skipString(text, i)
    else if (c === 123 || c === 91) {
      depth++
      i++
      continue
    } else if (c === 125 || c === 93) {
      depth--
      i++
    } else if (c === 44 || c === 58 || isSpace(c)) {
      i++
      continue
    } else {
      // a number or a literal: up to the next delimiter
      while (i < text.length) {
        const d = text.charCodeAt(i)
        if (d === 44 || d === 125 || d === 93 || isSpace(d)) break
        i++
      }
    }
    if (depth === 0) return i
  }
  return i
}

interface Member {
  readonly key: string
  readonly start: number
  readonly end: number
}

/** The members of the object starting at `i` (its `{`), with each value's span; undefined when it is no object. */
const members = (text: string, i: number): Array<Member> | undefined => {
  if (text.charCodeAt(i) !== 123) return undefined
  const out: Array<Member> = []
  i = skipSpace(text, i + 1)
  if (text.charCodeAt(i) === 125) return out
  while (i < text.length) {
    const keyStart = i
    i = skipString(text, i)
    const raw = text.slice(keyStart + 1, i - 1)
    const key = raw.includes("\\") ? (JSON.parse(text.slice(keyStart, i)) as string) : raw
    i = skipSpace(text, i)
    i = skipSpace(text, i + 1) // the colon
    const start = i
    i = skipValue(text, i)
    out.push({ key, start, end: i })
    i = skipSpace(text, i)
    if (text.charCodeAt(i) !== 44) return out
    i = skipSpace(text, i + 1)
  }
  return out
}

const only = (list: ReadonlyArray<Member>, key: string): Member | undefined => {
  let found: Member | undefined
  for (const m of list) {
    if (m.key !== key) continue
    if (found !== undefined) return undefined
    found = m
  }
  return found
}

/**
 * The template of `text`, a frame the generic decoder accepted as `message`; undefined when the frame does not
 * qualify (over `MaxTemplateChars`, or `payload`, `ts` or `active_requests` absent or repeated).
 */
export const template = (text: string, message: Heartbeat): HeartbeatTemplate | undefined => {
  if (text.length > MaxTemplateChars) return undefined
  const top = members(text, skipSpace(text, 0))
  const payload = top === undefined ? undefined : only(top, "payload")
  const inner = payload === undefined ? undefined : members(text, payload.start)
  if (inner === undefined) return undefined
  const ts = only(inner, "ts")
  const active = only(inner, "active_requests")
  if (ts === undefined || active === undefined) return undefined
  const [first, second] = ts.start < active.start ? [ts, active] : [active, ts]
  const tsFirst = first === ts
  // Templates with the same parts are interchangeable (same text structure, so the same message up to the two
  // numbers, which `messageOf` sets): connections whose daemons declare the same share one.
  const key = `${tsFirst ? "t" : "a"}${first.start}:${second.start - first.end}:${text.slice(0, first.start)}${
    text.slice(first.end, second.start)
  }${text.slice(second.end)}`
  const known = shared.get(key)
  if (known !== undefined) return known
  // Flat copies: a slice may keep the whole frame text alive.
  const prefix = flat(text.slice(0, first.start))
  const middle = flat(text.slice(first.end, second.start))
  const suffix = flat(text.slice(second.end))
  const made: HeartbeatTemplate = {
    prefix,
    middle,
    suffix,
    tsFirst,
    fixedBytes: utf8ByteLength(prefix) + utf8ByteLength(middle) + utf8ByteLength(suffix),
    fixedChars: prefix.length + middle.length + suffix.length,
    message
  }
  return shared.add(key, made)
}

/** How many templates the process shares at most, and their total text (UTF-16 units). */
export const MaxSharedTemplates = 1024
export const MaxSharedChars = 4 * 1024 * 1024
/** Templates by their parts (see `template`). */
const shared = SharedByKey.make<HeartbeatTemplate>(MaxSharedTemplates, MaxSharedChars)

/**
 * The same string with storage of its own: V8 keeps a long slice as a view that holds the whole frame text alive;
 * the concatenation is flattened into a copy by `slice`.
 */
const flat = (s: string): string => (" " + s).slice(1)

/**
 * The end of a plain decimal non-negative integer starting at `i` (`0` or `[1-9][0-9]*`, at most 15 digits), or
 * -1. Its value is left in `parsed`.
 */
let parsed = 0
const number = (text: string, i: number): number => {
  const c = text.charCodeAt(i) - 48
  if (c < 0 || c > 9) return -1
  parsed = c
  if (c === 0) return i + 1
  const limit = Math.min(text.length, i + MaxDigits)
  let j = i + 1
  while (j < limit) {
    const d = text.charCodeAt(j) - 48
    if (d < 0 || d > 9) return j
    parsed = parsed * 10 + d
    j++
  }
  // A 16th digit: not handled here.
  const d = text.charCodeAt(j) - 48
  return d >= 0 && d <= 9 ? -1 : j
}

/** The liveness numbers of a matched frame. */
export interface Liveness {
  ts: number
  active_requests: number
}

/**
 * True when `text` is `t`'s text with other liveness numbers (see the module header), which are then written to
 * `into` (no allocation: the fast path of a connection's read side); false otherwise (decode `text` with the
 * generic decoder). Never throws.
 */
export const matches = (t: HeartbeatTemplate, text: string, into: Liveness): boolean => {
  const extra = text.length - t.fixedChars
  // Parts are compared as slices with `===` (a word-wise compare in V8): `startsWith` / `endsWith` compare
  // character by character, 0.3–1.5 µs for a 900-character heartbeat against 0.05 µs.
  if (extra < 2 || extra > 2 * MaxDigits || text.slice(0, t.prefix.length) !== t.prefix) return false
  const firstEnd = number(text, t.prefix.length)
  if (firstEnd < 0) return false
  const first = parsed
  const secondStart = firstEnd + t.middle.length
  if (text.slice(firstEnd, secondStart) !== t.middle) return false
  const secondEnd = number(text, secondStart)
  if (secondEnd < 0 || secondEnd + t.suffix.length !== text.length || text.slice(secondEnd) !== t.suffix) return false
  into.ts = t.tsFirst ? first : parsed
  into.active_requests = t.tsFirst ? parsed : first
  return true
}

/** The message a matched frame decodes to: `t`'s message with the frame's liveness numbers. */
export const messageOf = (t: HeartbeatTemplate, liveness: Liveness): Heartbeat => {
  const base = t.message
  const payload = { ...base.payload, ts: liveness.ts, active_requests: liveness.active_requests }
  return base.trace === undefined
    ? { type: "heartbeat", payload }
    : { type: "heartbeat", payload, trace: base.trace }
}

/**
 * The heartbeat `text` decodes to when it is `t`'s text with other liveness numbers (exactly the generic decoder's
 * message); undefined otherwise. Never throws.
 */
export const match = (t: HeartbeatTemplate, text: string): Heartbeat | undefined => {
  const liveness: Liveness = { ts: 0, active_requests: 0 }
  return matches(t, text, liveness) ? messageOf(t, liveness) : undefined
}

/** The UTF-8 size of a frame `matches` accepted with `t`. */
export const matchedBytes = (t: HeartbeatTemplate, text: string): number => t.fixedBytes + text.length - t.fixedChars
