/**
 * `EncodedFrame.deltaEncoder` builds a Run's delta frames without the generic codec pass; it must give exactly
 * the codec's answer (`Messages.encodeMessage`): byte-identical text for every valid payload (awkward characters,
 * lone surrogates, text written without escaping and text that must be escaped, `item_id`, a trace, sequence bounds), the codec's refusal for every invalid one (the same
 * reason, the 4 MiB bound included), and no encoder for an envelope the codec refuses. `encodeChunkFrame` builds a
 * chunk-carrying frame without re-escaping its base64 data: the same exactness for every chunk family.
 */
import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import { deltaEncoder as directEncoder, EncodedDelta, encodeChunkFrame, encodeDoneParts, encodeFrame, frameText, isEncoded } from "../../src/proto/EncodedFrame.js"
import { unsafeMake } from "../../src/proto/Ids.js"
import { Messages } from "../../src/proto/index.js"
import type { DonePayload } from "../../src/proto/RunEvents.js"

const runId = unsafeMake.runId("run-7f3c")
const trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
const Texts = ["", "x", "The parser accepts trailing commas only in ", "quote \" backslash \\ newline \n tab \t", "\u0000\u001f\u007f",
  "é€😀", "\ud800 lone", "lone \udc00", "\u2028\u2029", "</script>",
  // Around the characters a text is written without escaping (`Unescaped`): the first and last escaped ones, the
  // nearest ones that are not, surrogates at the ends of their range, an escape only at the end.
  "\"", "\\", "\u0020 end\u001f", "\ud7ff\ue000\uffff", "\udfff", "x".repeat(3000) + "\n"]

/** The direct encoder with its answer as a `Result` (it returns the frame or the refusal itself). */
const deltaEncoder = (...args: Parameters<typeof directEncoder>) => {
  const encode = directEncoder(...args)
  return encode === undefined ? undefined : (...a: Parameters<typeof encode>) => {
    const frame = encode(...a)
    return frame instanceof Messages.OutgoingFrameRejected ? Result.fail(frame) : Result.succeed(frame)
  }
}

const viaCodec = (delta: unknown, sequence: unknown, itemId: unknown, withTrace: string | undefined) => {
  const payload = itemId === undefined ? { delta, sequence } : { item_id: itemId, delta, sequence }
  const message = (withTrace === undefined
    ? { type: "delta", id: runId, payload }
    : { type: "delta", id: runId, payload, trace: withTrace }) as Messages.RuntimeToCore
  return Messages.encodeMessage(message)
}

