/**
 * `Checks.utf8ByteLength` measures long strings with the host's UTF-8 encoder, piece by piece through a 64 KiB
 * scratch buffer; it must agree with the character loop (`utf8ByteLengthLoop`, the oracle) on every kind of
 * character, lone surrogates included, and at every piece boundary (a surrogate pair or a 3-byte character
 * that straddles the end of the scratch).
 */
import { assert, describe, it } from "@effect/vitest"
import { utf8ByteLength, utf8ByteLengthLoop } from "../../src/proto/Checks.js"

const seeded = (seed: number) => () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 4294967296
const Pieces = ["a", "Z", "~", "\u007f", "é", "\u07ff", "\u0800", "€", "\uffff", "\ud83d\ude00", "\ud800", "\udc00", "\udbff\udfff"]

const generate = (random: () => number, length: number, asciiShare: number) => {
  const parts: Array<string> = []
  let n = 0
  while (n < length) {
    const piece = random() < asciiShare ? "x" : Pieces[Math.floor(random() * Pieces.length)]!
    parts.push(piece)
    n += piece.length
  }
  return parts.join("")
}

describe("utf8ByteLength", () => {
  it("agrees with the character loop on generated strings around the native threshold and the scratch size", () => {
    const random = seeded(5)
    const lengths = [0, 1, 2, 1000, 1023, 1024, 1025, 5000, 21845, 21846, 32768, 65535, 65536, 65537, 87384, 200000]
    for (const length of lengths) {
      for (const asciiShare of [1, 0.99, 0.5, 0]) {
        const s = generate(random, length, asciiShare)
        assert.strictEqual(utf8ByteLength(s), utf8ByteLengthLoop(s), `length ${length}, ascii share ${asciiShare}`)
      }
    }
  })

  it("counts characters straddling the end of the scratch buffer exactly", () => {
    for (const tail of ["\ud83d\ude00", "€", "é", "\ud800", "\udc00", "\ud800x"]) {
      for (let shift = 0; shift < 4; shift++) {
        const s = "x".repeat(65536 - shift) + tail + "y".repeat(70000)
        assert.strictEqual(utf8ByteLength(s), utf8ByteLengthLoop(s), `${JSON.stringify(tail)} at ${65536 - shift}`)
        const wide = "é".repeat(32768 - shift) + tail + "€".repeat(30000)
        assert.strictEqual(utf8ByteLength(wide), utf8ByteLengthLoop(wide), `${JSON.stringify(tail)} after 2-byte text`)
      }
    }
    assert.strictEqual(utf8ByteLength("\ud800".repeat(100001)), 300003)
    assert.strictEqual(utf8ByteLength("x".repeat(100000)), 100000)
  })
})
