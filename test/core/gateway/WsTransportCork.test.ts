/**
 * The gateway's `ws` transport writes a batch of frames in one socket write (`core/transport/internal/webSocket.ts`,
 * issue 18): the frames queued in one turn go to `ws.send` inside one cork of the TCP socket, so they leave in a
 * single `writev` instead of one per frame (`ws` corks only each frame's own header and payload). Checked over a real
 * loopback WebSocket: the client receives every frame intact and in order, and the server socket's stream wrote the
 * whole batch in one `_writev` call; a frame alone is written as before.
 */
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { WebSocket, WebSocketServer } from "ws"
import { fromWebSocket } from "../../../src/core/transport/internal/webSocket.js"

interface Pair {
  readonly server: WebSocket
  readonly client: WebSocket
  readonly received: Array<string>
  /** Each write the server's TCP socket made: how many chunks it carried. */
  readonly writes: Array<number>
  readonly close: () => Promise<void>
}

const open = (): Promise<Pair> =>
  new Promise((resolve, reject) => {
    const http: Server = createServer()
    const wss = new WebSocketServer({ server: http })
    wss.on("connection", (server) => {
      const socket = (server as unknown as { readonly _socket: { _write: Function; _writev: Function } })._socket
      const writes: Array<number> = []
      const write = socket._write
      const writev = socket._writev
      socket._write = function(...args: Array<unknown>) {
        writes.push(1)
        return write.apply(this, args)
      }
      socket._writev = function(chunks: Array<unknown>, ...rest: Array<unknown>) {
        writes.push(chunks.length)
        return writev.call(this, chunks, ...rest)
      }
      const received: Array<string> = []
      client.on("message", (data) => received.push(String(data)))
      resolve({
        server,
        client,
        received,
        writes,
        close: () =>
          new Promise<void>((done) => {
            client.terminate()
            wss.close()
            http.close(() => done())
          })
      })
    })
    http.listen(0, "127.0.0.1")
    let client: WebSocket
    http.on("listening", () => {
      client = new WebSocket(`ws://127.0.0.1:${(http.address() as AddressInfo).port}`)
      client.on("error", reject)
    })
  })

const until = (check: () => boolean) =>
  Effect.promise(() =>
    new Promise<void>((resolve) => {
      const poll = () => (check() ? resolve() : setImmediate(poll))
      poll()
    })
  )

describe("gateway ws transport, one socket write per batch", () => {
  it.live("several frames of one turn arrive intact and in order from a single writev", () =>
    Effect.gen(function* () {
      const pair = yield* Effect.promise(open)
      yield* Effect.addFinalizer(() => Effect.promise(pair.close))
      const transport = fromWebSocket(pair.server as never, { capacity: 8 })
      transport.listen({ onFrame: () => {}, onEnd: () => {} })
      const frames = ["first", JSON.stringify({ type: "execution_prepare", é: "€😀" }), "x".repeat(70_000), "last"]
      for (const frame of frames) assert.strictEqual(transport.offer(frame), "queued")
      yield* until(() => pair.received.length === frames.length)
      assert.deepStrictEqual(pair.received, frames)
      // Four frames, each a header and a payload: eight chunks in one write.
      assert.deepStrictEqual(pair.writes, [8])

      // One frame alone: `ws`'s own cork of its header and payload, one write as before.
      assert.strictEqual(transport.offer("alone"), "queued")
      yield* until(() => pair.received.length === frames.length + 1)
      assert.strictEqual(pair.received[frames.length], "alone")
      assert.deepStrictEqual(pair.writes, [8, 2])
    }).pipe(Effect.scoped))
})
