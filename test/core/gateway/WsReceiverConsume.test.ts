/**
 * The gateway's `ws` sockets read frames with an offset into the socket read's chunk instead of a new view of its rest
 * per step (`core/transport/internal/webSocket.ts`, `TrackedWebSocket`; issue 18). The same masked frames (every
 * length form, text and binary, a fragmented message, an empty one) fed in chunks split at every kind of boundary
 * must reach `message` exactly as they reach a plain `ws` socket's listener.
 */
import { createRequire } from "node:module"
import { Socket } from "node:net"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { WebSocket } from "@effect/platform-node/NodeWS"
import { TrackedWebSocket } from "../../../src/core/transport/internal/webSocket.js"
import { feedChunks } from "../../support/socketChunks.js"

/**
 * The TCP socket under a server-side `ws` socket: a `net.Socket` that never connects; the test emits its `data`
 * events itself (no timer, no I/O).
 */
const unconnectedSocket = () => new Socket()

/** One masked client frame (RFC 6455 §5.2). */
const frame = (opcode: number, payload: Uint8Array, fin = true): Buffer => {
  const n = payload.length
  const header = n < 126 ? [n | 0x80] : n < 65536 ? [126 | 0x80, n >> 8, n & 0xff] : [127 | 0x80, 0, 0, 0, 0, (n >>> 24) & 0xff, (n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff]
  const mask = [0x37, 0xfa, 0x21, 0x3d]
  const body = Buffer.from(payload.map((b, i) => b ^ mask[i & 3]!))
  return Buffer.concat([Buffer.from([(fin ? 0x80 : 0) | opcode, ...header, ...mask]), body])
}

const text = (s: string) => new Uint8Array(Buffer.from(s, "utf8"))

/** The wire bytes of one frame per size (text and binary), a non-ASCII text, and a fragmented text; what ws reads. */
const wireOf = (sizes: ReadonlyArray<number>) => {
  const messages: Array<readonly [Uint8Array, boolean]> = sizes.flatMap((n, i) => [
    [text("x".repeat(n)), false] as const,
    [new Uint8Array(n).map((_, k) => (k * 7 + i) & 0xff), true] as const
  ])
  messages.push([text(`{"type":"delta","payload":{"delta":"é€😀"}}`), false])
  const wire = Buffer.concat([
    ...messages.map(([payload, binary]) => frame(binary ? 2 : 1, payload)),
    // A fragmented text message: "frag" + "ment" + "ed".
    frame(1, text("frag"), false),
    frame(0, text("ment"), false),
    frame(0, text("ed"))
  ])
  const expected = [
    ...messages.map(([payload, binary]) => `${binary}:${Buffer.from(payload).toString("hex")}`),
    `false:${Buffer.from("fragmented").toString("hex")}`
  ]
  return { wire, expected }
}

/** Feeds `wire` to a fresh server-side socket of `Ws` in chunks of the given sizes (cycled); returns what it read. */
const read = (Ws: typeof WebSocket, wire: Buffer, chunkSizes: ReadonlyArray<number>): Array<string> => {
  const ws = new Ws(null as unknown as string, undefined, { autoPong: true })
  const socket = unconnectedSocket()
  ;(ws as unknown as { setSocket: (s: object, h: Buffer, o: object) => void }).setSocket(socket, Buffer.alloc(0), {
    maxPayload: 4 * 1024 * 1024
  })
  const out: Array<string> = []
  ws.on("message", (data: Buffer, isBinary: boolean) => out.push(`${isBinary}:${data.toString("hex")}`))
  feedChunks(socket, wire, chunkSizes)
  return out
}

const receiverOf = (ws: WebSocket): object => {
  ;(ws as unknown as { setSocket: (s: object, h: Buffer, o: object) => void }).setSocket(unconnectedSocket(), Buffer.alloc(0), {
    maxPayload: 4 * 1024 * 1024
  })
  return (ws as unknown as { readonly _receiver: object })._receiver
}

/** Feeds `wire` in one read to a fresh server-side socket of `Ws`; returns its messages and its first error. */
const readWithError = (Ws: typeof WebSocket, wire: Buffer): Array<string> => {
  const ws = new Ws(null as unknown as string, undefined, { autoPong: true })
  const socket = unconnectedSocket()
  ;(ws as unknown as { setSocket: (s: object, h: Buffer, o: object) => void }).setSocket(socket, Buffer.alloc(0), {
    maxPayload: 1024
  })
  const out: Array<string> = []
  ws.on("message", (data: Buffer, isBinary: boolean) => out.push(`${isBinary}:${data.toString("hex")}`))
  ws.on("error", (error: Error & { readonly code?: string }) => out.push(`error:${error.code}:${error.message}`))
  // A copy: `ws` unmasks a payload in place.
  socket.emit("data", Buffer.from(wire))
  return out
}

describe("gateway ws frame parser", () => {
  it.effect("ws is the version whose parser the offset consume was checked against", () =>
    Effect.sync(() => {
      // `consume` must stay the only reader of the parser's first buffered chunk: re-check `ws/lib/receiver.js`
      // (and this test's frames) before changing the pin.
      const version = (createRequire(import.meta.url)("ws/package.json") as { readonly version: string }).version
      assert.strictEqual(version, "8.23.0")
    }))

  it.effect("reads every frame as ws does, whatever the socket reads' boundaries", () =>
    Effect.sync(() => {
      const tracked = receiverOf(new TrackedWebSocket(null as unknown as string, undefined, { autoPong: true }))
      const plain = receiverOf(new WebSocket(null as unknown as string, undefined, { autoPong: true }))
      assert.notStrictEqual(Object.getPrototypeOf(tracked), Object.getPrototypeOf(plain), "the offset consume is in use")
      // Small frames split everywhere (a byte at a time included); large ones (16- and 64-bit lengths) in larger reads.
      const small = wireOf([0, 1, 2, 5, 120, 125, 126, 127, 300])
      const large = wireOf([0, 1, 126, 300, 65535, 65536, 70000])
      const cases = [
        [small, [small.wire.length]],
        [small, [1]],
        [small, [2]],
        [small, [3]],
        [small, [7]],
        [small, [126, 4, 9]],
        [large, [large.wire.length]],
        [large, [64]],
        [large, [1000]],
        [large, [65536]],
        [large, [5, 1, 200, 3, 70001, 2]]
      ] as const
      for (const [{ expected, wire }, chunks] of cases) {
        assert.deepStrictEqual(read(WebSocket, wire, chunks), expected, `plain ws, chunks ${chunks.join(",")}`)
        assert.deepStrictEqual(read(TrackedWebSocket, wire, chunks), expected, `tracked, chunks ${chunks.join(",")}`)
      }
    }))

  it.effect("refuses a malformed frame with ws's own error", () =>
    Effect.gen(function*() {
      const ok = frame(1, text("ok"))
      const unmasked = Buffer.from([0x81, 0x02, 0x6f, 0x6b])
      const cases = [
        Buffer.concat([ok, Buffer.from([0xa1, 0x80, 0, 0, 0, 0])]), // RSV2 set
        Buffer.concat([ok, frame(3, text("x"))]), // reserved opcode
        Buffer.concat([ok, unmasked]), // a client frame without a mask
        Buffer.concat([ok, frame(9, new Uint8Array(126))]), // a control frame over 125 bytes
        Buffer.concat([ok, frame(9, text("p"), false)]), // a fragmented control frame
        Buffer.concat([ok, frame(0, text("x"))]), // a continuation with nothing to continue
        Buffer.concat([ok, frame(2, new Uint8Array(2000))]), // over maxPayload (16-bit length)
        Buffer.concat([ok, Buffer.from([0x82, 0xff, 0, 0x20, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4])]) // a length over 2^53 - 1
      ]
      for (const wire of cases) {
        const expected = readWithError(WebSocket, wire)
        const tracked = readWithError(TrackedWebSocket, wire)
        // `ws` reports a parse error after the read (its write callback's error): one turn later.
        yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
        assert.strictEqual(expected.length, 2, expected.join(" "))
        assert.deepStrictEqual(tracked, expected)
      }
    }))

  it.effect("reads a frame's header and mask without a view of the socket's chunk", () =>
    Effect.sync(() => {
      const ws = new TrackedWebSocket(null as unknown as string, undefined, { autoPong: true })
      const receiver = receiverOf(ws) as { consume: (n: number) => Buffer }
      const consume = receiver.consume
      const reads: Array<readonly [number, Buffer]> = []
      receiver.consume = function(n) {
        const out = consume.call(this, n)
        reads.push([n, out])
        return out
      }
      const messages: Array<string> = []
      ws.on("message", (data: Buffer) => messages.push(data.toString()))
      const payload = "x".repeat(300) // a 16-bit length
      const chunk = Buffer.concat([frame(1, text("hello")), frame(1, text(payload))])
      ;(ws as unknown as { readonly _socket: Socket })._socket.emit("data", chunk)
      assert.deepStrictEqual(messages, ["hello", payload])
      // header, mask, payload; header, 16-bit length, mask, payload
      assert.deepStrictEqual(reads.map(([n]) => n), [2, 4, 5, 2, 2, 4, 300])
      const views = reads.filter(([, out]) => out.buffer === chunk.buffer).map(([n]) => n)
      assert.deepStrictEqual(views, [5, 300], "only the payloads are views of the chunk")
    }))
})
