/**
 * The structural bound of peer JSON: nesting depth and value count (`Limits.MaxJsonDepth`,
 * `Limits.MaxJsonNodes`), checked without recursion, so no later walk over peer data (schema decode, fast
 * validator, canonical encoding, fingerprints, `JSON.stringify` into a journal or a log) can exhaust the stack
 * or run unbounded.
 *
 * - `scanJsonText` checks a frame's text in one pass before `JSON.parse` (which parses a 2-million-deep frame
 *   without throwing but spends over a second on it). It also picks the envelope's top-level `type` and `id`
 *   strings, so a refused frame can still get its family's documented reply.
 * - `checkJsonValue` checks an already parsed value (an HTTP body, an outgoing message) by an explicit stack.
 *
 * Depth counts open arrays and objects: `1` has depth 0, `[]` depth 1, `{"a":[1]}` depth 2. Nodes count JSON
 * values: the root, each array element and each object member value (keys are not nodes).
 */
import { MaxJsonDepth, MaxJsonNodes } from "./Limits.js"

/** Which bound a value exceeds. */
export type JsonBoundsViolation = "too_deep" | "too_many_nodes"

export interface JsonBoundsOptions {
  readonly maxDepth?: number
  readonly maxNodes?: number
}

/** The outcome of a text scan. `violation` is absent when the text is within both bounds. */
export interface TextScan {
  readonly violation?: JsonBoundsViolation
  /** The raw JSON string token (quotes included) of a top-level `type` member, when the root is an object. */
  readonly typeToken?: string
  /** The raw JSON string token of a top-level `id` member. */
  readonly idToken?: string
}

const QUOTE = 0x22
const BACKSLASH = 0x5c
const COMMA = 0x2c
const COLON = 0x3a
const OPEN_ARRAY = 0x5b
const CLOSE_ARRAY = 0x5d
const OPEN_OBJECT = 0x7b
const CLOSE_OBJECT = 0x7d

/** Index of the quote that closes the string opened at `start`, or -1 when it is unterminated. */
const stringEnd = (text: string, start: number): number => {
  let j = text.indexOf('"', start + 1)
  while (j > 0) {
    if (text.charCodeAt(j - 1) !== BACKSLASH) return j
    let backslashes = 1
    for (let k = j - 2; k > start && text.charCodeAt(k) === BACKSLASH; k--) backslashes++
    if (backslashes % 2 === 0) return j
    j = text.indexOf('"', j + 1)
  }
  return -1
}

/** Top-level string tokens longer than this are not kept (an id over 128 bytes is never echoed anyway). */
const MaxKeptTokenChars = 1024

/**
 * One pass over JSON text, without recursion, allocating only when it reports a violation. For valid JSON the
 * depth and node counts are exact; for invalid text the result is meaningless but the scan still ends in
 * O(length), and `JSON.parse` then refuses the text. The whole text is scanned even after a violation, so a
 * `type` or `id` behind a deep member is still found. Text that cannot exceed either bound is not scanned at
 * all: fewer than 2 × MaxJsonNodes characters (n values need at least 2n - 1) and at most MaxJsonDepth opening
 * brackets, or too short to nest deeper (depth d needs at least 2d characters).
 */
