/**
 * Child role `transfer-peer`: the Runtime's side of the transfer bench in its own process, as in a deployment
 * (Core and the daemon are two processes on two cores). It plays both contenders, so both run between the same
 * two processes:
 *
 * - Daemon: `Daemon.run` with the production Connector, bound to the bench's temporary workspace (`RuntimeProcess`
 *   with the Environment binding): its `Transfer` service stages, hashes and installs each file.
 * - Raw: a plain `ws` client that dials the bench's raw server (so, like the daemon, it is the end whose frames are
 *   masked) and answers each chunk frame with a small receipt after decoding its base64 data.
 *
 * Configuration (including the bench credential) arrives over the IPC channel, never in argv or the environment.
 */
import { Effect, Fiber, Layer, Logger, Redacted, References } from "effect"
import WebSocket from "ws"
import { Ids } from "../../src/proto/index.js"
import { ProtocolVersion } from "../../src/proto/Version.js"
import * as Daemon from "../../src/runtime/Daemon.js"
import * as RuntimeProcess from "../../src/runtime/RuntimeProcess.js"
import { StatusBoard } from "../../src/runtime/StatusBoard.js"
import { Connector } from "../../src/runtime/transport/Connector.js"

export type TransferPeerCommand =
  | { readonly op: "raw"; readonly url: string }
  | {
    readonly op: "daemon"
    readonly coreUrl: string
    readonly deviceId: string
    readonly credential: string
    readonly environmentId: string
    /** The bound workspace (a real path). */
    readonly workspace: string
  }
  /** This process's CPU time so far: `{op: "cpu", micros}`. */
  | { readonly op: "cpu" }
  | { readonly op: "exit" }

const reply = (message: { readonly op: string } & Record<string, unknown>) => process.send?.(message)

/** The raw contender: decode each chunk, answer with the running total; `commit` answers `completed`. */
const startRaw = (url: string) => {
  const ws = new WebSocket(url, { perMessageDeflate: false })
  let received = 0
  ws.on("open", () => reply({ op: "raw-ready" }))
  ws.on("error", (e) => reply({ op: "error", message: `raw ws: ${e.message}` }))
  ws.on("message", (data) => {
    const frame = JSON.parse(String(data)) as { readonly id: string; readonly payload: { readonly step: string; readonly data?: string } }
    if (frame.payload.step === "chunk") {
      received += Buffer.from(frame.payload.data ?? "", "base64").length
      ws.send(JSON.stringify({ type: "runtime_prepare_result", id: frame.id, payload: { outcome: "received", offset: received } }))
    } else {
      ws.send(JSON.stringify({ type: "runtime_prepare_result", id: frame.id, payload: { outcome: "completed", size_bytes: received } }))
      received = 0
    }
  })
  return ws
}

const startDaemon = (command: Extract<TransferPeerCommand, { op: "daemon" }>) => {
  const deviceId = Ids.unsafeMake.deviceId(command.deviceId)
  return Effect.runFork(
    Daemon.run({ deviceId, coreOrigin: command.coreUrl }).pipe(
      Effect.provide(Layer.mergeAll(
        Connector.layer({ apiBase: `${command.coreUrl}/api/v1`, deviceId, credential: Redacted.make(command.credential), userAgent: "agentwire-bench" }),
        RuntimeProcess.layer({
          environment: { environmentId: command.environmentId, root: command.workspace, configured: command.workspace, networkAccess: "disabled" }
        }),
        StatusBoard.layer({ daemonVersion: "bench", wireVersion: ProtocolVersion, pid: process.pid, deviceId, coreUrl: command.coreUrl }),
        Logger.layer([Logger.withConsoleError(Logger.formatLogFmt)]),
        Layer.succeed(References.MinimumLogLevel, "Warn")
      ))
    )
  )
}

export const transferPeer = async (): Promise<void> => {
  let ws: WebSocket | undefined
  let daemon: Fiber.Fiber<void, unknown> | undefined
  process.on("message", (message: TransferPeerCommand) => {
    switch (message.op) {
      case "raw":
        ws = startRaw(message.url)
        return
      case "daemon":
        daemon = startDaemon(message)
        reply({ op: "daemon-started" })
        return
      case "cpu": {
        const cpu = process.cpuUsage()
        reply({ op: "cpu", micros: cpu.user + cpu.system })
        return
      }
      case "exit":
        ws?.close()
        if (daemon === undefined) process.exit(0)
        Effect.runPromise(Fiber.interrupt(daemon)).finally(() => process.exit(0))
        return
    }
  })
  process.on("disconnect", () => process.exit(0))
  await new Promise<never>(() => {})
}
