/**
 * MessageInput rules (reference part 2 §5): the wire validator, the public inline image profile with real
 * PNG and JPEG byte strings built here, the Harness whitespace admission rule, and text-only joining.
 */
import { assert, describe, it } from "@effect/vitest"
import { Option } from "effect"
import { Buffer } from "node:buffer"
import { crc32, deflateSync } from "node:zlib"
import { MessageInput } from "../../src/proto/index.js"

// ---------------------------------------------------------------------------------------------- images

const chunk = (type: string, data: Uint8Array): Buffer => {
  const length = Buffer.alloc(4)
  length.writeUInt32BE(data.length)
  const body = Buffer.concat([Buffer.from(type, "latin1"), data])
  const crc = Buffer.alloc(4)
  crc.writeUInt32BE(crc32(body))
  return Buffer.concat([length, body, crc])
}

/** A complete 1×1 RGBA PNG: signature, IHDR, one zlib-compressed IDAT row, IEND, each with its CRC. */
const tinyPng = (): Uint8Array => {
  const ihdr = Buffer.alloc(13)
  ihdr.writeUInt32BE(1, 0) // width
  ihdr.writeUInt32BE(1, 4) // height
  ihdr.set([8, 6, 0, 0, 0], 8) // bit depth 8, colour type RGBA, deflate, no filter method, no interlace
  const row = Buffer.from([0, 0x33, 0x99, 0xcc, 0xff]) // filter byte + one pixel
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk("IHDR", ihdr),
    chunk("IDAT", deflateSync(row)),
    chunk("IEND", new Uint8Array())
  ])
}

/** A JFIF byte string: SOI, an APP0 JFIF segment (version 1.1, 1:1 density), then EOI. */
const tinyJpeg = (): Uint8Array =>
  Buffer.from([
    0xff, 0xd8, // SOI
    0xff, 0xe0, 0x00, 0x10, 0x4a, 0x46, 0x49, 0x46, 0x00, 0x01, 0x01, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, // APP0
    0xff, 0xd9 // EOI
  ])

const gif = (): Uint8Array => Buffer.from("GIF89a\u0001\u0000\u0001\u0000\u0000\u0000\u0000;", "latin1")
const dataUrl = (mediaType: string, bytes: Uint8Array) => `data:${mediaType};base64,${Buffer.from(bytes).toString("base64")}`

