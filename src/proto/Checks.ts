/**
 * Single-value checks shared by the wire schemas: UTF-8 byte bounds, non-blank strings, canonical UUIDs and
 * lower-case SHA-256 digests. Each check is a Schema filter with an arbitrary constraint, so property tests can
 * generate values that satisfy it.
 */
import { Schema } from "effect"

/** UTF-8 length of `s` in bytes, counted character by character; a lone surrogate counts as U+FFFD (3 bytes). */
export const utf8ByteLengthLoop = (s: string): number => {
  let bytes = 0
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if (c < 0x80) bytes += 1
    else if (c < 0x800) bytes += 2
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const next = s.charCodeAt(i + 1)
      if (next >= 0xdc00 && next <= 0xdfff) {
        bytes += 4
        i++
      } else bytes += 3
    } else bytes += 3
  }
  return bytes
}

// Long strings are measured by the host's native UTF-8 encoder into a fixed scratch buffer (about 3 µs for an
// 87 KiB base64 member, against 110 µs for the loop). `encodeInto` never splits a character, replaces a lone
// surrogate with U+FFFD (3 bytes, as the loop counts it) and reports the UTF-16 units it consumed, so a string
// longer than the scratch is measured piece by piece. `test/proto/Utf8Length.property.test.ts` checks it
// against the loop.
const NativeFrom = 1024
const scratch = new Uint8Array(64 * 1024)
const encoder = new TextEncoder()

/** UTF-8 length of `s` in bytes, without keeping any copy; a lone surrogate counts as U+FFFD (3 bytes). */
export const utf8ByteLength = (s: string): number => {
  const n = s.length
  if (n < NativeFrom) return utf8ByteLengthLoop(s)
  let bytes = 0
  let read = 0
  while (read < n) {
    const step = encoder.encodeInto(read === 0 ? s : s.slice(read), scratch)
    bytes += step.written
    read += step.read
  }
  return bytes
}

/** True when `s` has at most `max` UTF-8 bytes; stops counting early for long strings. */
export const fitsUtf8Bytes = (s: string, max: number): boolean =>
  s.length <= max / 3 ? true : s.length > max ? false : utf8ByteLength(s) <= max

/** At most `max` UTF-8 bytes. */
export const isMaxBytes = (max: number) =>
  Schema.makeFilter<string>((s) => fitsUtf8Bytes(s, max), {
    expected: `a string of at most ${max} UTF-8 bytes`,
    arbitraryConstraint: { maxLength: Math.floor(max / 4) }
  })

/** Not empty and not only whitespace. */
export const isNonBlank = Schema.makeFilter<string>((s) => s.trim().length > 0, {
  expected: "a non-blank string",
  arbitraryConstraint: { patterns: [{ source: "^[A-Za-z0-9][A-Za-z0-9_.:-]{0,30}$", flags: "" }] }
})

const CANONICAL_UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/
const NIL_UUID = "00000000-0000-0000-0000-000000000000"

/** Lower-case, hyphenated, 36 characters and not the nil UUID (what Go's parse-and-reprint check accepts). */
export const isCanonicalUuidString = (s: string): boolean => CANONICAL_UUID.test(s) && s !== NIL_UUID

export const isCanonicalUuid = Schema.makeFilter<string>(isCanonicalUuidString, {
  expected: "a canonical lower-case UUID",
  arbitraryConstraint: {
    patterns: [{ source: "^[1-9a-f][0-9a-f]{7}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$", flags: "" }]
  }
})

const SHA256_HEX = /^[0-9a-f]{64}$/
/** 64 lower-case hexadecimal characters. */
export const isSha256Hex = Schema.makeFilter<string>((s) => SHA256_HEX.test(s), {
  expected: "a lower-case SHA-256 hex digest",
  arbitraryConstraint: { patterns: [{ source: "^[0-9a-f]{64}$", flags: "" }] }
})

/** A non-negative safe integer (Go int / int64 values used on this wire). */
export const NonNegativeInt = Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))
/** A positive integer. */
export const PositiveInt = Schema.Int.check(Schema.isGreaterThanOrEqualTo(1))

/** Any JSON object (an opaque native value passed through unchanged). */
export const JsonObject = Schema.Record(Schema.String, Schema.Json)
