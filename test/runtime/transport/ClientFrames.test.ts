/**
 * Client text frames framed for a batch (`clientFrames.ts`): read back by RFC 6455 §5.2, every frame is FIN +
 * text, masked, with the right length form at each boundary (125/126, 65535/65536) and the exact payload.
 */
import { assert, describe, it } from "@effect/vitest"
import { deltaEncoder, EncodedDelta } from "../../../src/proto/EncodedFrame.js"
import { unsafeMake } from "../../../src/proto/Ids.js"
import { type FramePayload, maskedTextFrames } from "../../../src/runtime/transport/internal/clientFrames.js"

interface ReadFrame {
  readonly fin: boolean
  readonly opcode: number
  readonly masked: boolean
  readonly lengthForm: 7 | 16 | 64
  readonly key: string
  readonly payload: Buffer
}

/** Reads masked frames back (a minimal server-side reader). */
const readFrames = (data: Buffer): Array<ReadFrame> => {
  const frames: Array<ReadFrame> = []
  let o = 0
  while (o < data.length) {
    const b0 = data[o]!
    const b1 = data[o + 1]!
    o += 2
    let n = b1 & 0x7f
    let lengthForm: 7 | 16 | 64 = 7
    if (n === 126) {
      n = data.readUInt16BE(o)
      o += 2
      lengthForm = 16
    } else if (n === 127) {
      n = data.readUInt32BE(o) * 0x1_0000_0000 + data.readUInt32BE(o + 4)
      o += 8
      lengthForm = 64
    }
    const key = data.subarray(o, o + 4)
    o += 4
    const payload = Buffer.alloc(n)
    for (let i = 0; i < n; i++) payload[i] = data[o + i]! ^ key[i & 3]!
    o += n
    frames.push({ fin: (b0 & 0x80) !== 0, opcode: b0 & 0x0f, masked: (b1 & 0x80) !== 0, lengthForm, key: key.toString("hex"), payload })
  }
  assert.strictEqual(o, data.length)
  return frames
}

const text = (n: number, seed: string) => Buffer.from(seed.repeat(Math.ceil(n / seed.length)).slice(0, n), "utf8")

