/**
 * DeltaFrame.ts (issue 18): a delta frame read by the fast path decodes to exactly what the generic decoder gives,
 * untraced or with the Run's trace, and every other text (another shape, another Run or trace, anything the generic
 * decoder refuses) is left to it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import { DeltaFrame, Messages } from "../../src/proto/index.js"

const id = "run-1"
const trace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
const untraced = DeltaFrame.layout(id, undefined)
const traced = DeltaFrame.layout(id, trace)
const prefix = untraced.prefix
const frame = (delta: unknown, sequence: unknown) => JSON.stringify({ type: "delta", id, payload: { delta, sequence } })
const tracedFrame = (delta: unknown, sequence: unknown, t: unknown = trace) =>
  JSON.stringify({ type: "delta", id, payload: { delta, sequence }, trace: t })

const utf8Text: DeltaFrame.Utf8Text = (bytes, start, end) => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length).toString("utf8", start, end)

/** How many frames `matchBytes` read (the rest it left to `match`). */
let readFromBytes = 0

/**
 * The fast path's answer must equal the generic decoder's success; `undefined` leaves the text to it. The bytes path
 * (`matchBytes`, on the text's UTF-8 bytes as a WebSocket delivers them) answers the same or leaves it to `match`.
 */
const checked = (text: string, layout: DeltaFrame.Layout = untraced) => {
  const fast = DeltaFrame.match(layout, text)
  const generic = Messages.decodeRuntimeToCore(text)
  if (fast !== undefined) {
    assert.isTrue(Result.isSuccess(generic), text)
    if (Result.isSuccess(generic)) assert.deepStrictEqual(fast, generic.success)
  }
  const bytes = Buffer.from(text, "utf8")
  // A text with a lone surrogate has no UTF-8 form: no WebSocket text frame carries it.
  if (bytes.toString("utf8") === text) {
    const fromBytes = DeltaFrame.matchBytes(layout, new Uint8Array(bytes), utf8Text)
    if (fromBytes !== undefined) {
      readFromBytes++
      assert.deepStrictEqual(fromBytes, fast, text)
    }
  }
  return fast
}

