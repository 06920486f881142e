/**
 * The daemon's `decodeInbound` reads a Turn's start frame with `LongTokens` (issue 18, relay): the input's long text is
 * never decoded or parsed as one string (no `TextDecoder.decode` or `JSON.parse` of anything as long as the input),
 * and the message is the one Core sent.
 */
import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import { vi } from "vitest"
import { InputFrame } from "../../../src/proto/index.js"
import { Slice } from "../../../src/proto/LongTokens.js"
import { decodeInbound } from "../../../src/runtime/transport/Transport.js"
import { executionStart } from "../../support/executionStart.js"

const script = JSON.stringify({ script: Array.from({ length: 2000 }, (_, i) => ({ delta: `The parser accepts trailing commas ${i} ` })) })

const start = (text: string) => executionStart([[text]])

describe("Transport.decodeInbound", () => {
  it("decodes a Turn's start frame without a text decode or JSON.parse of anything as long as its input", () => {
    const frame = Result.getOrThrow(InputFrame.encodeMessageBytes(start(script)))
    assert.isTrue(frame instanceof Uint8Array)
    const parse = vi.spyOn(JSON, "parse")
    const decode = vi.spyOn(TextDecoder.prototype, "decode")
    try {
      const inbound = decodeInbound(frame)
      assert.strictEqual(inbound._tag, "Message")
      if (inbound._tag === "Message") assert.deepStrictEqual(inbound.message, start(script))
      const longest = (calls: ReadonlyArray<ReadonlyArray<unknown>>) =>
        Math.max(0, ...calls.map(([arg]) => typeof arg === "string" ? arg.length : arg instanceof Uint8Array ? arg.length : 0))
      assert.isBelow(longest(parse.mock.calls), Slice * 2)
      assert.isBelow(longest(decode.mock.calls), Slice * 2)
    } finally {
      parse.mockRestore()
      decode.mockRestore()
    }
  })
})
