/**
 * Step one of the two-step decode (`Envelope.decodeEnvelope`): the 4 MiB frame bound for text and bytes,
 * JSON, the outer shape, tolerant envelope members (E3–E5, E7), and the rule that no error ever carries
 * peer text.
 */
import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import { vi } from "vitest"
import { Envelope, Ids, Limits, Messages } from "../../src/proto/index.js"
import { getErr, getOk, utf8Bytes } from "./support/frames.js"
import { neverMentions } from "./support/wireShape.js"

const MiB = 1024 * 1024
const refused = (frame: string | Uint8Array, code: Envelope.InvalidFrameCode, bytes: number) =>
  assert.deepStrictEqual(getErr(Envelope.decodeEnvelope(frame)), new Envelope.InvalidFrame({ code, bytes }))

/** A heartbeat frame padded with an ignored envelope member to exactly `size` bytes. */
const paddedFrame = (size: number): string => {
  const head = '{"type":"heartbeat","payload":{"ts":1,"active_requests":0},"pad":"'
  const tail = '"}'
  return head + "x".repeat(size - head.length - tail.length) + tail
}

describe("Envelope.decodeEnvelope", () => {
  it("reads type, id, payload and trace of a well-formed frame", () => {
    const trace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    const text = JSON.stringify({ type: "delta", id: "run-1", payload: { delta: "é", sequence: 1 }, trace })
    const raw = getOk(Envelope.decodeEnvelope(text))
    assert.deepStrictEqual(
      { type: raw.type, id: raw.id, payload: raw.payload, trace: raw.trace, bytes: raw.bytes },
      { type: "delta", id: "run-1", payload: { delta: "é", sequence: 1 }, trace, bytes: utf8Bytes(text) }
    )
  })

  it("accepts a text frame of exactly 4 MiB and refuses one byte more as frame_too_large", () => {
    assert.strictEqual(getOk(Envelope.decodeEnvelope(paddedFrame(Limits.MaxFrameBytes))).bytes, 4 * MiB)
    refused(paddedFrame(Limits.MaxFrameBytes + 1), "frame_too_large", Limits.MaxFrameBytes + 1)
  })

  it("counts UTF-8 bytes of a text frame: fewer than 4 MiB characters can still be too large", () => {
    const head = '{"type":"heartbeat","pad":"'
    const frame = head + "é".repeat(2 * MiB) + '"}' // 2 MiB characters of two bytes each
    assert.isBelow(frame.length, 4 * MiB)
    const error = getErr(Envelope.decodeEnvelope(frame))
    assert.strictEqual(error.code, "frame_too_large")
    assert.isAbove(error.bytes, 4 * MiB)
  })

  it("accepts a byte frame of exactly 4 MiB and refuses one byte more as frame_too_large", () => {
    const encoder = new TextEncoder()
    assert.strictEqual(getOk(Envelope.decodeEnvelope(encoder.encode(paddedFrame(4 * MiB)))).bytes, 4 * MiB)
    refused(encoder.encode(paddedFrame(4 * MiB + 1)), "frame_too_large", 4 * MiB + 1)
  })

  it("trusts a size the transport already measured", () => {
    assert.deepStrictEqual(
      getErr(Envelope.decodeEnvelope('{"type":"heartbeat"}', 4 * MiB + 7)),
      new Envelope.InvalidFrame({ code: "frame_too_large", bytes: 4 * MiB + 7 })
    )
    assert.strictEqual(getOk(Envelope.decodeEnvelope('{"type":"heartbeat"}', 20)).bytes, 20)
  })

  it("refuses text that is not JSON as not_json", () => {
    for (const text of ["", "{", "{type:'heartbeat'}", '{"type":"heartbeat"} trailing', "\u0000"]) {
      refused(text, "not_json", utf8Bytes(text))
    }
  })

  it("refuses bytes that are not valid UTF-8 as not_json", () => {
    const valid = new TextEncoder().encode('{"type":"heartbeat","pad":"__"}')
    for (const bad of [[0xc3, 0x28], [0xff, 0xfe], [0xed, 0xa0, 0x80]]) {
      const bytes = new Uint8Array(valid)
      bytes.set(bad, valid.length - 4)
      refused(bytes, "not_json", bytes.byteLength)
    }
  })

  it("refuses a leading byte-order mark the same way in text and in bytes", () => {
    const text = '\ufeff{"type":"heartbeat"}'
    refused(text, "not_json", utf8Bytes(text))
    const bytes = new TextEncoder().encode(text)
    assert.deepStrictEqual([...bytes.slice(0, 3)], [0xef, 0xbb, 0xbf])
    refused(bytes, "not_json", bytes.byteLength)
  })

  it("refuses JSON that is not an object as not_an_envelope", () => {
    for (const text of ["null", "[]", '[{"type":"heartbeat"}]', "42", '"heartbeat"', "true"]) {
      refused(text, "not_an_envelope", utf8Bytes(text))
    }
  })

  it("refuses a missing, empty or non-string type as not_an_envelope", () => {
    for (const envelope of [{}, { type: "" }, { type: 7 }, { type: null }, { type: ["delta"] }, { id: "x", payload: {} }]) {
      const text = JSON.stringify(envelope)
      refused(text, "not_an_envelope", utf8Bytes(text))
    }
  })

  it("refuses a non-string id as not_an_envelope", () => {
    for (const id of [42, true, null, ["run-1"], { run: 1 }]) {
      const text = JSON.stringify({ type: "delta", id, payload: { delta: "", sequence: 1 } })
      refused(text, "not_an_envelope", utf8Bytes(text))
    }
  })

  it("ignores unknown envelope members (E3)", () => {
    const text = JSON.stringify({ type: "done", id: "run-1", payload: { content: "" }, assignment: { epoch: 3 }, x: null })
    const raw = getOk(Envelope.decodeEnvelope(text))
    assert.deepStrictEqual({ type: raw.type, id: raw.id, payload: raw.payload }, { type: "done", id: "run-1", payload: { content: "" } })
    const decoded: unknown = getOk(Messages.decodeRuntimeToCore(text))
    assert.deepStrictEqual(decoded, { type: "done", id: "run-1", payload: { content: "" } })
  })

  it("treats payload null as absent and an empty id as no id (E4, E5)", () => {
    const raw = getOk(Envelope.decodeEnvelope('{"type":"prompt_cancel","id":"","payload":null}'))
    assert.strictEqual(raw.payload, undefined)
    assert.strictEqual(raw.id, undefined)
    const decoded: unknown = getOk(Messages.decodeCoreToRuntime('{"type":"prompt_cancel","id":"run-1","payload":null}'))
    assert.deepStrictEqual(decoded, {
      type: "prompt_cancel",
      id: "run-1",
      payload: {}
    })
  })

  it("drops a non-string, empty or over-256-character trace and keeps one of exactly 256 (E7)", () => {
    const traceOf = (trace: unknown) => getOk(Envelope.decodeEnvelope(JSON.stringify({ type: "heartbeat", trace }))).trace
    for (const trace of [42, null, { id: 1 }, ["00"], true, "", "t".repeat(257)]) assert.strictEqual(traceOf(trace), undefined)
    assert.strictEqual(traceOf("t".repeat(256)), "t".repeat(256))
    assert.strictEqual(traceOf("not a traceparent"), "not a traceparent")
  })

  it("never puts peer text in an error, whatever was wrong with the frame", () => {
    const marker = "LEAKCHECK"
    const frames: Array<string | Uint8Array> = [
      `{"type":"${marker}",`,
      `["${marker}"]`,
      JSON.stringify({ type: "", id: marker }),
      JSON.stringify({ type: marker, id: 5 }),
      JSON.stringify({ type: "heartbeat", pad: marker.repeat(500_000) }),
      new Uint8Array([...new TextEncoder().encode(`{"type":"${marker}"`), 0xff, 0x7d])
    ]
    for (const frame of frames) {
      const error = getErr(Envelope.decodeEnvelope(frame))
      assert.isTrue(neverMentions(error, marker), `${error.code} leaks peer text`)
      assert.isUndefined(error.type)
      assert.isUndefined(error.id)
    }
  })

  it("never names an undefined type or echoes a payload in a step-two error", () => {
    const marker = "LEAKCHECK"
    const unknownType = JSON.stringify({ type: `${marker}_type`, id: "run-1" })
    const badPayload = JSON.stringify({ type: "delta", id: "run-1", payload: { delta: marker, sequence: marker } })
    for (const [frame, code] of [[unknownType, "unknown_type"], [badPayload, "invalid_payload"]] as const) {
      const error = getErr(Messages.decodeRuntimeToCore(frame))
      assert.strictEqual(error.code, code)
      assert.isTrue(neverMentions(error, marker))
    }
  })
})

