/**
 * `LongTokens.decodeLongTokens` reads a frame's long string values in slices, never as one large new string: when it
 * answers, the answer must be exactly the generic step one's (`Envelope.decodeEnvelope` of the same bytes), payload
 * and all; for anything it does not read (no long value, a long key, a marker-like text elsewhere, invalid UTF-8 or
 * JSON, escapes everywhere, bounds, refusals) it leaves the answer to the generic decode.
 */
import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import { Envelope, InputFrame, Limits, Messages } from "../../src/proto/index.js"
import { decodeLongTokens, LongToken, Slice } from "../../src/proto/LongTokens.js"
import { executionStart } from "../support/executionStart.js"

const utf8 = new TextEncoder()
const script = JSON.stringify({ script: Array.from({ length: 2000 }, (_, i) => ({ delta: `The parser accepts trailing commas ${i} ` })) })

const start = (texts: ReadonlyArray<string>, extra: Record<string, unknown> = {}) => executionStart([texts], extra)

const view = (raw: Result.Result<Envelope.RawEnvelope, Envelope.InvalidFrame>) =>
  Result.isFailure(raw)
    ? { failure: raw.failure }
    : { type: raw.success.type, id: raw.success.id, payload: raw.success.payload, trace: raw.success.trace, bytes: raw.success.bytes, violation: raw.success.violation }

/** The direct read answers exactly as the generic one, or not at all; `direct` says which is expected. */
const same = (frame: string | Uint8Array, direct: boolean) => {
  const bytes = typeof frame === "string" ? utf8.encode(frame) : frame
  const generic = Envelope.decodeEnvelope(bytes)
  const answer = decodeLongTokens(bytes)
  assert.strictEqual(answer !== undefined, direct)
  if (answer !== undefined) assert.deepStrictEqual(view(answer), view(generic))
}

const long = (unit: string, length = LongToken + 7) => unit.repeat(Math.ceil(length / unit.length))

describe("LongTokens.decodeLongTokens", () => {
  it("reads a Turn's start frame (the input's only escapes are quotes) as the generic decode does", () => {
    const frame = Result.getOrThrow(InputFrame.encodeMessageBytes(start([script])))
    same(frame, true)
    same(Result.getOrThrow(Messages.encodeMessage(start([script], { trace: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" }))), true)
    const decoded = Messages.decodeCoreToRuntimeEnvelope(Result.getOrThrow(decodeLongTokens(frame as Uint8Array)!))
    assert.deepStrictEqual(Result.getOrThrow(decoded), start([script]))
  })

  it("reads every escape, non-ASCII text and surrogates, at and around every slice boundary", () => {
    const units = ["\n", "\\", "\"", "\u0000", "\u001f", "\u2028", "é", "€", "😀", "\ud800", "\udfff", "\t/", "a"]
    for (const unit of units) same(Result.getOrThrow(Messages.encodeMessage(start([long(`${unit}abcdef`)]))), true)
    for (let shift = 0; shift < 12; shift++) {
      const text = "x".repeat(Slice - 20 + shift) + "é\\\"\n😀\u0001\ud800" + long("ab\"c€")
      same(Result.getOrThrow(Messages.encodeMessage(start([text]))), true)
    }
    // Escapes closer together than the cut allows: the generic decode answers.
    for (const unit of ["\n", "\\", "\"", "\u0000", "\ud800", "\\\n"]) same(Result.getOrThrow(Messages.encodeMessage(start([long(unit)]))), false)
  })

  it("reads several long values, short ones between them, in nested arrays and objects", () => {
    same(Result.getOrThrow(Messages.encodeMessage(start([script, "short \"one\"", long("é\"x"), "", long("z")]))), true)
    same(JSON.stringify({ type: "x", payload: { a: [[long("a")], { b: long("b") }], c: long("c\n") } }), true)
    same(` \n{ "type" : "x" , "payload" : { "a" : ${JSON.stringify(long("q"))} } }\t`, true)
  })

  it("leaves a frame to the generic decode when a long value is not in the payload, or is a key", () => {
    same(JSON.stringify({ type: "x", id: long("i"), payload: {} }), false)
    same(JSON.stringify({ type: long("t"), payload: {} }), false)
    same(JSON.stringify({ type: "x", trace: long("t"), payload: {} }), false)
    same(JSON.stringify({ type: "x", pad: long("p"), payload: {} }), false)
    same(JSON.stringify({ type: "x", payload: { [long("k")]: 1 } }), false)
    same(`{"type":"x","payload":{${JSON.stringify(long("k"))}  :1}}`, false)
  })

  it("leaves a frame with a marker-like text outside its long values to the generic decode", () => {
    same(JSON.stringify({ type: "x", payload: { a: long("a"), b: "\u00000" } }), false)
    same(JSON.stringify({ type: "x", payload: { a: long("a"), b: "\\u0000" } }), false)
    same(JSON.stringify({ type: "x", payload: { a: long("a\u0000") } }), true)
    same(JSON.stringify({ type: "x", payload: { a: "\u00000" } }), false)
  })

  it("answers as the generic decode for a duplicated member, a null payload and an array root", () => {
    same(`{"type":"x","payload":{"a":${JSON.stringify(long("a"))},"a":"short"}}`, false)
    same(`{"type":"x","payload":{"a":"short","a":${JSON.stringify(long("a"))}}}`, true)
    same(`{"type":"x","payload":{"a":${JSON.stringify(long("a"))}},"payload":null}`, false)
    same(`[{"type":"x","payload":{"a":${JSON.stringify(long("a"))}}}]`, false)
  })

  it("leaves every refused frame to the generic decode", () => {
    const value = JSON.stringify(long("v\""))
    const bad: Array<string | Uint8Array> = [
      `{"type":"x","payload":{"a":${value}}`, // not closed
      `{"type":"x","payload":{"a":${value.slice(0, -1)}`, // string not closed
      `{"type":"x","payload":{"a":${value}}}x`, // trailing text
      `{"type":"x","payload":{"a":"\\x${long("v")}"}}`, // invalid escape
      `{"type":"x","payload":{"a":"\u0001${long("v")}"}}`, // raw control character
      `\ufeff{"type":"x","payload":{"a":${value}}}`, // byte-order mark
      `{"type":"","payload":{"a":${value}}}`, // not an envelope
      JSON.stringify({ type: "x", payload: { a: long("v", Limits.MaxFrameBytes) } }) // too large
    ]
    const invalidUtf8 = utf8.encode(JSON.stringify({ type: "x", payload: { a: long("v") } }))
    invalidUtf8[100] = 0xff
    bad.push(invalidUtf8)
    // Over the JSON bounds: step one's answer carries the violation.
    same(`{"type":"x","payload":{"a":${value},"d":${"[".repeat(200)}${"]".repeat(200)}}}`, false)
    const cutCharacter = utf8.encode(JSON.stringify({ type: "x", payload: { a: long("€") } }))
    bad.push(cutCharacter.subarray(0, cutCharacter.length - 5))
    for (const frame of bad) {
      const bytes = typeof frame === "string" ? utf8.encode(frame) : frame
      assert.isTrue(Result.isFailure(Envelope.decodeEnvelope(bytes)))
      same(bytes, false)
    }
  })

  it("leaves short frames, texts and frames without a long value to the generic decode", () => {
    same(JSON.stringify({ type: "x", payload: { a: "short" } }), false)
    same(JSON.stringify({ type: "x", payload: { a: long("v", LongToken - 1).slice(0, LongToken - 1), b: long("w", LongToken - 1).slice(0, LongToken - 1) } }), false)
  })
})
