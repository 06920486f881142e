/**
 * The strict base64 codec of the transfer chunks (`internal/base64.ts`) against the slow oracle it replaced: the
 * standard alphabet pattern, Effect's decoder and re-encoding to the same text. Both implementations (native,
 * used on Node, and portable) must give the oracle's verdict and bytes on generated valid texts and on mutations
 * of them: URL-safe characters, whitespace, misplaced padding, non-canonical tails, non-ASCII characters
 * (including ones whose low byte is an alphabet character) and lone surrogates.
 */
import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import { Base64 } from "effect/encoding"
import * as Codec from "../../src/proto/internal/base64.js"
import { Transfer } from "../../src/proto/index.js"

const oracle = (data: string): Uint8Array | undefined => {
  if (data.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(data)) return undefined
  const decoded = Base64.decode(data)
  return decoded._tag === "Success" && Base64.encode(decoded.success) === data ? decoded.success : undefined
}

const seeded = (seed: number) => () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 4294967296
const Alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
// Strangers: URL-safe, padding, whitespace, non-ASCII (U+0141 and U+012B have the low bytes of "A" and "+"),
// a lone high and low surrogate, a surrogate pair, NUL and DEL.
const Strangers = ["-", "_", "=", " ", "\n", "\r", "\t", "é", "\u0141", "\u012b", "\ud800", "\udc00", "\ud83d\ude00", "\u0000", "\u007f", "."]

const bytesOf = (random: () => number, length: number) => {
  const bytes = new Uint8Array(length)
  for (let i = 0; i < length; i++) bytes[i] = Math.floor(random() * 256)
  return bytes
}

const mutate = (random: () => number, text: string): string => {
  const at = Math.floor(random() * (text.length + 1))
  const pick = (list: ReadonlyArray<string> | string) => list[Math.floor(random() * list.length)]!
  switch (Math.floor(random() * 6)) {
    case 0: // replace one character by a stranger
      return text.slice(0, at) + pick(Strangers) + text.slice(at + 1)
    case 1: // insert a stranger
      return text.slice(0, at) + pick(Strangers) + text.slice(at)
    case 2: // delete one character
      return text.slice(0, at) + text.slice(at + 1)
    case 3: // replace the last character before the padding by any alphabet character (non-canonical tails)
    {
      const end = text.replace(/=+$/, "").length
      return end === 0 ? text : text.slice(0, end - 1) + pick(Alphabet) + text.slice(end)
    }
    case 4: // add or remove padding
      return random() < 0.5 ? text + "=" : text.replace(/=$/, "")
    default: // replace four characters (keeps the length a multiple of 4)
      return text.slice(0, at) + pick(Strangers) + pick(Alphabet) + pick(Strangers) + pick(Alphabet) + text.slice(at + 4)
  }
}

const same = (actual: Uint8Array | undefined, expected: Uint8Array | undefined, label: string) => {
  if (expected === undefined) return assert.isUndefined(actual, label)
  assert.isDefined(actual, label)
  assert.strictEqual(Object.getPrototypeOf(actual), Uint8Array.prototype, label)
  assert.deepStrictEqual(Array.from(actual!), Array.from(expected), label)
}

const check = (text: string) => {
  const expected = oracle(text)
  const label = JSON.stringify(text.length > 80 ? text.slice(0, 40) + "…" + text.slice(-40) : text)
  same(Codec.decodeStrictPortable(text), expected, `portable ${label}`)
  same(Codec.decodeStrict(text), expected, `host ${label}`)
  const viaTransfer = Transfer.decodeChunkData(text)
  assert.strictEqual(Result.isSuccess(viaTransfer), expected !== undefined, `decodeChunkData ${label}`)
  return expected !== undefined
}

describe("strict base64 codec", () => {
  it("uses the native codec on Node", () => {
    assert.strictEqual(Codec.implementation, "native")
  })

  it("encodes every length 0..300 and a 64 KiB chunk exactly like the reference encoder, both implementations", () => {
    const random = seeded(11)
    for (const length of [...Array.from({ length: 301 }, (_, i) => i), 65535, 65536]) {
      const bytes = bytesOf(random, length)
      const expected = Base64.encode(bytes)
      assert.strictEqual(Codec.encodePortable(bytes), expected, `portable ${length}`)
      assert.strictEqual(Codec.encode(bytes), expected, `host ${length}`)
      // A view into a larger buffer encodes only its own bytes.
      const wide = new Uint8Array(length + 7)
      wide.set(bytes, 3)
      assert.strictEqual(Codec.encode(wide.subarray(3, 3 + length)), expected, `host view ${length}`)
      assert.strictEqual(Codec.encodePortable(wide.subarray(3, 3 + length)), expected, `portable view ${length}`)
    }
  })

  it("agrees with the oracle on valid texts and on 20,000 mutations of them", () => {
    const random = seeded(29)
    let accepted = 0
    let refused = 0
    for (let i = 0; i < 4000; i++) {
      const length = i % 50 === 0 ? 4096 + Math.floor(random() * 8) : Math.floor(random() * 40)
      const text = Base64.encode(bytesOf(random, length))
      assert.isTrue(check(text))
      for (let k = 0; k < 5; k++) {
        let mutated = mutate(random, text)
        if (random() < 0.3) mutated = mutate(random, mutated)
        if (check(mutated)) accepted++
        else refused++
      }
    }
    assert.isAbove(accepted, 100) // some mutations stay canonical (an alphabet character for another)
    assert.isAbove(refused, 10000)
  })

  it("returns bytes that own their whole buffer (never a view into a shared pool)", () => {
    for (const length of [1, 10, 5000, 30000, 65536]) {
      const decoded = Codec.decodeStrict(Base64.encode(bytesOf(seeded(length), length)))!
      assert.strictEqual(decoded.byteOffset, 0, `${length}`)
      assert.strictEqual(decoded.buffer.byteLength, length, `${length}`)
    }
  })

  it("refuses the known non-canonical and non-standard forms and decodes a full 64 KiB chunk", () => {
    for (const text of ["QQ", "QQ=", "-_8=", "QQ==\n", " QQ==", "QQ=A", "Q===", "QR==", "QUF=", "@@@@", "QQ==QQ==", "\u0141Q==", "QQ\u012b="]) {
      assert.isFalse(check(text), text)
    }
    assert.isTrue(check(""))
    const chunk = bytesOf(seeded(3), 65536)
    const text = Base64.encode(chunk)
    assert.isTrue(check(text))
    assert.isFalse(check(text.slice(0, 40000) + "-" + text.slice(40001)))
    assert.isFalse(check(text.slice(0, 40000) + "\u0141" + text.slice(40001)))
  })
})