describe("deltaEncoder", () => {
  it("gives the codec's exact text for valid deltas, with and without item_id and trace", () => {
    for (const withTrace of [undefined, trace]) {
      const encode = deltaEncoder(runId, withTrace)!
      for (const text of Texts) {
        for (const itemId of [undefined, "msg-1", "é \" \\"]) {
          for (const sequence of [0, 1, 2, 10_000, Number.MAX_SAFE_INTEGER]) {
            const direct = encode(text, sequence, itemId)
            const codec = viaCodec(text, sequence, itemId, withTrace)
            assert.isTrue(Result.isSuccess(direct) && Result.isSuccess(codec))
            if (Result.isSuccess(direct) && Result.isSuccess(codec)) {
              assert.strictEqual(direct.success.encoded, codec.success)
              assert.strictEqual(direct.success.type, "delta")
              assert.strictEqual(direct.success.id, runId)
            }
          }
        }
      }
    }
  })

  it("writes each delta's UTF-8 bytes from its parts as the old text encoding and the codec write them", () => {
    // The encoding before deltas were kept as parts: the frame's text by concatenation, then its UTF-8 bytes.
    const jsonString = (text: string) => (/^[^"\\\u0000-\u001f\ud800-\udfff]*$/.test(text) ? `"${text}"` : JSON.stringify(text))
    const oldText = (delta: string, sequence: number, itemId: string | undefined, withTrace: string | undefined) => {
      const head = `{"type":"delta","id":${JSON.stringify(runId)},"payload":{`
      const tail = withTrace === undefined ? "}}" : `},"trace":${JSON.stringify(withTrace)}}`
      return itemId === undefined
        ? `${head}"delta":${JSON.stringify(delta)},"sequence":${sequence}${tail}`
        : `${head}"item_id":${jsonString(itemId)},"delta":${jsonString(delta)},"sequence":${sequence}${tail}`
    }
    const texts = [...Texts, "a\ud83d\ude00b", "\ude00\ud83d", "mixed é \" \u0001 😀 \udbff", "\u007f~ ascii"]
    for (const withTrace of [undefined, trace]) {
      const encode = directEncoder(runId, withTrace)!
      for (const text of texts) {
        for (const itemId of [undefined, "msg-1", "é \" \\", "\udc00"]) {
          for (const sequence of [0, 9, 10, 99_999, Number.MAX_SAFE_INTEGER]) {
            const frame = encode(text, sequence, itemId)
            assert.instanceOf(frame, EncodedDelta)
            if (!(frame instanceof EncodedDelta)) continue
            const codec = viaCodec(text, sequence, itemId, withTrace)
            assert.isTrue(Result.isSuccess(codec))
            if (Result.isFailure(codec)) continue
            const expected = Buffer.from(codec.success, "utf8")
            assert.isTrue(expected.equals(Buffer.from(oldText(text, sequence, itemId, withTrace), "utf8")))
            const out = Buffer.alloc(frame.room + 8, 0xee)
            const end = frame.writeUtf8(out, 3)
            assert.isTrue(out.subarray(3, end).equals(expected), `${JSON.stringify(text)} ${itemId} ${sequence}`)
            assert.isAtMost(end - 3, frame.room)
            assert.strictEqual(out[end], 0xee)
          }
        }
      }
    }
  })

  it("keeps a delta in three fields, its item id in the Run's shape per item, each frame keeping its own", () => {
    const encode = directEncoder(runId, trace)!
    const itemIds = [undefined, "msg-1", "msg-1", "msg-2", undefined, "msg-2", "msg-1"]
    const frames = itemIds.map((itemId, i) => encode(`d${i}`, i, itemId))
    frames.forEach((frame, i) => {
      assert.instanceOf(frame, EncodedDelta)
      if (!(frame instanceof EncodedDelta)) return
      // 48 B on Node's heap where a fourth field (the item id) made 56 B per delta (issue 18, relay).
      assert.deepStrictEqual(Object.keys(frame), ["shape", "delta", "sequence"])
      assert.strictEqual(frame.itemId, itemIds[i])
      const codec = viaCodec(`d${i}`, i, itemIds[i], trace)
      assert.isTrue(Result.isSuccess(codec) && frame.encoded === codec.success)
    })
  })

  it("refuses what the codec refuses, with the same reason", () => {
    const encode = deltaEncoder(runId, undefined)!
    const invalid: ReadonlyArray<readonly [unknown, unknown, unknown]> = [
      [42, 1, undefined],
      [undefined, 1, undefined],
      ["x", -1, undefined],
      ["x", 1.5, undefined],
      ["x", Number.NaN, undefined],
      ["x", "1", undefined],
      ["x", 1, 7],
      ["x", 1, null]
    ]
    for (const [delta, sequence, itemId] of invalid) {
      const direct = encode(delta as string, sequence as number, itemId as string)
      const codec = viaCodec(delta, sequence, itemId, undefined)
      assert.isTrue(Result.isFailure(codec), `codec accepted ${String(delta)} ${String(sequence)} ${String(itemId)}`)
      if (Result.isFailure(codec)) assert.deepStrictEqual(direct, Result.fail(codec.failure))
    }
  })

  it("refuses a frame over 4 MiB as frame_too_large with its size, like the codec", () => {
    const encode = deltaEncoder(runId, trace)!
    for (const big of ["x".repeat(4 * 1024 * 1024), "é".repeat(2 * 1024 * 1024), "x".repeat(4 * 1024 * 1024 - 200)]) {
      const direct = encode(big, 3, undefined)
      const codec = viaCodec(big, 3, undefined, trace)
      if (Result.isSuccess(codec)) {
        assert.isTrue(Result.isSuccess(direct) && direct.success.encoded === codec.success)
      } else {
        assert.deepStrictEqual(direct, Result.fail(codec.failure))
        assert.strictEqual(codec.failure.reason, "frame_too_large")
      }
    }
  })

  it("makes no encoder for an envelope the codec refuses (an oversized or blank Run id)", () => {
    assert.isUndefined(deltaEncoder(unsafeMake.runId("r".repeat(129)), undefined))
    assert.isUndefined(deltaEncoder(unsafeMake.runId(""), trace))
    assert.isDefined(deltaEncoder(unsafeMake.runId("r".repeat(128)), trace))
  })
})

describe("encodeFrame / frameText", () => {
  it("encodes with the codec and passes an encoded frame through unchanged", () => {
    const message: Messages.RuntimeToCore = { type: "delta", id: runId, payload: { delta: "a", sequence: 1 } }
    const encoded = encodeFrame(message)
    assert.isTrue(Result.isSuccess(encoded))
    if (Result.isFailure(encoded)) return
    assert.isTrue(isEncoded(encoded.success))
    assert.isFalse(isEncoded(message))
    assert.deepStrictEqual(frameText(encoded.success), Messages.encodeMessage(message))
    assert.deepStrictEqual(frameText(message), Messages.encodeMessage(message))
    const refused: Messages.RuntimeToCore = { type: "delta", id: runId, payload: { delta: "a", sequence: -1 } }
    assert.deepStrictEqual(encodeFrame(refused), Result.fail(new Messages.OutgoingFrameRejected({ type: "delta", reason: "invalid_message" })))
  })
})

describe("encodeFrame of a done with a long content", () => {
  const long = "The parser accepts trailing commas only in ".repeat(200) // 8,600 characters, no escape
  const contents = [
    long, long.slice(0, 4096), long.slice(0, 4095), "é€ ".repeat(2000), long + "\n", "\"" + long, long + "\ud800",
    "\udfff" + long, long + "\u001f", "\u007f\u2028</script>" + long, "x".repeat(5000) + "\\"
  ]
  const done = (content: string, extra: Partial<DonePayload> = {}, withTrace?: string): Messages.RuntimeToCore =>
    withTrace === undefined
      ? { type: "done", id: runId, payload: { content, ...extra } }
      : { type: "done", id: runId, payload: { content, ...extra }, trace: withTrace }

  it("gives the codec's exact text, with and without metadata, usage, transcript and trace", () => {
    const extras: ReadonlyArray<Partial<DonePayload>> = [
      {},
      { metadata: { agent_session_id: "s-1", agent_session_type: "scripted" } },
      { transcript: "\"content\":\"\"", usage: { input_tokens: 3, output_tokens: 4 } },
      // A second empty `content` member elsewhere: the codec's way, still the same text.
      { metadata: { agent_session_id: "", agent_session_type: "\"content\":\"\"" }, source_completed_at_ms: 7 }
    ]
    for (const content of contents) {
      for (const extra of extras) {
        for (const withTrace of [undefined, trace]) {
          const message = done(content, extra, withTrace)
          const encoded = encodeFrame(message)
          assert.deepStrictEqual(Result.map(encoded, (frame) => frame.encoded), Messages.encodeMessage(message))
          if (Result.isSuccess(encoded)) {
            assert.strictEqual(encoded.success.type, "done")
            assert.strictEqual(encoded.success.id, runId)
            // When the frame carries its UTF-8 bytes, they are the codec's text, byte for byte.
            const bytes = encoded.success.bytes
            if (bytes !== undefined) assert.isTrue(Buffer.from(bytes).equals(Buffer.from(encoded.success.encoded, "utf8")))
          }
        }
      }
    }
  })

  it("writes a long content that needs no escape straight into the frame's UTF-8 bytes", () => {
    // The frame's text is never flattened into one string: the transport writes these bytes (issue 18, relay).
    for (const content of [long, "é€ ".repeat(2000), "\u007f\u2028</script>" + long]) {
      const message = done(content, { metadata: { agent_session_id: "s-é", agent_session_type: "scripted" } }, trace)
      const encoded = encodeFrame(message)
      assert.isTrue(Result.isSuccess(encoded))
      if (Result.isFailure(encoded)) return
      const codec = Messages.encodeMessage(message)
      assert.isTrue(Result.isSuccess(codec))
      if (Result.isFailure(codec)) return
      assert.isDefined(encoded.success.bytes)
      assert.isTrue(Buffer.from(encoded.success.bytes!).equals(Buffer.from(codec.success, "utf8")))
    }
    // A content that needs an escape is the codec's text alone.
    const escaped = encodeFrame(done(long + "\n"))
    assert.isTrue(Result.isSuccess(escaped) && escaped.success.bytes === undefined)
  })

  it("writes a content given as parts (encodeDoneParts) as the codec writes the joined content", () => {
    const splits = (content: string): ReadonlyArray<ReadonlyArray<string>> => [
      [content],
      [content.slice(0, 1), content.slice(1)],
      [content.slice(0, 3000), "", content.slice(3000, 5000), content.slice(5000)],
      Array.from({ length: Math.ceil(content.length / 43) }, (_, i) => content.slice(43 * i, 43 * i + 43))
    ]
    // Both halves of a surrogate pair in different parts: the parts are escaped as the codec escapes the whole.
    for (const content of [...contents, "😀".repeat(3000), "a\ud83d" + "x".repeat(5000)]) {
      for (const parts of [...splits(content), ["a\ud83d", "\ude00" + long]]) {
        const whole = parts.join("")
        const message = done("ignored", { metadata: { agent_session_id: "s-1", agent_session_type: "scripted" } }, trace)
        const expected = Messages.encodeMessage(done(whole, { metadata: { agent_session_id: "s-1", agent_session_type: "scripted" } }, trace))
        const encoded = encodeDoneParts(message as Messages.RuntimeToCore & { type: "done" }, parts)
        assert.deepStrictEqual(Result.map(encoded, (frame) => frame.encoded), expected)
        if (Result.isSuccess(encoded) && encoded.success.bytes !== undefined) {
          assert.isTrue(Buffer.from(encoded.success.bytes).equals(Buffer.from(encoded.success.encoded, "utf8")))
        }
      }
    }
    const parts = Array.from({ length: 200 }, () => "The parser accepts trailing commas only in ")
    const placed = encodeDoneParts(done("") as Messages.RuntimeToCore & { type: "done" }, parts)
    assert.isTrue(Result.isSuccess(placed) && placed.success.bytes !== undefined)
    const huge = Array.from({ length: 1025 }, () => "y".repeat(4096)) // 4 MiB + 4 KiB
    assert.deepStrictEqual(
      encodeDoneParts(done("") as Messages.RuntimeToCore & { type: "done" }, huge),
      Result.map(Messages.encodeMessage(done(huge.join(""))), () => undefined as never)
    )
  })

  it("refuses what the codec refuses, with the same reason and size", () => {
    const huge = done("y".repeat(4 * 1024 * 1024))
    const refused = encodeFrame(huge)
    assert.isTrue(Result.isFailure(refused))
    assert.deepStrictEqual(refused, Result.map(Messages.encodeMessage(huge), () => undefined as never))
    const wide = done("é".repeat(2 * 1024 * 1024 + 1)) // 4 MiB + 2 bytes of UTF-8 from fewer units
    assert.deepStrictEqual(encodeFrame(wide), Result.map(Messages.encodeMessage(wide), () => undefined as never))
    const invalid = { type: "done", id: runId, payload: { content: long, usage: { input_tokens: -1 } } } as unknown as Messages.RuntimeToCore
    assert.deepStrictEqual(encodeFrame(invalid), Result.fail(new Messages.OutgoingFrameRejected({ type: "done", reason: "invalid_message" })))
  })
})

describe("encodeChunkFrame", () => {
  const operationId = unsafeMake.operationId("6a1d3e9f-0b52-4c48-9f7e-2d3e4f5a6b7c")
  const transferId = unsafeMake.transferId("transfer-1")
  // Every message that carries chunk bytes as base64 `data`, without its data.
  const carriers: ReadonlyArray<Messages.Message & { readonly payload: { readonly data?: string } }> = [
    { type: "workspace_write", id: operationId, payload: { step: "chunk", offset: 65536 } },
    { type: "runtime_prepare", id: transferId, payload: { step: "chunk" } },
    { type: "runtime_prepare", id: transferId, payload: { step: "chunk", offset: 131072 } },
    // Multi-byte UTF-8 before the data (the bytes are not the text's UTF-16 length).
    { type: "runtime_prepare", id: unsafeMake.transferId("überträgung-😀"), payload: { step: "chunk", offset: 0 } },
    { type: "workspace_export_result", id: operationId, payload: { outcome: "chunk", offset: 0 } },
    { type: "workspace_read_result", id: operationId, payload: { outcome: "completed", close_acknowledged: true } }
  ]
  // Every byte value, every base64 tail (0, 1 or 2 padding characters), and a full 64 KiB chunk.
  const bodies = [
    new Uint8Array([0]),
    new Uint8Array([0xfb, 0xff]),
    Uint8Array.from({ length: 256 }, (_, i) => i),
    Uint8Array.from({ length: 65536 }, (_, i) => (i * 2654435761) >>> 24)
  ]
  const withData = <M extends Messages.Message & { readonly payload: object }>(m: M, bytes: Uint8Array): M =>
    ({ ...m, payload: { ...m.payload, data: Buffer.from(bytes).toString("base64") } })

  it("gives the codec's exact text of the message with its data, with and without a trace", () => {
    for (const carrier of carriers) {
      for (const withTrace of [undefined, trace]) {
        const message = withTrace === undefined ? carrier : { ...carrier, trace: withTrace }
        for (const bytes of bodies) {
          const direct = encodeChunkFrame(message, bytes)
          const full = withData(message, bytes)
          const codec = Messages.encodeMessage(full)
          assert.isTrue(Result.isSuccess(codec), `${message.type}: the codec refused the sample`)
          assert.isTrue(Result.isSuccess(direct), `${message.type}: refused`)
          if (Result.isFailure(direct) || Result.isFailure(codec)) continue
          assert.strictEqual(direct.success.encoded, codec.success)
          // The bytes a transport writes are exactly the UTF-8 of that text.
          assert.deepStrictEqual(Buffer.from(direct.success.bytes!), Buffer.from(codec.success, "utf8"))
          assert.deepStrictEqual(direct.success.message, full)
          assert.strictEqual(direct.success.type, message.type)
          assert.strictEqual(direct.success.id, "id" in message ? message.id : undefined)
          assert.isTrue(isEncoded(direct.success))
        }
      }
    }
  })

  it("replaces data the message already had", () => {
    const message = { type: "workspace_write" as const, id: operationId, payload: { step: "chunk" as const, offset: 0, data: "QUJD" } }
    const direct = encodeChunkFrame(message, new Uint8Array([1, 2, 3]))
    assert.deepStrictEqual(Result.map(direct, (f) => f.encoded), Messages.encodeMessage(withData(message, new Uint8Array([1, 2, 3]))))
  })

  it("refuses what the codec refuses, with the same reason", () => {
    const invalid: ReadonlyArray<Messages.Message & { readonly payload: { readonly data?: string } }> = [
      { type: "workspace_write", id: operationId, payload: { step: "chunk", offset: -1 } },
      { type: "workspace_export_result", id: operationId, payload: { outcome: "sideways" as "chunk", offset: 0 } },
      { type: "workspace_write", id: unsafeMake.operationId(""), payload: { step: "chunk", offset: 0 } }
    ]
    for (const message of invalid) {
      const codec = Messages.encodeMessage(withData(message, new Uint8Array([7])))
      assert.isTrue(Result.isFailure(codec), `codec accepted ${JSON.stringify(message)}`)
      if (Result.isFailure(codec)) assert.deepStrictEqual(encodeChunkFrame(message, new Uint8Array([7])), Result.fail(codec.failure))
    }
  })

  it("refuses a frame over 4 MiB as frame_too_large with its size, like the codec", () => {
    const message = { type: "workspace_read_result" as const, id: operationId, payload: { outcome: "completed" as const, close_acknowledged: true } }
    for (const size of [3 * 1024 * 1024 - 200, 3 * 1024 * 1024 + 3]) {
      const bytes = new Uint8Array(size)
      const codec = Messages.encodeMessage(withData(message, bytes))
      const direct = encodeChunkFrame(message, bytes)
      if (Result.isSuccess(codec)) {
        assert.isTrue(Result.isSuccess(direct) && direct.success.encoded === codec.success)
        assert.isTrue(Result.isSuccess(direct) && direct.success.bytes!.byteLength === Buffer.byteLength(codec.success))
      }
      else {
        assert.strictEqual(codec.failure.reason, "frame_too_large")
        assert.deepStrictEqual(direct, Result.fail(codec.failure))
      }
    }
  })
})
