/**
 * A gateway `ws` socket's parser hands a whole text frame straight to the transport's `message` listener
 * (`core/transport/internal/wsReceiver.ts`, `directMessages`; issue 18): unmasked a word at a time, checked as UTF-8,
 * without `ws`'s fragment list and its two `message` events. What the listener receives, and every error, must be
 * what a plain `ws` socket gives; anything but a whole text frame, and a socket with another `message` listener, take
 * `ws`'s own step.
 */
import { Socket } from "node:net"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { WebSocket } from "@effect/platform-node/NodeWS"
import { TrackedWebSocket } from "../../../src/core/transport/internal/webSocket.js"
import { directMessages, unmaskInPlace } from "../../../src/core/transport/internal/wsReceiver.js"
import { feedChunks } from "../../support/socketChunks.js"

/** One masked client frame (RFC 6455 §5.2). */
const frame = (opcode: number, payload: Uint8Array, fin = true, mask = [0x37, 0xfa, 0x21, 0x3d]): Buffer => {
  const n = payload.length
  const header = n < 126 ? [n | 0x80] : n < 65536 ? [126 | 0x80, n >> 8, n & 0xff] : [127 | 0x80, 0, 0, 0, 0, (n >>> 24) & 0xff, (n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff]
  const body = Buffer.from(payload.map((b, i) => b ^ mask[i & 3]!))
  return Buffer.concat([Buffer.from([(fin ? 0x80 : 0) | opcode, ...header, ...mask]), body])
}

const text = (s: string) => new Uint8Array(Buffer.from(s, "utf8"))

/** A server-side socket of `Ws` over a `net.Socket` that never connects (the test emits its reads). */
const open = (Ws: typeof WebSocket, maxPayload = 4 * 1024 * 1024) => {
  const ws = new Ws(null as unknown as string, undefined, { autoPong: true })
  const socket = new Socket()
  ;(ws as unknown as { setSocket: (s: object, h: Buffer, o: object) => void }).setSocket(socket, Buffer.alloc(0), { maxPayload })
  const receiver = (ws as unknown as { readonly _receiver: { emit: (type: string, ...args: Array<unknown>) => boolean } })._receiver
  // The parser's own `message` events (ws re-emits each on the socket).
  let parserEvents = 0
  const emit = receiver.emit
  receiver.emit = function(type, ...args) {
    if (type === "message") parserEvents++
    return emit.call(this, type, ...args)
  }
  const out: Array<string> = []
  const listener = (data: Buffer, isBinary: boolean) => out.push(`${isBinary}:${data.toString("hex")}`)
  ws.on("message", listener)
  ws.on("error", (error: Error & { readonly code?: string }) => out.push(`error:${error.code}:${error.message}`))
  /** Feeds `wire` in chunks of the given sizes (cycled), each its own buffer inside a larger allocation. */
  const feed = (wire: Buffer, chunkSizes?: ReadonlyArray<number>) => feedChunks(socket, wire, chunkSizes)
  return { ws, out, listener, feed, parserEvents: () => parserEvents }
}

const nextTurn = Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))

describe("gateway ws parser, whole text frames to the transport's listener", () => {
  it.effect("delivers every frame as ws does, the whole text frames without the parser's message event", () =>
    Effect.sync(() => {
      const texts = [1, 3, 4, 5, 43, 125, 126, 300, 65536].map((n, i) => "x".repeat(n - 1) + String.fromCharCode(97 + i))
      texts.push(`{"type":"delta","payload":{"delta":"é€😀"}}`)
      const wire = Buffer.concat([
        ...texts.map((s, i) => frame(1, text(s), true, i % 3 === 0 ? [0, 0, 0, 0] : [0x37, 0xfa, 0x21, 0x3d + i])),
        frame(2, new Uint8Array([1, 2, 3])), // binary: ws's step
        frame(1, new Uint8Array(0)), // empty: ws's step
        frame(1, text("frag"), false), // fragmented: ws's step
        frame(0, text("ment"))
      ])
      for (const chunks of [[wire.length], [1], [3], [7], [126, 4, 9], [1000]]) {
        const plain = open(WebSocket)
        plain.feed(wire, chunks)
        const tracked = open(TrackedWebSocket)
        directMessages(tracked.ws, tracked.listener)
        tracked.feed(wire, chunks)
        assert.strictEqual(plain.out.length, texts.length + 3)
        assert.deepStrictEqual(tracked.out, plain.out, `chunks ${chunks.join(",")}`)
        // Only the binary, the empty and the fragmented message went through ws's events.
        assert.strictEqual(tracked.parserEvents(), 3, `chunks ${chunks.join(",")}`)
        assert.strictEqual(plain.parserEvents(), texts.length + 3)
      }
    }))

  it.effect("refuses invalid UTF-8 with ws's own error, and delivers nothing of it", () =>
    Effect.gen(function*() {
      for (const bad of [[0xc3, 0x28], [0xed, 0xa0, 0x80], [0xf4, 0x90, 0x80, 0x80], [0xc0, 0xaf], [0xe2, 0x82]]) {
        const wire = Buffer.concat([frame(1, text("ok")), frame(1, new Uint8Array([0x61, ...bad, 0x62]))])
        const plain = open(WebSocket)
        plain.feed(wire)
        const tracked = open(TrackedWebSocket)
        directMessages(tracked.ws, tracked.listener)
        tracked.feed(wire)
        yield* nextTurn
        assert.strictEqual(plain.out.length, 2, plain.out.join(" "))
        assert.deepStrictEqual(tracked.out, plain.out)
        assert.match(tracked.out[1]!, /^error:WS_ERR_INVALID_UTF8:/)
      }
    }))

  it.effect("a socket with another message listener gets its frames through ws's events", () =>
    Effect.sync(() => {
      const tracked = open(TrackedWebSocket)
      directMessages(tracked.ws, tracked.listener)
      const other: Array<string> = []
      tracked.ws.on("message", (data: Buffer) => other.push(data.toString()))
      tracked.feed(Buffer.concat([frame(1, text("one")), frame(1, text("two"))]))
      assert.deepStrictEqual(other, ["one", "two"])
      assert.deepStrictEqual(tracked.out, [`false:${Buffer.from("one").toString("hex")}`, `false:${Buffer.from("two").toString("hex")}`])
      assert.strictEqual(tracked.parserEvents(), 2)
    }))

  it.effect("unmasks a word at a time exactly as the byte loop does", () =>
    Effect.sync(() => {
      const mask = new Uint8Array([0x81, 0x7f, 0x00, 0xfe])
      for (let offset = 0; offset < 6; offset++) {
        for (let n = 0; n < 42; n++) {
          const backing = new Uint8Array(n + 12).map((_, i) => (i * 37 + n) & 0xff)
          const expected = Uint8Array.from(backing)
          for (let i = 0; i < n; i++) expected[offset + i] = expected[offset + i]! ^ mask[i & 3]!
          unmaskInPlace(Buffer.from(backing.buffer, offset, n), mask)
          assert.deepStrictEqual(backing, expected, `offset ${offset}, length ${n}`)
        }
      }
    }))
})