describe("clientFrames.maskedTextFrames", () => {
  it("frames each payload as one masked text frame, with the length form of its size", () => {
    const sizes = [0, 1, 2, 3, 4, 5, 125, 126, 127, 65535, 65536, 70001]
    const payloads = sizes.map((n, i) => text(n, `{"d":"${i}é"}`).subarray(0, n))
    const batch = maskedTextFrames(payloads)
    const frames = readFrames(batch.frames)
    assert.strictEqual(frames.length, payloads.length)
    assert.strictEqual(batch.bytes, sizes.reduce((a, b) => a + b, 0))
    frames.forEach((frame, i) => {
      const n = sizes[i]!
      assert.isTrue(frame.fin)
      assert.strictEqual(frame.opcode, 1)
      assert.isTrue(frame.masked)
      assert.strictEqual(frame.lengthForm, n < 126 ? 7 : n < 65536 ? 16 : 64)
      assert.isTrue(frame.payload.equals(payloads[i]!), `payload ${i} (${n} bytes)`)
    })
  })

  it("keeps multi-byte UTF-8 text exact, given as text or as bytes, and an empty batch empty", () => {
    const texts = [
      `{"type":"delta","payload":{"delta":"é€😀 \\"quoted\\"","sequence":1}}`,
      "",
      "x",
      "é€😀".repeat(40), // 360 bytes: a 16-bit length from 120 code units
      "a\ud800b", // a lone surrogate is written as U+FFFD, as Buffer.from writes it
      "é".repeat(40000) // 80,000 bytes: a 64-bit length
    ]
    const batch = maskedTextFrames([...texts, ...texts.map((t) => Buffer.from(t, "utf8"))])
    const frames = readFrames(batch.frames)
    assert.strictEqual(frames.length, texts.length * 2)
    assert.strictEqual(batch.bytes, 2 * texts.reduce((n, t) => n + Buffer.byteLength(t, "utf8"), 0))
    frames.forEach((frame, i) => {
      const expected = Buffer.from(texts[i % texts.length]!, "utf8")
      assert.isTrue(frame.payload.equals(expected), `frame ${i}`)
      assert.strictEqual(frame.lengthForm, expected.length < 126 ? 7 : expected.length < 65536 ? 16 : 64)
    })
    assert.strictEqual(maskedTextFrames([]).frames.length, 0)
    assert.strictEqual(maskedTextFrames([]).bytes, 0)
  })

  it("frames texts written before their size is known: every length form, a text moved next to a shorter header", () => {
    // Texts whose UTF-8 size differs from their UTF-16 length, around each length form's boundary (a text is
    // converted into the scratch first, then framed behind the header its size needs).
    const texts = [
      ...[0, 1, 2, 3, 4, 5, 41, 42, 43, 125, 126, 127, 2047].map((n) => "a".repeat(n)),
      "é".repeat(62), // 124 bytes from 62 units: room 8, 7-bit length
      "é".repeat(63), // 126 bytes: room 8, 16-bit length
      "😀".repeat(31), // 124 bytes from 62 units
      "x".repeat(21845), // 3 × 21845 < 65536: room 8
      "x".repeat(21846), // room 14, 21,846 bytes: 16-bit length, moved by 6
      "é".repeat(32767), // room 14, 65,534 bytes: 16-bit length
      "é".repeat(32768), // room 14, 65,536 bytes: 64-bit length, not moved
      "\ud800".repeat(50) // 150 bytes of U+FFFD from 50 lone surrogates
    ]
    const batch = maskedTextFrames(texts)
    const frames = readFrames(batch.frames)
    assert.strictEqual(frames.length, texts.length)
    frames.forEach((frame, i) => {
      const expected = Buffer.from(texts[i]!, "utf8")
      assert.isTrue(frame.payload.equals(expected), `text ${i}`)
      assert.strictEqual(frame.lengthForm, expected.length < 126 ? 7 : expected.length < 65536 ? 16 : 64)
    })
    assert.strictEqual(batch.bytes, texts.reduce((n, t) => n + Buffer.byteLength(t, "utf8"), 0))
  })

  it("frames long texts measured first, alone or among short ones, at every length form", () => {
    // A text of at least 16 Ki units is measured before it is written (room: its UTF-8 size, not 3 bytes per unit).
    const texts = [
      "a".repeat(16 * 1024 - 1), "a".repeat(16 * 1024), "b".repeat(21845), "c".repeat(21846), "d".repeat(65535),
      "e".repeat(65536), "é".repeat(16384), "😀".repeat(8192), "\udc00".repeat(16384), "x".repeat(430_000)
    ]
    for (const batch of [...texts.map((t) => [t]), texts, ["short", texts[9]!, "é", texts[6]!]]) {
      const framed = maskedTextFrames(batch)
      const frames = readFrames(framed.frames)
      assert.strictEqual(frames.length, batch.length)
      frames.forEach((frame, i) => {
        const expected = Buffer.from(batch[i]!, "utf8")
        assert.isTrue(frame.payload.equals(expected), `text ${i} of ${batch.length}`)
        assert.strictEqual(frame.lengthForm, expected.length < 126 ? 7 : expected.length < 65536 ? 16 : 64)
      })
      assert.strictEqual(framed.bytes, batch.reduce((n, t) => n + Buffer.byteLength(t, "utf8"), 0))
    }
  })

  it("frames Run deltas kept as parts (EncodedDelta), among texts and bytes, as the UTF-8 of their codec text", () => {
    const encode = deltaEncoder(unsafeMake.runId("run-1"), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")!
    const deltas = ["The parser accepts trailing commas only in ", "say \"hi\"", "é€😀", "quote \" \\ \n", "\ud800 lone", "", "x".repeat(200),
      "y".repeat(11_000), "\u0001".repeat(11_000)].map((text, i) => encode(text, i * 1000, i % 2 === 0 ? undefined : `item-${i}é`))
    const bytes = Buffer.from(`{"type":"usage","é":1}`, "utf8")
    for (const batch of [deltas, [...deltas, "plain text", bytes, "é".repeat(16384), ...deltas], [bytes, deltas[0]!]]) {
      const payloads = batch as ReadonlyArray<FramePayload>
      const framed = maskedTextFrames(payloads)
      const frames = readFrames(framed.frames)
      assert.strictEqual(frames.length, payloads.length)
      const expected = payloads.map((p) =>
        p instanceof EncodedDelta ? Buffer.from(p.encoded, "utf8") : typeof p === "string" ? Buffer.from(p, "utf8") : Buffer.from(p)
      )
      frames.forEach((frame, i) => {
        assert.isTrue(frame.payload.equals(expected[i]!), `payload ${i}`)
        assert.strictEqual(frame.lengthForm, expected[i]!.length < 126 ? 7 : expected[i]!.length < 65536 ? 16 : 64)
      })
      assert.strictEqual(framed.bytes, expected.reduce((n, b) => n + b.length, 0))
    }
  })

  it("frames a batch of ASCII texts converted in one go, and any batch with a non-ASCII text exactly as well", () => {
    const check = (texts: ReadonlyArray<string>, label: string) => {
      const batch = maskedTextFrames(texts)
      const frames = readFrames(batch.frames)
      assert.strictEqual(frames.length, texts.length, label)
      frames.forEach((frame, i) => {
        const expected = Buffer.from(texts[i]!, "utf8")
        assert.isTrue(frame.payload.equals(expected), `${label}: text ${i}`)
        assert.strictEqual(frame.lengthForm, expected.length < 126 ? 7 : expected.length < 65536 ? 16 : 64)
      })
      assert.strictEqual(batch.bytes, texts.reduce((n, t) => n + Buffer.byteLength(t, "utf8"), 0), label)
    }
    const ascii = [0, 1, 2, 3, 4, 5, 125, 126, 127, 2047, 60000].map((n, i) => String.fromCharCode(33 + i).repeat(n))
    // A non-ASCII character first: its UTF-8 bytes must never pass for the batch's units.
    const mixed = ["é" + "a".repeat(9), "b".repeat(10), "\u007f\u0080", "😀", "\ud800", "c"]
    // Batches alternate, so both ways are taken whatever the batches before (a non-ASCII batch makes the next ones
    // skip the one-go conversion for a while); a batch over 64 Ki units is framed text by text.
    for (let round = 0; round < 40; round++) {
      check(ascii, `ascii ${round}`)
      if (round % 5 === 0) check(mixed, `mixed ${round}`)
      if (round % 13 === 0) check(["x".repeat(40000), "y".repeat(30000)], `large ${round}`)
    }
    check([], "empty")
    check(["", ""], "empty texts")
  })

  it("takes a fresh masking key for each frame", () => {
    const frames = readFrames(maskedTextFrames(Array.from({ length: 3000 }, () => Buffer.from("x"))).frames)
    // 3000 frames span more than one pool of 2048 keys; random keys are (almost surely) not all the same.
    assert.isAbove(new Set(frames.map((f) => f.key)).size, 2900)
  })
})
