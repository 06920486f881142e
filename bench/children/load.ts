/**
 * Child role `load`: the scale suite's load generator, one process holding many raw `ws` device connections.
 * Against the gateway each device connects as a daemon does (protocol "Ownership and connection"): bootstrap
 * with its Bearer credential, dial `ws_url` with `device_id` and `version` and the Bearer header, send a
 * heartbeat at once and then every `heartbeat_seconds` (spread evenly over the interval). Against the raw
 * baseline it dials directly and sends the same heartbeats. Connections use source addresses 127.0.0.2–9 in
 * turn, so repeated runs do not run out of ephemeral ports on one address.
 */
import { Agent, request } from "node:http"
import WebSocket from "ws"
import { Capabilities } from "../../src/proto/index.js"
import { ProtocolVersion } from "../../src/proto/Version.js"
import type { BenchDevice } from "../support/core.js"

export type LoadCommand =
  | {
    readonly op: "connect"
    readonly mode: "gateway" | "raw"
    readonly baseUrl: string
    readonly devices: ReadonlyArray<BenchDevice>
    readonly heartbeatSeconds: number
  }
  | { readonly op: "count" }
  | { readonly op: "exit" }

const declaration = Object.fromEntries(Capabilities.capabilityNames.map((n) => [n, true]))
const heartbeat = () =>
  JSON.stringify({
    type: "heartbeat",
    payload: {
      ts: Math.floor(Date.now() / 1000),
      active_requests: 0,
      daemon_version: "bench",
      supported_agent_kinds: [{ kind: "scripted", available: true, version: "1.0.0", capabilities: declaration }]
    }
  })

const agent = new Agent({ keepAlive: true, maxSockets: 16 })

const bootstrap = (baseUrl: string, device: BenchDevice): Promise<{ ws_url: string; heartbeat_seconds: number }> =>
  new Promise((resolve, reject) => {
    const body = JSON.stringify({ device_id: device.deviceId })
    const req = request(`${baseUrl}/api/v1/agent-daemon/bootstrap`, {
      method: "POST",
      agent,
      headers: {
        authorization: `Bearer ${device.credential}`,
        "content-type": "application/json",
        "content-length": Buffer.byteLength(body)
      }
    }, (res) => {
      const chunks: Array<Buffer> = []
      res.on("data", (c: Buffer) => chunks.push(c))
      res.on("end", () => {
        if (res.statusCode !== 200) return reject(new Error(`bootstrap answered ${res.statusCode}`))
        resolve(JSON.parse(Buffer.concat(chunks).toString("utf8")) as { ws_url: string; heartbeat_seconds: number })
      })
    })
    req.on("error", reject)
    req.end(body)
  })

export const load = async (): Promise<void> => {
  const sockets: Array<WebSocket> = []
  let heartbeats = 0
  let opened = 0
  let retries = 0
  const dial = (url: string, device: BenchDevice | undefined, heartbeatMs: number, index: number) =>
    new Promise<void>((resolve, reject) => {
      const ws = new WebSocket(url, {
        perMessageDeflate: false,
        localAddress: `127.0.0.${2 + (index % 8)}`,
        ...(device === undefined ? {} : { headers: { authorization: `Bearer ${device.credential}` } })
      })
      ws.once("open", () => {
        opened++
        sockets.push(ws)
        ws.send(heartbeat())
        heartbeats++
        // Spread the cadence: device i first repeats after a fraction of the interval.
        const offset = Math.floor(((index * 7919) % 1000) / 1000 * heartbeatMs)
        const timer = setTimeout(() => {
          const again = () => {
            if (ws.readyState !== WebSocket.OPEN) return
            ws.send(heartbeat())
            heartbeats++
          }
          again()
          const interval = setInterval(again, heartbeatMs)
          ws.once("close", () => clearInterval(interval))
        }, offset)
        ws.once("close", () => clearTimeout(timer))
        resolve()
      })
      ws.once("error", reject)
      ws.once("unexpected-response", (_req, res) => reject(new Error(`upgrade answered ${res.statusCode}`)))
    })

  process.on("message", async (message: LoadCommand) => {
    try {
      switch (message.op) {
        case "connect": {
          const failures: Array<string> = []
          const queue = [...message.devices]
          const base = sockets.length
          let next = 0
          const worker = async () => {
            while (next < queue.length) {
              const i = next++
              const device = queue[i]!
              // Up to three attempts, as a daemon retries (a reset under a busy machine is not the figure).
              for (let attempt = 1; attempt <= 3; attempt++) {
                try {
                  if (message.mode === "gateway") {
                    const boot = await bootstrap(message.baseUrl, device)
                    const url = `${boot.ws_url}?device_id=${encodeURIComponent(device.deviceId)}&version=${ProtocolVersion}`
                    await dial(url, device, boot.heartbeat_seconds * 1000, base + i)
                  } else {
                    await dial(`${message.baseUrl.replace(/^http/, "ws")}/raw`, undefined, message.heartbeatSeconds * 1000, base + i)
                  }
                  break
                } catch (error) {
                  if (attempt === 3) failures.push(error instanceof Error ? error.message : String(error))
                  else retries++
                }
              }
            }
          }
          await Promise.all(Array.from({ length: 32 }, worker))
          process.send?.({ op: "connected", open: opened, failed: failures.length, retries, firstFailure: failures[0] ?? "" })
          return
        }
        case "count":
          process.send?.({ op: "count", heartbeats, open: sockets.filter((s) => s.readyState === WebSocket.OPEN).length })
          return
        case "exit":
          for (const ws of sockets) ws.terminate()
          process.exit(0)
      }
    } catch (error) {
      process.send?.({ op: "error", message: error instanceof Error ? error.message : String(error) })
    }
  })
  process.on("disconnect", () => process.exit(0))
  await new Promise<never>(() => {})
}