describe("MessageInput.validateInlineImage", () => {
  it("accepts a real PNG as image/png and a real JPEG as image/jpeg", () => {
    assert.deepStrictEqual(MessageInput.validateInlineImage(dataUrl("image/png", tinyPng())), Option.none())
    assert.deepStrictEqual(MessageInput.validateInlineImage(dataUrl("image/jpeg", tinyJpeg())), Option.none())
  })

  it("refuses any other media type, casing or reference form", () => {
    const png = Buffer.from(tinyPng()).toString("base64")
    for (const url of [
      dataUrl("image/gif", gif()),
      `data:image/PNG;base64,${png}`,
      `data:image/jpg;base64,${png}`,
      `data:image/png,${png}`,
      `DATA:image/png;base64,${png}`,
      "https://example.org/cat.png",
      "file:///tmp/cat.png",
      png
    ]) {
      assert.deepStrictEqual(MessageInput.validateInlineImage(url), Option.some("image_media_type"), url.slice(0, 30))
    }
  })

  it("refuses empty, non-canonical or malformed base64", () => {
    const png = Buffer.from(tinyPng()).toString("base64")
    const unpadded = png.replace(/=+$/, "")
    assert.notStrictEqual(unpadded, png)
    for (const encoded of ["", unpadded, `${png.slice(0, 20)}\n${png.slice(20)}`, ` ${png}`, png.replace(/\+/g, "-").replace(/\//g, "_") + "A", "iVBO*w0K"]) {
      assert.deepStrictEqual(MessageInput.validateInlineImage(`data:image/png;base64,${encoded}`), Option.some("image_base64"))
    }
    // A last character with non-zero unused bits decodes to the same bytes but is not canonical.
    const last = png.replace(/=+$/, "").slice(-1)
    const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    const sibling = alphabet[alphabet.indexOf(last) + 1]!
    const nonCanonical = png.replace(/.(=+)$/, `${sibling}$1`)
    assert.deepStrictEqual(MessageInput.validateInlineImage(`data:image/png;base64,${nonCanonical}`), Option.some("image_base64"))
  })

  it("refuses bytes that are not the declared format", () => {
    const cases: Array<[string, Uint8Array]> = [
      ["image/png", tinyJpeg()],
      ["image/jpeg", tinyPng()],
      ["image/png", gif()],
      ["image/png", tinyPng().slice(0, 20)],
      ["image/jpeg", Buffer.from([0xff, 0xd8])],
      ["image/png", Buffer.from("not an image at all, just text")]
    ]
    for (const [mediaType, bytes] of cases) {
      assert.deepStrictEqual(MessageInput.validateInlineImage(dataUrl(mediaType, bytes)), Option.some("image_format_mismatch"))
    }
  })

  it("checks every image part of an input and stops at the first bad one", () => {
    const good = { type: "input_image", image_url: dataUrl("image/png", tinyPng()) } as const
    const bad = { type: "input_image", image_url: "https://example.org/x.png" } as const
    const text = { type: "input_text", text: "look" } as const
    assert.deepStrictEqual(MessageInput.validateInlineImages([{ content: [text, good] }]), Option.none())
    assert.deepStrictEqual(MessageInput.validateInlineImages([{ content: [good] }, { content: [text, bad] }]), Option.some("image_media_type"))
  })
})

// ---------------------------------------------------------------------------------------------- wire validator

const text = (value: string) => ({ type: "input_text", text: value }) as const
const image = (url: string) => ({ type: "input_image", image_url: url }) as const

describe("MessageInput.validateMessageInput", () => {
  it("accepts ordered messages with text or image parts, including whitespace-only text (I1)", () => {
    const inputs: Array<MessageInput.MessageInput> = [
      MessageInput.text("hello"),
      [{ content: [text("   ")] }],
      [{ content: [text(""), text("x")] }],
      [{ content: [image("https://example.org/a.png")] }, { content: [text("\n")] }]
    ]
    for (const input of inputs) assert.deepStrictEqual(MessageInput.validateMessageInput(input), Option.none())
  })

  it("refuses an input without messages", () => {
    assert.deepStrictEqual(MessageInput.validateMessageInput([]), Option.some("empty_input"))
  })

  it("refuses a message without parts", () => {
    assert.deepStrictEqual(MessageInput.validateMessageInput([{ content: [text("a")] }, { content: [] }]), Option.some("empty_message"))
  })

  it("refuses an image part whose reference is blank", () => {
    for (const url of ["", " ", "\t\n"]) {
      assert.deepStrictEqual(MessageInput.validateMessageInput([{ content: [text("a"), image(url)] }]), Option.some("blank_image_url"))
    }
  })

  it("refuses a message whose only parts are empty text", () => {
    assert.deepStrictEqual(MessageInput.validateMessageInput([{ content: [text(""), text("")] }]), Option.some("no_content"))
  })

  it("applies the part rules to a bare content list (function results may be empty)", () => {
    assert.deepStrictEqual(MessageInput.validateContentParts([]), Option.none())
    assert.deepStrictEqual(MessageInput.validateContentParts([text(""), image(" ")]), Option.some("blank_image_url"))
    assert.isTrue(MessageInput.contentHasImages([text("a"), image("x")]))
    assert.isFalse(MessageInput.hasImages([{ content: [text("a")] }]))
  })
})

describe("MessageInput.isWhitespaceOnlyMessage", () => {
  it("is true for text made only of the blank set (Go unicode.IsSpace united with ECMAScript trim)", () => {
    const blanks = "\t\n\u000b\f\r \u0085\u00a0\u1680\u2000\u2005\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
    assert.isTrue(MessageInput.isWhitespaceOnlyMessage({ content: [text(blanks)] }))
    assert.isTrue(MessageInput.isWhitespaceOnlyMessage({ content: [text(""), text(" ")] }))
  })

  it("is false as soon as a part has a visible character, a zero-width non-blank, or an image", () => {
    assert.isFalse(MessageInput.isWhitespaceOnlyMessage({ content: [text("  a ")] }))
    assert.isFalse(MessageInput.isWhitespaceOnlyMessage({ content: [text("\u200b")] }))
    assert.isFalse(MessageInput.isWhitespaceOnlyMessage({ content: [text(" "), image("x")] }))
  })
})

describe("MessageInput.toPlainText", () => {
  it("joins messages with a blank line and parts without a separator, keeping order", () => {
    const input = [{ content: [text("Hello, "), text("world.")] }, { content: [text("Second")] }, { content: [text("")] }]
    assert.deepStrictEqual(MessageInput.toPlainText(input), Option.some("Hello, world.\n\nSecond\n\n"))
  })

  it("refuses any image instead of dropping it", () => {
    assert.deepStrictEqual(MessageInput.toPlainText([{ content: [text("a")] }, { content: [image("x")] }]), Option.none())
  })
})
