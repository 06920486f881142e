/**
 * The raw `ws` endpoint on Core's side of the baselines: one WebSocket server on 127.0.0.1 that the
 * runtime-peer child dials, with the same 4 MiB frame bound as the gateway and no compression. The receiver
 * does only what any receiver must: take the frame as text.
 */
import type { AddressInfo } from "node:net"
import { WebSocket, WebSocketServer } from "ws"

export interface RawServer {
  readonly url: string
  /** Resolves once the peer has connected. */
  readonly connected: Promise<void>
  /** Asks the peer for `n` prebuilt delta frames at once; resolves with receive times of the first and last. */
  readonly burst: (n: number, runId: string, text: string) => Promise<{ readonly first: number; readonly last: number }>
  /**
   * The same, with the daemon's batching: up to `batch` frames corked into one write, the next batch after the
   * last frame's write callback.
   */
  readonly burstBatched: (n: number, runId: string, text: string, batch: number) => Promise<{ readonly first: number; readonly last: number }>
  /**
   * Collects the one-way latency (ms) of paired frames by stamp, per frame id (`paired`, `delayed`) until
   * `stop` (the peer sends them while pairing is on).
   */
  readonly collectPaired: () => { readonly byId: Map<string, Map<string, number>>; readonly stop: () => void }
  /** Asks the peer for `n` stamped frames, one every `intervalMs`; resolves with each frame's one-way latency (ms). */
  readonly paced: (n: number, intervalMs: number, runId: string) => Promise<Array<number>>
  /** One round trip of a small frame (ms). */
  readonly echo: () => Promise<number>
  /** Calls `f` on the first frame of the next connection (a fresh process dialing in). */
  readonly onNextConnectionFrame: (f: () => void) => void
  readonly close: () => Promise<void>
}

export const startRawServer = async (): Promise<RawServer> => {
  const server = new WebSocketServer({ host: "127.0.0.1", port: 0, perMessageDeflate: false, maxPayload: 4 * 1024 * 1024 })
  await new Promise<void>((resolve) => server.once("listening", () => resolve()))
  const port = (server.address() as AddressInfo).port
  let peer: WebSocket | undefined
  let onFrame: (text: string) => void = () => {}
  let nextConnection: ((ws: WebSocket) => void) | undefined
  const connected = new Promise<void>((resolve) => {
    nextConnection = (ws) => {
      peer = ws
      ws.on("message", (data) => onFrame(String(data)))
      resolve()
    }
  })
  server.on("connection", (ws) => {
    const handle = nextConnection
    nextConnection = undefined
    handle?.(ws)
  })
  const send = (command: unknown) => {
    if (peer === undefined) throw new Error("raw peer not connected")
    peer.send(JSON.stringify(command))
  }
  const burstOf = (command: Record<string, unknown> & { readonly n: number }) =>
    new Promise<{ readonly first: number; readonly last: number }>((resolve) => {
      let count = 0
      let first = 0
      onFrame = () => {
        const at = performance.now()
        if (count++ === 0) first = at
        if (count === command.n) resolve({ first, last: at })
      }
      send(command)
    })
  return {
    url: `ws://127.0.0.1:${port}/raw`,
    connected,
    burst: (n, runId, text) => burstOf({ cmd: "burst-delta", n, runId, text }),
    burstBatched: (n, runId, text, batch) => burstOf({ cmd: "burst-batched", n, runId, text, batch }),
    collectPaired: () => {
      const byId = new Map<string, Map<string, number>>()
      onFrame = (frame) => {
        const now = process.hrtime.bigint()
        const parsed = JSON.parse(frame) as { id: string; payload: { delta: string } }
        let m = byId.get(parsed.id)
        if (m === undefined) byId.set(parsed.id, (m = new Map()))
        m.set(parsed.payload.delta, Number(now - BigInt(parsed.payload.delta)) / 1e6)
      }
      return { byId, stop: () => (onFrame = () => {}) }
    },
    paced: (n, intervalMs, runId) =>
      new Promise((resolve) => {
        const latencies: Array<number> = []
        onFrame = (frame) => {
          const now = process.hrtime.bigint()
          const sent = BigInt((JSON.parse(frame) as { payload: { delta: string } }).payload.delta)
          latencies.push(Number(now - sent) / 1e6)
          if (latencies.length === n) resolve(latencies)
        }
        send({ cmd: "paced", n, intervalMs, runId })
      }),
    echo: () =>
      new Promise((resolve) => {
        const t0 = performance.now()
        onFrame = () => resolve(performance.now() - t0)
        send({ cmd: "echo", t: t0 })
      }),
    onNextConnectionFrame: (f) => {
      nextConnection = (ws) => ws.once("message", () => f())
    },
    close: () =>
      new Promise((resolve) => {
        for (const client of server.clients) client.terminate()
        server.close(() => resolve())
      })
  }
}
