/**
 * When the gateway's `ws` transport writes what it was offered (`core/transport/internal/webSocket.ts`): envelopes
 * queued in one turn go to `ws.send` together at the end of the current microtask, and a chunk frame (offered as
 * its bytes) is written at once, after whatever was queued before it, so a driver waiting for the chunk's receipt
 * does not hold its own frame back for the rest of its turn.
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
})
