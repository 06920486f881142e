/**
 * The daemon's client socket (`internal/ws.ts`) writes single frames sent with `joinTurn` within one turn of the event
 * loop to the kernel in one write, frames sent in different turns, or without `joinTurn` (a posted receipt), in writes
 * of their own; order and write callbacks are kept. Live: a real `ws` client and server on loopback and the real event
 * loop, whose turns are the unit here (no clock is involved, no timer is set). Each kernel write of a `net.Socket` goes
 * through its `_writeGeneric` (Node's stream_base path for `write` and `writev`), which the test counts.
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
  /** Resolves with the first `n` frames the server received, in order, once it has them. */
  readonly firstFrames: (n: number) => Promise<ReadonlyArray<string>>
  readonly close: () => Promise<void>
}

const startServer = async (): Promise<Server> => {
  const http = createServer()
  const wss = new WebSocketServer({ server: http })
  const received: Array<string> = []
  const waiting: Array<{ readonly n: number; readonly resolve: (frames: ReadonlyArray<string>) => void }> = []
  const settle = () => {
    for (const w of waiting.filter((w) => received.length >= w.n)) {
      waiting.splice(waiting.indexOf(w), 1)
      w.resolve(received.slice(0, w.n))
    }
  }
  wss.on("connection", (socket) =>
    socket.on("message", (data) => {
      received.push(String(data))
      settle()
    }))
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve))
  const port = (http.address() as net.AddressInfo).port
  return {
    url: `ws://127.0.0.1:${port}/`,
    firstFrames: (n) =>
      new Promise((resolve) => {
        waiting.push({ n, resolve })
        settle()
      }),
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

/** The server's first frames are `expected`, in order (waits for them: the test's timeout bounds the wait). */
const arrived = async (server: Server, expected: ReadonlyArray<string>) =>
  assert.deepStrictEqual(await server.firstFrames(expected.length), expected)

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
