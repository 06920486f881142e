/**
 * Child role `gateway-host`: the process whose memory and CPU the scale suite measures. Mode `gateway` runs
 * Core's real gateway (`GatewayServer` with `DeviceCredentials.layerMemory` holding every bench device); mode
 * `raw` runs the baseline, a plain `ws` server on a Node HTTP server that accepts every upgrade and only takes
 * each frame as text. Runs with `--expose-gc`, so a measurement starts from a collected heap.
 */
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { writeHeapSnapshot } from "node:v8"
import { WebSocketServer } from "ws"
import { type BenchDevice, type Core, startCore } from "../support/core.js"

export type HostCommand =
  | { readonly op: "start"; readonly mode: "gateway" | "raw"; readonly devices: ReadonlyArray<BenchDevice>; readonly heartbeatSeconds: number }
  /** Memory after a full collection (`collect: true`; costs CPU) or CPU time alone. */
  | { readonly op: "measure"; readonly collect: boolean }
  /** Writes a heap snapshot (diagnostics: docs/performance.md). */
  | { readonly op: "snapshot"; readonly path: string }
  | { readonly op: "exit" }

export interface HostMeasurement {
  readonly op: "measured"
  readonly rss: number
  readonly heapUsed: number
  readonly external: number
  /** Process CPU time so far (user + system, every thread), microseconds. */
  readonly cpuMicros: number
  readonly frames: number
}

const collect = () => {
  const gc = (globalThis as { gc?: () => void }).gc
  if (gc !== undefined) {
    gc()
    gc()
  }
}

export const gatewayHost = async (): Promise<void> => {
  let core: Core | undefined
  let raw: { server: Server; wss: WebSocketServer } | undefined
  let frames = 0
  process.on("message", async (message: HostCommand) => {
    try {
      switch (message.op) {
        case "start": {
          if (message.mode === "gateway") {
            core = await startCore(message.devices, { heartbeatSeconds: message.heartbeatSeconds })
            process.send?.({ op: "started", baseUrl: core.baseUrl })
          } else {
            const server = createServer((_, res) => res.writeHead(404).end())
            const wss = new WebSocketServer({ server, perMessageDeflate: false, maxPayload: 4 * 1024 * 1024 })
            wss.on("connection", (ws) => ws.on("message", (data) => {
              frames++
              void String(data)
            }))
            await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()))
            raw = { server, wss }
            process.send?.({ op: "started", baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}` })
          }
          return
        }
        case "measure": {
          if (message.collect) collect()
          const memory = process.memoryUsage()
          const cpu = process.cpuUsage()
          process.send?.({
            op: "measured",
            rss: memory.rss,
            heapUsed: memory.heapUsed,
            external: memory.external,
            cpuMicros: cpu.user + cpu.system,
            frames
          } satisfies HostMeasurement)
          return
        }
        case "snapshot": {
          collect()
          process.send?.({ op: "snapshot-written", path: writeHeapSnapshot(message.path) })
          return
        }
        case "exit": {
          if (core !== undefined) await core.dispose()
          if (raw !== undefined) {
            for (const client of raw.wss.clients) client.terminate()
            raw.server.closeAllConnections()
            raw.server.close()
          }
          process.exit(0)
        }
      }
    } catch (error) {
      process.send?.({ op: "error", message: error instanceof Error ? error.message : String(error) })
    }
  })
  process.on("disconnect", () => process.exit(0))
  await new Promise<never>(() => {})
}
