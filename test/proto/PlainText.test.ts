/**
 * `PlainText`: the tests that decide whether a string is written (or read) as it is, the placeholders' splice points
 * in the codec's text, and the splice's UTF-8 bytes, which must be exactly `JSON.stringify`'s text of the whole.
 */
import { assert, describe, it } from "@effect/vitest"
import {
  aroundEmpty,
  aroundMarkers,
  isPlain,
  isPlainButQuotes,
  Marker,
  plainTokenEnd,
  spliceBytes,
  spliceOf
} from "../../src/proto/PlainText.js"

const utf8 = new TextEncoder()

// Every character `JSON.stringify` escapes, and a few it does not.
const Escaped = ["\\", "\u0000", "\n", "\u001f", "\ud800", "\udfff", "😀"]
const Kept = ["a", " ", "\u007f", "é", "\u2028", "\u2029", "\ue000", "\uffff"]

describe("PlainText", () => {
  it("isPlain is true exactly when JSON.stringify writes the text as it is between quotes, with no surrogate", () => {
    for (const c of Kept) assert.isTrue(isPlain(`x${c}y`), JSON.stringify(c))
    for (const c of Kept) assert.strictEqual(JSON.stringify(`x${c}y`), `"x${c}y"`)
    for (const c of [...Escaped, '"']) assert.isFalse(isPlain(`x${c}y`), JSON.stringify(c))
    assert.isTrue(isPlain(""))
  })

  it("isPlainButQuotes accepts quotes and refuses everything else isPlain refuses", () => {
    assert.isTrue(isPlainButQuotes(`say "hi"`))
    for (const c of Kept) assert.isTrue(isPlainButQuotes(`x${c}y`))
    for (const c of Escaped) assert.isFalse(isPlainButQuotes(`x${c}y`), JSON.stringify(c))
  })

  it("plainTokenEnd finds a token's closing quote, or -1 for a token with an escape or a raw control character", () => {
    const text = `{"a":"b\ud800c","d":"e\\"f","g":"h\ni"}`
    assert.strictEqual(plainTokenEnd(text, 1), 3)
    assert.strictEqual(plainTokenEnd(text, 5), 9)
    assert.strictEqual(plainTokenEnd(text, text.indexOf(`"e`)), -1)
    assert.strictEqual(plainTokenEnd(text, text.indexOf(`"h`)), -1)
  })

  it("aroundEmpty cuts at the one empty member's token, and refuses none or two", () => {
    const text = JSON.stringify({ type: "done", payload: { content: "", x: `"content":""` } })
    assert.deepStrictEqual(aroundEmpty(text, `"content":""`), [`{"type":"done","payload":{"content":`, `,"x":"\\"content\\":\\"\\""}}`])
    assert.isUndefined(aroundEmpty(`{"content":"","a":{"content":""}}`, `"content":""`))
    assert.isUndefined(aroundEmpty(`{"content":"x"}`, `"content":""`))
  })

  it("aroundMarkers splits at the marker tokens only when there are as many as asked", () => {
    const text = JSON.stringify({ a: Marker, b: [Marker, `x${Marker}`] })
    assert.deepStrictEqual(aroundMarkers(text, 2), [`{"a":`, `,"b":[`, `,"x\\u0000"]}`])
    assert.isUndefined(aroundMarkers(text, 1))
    assert.isUndefined(aroundMarkers(text, 3))
  })

  it("spliceBytes writes the UTF-8 of JSON.stringify of the whole, from parts, escaping quotes", () => {
    const texts = [[`say "hi" é`, `, "bye"`], ["😀\u2028plain"], ["", ""]]
    const value = { a: Marker, b: [Marker, 1], c: { d: Marker, e: "ü" } }
    const pieces = aroundMarkers(JSON.stringify(value), 3)!
    const splice = spliceOf(pieces, texts)
    const whole = JSON.stringify({ a: texts[0]!.join(""), b: [texts[1]!.join(""), 1], c: { d: "", e: "ü" } })
    assert.deepStrictEqual(splice.quotes, [4, 0, 0])
    assert.strictEqual(splice.size, utf8.encode(whole).length)
    assert.deepStrictEqual(spliceBytes(splice), utf8.encode(whole))
  })

  it("spliceBytes of plain parts (no quote counting) equals the codec's text", () => {
    const parts = ["abc", "é😀", "xyz".repeat(1000)]
    const pieces = aroundEmpty(JSON.stringify({ content: "", n: 1 }), `"content":""`)!
    const splice = spliceOf(pieces, [parts], true)
    assert.deepStrictEqual(spliceBytes(splice), utf8.encode(JSON.stringify({ content: parts.join(""), n: 1 })))
  })
})
