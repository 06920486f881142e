/**
 * Child role `runtime-peer`: the Runtime's side of the relay and latency benches, one process that plays both
 * the real daemon and the raw `ws` baseline, so both paths run between the same two processes.
 *
 * - Daemon: `Daemon.run` with the production Connector (bootstrap + WebSocket dial), `RuntimeProcess.layer`
 *   (the built-in `scripted` harness plus `stamped`, the scripted harness whose deltas carry the
 *   CLOCK_MONOTONIC nanoseconds at which the harness emitted them) and the StatusBoard: the same modules the
 *   `agentwire daemon` binary composes (without its local status socket).
 * - Raw: a plain `ws` client that answers commands from the bench's raw server: `burst` (N prebuilt frames as
 *   fast as `ws` takes them), `paced` (N stamped frames, one every `intervalMs`) and `echo` (round trips).
 *
 * Configuration (including the bench credential) arrives over the IPC channel, never in argv or the environment.
 */
import { Effect, Fiber, Layer, Logger, Redacted } from "effect"
import WebSocket from "ws"
import { Ids } from "../../src/proto/index.js"
import { ProtocolVersion } from "../../src/proto/Version.js"
import * as Daemon from "../../src/runtime/Daemon.js"
import type { Harness } from "../../src/runtime/harness/Harness.js"
import { makeScriptedHarness } from "../../src/runtime/harness/scripted/ScriptedHarness.js"
import { ScriptedSignals } from "../../src/runtime/harness/scripted/ScriptedSignals.js"
import * as RuntimeProcess from "../../src/runtime/RuntimeProcess.js"
import { StatusBoard } from "../../src/runtime/StatusBoard.js"
import { Connector } from "../../src/runtime/transport/Connector.js"
import { loggerFor } from "../../src/bin/Logging.js"
import { relayDiag } from "./relayDiag.js"

export const StampedKind = "stamped"

/**
 * Paired latency (docs/performance.md "Latency"): while set, each stamped delta is also sent over the raw `ws`
 * connection with the same stamp at the same moment (id `paired`), and again 1 ms later (id `delayed`, the
 * negative control: a path with a known added delay), so Core can take the difference frame by frame.
 */
let pairWith: WebSocket | undefined

const sendPaired = (stamp: string) => {
  const ws = pairWith
  if (ws === undefined) return
  ws.send(JSON.stringify({ type: "delta", id: "paired", payload: { delta: stamp, sequence: 1 } }))
  setTimeout(() => ws.send(JSON.stringify({ type: "delta", id: "delayed", payload: { delta: stamp, sequence: 1 } })), 1)
}

/** The scripted harness under another kind, with each delta's text replaced by its emission time (ns). */
const stampedHarness = (inner: Harness): Harness => ({
  declaration: { ...inner.declaration, kind: StampedKind },
  prepare: (request) =>
    Effect.map(inner.prepare(request), (executor) => ({
      ...executor,
      startTurn: (runId, input, sink) =>
        executor.startTurn(runId, input, {
          emit: (event) =>
            event.type === "delta"
              ? Effect.suspend(() => {
                const stamp = String(process.hrtime.bigint())
                return Effect.tap(sink.emit({ ...event, delta: stamp }), () => Effect.sync(() => sendPaired(stamp)))
              })
              : sink.emit(event)
        })
    }))
})

export type PeerCommand =
  | { readonly op: "raw"; readonly url: string }
  | {
    readonly op: "daemon"
    readonly coreUrl: string
    readonly deviceId: string
    readonly credential: string
    /** The daemon's capacity (`--max-active`; default 4) and idle Executor bound (default 16). */
    readonly maxActive?: number
    readonly maxIdleExecutors?: number
  }
  /** Turns paired sending of stamped deltas over raw `ws` on or off (see `pairWith`). */
  | { readonly op: "pair"; readonly on: boolean }
  /** This process's CPU time so far: `{op: "cpu", micros}`. */
  | { readonly op: "cpu" }
  | { readonly op: "exit" }

export type PeerReply =
  | { readonly op: "raw-ready" }
  | { readonly op: "daemon-started" }
  | { readonly op: "paired"; readonly on: boolean }
  | { readonly op: "cpu"; readonly micros: number; readonly systemMicros: number }
  | { readonly op: "error"; readonly message: string }

const reply = (message: PeerReply) => process.send?.(message)

