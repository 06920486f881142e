/**
 * `InputFrame.encodeMessageBytes` writes a request with a long input text as its UTF-8 bytes without escaping the
 * text through `JSON.stringify`; it must give exactly the codec's answer (`Messages.encodeMessage`): the UTF-8 of the
 * codec's text for every message (quotes, backslashes, every control character, lone and paired surrogates,
 * U+2028/2029, non-ASCII, several long parts, the probe's NUL elsewhere in the message, a trace) and the codec's
 * refusal for every refused one (the 4 MiB bound, an invalid payload). `checkMessage` gives the codec's verdict.
 */
import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import { unsafeMake } from "../../src/proto/Ids.js"
import { InputFrame, Messages } from "../../src/proto/index.js"
import { MaxFrameBytes } from "../../src/proto/Limits.js"
import { executionStart } from "../support/executionStart.js"

const script = JSON.stringify({ script: Array.from({ length: 500 }, () => ({ delta: "The parser accepts trailing commas only in " })) })
const long = (text: string) => text.repeat(Math.ceil(InputFrame.LongText / text.length))

const start = (texts: ReadonlyArray<ReadonlyArray<string>>, trace?: string) =>
  executionStart(texts, trace === undefined ? {} : { trace })

const utf8 = new TextEncoder()
const bytesOf = (frame: string | Uint8Array) => typeof frame === "string" ? utf8.encode(frame) : frame

/** The same answer as the codec: the same bytes, or the same refusal. */
const assertSame = (message: Messages.CoreToRuntime, expectBytes: boolean) => {
  const codec = Messages.encodeMessage(message)
  const direct = InputFrame.encodeMessageBytes(message)
  const check = InputFrame.checkMessage(message)
  if (Result.isFailure(codec)) {
    assert.deepStrictEqual(direct, codec)
    assert.deepStrictEqual(check, Result.fail(codec.failure))
    return
  }
  assert.isTrue(Result.isSuccess(direct))
  assert.deepStrictEqual(check, Result.succeed(undefined))
  const frame = Result.getOrThrow(direct)
  assert.strictEqual(typeof frame !== "string", expectBytes)
  assert.deepStrictEqual(Buffer.from(bytesOf(frame)), Buffer.from(utf8.encode(codec.success)))
}

describe("InputFrame", () => {
  it("writes a long text whose only escapes are quotes as the codec's bytes", () => {
    assertSame(start([[script]]), true)
    assertSame(start([[script]], "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"), true)
    assertSame(start([[long("\"")]]), true)
    assertSame(start([[long("no quote at all ")]]), true)
    assertSame(start([[long("é€ \u2028\u2029 \u007f \ud7ff\ue000\uffff \"q\" ")]]), true)
  })

  it("writes several long texts and short ones between them", () => {
    assertSame(start([[script, "short \"one\"\n", script + "x"], ["\u0001 \"", long("a\"b")]]), true)
    assertSame(start([["short"], [long("\"x")]]), true)
  })

  it("gives the codec's text for a long text with a backslash, a control character or a surrogate", () => {
    const awkward = ["\\", "\n", "\t", "\ud800", "\udc00", "\udfff", "😀", "\ud83d\ude00"]
    for (let c = 0; c < 0x20; c++) awkward.push(String.fromCharCode(c))
    for (const a of awkward) {
      assertSame(start([[script + a]]), false)
      assertSame(start([[a + script]]), false)
    }
  })

  it("gives the codec's text for short texts and messages without input", () => {
    assertSame(start([["x".repeat(InputFrame.LongText - 2) + "\""]]), false)
    assertSame({ type: "execution_release", id: unsafeMake.preparationRequestId("prep-1"), payload: { handle: unsafeMake.admissionHandle("h-1") } } as Messages.CoreToRuntime, false)
  })

  it("falls back to the codec when the probe's token appears elsewhere in the message", () => {
    // A short text ending with a quote and the NUL is written `\"\u0000"`, which holds the probe's token.
    assertSame(start([[script], ["x\"\u0000"]]), false)
    assertSame(start([["\u0000"], [script]]), false)
  })

  it("refuses what the codec refuses: over 4 MiB, an invalid payload", () => {
    const big = "a\"".repeat(MaxFrameBytes / 4) // 2 MiB, escaped to 3 MiB: two of them exceed the bound
    assertSame(start([[big, big]]), false)
    const fits = "a".repeat(MaxFrameBytes - 400)
    assertSame(start([[fits]]), true)
    assertSame(start([[fits + "a\"".repeat(200)]]), false)
    // Texts written as six bytes per unit: the check's bound (6 bytes per unit) just within and just past 4 MiB.
    assertSame(start([["\u0001".repeat(690_000)]]), false)
    assertSame(start([["\u0001".repeat(700_000)]]), false)
    assertSame(start([["\u0001".repeat(690_000) + "\"".repeat(10_000)]]), false)
    assertSame(start([]), false)
    const invalid = { ...start([[script]]), payload: { ...(start([[script]]) as { payload: object }).payload, run_id: "" } }
    assertSame(invalid as Messages.CoreToRuntime, false)
  })
})