export const scanJsonText = (text: string, options?: JsonBoundsOptions): TextScan => {
  const maxDepth = options?.maxDepth ?? MaxJsonDepth
  const maxNodes = options?.maxNodes ?? MaxJsonNodes
  const n = text.length
  if (n < 2 * maxNodes && (n <= 2 * maxDepth + 1 || opensAtMost(text, maxDepth))) return noViolation
  let depth = 0
  let nodes = 0
  let tooDeep = false
  /** The previous token opened a container: the next token other than its close starts its first value. */
  let justOpened = false
  let rootIsObject = false
  let started = false
  /** Top-level (depth 1 of an object root) state: the last key and whether a value follows a colon. */
  let expectKey = false
  let lastKey = 0 // 1: "type", 2: "id", 0: another key
  let afterColon = false
  let typeStart = -1
  let typeEnd = -1
  let idStart = -1
  let idEnd = -1

  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i)
    if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) continue
    if (!started) {
      started = true
      nodes = 1
      rootIsObject = c === OPEN_OBJECT
    }
    if (justOpened) {
      justOpened = false
      if (c !== CLOSE_ARRAY && c !== CLOSE_OBJECT) nodes++
    }
    switch (c) {
      case QUOTE: {
        const end = stringEnd(text, i)
        if (end < 0) {
          i = n
          break
        }
        if (depth === 1 && rootIsObject) {
          if (expectKey) {
            const length = end - i + 1
            lastKey = length === 6 && text.startsWith('"type"', i) ? 1 : length === 4 && text.startsWith('"id"', i) ? 2 : 0
            expectKey = false
          } else if (afterColon && end - i < MaxKeptTokenChars) {
            if (lastKey === 1) {
              typeStart = i
              typeEnd = end + 1
            } else if (lastKey === 2) {
              idStart = i
              idEnd = end + 1
            }
          }
        }
        afterColon = false
        i = end
        break
      }
      case OPEN_ARRAY:
      case OPEN_OBJECT:
        depth++
        if (depth > maxDepth) tooDeep = true
        justOpened = true
        if (depth === 1 && rootIsObject) expectKey = true
        afterColon = false
        break
      case CLOSE_ARRAY:
      case CLOSE_OBJECT:
        if (depth > 0) depth--
        afterColon = false
        break
      case COMMA:
        nodes++
        if (depth === 1 && rootIsObject) expectKey = true
        afterColon = false
        break
      case COLON:
        afterColon = depth === 1
        break
      default:
        afterColon = false
    }
  }
  const violation: JsonBoundsViolation | undefined = tooDeep ? "too_deep" : nodes > maxNodes ? "too_many_nodes" : undefined
  if (violation === undefined) return noViolation
  return {
    violation,
    ...(typeStart < 0 ? {} : { typeToken: text.slice(typeStart, typeEnd) }),
    ...(idStart < 0 ? {} : { idToken: text.slice(idStart, idEnd) })
  }
}

const noViolation: TextScan = {}

/**
 * True when the text holds at most `limit` `{` and `[` characters, strings included (an over-count is safe):
 * then no value nests deeper than `limit`. Native `indexOf` jumps, so a typical frame with a few dozen
 * containers costs a few dozen calls instead of a pass over every character.
 */
const opensAtMost = (text: string, limit: number): boolean => {
  let count = 0
  for (let i = text.indexOf("{"); i >= 0; i = text.indexOf("{", i + 1)) if (++count > limit) return false
  for (let i = text.indexOf("["); i >= 0; i = text.indexOf("[", i + 1)) if (++count > limit) return false
  return true
}

/**
 * Checks a parsed value against both bounds by an explicit stack: arrays and plain objects are walked (own
 * enumerable members), anything else is a leaf. Stops at the first violation, so it costs at most
 * `maxNodes` steps; a cyclic value is reported as `too_deep` or `too_many_nodes`, never looped over.
 */
export const checkJsonValue = (value: unknown, options?: JsonBoundsOptions): JsonBoundsViolation | undefined => {
  const maxDepth = options?.maxDepth ?? MaxJsonDepth
  const maxNodes = options?.maxNodes ?? MaxJsonNodes
  const values: Array<unknown> = [value]
  const depths: Array<number> = [0]
  let nodes = 0
  while (values.length > 0) {
    const current = values.pop()
    const depth = depths.pop()!
    if (++nodes > maxNodes) return "too_many_nodes"
    if (typeof current !== "object" || current === null || ArrayBuffer.isView(current)) continue
    const inner = depth + 1
    if (inner > maxDepth) return "too_deep"
    if (Array.isArray(current)) {
      if (nodes + values.length + current.length > maxNodes) return "too_many_nodes"
      for (let i = 0; i < current.length; i++) {
        values.push(current[i])
        depths.push(inner)
      }
    } else {
      for (const key in current) {
        if (!Object.prototype.hasOwnProperty.call(current, key)) continue
        const member = (current as Record<string, unknown>)[key]
        if (member === undefined) continue
        values.push(member)
        depths.push(inner)
      }
    }
    if (nodes + values.length > maxNodes) return "too_many_nodes"
  }
  return undefined
}

/** True when the value is within both bounds. */
export const isWithinJsonBounds = (value: unknown, options?: JsonBoundsOptions): boolean =>
  checkJsonValue(value, options) === undefined
