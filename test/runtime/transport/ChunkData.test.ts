/**
 * A received chunk's base64 text is decoded at the transport boundary and dropped from the message
 * (src/runtime/transport/ChunkData.ts): the handlers get the same strict decode result, the validators still see a
 * chunk step with `data`, and nothing else about the message changes.
 */
import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import { Messages } from "../../../src/proto/index.js"
import { chunkBytes } from "../../../src/runtime/transport/ChunkData.js"
import { decodeInbound } from "../../../src/runtime/transport/Transport.js"
import { prepareChunk } from "../../support/prepareFrames.js"
import { writeBegin, writeChunk } from "../../support/workspaceFrames.js"

const Id = "0f3c2b1a-4d5e-4f60-8a7b-9c8d7e6f5a4b"
const EnvironmentId = "b3e5a7c9-2d4f-4e6a-8b0c-1d2e3f4a5b6c"

const inbound = (message: Messages.CoreToRuntime) => {
  const text = Result.getOrThrow(Messages.encodeMessage(message))
  const item = decodeInbound(text)
  if (item._tag !== "Message") throw new Error(`frame refused: ${item.error.code}`)
  return item.message
}

const payloadOf = (message: Messages.CoreToRuntime) => {
  if (message.type !== "workspace_write" && message.type !== "runtime_prepare") throw new Error(message.type)
  return message.payload
}

describe("ChunkData", () => {
  it("a workspace_write chunk arrives decoded, without its text", () => {
    const body = Buffer.from("chunk bytes \u00ff\u0000 end")
    const p = payloadOf(inbound(writeChunk(Id, 7, body)))
    assert.strictEqual(p.data, "")
    assert.strictEqual(p.offset, 7)
    assert.deepStrictEqual(JSON.stringify(p), JSON.stringify({ step: "chunk", offset: 7, data: "" }))
    const bytes = chunkBytes(p)
    assert.isTrue(bytes !== undefined && Result.isSuccess(bytes))
    assert.deepStrictEqual(Buffer.from(Result.getOrThrow(bytes!)), body)
  })

  it("a runtime_prepare chunk arrives decoded, without its text", () => {
    const body = Buffer.alloc(65536, 3)
    const p = payloadOf(inbound(prepareChunk(Id, 0, body)))
    assert.strictEqual(p.data, "")
    assert.deepStrictEqual(Buffer.from(Result.getOrThrow(chunkBytes(p)!)), body)
  })

  it("bad or empty base64 stays refused by the handler's result", () => {
    const bad = inbound({ ...writeChunk(Id, 0, "x"), payload: { step: "chunk", offset: 0, data: "eA" } } as Messages.CoreToRuntime)
    assert.deepStrictEqual(chunkBytes(payloadOf(bad)), Result.fail("bad_base64"))
    const empty = inbound({ ...writeChunk(Id, 0, "x"), payload: { step: "chunk", offset: 0, data: "" } } as Messages.CoreToRuntime)
    assert.strictEqual(Result.getOrThrow(chunkBytes(payloadOf(empty))!).length, 0)
  })

  it("only chunk steps are touched: a begin with data keeps it (its validator refuses it)", () => {
    const begin = writeBegin(Id, EnvironmentId, "a.txt", "abc")
    const withData = { ...begin, payload: { ...payloadOf(begin), data: "YWJj" } } as Messages.CoreToRuntime
    assert.strictEqual(payloadOf(inbound(withData)).data, "YWJj")
  })

  it("a chunk frame received as bytes (the WebSocket transport) decodes as its text does", () => {
    const utf8 = new TextEncoder()
    const same = (message: Messages.CoreToRuntime) => {
      const text = Result.getOrThrow(Messages.encodeMessage(message))
      const fromText = decodeInbound(text)
      const fromBytes = decodeInbound(utf8.encode(text))
      if (fromText._tag !== "Message" || fromBytes._tag !== "Message") throw new Error("frame refused")
      assert.deepStrictEqual(fromBytes.message, fromText.message)
      assert.strictEqual(fromBytes.bytes, fromText.bytes)
      const bytes = chunkBytes(payloadOf(fromBytes.message))
      assert.deepStrictEqual(bytes, chunkBytes(payloadOf(fromText.message)))
      return bytes
    }
    assert.strictEqual(Result.getOrThrow(same(prepareChunk(Id, 65536, Buffer.alloc(65536, 9)))!).length, 65536)
    assert.strictEqual(Result.getOrThrow(same(writeChunk(Id, 3, Buffer.from("abc")))!).length, 3)
    // Not canonical base64: the generic path's answer, the handler's refusal.
    assert.deepStrictEqual(same({ ...writeChunk(Id, 0, "x"), payload: { step: "chunk", offset: 0, data: "eA" } } as Messages.CoreToRuntime), Result.fail("bad_base64"))
    // An invalid id is refused as an invalid frame either way.
    const badId = Result.getOrThrow(Messages.encodeMessage(prepareChunk(Id, 0, Buffer.from("abc")))).replace(Id, " ")
    const refused = decodeInbound(utf8.encode(badId))
    assert.strictEqual(refused._tag, "Invalid")
    assert.deepStrictEqual(refused, decodeInbound(badId))
  })

  it("the decoded data is handed over once: the message then no longer holds it", () => {
    const p = payloadOf(inbound(prepareChunk(Id, 0, Buffer.alloc(1000, 5))))
    assert.strictEqual(Result.getOrThrow(chunkBytes(p)!).length, 1000)
    assert.strictEqual(chunkBytes(p), undefined)
  })

  it("a payload that did not come through the transport is decoded from its data", () => {
    assert.deepStrictEqual(Buffer.from(Result.getOrThrow(chunkBytes({ step: "chunk", data: "YWJj" })!)), Buffer.from("abc"))
    assert.strictEqual(chunkBytes({ step: "commit" }), undefined)
  })
})
