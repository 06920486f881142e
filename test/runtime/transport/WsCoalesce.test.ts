/**
 * The daemon's client socket (`internal/ws.ts`) writes single frames sent with `joinTurn` within one turn of the event
 * loop to the kernel in one write, frames sent in different turns, or without `joinTurn` (a posted receipt), in writes
 * of their own; order and write callbacks are kept. Counted on the real TCP socket under a real `ws` client, against a real `ws` server on loopback: each
 * kernel write of a `net.Socket` goes through its `_writeGeneric` (Node's stream_base path for `write` and `writev`).
 */
import { createServer } from "node:http"
import net from "node:net"
import { afterEach, assert, describe, it, vi } from "vitest"
import { Effect } from "effect"
import { WebSocketServer } from "ws"
import { dial } from "../../../src/runtime/transport/internal/ws.js"
import type { FrameSocket } from "../../../src/runtime/transport/internal/frameSocket.js"

interface Server {
  readonly url: string
  readonly received: Array<string>
  readonly close: () => Promise<void>
}

const startServer = async (): Promise<Server> => {
  const http = createServer()
  const wss = new WebSocketServer({ server: http })
  const received: Array<string> = []
  wss.on("connection", (socket) => socket.on("message", (data) => received.push(String(data))))
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve))
  const port = (http.address() as net.AddressInfo).port
  return {
    url: `ws://127.0.0.1:${port}/`,
    received,
    close: () =>
      new Promise<void>((resolve) => {
        for (const client of wss.clients) client.terminate()
        wss.close(() => http.close(() => resolve()))
      })
  }
}

const open = (url: string): Promise<FrameSocket> =>
  Effect.runPromise(dial({ url, authorization: "Bearer t", userAgent: "agentwire/test", maxPayload: 1 << 20, maxRefusalBody: 1024 }))

const sent = (socket: FrameSocket, text: string, joinTurn = true): Promise<void> =>
  new Promise((resolve, reject) => socket.send(text, (error) => (error === undefined ? resolve() : reject(error)), joinTurn))

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve))

/** Waits (at most about 1 s) until the server has as many frames as `expected`, then compares them in order. */
const arrived = async (server: Server, expected: ReadonlyArray<string>) => {
  for (let i = 0; i < 200 && server.received.length < expected.length; i++) await new Promise((resolve) => setTimeout(resolve, 5))
  assert.deepStrictEqual(server.received, expected)
}

/** Kernel writes of every `net.Socket` in this process while `run` runs (only the client writes here). */
const countWrites = async (run: () => Promise<void>): Promise<number> => {
  const proto = net.Socket.prototype as unknown as { _writeGeneric: (...args: Array<unknown>) => unknown }
  const spy = vi.spyOn(proto, "_writeGeneric")
  try {
    await run()
    return spy.mock.calls.length
  } finally {
    spy.mockRestore()
  }
}

describe("ws client socket: frames sent with joinTurn in one event-loop turn leave in one write", () => {
  const cleanup: Array<() => Promise<void>> = []
  afterEach(async () => {
    for (const f of cleanup.splice(0)) await f()
  })
  /** A server and an open client socket, closed after the case; returns in a later turn than the dial's. */
  const connected = async () => {
    const server = await startServer()
    cleanup.push(server.close)
    const socket = await open(server.url)
    cleanup.push(async () => socket.terminate())
    await nextTurn()
    return { server, socket }
  }

  // Three frames sent in one turn: with joinTurn one kernel write; without it (a posted receipt) three, at once. Every
  // frame arrives in order and each callback fires.
  it.each([
    { joinTurn: true, writes: 1 },
    { joinTurn: false, writes: 3 }
  ])("three sends in one turn with joinTurn $joinTurn are $writes kernel write(s)", async ({ joinTurn, writes }) => {
    const { server, socket } = await connected()
    const texts = ["starting", "started", "delta"]
    assert.strictEqual(await countWrites(async () => void (await Promise.all(texts.map((t) => sent(socket, t, joinTurn))))), writes)
    await arrived(server, texts)
  })

  it("sends in different turns are written one by one (the control)", async () => {
    const { server, socket } = await connected()
    const writes = await countWrites(async () => {
      const first = sent(socket, "a")
      await nextTurn()
      const second = sent(socket, "b")
      await nextTurn()
      const third = sent(socket, "c")
      await Promise.all([first, second, third])
    })
    assert.strictEqual(writes, 3)
    await arrived(server, ["a", "b", "c"])
  })

  it("a batch written in the same turn as a single frame joins its write, after it", async () => {
    const { server, socket } = await connected()
    const writes = await countWrites(async () => {
      const single = sent(socket, "status")
      const batch = new Promise<void>((resolve, reject) =>
        socket.sendAll(["d1", "d2"], (error) => (error === undefined ? resolve() : reject(error)))
      )
      await Promise.all([single, batch])
    })
    assert.strictEqual(writes, 1)
    await arrived(server, ["status", "d1", "d2"])
  })
})