const startRaw = (url: string) => {
  const ws = new WebSocket(url, { perMessageDeflate: false })
  ws.on("open", () => reply({ op: "raw-ready" }))
  ws.on("error", (e) => reply({ op: "error", message: `raw ws: ${e.message}` }))
  ws.on("message", (data) => {
    const command = JSON.parse(String(data)) as
      | { readonly cmd: "burst-delta"; readonly n: number; readonly runId: string; readonly text: string }
      | { readonly cmd: "burst-batched"; readonly n: number; readonly runId: string; readonly text: string; readonly batch: number }
      | { readonly cmd: "paced"; readonly n: number; readonly intervalMs: number; readonly runId: string }
      | { readonly cmd: "echo"; readonly t: number }
    switch (command.cmd) {
      case "burst-delta": {
        // Prebuilt before the first send: the baseline is what the socket carries, nothing else.
        const frames = Array.from({ length: command.n }, (_, i) =>
          JSON.stringify({ type: "delta", id: command.runId, payload: { delta: command.text, sequence: i + 1 } }))
        for (const frame of frames) ws.send(frame)
        return
      }
      case "burst-batched": {
        // The daemon's discipline (Runs.forward + ws.ts sendAll): up to `batch` frames written with the TCP
        // socket corked (one writev), the next batch only after the last frame's write callback.
        const frames = Array.from({ length: command.n }, (_, i) =>
          JSON.stringify({ type: "delta", id: command.runId, payload: { delta: command.text, sequence: i + 1 } }))
        const tcp = (ws as unknown as { readonly _socket?: { cork: () => void; uncork: () => void } })._socket
        let at = 0
        const nextBatch = () => {
          const end = Math.min(frames.length, at + command.batch)
          if (at >= end) return
          tcp?.cork()
          try {
            for (let i = at; i < end - 1; i++) ws.send(frames[i]!)
            ws.send(frames[end - 1]!, () => nextBatch())
          } finally {
            tcp?.uncork()
          }
          at = end
        }
        nextBatch()
        return
      }
      case "paced": {
        let i = 0
        const next = () => {
          i++
          ws.send(JSON.stringify({
            type: "delta",
            id: command.runId,
            payload: { delta: String(process.hrtime.bigint()), sequence: i }
          }))
          if (i < command.n) setTimeout(next, command.intervalMs)
        }
        next()
        return
      }
      case "echo":
        ws.send(data, { binary: false })
        return
      default:
        return
    }
  })
  return ws
}

const startDaemon = (command: Extract<PeerCommand, { op: "daemon" }>) => {
  const deviceId = Ids.unsafeMake.deviceId(command.deviceId)
  const program = Effect.gen(function* () {
    const scripted = yield* makeScriptedHarness({})
    const services = Layer.mergeAll(
      Connector.layer({
        apiBase: `${command.coreUrl}/api/v1`,
        deviceId,
        credential: Redacted.make(command.credential),
        userAgent: "agentwire-bench"
      }),
      RuntimeProcess.layer({
        harnesses: [stampedHarness(scripted)],
        ...(command.maxActive === undefined ? {} : { maxActive: command.maxActive }),
        ...(command.maxIdleExecutors === undefined ? {} : { maxIdleExecutors: command.maxIdleExecutors })
      }),
      StatusBoard.layer({
        daemonVersion: "bench",
        wireVersion: ProtocolVersion,
        pid: process.pid,
        deviceId,
        coreUrl: command.coreUrl
      })
    )
    return yield* Daemon.run({ deviceId, coreOrigin: command.coreUrl }).pipe(Effect.provide(services))
  }).pipe(
    Effect.provide(Layer.mergeAll(ScriptedSignals.layer, Logger.layer([loggerFor("text")])))
  )
  return Effect.runFork(program)
}

export const runtimePeer = async (): Promise<void> => {
  let ws: WebSocket | undefined
  let daemon: Fiber.Fiber<void, unknown> | undefined
  const diag = relayDiag(() => (daemon === undefined ? "raw" : "daemon"))
  process.on("message", (message: PeerCommand) => {
    switch (message.op) {
      case "raw":
        ws = startRaw(message.url)
        return
      case "daemon":
        daemon = startDaemon(message)
        reply({ op: "daemon-started" })
        return
      case "pair":
        pairWith = message.on ? ws : undefined
        reply({ op: "paired", on: message.on })
        return
      case "cpu": {
        const cpu = process.cpuUsage()
        reply({ op: "cpu", micros: cpu.user + cpu.system, systemMicros: cpu.system })
        diag()
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