describe("DeltaFrame", () => {
  it("reads the daemon's delta frames as the generic decoder does, escapes and non-ASCII included", () => {
    const deltas = ["", "hello", "a\"b\\c", "line\nnext\ttab", "é€😀", "\u0000\u001f", "\ud800 lone", "</script>", "x".repeat(1000)]
    for (const delta of deltas) {
      for (const sequence of [0, 1, 9, 10, 123456789, Number.MAX_SAFE_INTEGER]) {
        const text = frame(delta, sequence)
        const fast = checked(text)
        if (sequence === Number.MAX_SAFE_INTEGER) continue // 16 digits: left to the generic decoder
        assert.isDefined(fast, text)
        assert.deepStrictEqual(fast!.payload, { delta, sequence })
      }
    }
  })

  it("reads the daemon's traced delta frames with the trace the generic decoder returns", () => {
    for (const delta of ["", "hello", "a\"b\\c", "é€😀", "\ud800 lone"]) {
      for (const sequence of [0, 7, 123456789]) {
        const text = tracedFrame(delta, sequence)
        const fast = checked(text, traced)
        assert.isDefined(fast, text)
        assert.strictEqual(fast!.trace, trace)
        assert.deepStrictEqual(fast!.payload, { delta, sequence })
        // The other layout never reads it.
        assert.isUndefined(checked(text, untraced), text)
        assert.isUndefined(checked(frame(delta, sequence), traced))
      }
    }
    // A trace with escapes is read as the generic decoder reads it.
    const odd = "ab\"c\\d"
    assert.isDefined(checked(tracedFrame("x", 1, odd), DeltaFrame.layout(id, odd)))
    const others = [
      tracedFrame("x", 1, "00-1af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
      tracedFrame("x", 1, ""),
      tracedFrame("x", 1, 1),
      tracedFrame("x", -1),
      JSON.stringify({ type: "delta", id, trace, payload: { delta: "x", sequence: 1 } }),
      JSON.stringify({ type: "delta", id, payload: { delta: "x", sequence: 1 }, trace, extra: 1 }),
      `${prefix}"x","sequence":1},"trace":"${trace}"} `,
      `${prefix}"x","sequence":1},"trace":"${trace}","trace":"${trace}"}`,
      `${prefix}"x","sequence":1}, "trace":"${trace}"}`
    ]
    for (const text of others) assert.isUndefined(checked(text, traced), text)
  })

  it("reads the daemon's delta frames with an item_id, untraced and traced, as the generic decoder does", () => {
    const itemFrame = (itemId: unknown, delta: unknown, sequence: unknown, t?: string) =>
      JSON.stringify(t === undefined
        ? { type: "delta", id, payload: { item_id: itemId, delta, sequence } }
        : { type: "delta", id, payload: { item_id: itemId, delta, sequence }, trace: t })
    for (const itemId of ["", "msg_1", "a\"b\\c", "é😀", "\u0000", "\udc00"]) {
      for (const delta of ["", "hello", "line\nnext"]) {
        for (const [t, layout] of [[undefined, untraced], [trace, traced]] as const) {
          const text = itemFrame(itemId, delta, 3, t)
          const fast = checked(text, layout)
          assert.isDefined(fast, text)
          assert.deepStrictEqual(fast!.payload, { item_id: itemId, delta, sequence: 3 })
        }
      }
    }
    const others = [
      itemFrame(1, "x", 1),
      itemFrame(null, "x", 1),
      JSON.stringify({ type: "delta", id, payload: { delta: "x", item_id: "m", sequence: 1 } }),
      JSON.stringify({ type: "delta", id, payload: { item_id: "m", sequence: 1, delta: "x" } }),
      `${untraced.head}"item_id":"m","item_id":"n","delta":"x","sequence":1}}`,
      `${untraced.head}"item_id":"m", "delta":"x","sequence":1}}`,
      `${untraced.head}"item_id": "m","delta":"x","sequence":1}}`,
      `${untraced.head}"item_id":"m""delta":"x","sequence":1}}`,
      `${untraced.head}"item_id":"a\u0001b","delta":"x","sequence":1}}`,
      `${untraced.head}"item_id":"ab","delta":"x","sequence":1}}`,
      `${untraced.head}"item_id":"m,"delta":"x","sequence":1}}`,
      `${untraced.head}"item_id":"m",`,
      itemFrame("m", "x", 1, trace)
    ]
    for (const text of others) assert.isUndefined(checked(text), text)
  })

  it("leaves every other text to the generic decoder", () => {
    const others = [
      frame("x", -1),
      frame("x", 1.5),
      frame("x", "1"),
      frame(1, 1),
      JSON.stringify({ type: "delta", id: "run-2", payload: { delta: "x", sequence: 1 } }),
      JSON.stringify({ type: "delta", id, payload: { delta: "x", sequence: 1 }, trace: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" }),
      JSON.stringify({ type: "delta", id, payload: { delta: "x", sequence: 1, extra: true } }),
      `${prefix}"x","sequence":01}}`,
      `${prefix}"x","sequence":1} }`,
      `${prefix}"x","sequence":1}}\n`,
      `${prefix}"x","sequence":1}},"type":"thinking"}`,
      `${prefix}"x","sequence":1},"type":"thinking"}`,
      `${prefix}"x","sequence":1,"sequence":2}}`,
      `${prefix}"x" ,"sequence":1}}`,
      `${prefix}"a\u0001b","sequence":1}}`,
      `${prefix}"a\\qb","sequence":1}}`,
      `${prefix}"a\\`,
      `${prefix}"abc`,
      `${prefix}"x","sequence":}}`,
      `${prefix}"x","sequence":1234567890123456}}`,
      `${prefix}"x","sequence":1e3}}`,
      `${prefix}"${"x".repeat(DeltaFrame.MaxChars)}","sequence":1}}`,
      `{"type":"delta","id":"run-1","payload":{"delta":"x","sequence":1}}`.replace('"id"', ' "id"')
    ]
    for (const text of others) assert.isUndefined(checked(text), text)
  })

  it("a differently escaped id is another prefix", () => {
    const text = `{"type":"delta","id":"run\\u002d1","payload":{"delta":"x","sequence":1}}`
    assert.isUndefined(DeltaFrame.match(untraced, text))
    assert.isTrue(Result.isSuccess(Messages.decodeRuntimeToCore(text)))
  })

  it("reads a frame's UTF-8 bytes as `match` reads its text when its tokens have no escape, and leaves the rest", () => {
    // The tests above (run first) compared every case with a UTF-8 form in `checked`; many were read from bytes.
    assert.isAbove(readFromBytes, 20)
    const bytesOf = (text: string) => new Uint8Array(Buffer.from(text, "utf8"))
    for (const delta of ["", "hello", "é€😀", "</script>", "x".repeat(1000)]) {
      for (const [text, layout] of [
        [frame(delta, 42), untraced],
        [tracedFrame(delta, 42), traced],
        [JSON.stringify({ type: "delta", id, payload: { item_id: "item-é", delta, sequence: 42 } }), untraced]
      ] as const) {
        const fromBytes = DeltaFrame.matchBytes(layout, bytesOf(text), utf8Text)
        assert.isDefined(fromBytes, text)
        assert.deepStrictEqual(fromBytes, DeltaFrame.match(layout, text))
      }
    }
    // Escapes, a raw control character, an escaped item id, a frame over MaxChars bytes: left to `match`.
    const left = [
      frame("a\"b", 1),
      frame("line\nnext", 1),
      prefix + `"a\u0001b","sequence":1}}`,
      JSON.stringify({ type: "delta", id, payload: { item_id: "i\"d", delta: "x", sequence: 1 } }),
      frame("é".repeat(DeltaFrame.MaxChars / 2), 1)
    ]
    for (const text of left) assert.isUndefined(DeltaFrame.matchBytes(untraced, bytesOf(text), utf8Text), text)
    // Under MaxChars units but over MaxChars bytes: `match` still reads it from the text.
    assert.isDefined(DeltaFrame.match(untraced, left[4]!))
  })
})
