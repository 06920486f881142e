/**
 * When the gateway's `ws` transport writes what it was offered (`core/transport/internal/webSocket.ts`): envelopes
 * queued in one turn go to `ws.send` together at the end of the current microtask, and a chunk frame (offered as
 * its bytes) is written at once, after whatever was queued before it, so a driver waiting for the chunk's receipt
 * does not hold its own frame back for the rest of its turn. A text frame is read with its byte size (the read side
 * counts it instead of measuring the text again, issue 18).
 */
import { EventEmitter } from "node:events"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import type { WebSocket } from "@effect/platform-node/NodeWS"
import { fromWebSocket } from "../../../src/core/transport/internal/webSocket.js"

class FakeWs extends EventEmitter {
  readonly sent: Array<string> = []
  send(data: string | Uint8Array, _options: unknown, _cb?: (error?: Error) => void): void {
    this.sent.push(typeof data === "string" ? data : new TextDecoder().decode(data))
  }
  pause(): void {}
  resume(): void {}
  close(): void {}
  terminate(): void {}
}

const microtask = Effect.promise(() => new Promise<void>((resolve) => queueMicrotask(resolve)))

describe("gateway ws transport writes", () => {
  it.effect("text envelopes are written at the end of the microtask; a chunk frame at once, after what was queued", () =>
    Effect.gen(function* () {
      const ws = new FakeWs()
      const transport = fromWebSocket(ws as unknown as WebSocket, { capacity: 8 })
      transport.listen({ onFrame: () => {}, onEnd: () => {} })
      assert.strictEqual(transport.offer("a"), "queued")
      assert.strictEqual(transport.offer("b"), "queued")
      assert.deepStrictEqual(ws.sent, [])
      assert.strictEqual(transport.offer(new TextEncoder().encode("chunk")), "queued")
      assert.deepStrictEqual(ws.sent, ["a", "b", "chunk"])
      assert.strictEqual(transport.offer("c"), "queued")
      yield* microtask
      assert.deepStrictEqual(ws.sent, ["a", "b", "chunk", "c"])
    }))

  it.effect("a text frame reaches the read side with its exact UTF-8 size; a binary frame as bytes, without one", () =>
    Effect.sync(() => {
      const ws = new FakeWs()
      const transport = fromWebSocket(ws as unknown as WebSocket, { capacity: 8 })
      const read: Array<readonly [string | Uint8Array, number | undefined]> = []
      transport.listen({ onFrame: (frame, bytes) => read.push([frame, bytes]), onEnd: () => {} })
      const text = JSON.stringify({ type: "delta", id: "run-1", payload: { delta: "é€😀 ok", sequence: 1 } })
      ws.emit("message", Buffer.from(text, "utf8"), false)
      ws.emit("message", Buffer.from([1, 2, 3]), true)
      assert.strictEqual(read.length, 2)
      assert.strictEqual(read[0]![0], text)
      // 3 non-ASCII characters of 2, 3 and 4 bytes: the size is not the text's length.
      assert.strictEqual(read[0]![1], text.length + 1 + 2 + 2)
      assert.strictEqual(read[0]![1], Buffer.byteLength(text, "utf8"))
      assert.deepStrictEqual([...(read[1]![0] as Uint8Array)], [1, 2, 3])
      assert.strictEqual(read[1]![1], undefined)
    }))

  it.effect("a text frame the read side takes as its bytes is not handed over as text; the others are", () =>
    Effect.sync(() => {
      const ws = new FakeWs()
      const transport = fromWebSocket(ws as unknown as WebSocket, { capacity: 8 })
      const read: Array<readonly [string | Uint8Array, number | undefined]> = []
      const offered: Array<string> = []
      transport.listen({
        onFrame: (frame, bytes) => read.push([frame, bytes]),
        onTextBytes: (frame) => {
          offered.push(frame.toString())
          return frame[0] === 0x7b // "{": taken
        },
        onEnd: () => {}
      })
      ws.emit("message", Buffer.from(`{"a":"é"}`, "utf8"), false)
      ws.emit("message", Buffer.from("[1]", "utf8"), false)
      ws.emit("message", Buffer.from("{bin}", "utf8"), true)
      // Text frames are offered as bytes first; a binary frame never is.
      assert.deepStrictEqual(offered, [`{"a":"é"}`, "[1]"])
      assert.strictEqual(read.length, 2)
      assert.deepStrictEqual(read[0], ["[1]", 3])
      assert.strictEqual(new TextDecoder().decode(read[1]![0] as Uint8Array), "{bin}")
    }))
})