describe("Envelope.isEchoableId", () => {
  it("allows ids up to 128 UTF-8 bytes and nothing longer", () => {
    assert.isTrue(Envelope.isEchoableId("a".repeat(128)))
    assert.isTrue(Envelope.isEchoableId("é".repeat(64)))
    assert.isFalse(Envelope.isEchoableId("a".repeat(129)))
    assert.isFalse(Envelope.isEchoableId("é".repeat(64) + "a"))
    assert.isFalse(Envelope.isEchoableId("😀".repeat(32) + "a"))
    assert.isFalse(Envelope.isEchoableId(undefined))
  })
})

describe("Envelope.decodeEnvelope of a done with a long content (read without copying it)", () => {
  const content = "The parser accepts trailing commas only in ".repeat(1000) // 43,000 characters
  const head = `{"type":"done","id":"run-1","payload":{"content":"`
  /** The same frame through the generic path only: a leading space is valid JSON, and no fast path reads it. */
  const generic = (text: string) => Envelope.decodeEnvelope(` ${text}`, utf8Bytes(text))
  const view = (result: ReturnType<typeof Envelope.decodeEnvelope>) =>
    Result.isFailure(result)
      ? { failure: result.failure }
      : { type: result.success.type, id: result.success.id, payload: result.success.payload, trace: result.success.trace, bytes: result.success.bytes, violation: result.success.violation }
  const deep = "[".repeat(Limits.MaxJsonDepth + 1) + "]".repeat(Limits.MaxJsonDepth + 1)
  const frames: ReadonlyArray<readonly [string, string]> = [
    ["the daemon's layout", `${head}${content}","usage":{"input_tokens":3,"output_tokens":5}}}`],
    ["with a trace", `${head}${content}"},"trace":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}`],
    ["a later content member wins", `${head}${content}","content":"x"}}`],
    ["a later content member written with an escape wins", `${head}${content}","cont\\u0065nt":"x"}}`],
    ["a later payload member wins", `${head}${content}"},"payload":{"content":"y"}}`],
    ["a later type member wins", `${head}${content}"},"type":"delta"}`],
    ["an escape in the content", `${head}${content}\\"${content}"}}`],
    ["a raw control character in the content", `${head}${content}\u0001"}}`],
    ["an unterminated content", `${head}${content}`],
    ["trailing text", `${head}${content}"}}x`],
    ["a rest nested too deep", `${head}${content}","metadata":{"x":${deep}}}}`],
    ["an escaped id", `{"type":"done","id":"run\\u002d1","payload":{"content":"${content}"}}`],
    ["a short content", `${head}short"}}`],
    ["an unknown member", `${head}${content}","extra":1}}`]
  ]

  it("gives exactly what the generic decode gives, step one and step two", () => {
    for (const [name, text] of frames) {
      assert.deepStrictEqual(view(Envelope.decodeEnvelope(text)), view(generic(text)), name)
      assert.deepStrictEqual(view(Envelope.decodeEnvelope(text, utf8Bytes(text))), view(generic(text)), name)
      const raw = generic(text)
      const message = Result.isFailure(raw) ? raw : Messages.decodeRuntimeToCoreEnvelope(raw.success)
      assert.deepStrictEqual(Messages.decodeRuntimeToCore(text), message, name)
    }
    const decoded = getOk(Messages.decodeRuntimeToCore(frames[0]![1]))
    assert.deepStrictEqual(decoded, {
      type: "done",
      id: Ids.unsafeMake.runId("run-1"),
      payload: { content, usage: { input_tokens: 3, output_tokens: 5 } }
    })
  })

  it("refuses an oversized frame by its known size, as the generic decode does", () => {
    const text = frames[0]![1]
    refusedWith(Envelope.decodeEnvelope(text, Limits.MaxFrameBytes + 1), "frame_too_large", Limits.MaxFrameBytes + 1)
  })

  it("never hands the long content to JSON.parse", () => {
    const parse = vi.spyOn(JSON, "parse")
    try {
      const raw = getOk(Envelope.decodeEnvelope(frames[0]![1]))
      assert.strictEqual((raw.payload as { content: string }).content, content)
      assert.isTrue(parse.mock.calls.length > 0)
      for (const [text] of parse.mock.calls) assert.isBelow(text.length, content.length)
    } finally {
      parse.mockRestore()
    }
  })
})

const refusedWith = (result: ReturnType<typeof Envelope.decodeEnvelope>, code: Envelope.InvalidFrameCode, bytes: number) =>
  assert.deepStrictEqual(getErr(result), new Envelope.InvalidFrame({ code, bytes }))
