/**
 * Transfer suite (issue #14): `runtime_prepare` file throughput with a receipt per 64 KiB chunk over loopback,
 * between two processes as in a deployment (Core and the daemon on two cores): this process runs the real
 * gateway (`GatewayServer` on 127.0.0.1) with Core's `RuntimePrepare` driver; the `transfer-peer` child runs the
 * real daemon (`Daemon.run`, production Connector, bound to a temporary workspace) whose `Transfer` service
 * stages, hashes and installs the file.
 *
 * Baseline: raw `ws` between the same two processes with the same roles and request / receipt pattern: this
 * process's server sends a JSON frame with 64 KiB of base64 data (unmasked, as Core's gateway does; built as Core
 * builds its chunk frames, `support/rawFrames.ts`), the child's
 * client decodes it and answers with a small JSON receipt (masked, as the daemon's are); the next chunk only after
 * it; the same body size. Target: ≥ 100 MB/s (decimal) on the median. Beside it, not judged: both processes' CPU
 * per byte of each contender (MB per CPU-second), which the machine's load moves less than wall-clock.
 */
import { mkdtempSync, realpathSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type { AddressInfo } from "node:net"
import { type WebSocket, WebSocketServer } from "ws"
import { randomUUID } from "node:crypto"
import * as RuntimePrepare from "../../src/core/prepare/RuntimePrepare.js"
import { Ids } from "../../src/proto/index.js"
import { figure, type Figure } from "../lib/figures.js"
import type { Suite, SuiteContext, SuiteResult } from "../lib/suite.js"
import { makeDevices, sessionOf, startCore, watchDeclared } from "../support/core.js"
import { op, spawnChild, withTimeout } from "../support/processes.js"
import { chunkFrame, textFrame } from "../support/rawFrames.js"

const Chunk = 64 * 1024
const EnvironmentId = "a2d4f6e8-1b3c-4d5e-9f70-8a9b0c1d2e3f"
const SessionId = "5f0c2d8e-9a41-4b37-8e6d-1c2f3a4b5d6e"

/** The raw contender's server side (Core's role): the child dials it once; `transfer` moves one body. */
const startRawCore = async () => {
  const server = new WebSocketServer({ host: "127.0.0.1", port: 0, maxPayload: 4 * 1024 * 1024, perMessageDeflate: false })
  await new Promise<void>((resolve) => server.once("listening", () => resolve()))
  let peer: WebSocket | undefined
  const connected = new Promise<void>((resolve) =>
    server.once("connection", (socket) => {
      peer = socket
      resolve()
    }))
  const roundTrip = (frame: string | Buffer) =>
    new Promise<void>((resolve) => {
      peer!.once("message", () => resolve())
      peer!.send(frame, textFrame)
    })
  return {
    url: `ws://127.0.0.1:${(server.address() as AddressInfo).port}`,
    connected,
    transfer: async (body: Uint8Array) => {
      for (let offset = 0; offset < body.length; offset += Chunk) {
        // Built as Core builds its chunk frames (`rawFrames.ts`).
        const part = body.subarray(offset, Math.min(body.length, offset + Chunk))
        await roundTrip(chunkFrame({ type: "runtime_prepare", id: "t", payload: { step: "chunk", offset } }, part))
      }
      await roundTrip(JSON.stringify({ type: "runtime_prepare", id: "t", payload: { step: "commit" } }))
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve()))
  }
}

const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

export const transferSuite: Suite = {
  name: "transfer",
  describe: "runtime_prepare file throughput, a receipt per 64 KiB chunk, gateway ⇄ daemon (two processes) over loopback vs raw ws",
  run: async (ctx: SuiteContext): Promise<SuiteResult> => {
    const rounds = ctx.quick ? 3 : 7
    const size = (ctx.quick ? 8 : 32) * 1024 * 1024
    const body = Uint8Array.from({ length: size }, (_, i) => (i * 2654435761) >>> 24)
    const workspace = realpathSync(mkdtempSync(join(tmpdir(), "agentwire-bench-ws-")))
    const [device] = makeDevices("bench-transfer", 1)
    const core = await startCore([device!])
    const raw = await startRawCore()
    const child = spawnChild(ctx.self, "transfer-peer")
    try {
      child.send({ op: "raw", url: raw.url })
      await Promise.all([raw.connected, child.next(op("raw-ready"))])
      const declared = watchDeclared(core, device!.deviceId)
      await declared.ready
      child.send({ op: "daemon", coreUrl: core.baseUrl, deviceId: device!.deviceId, credential: device!.credential, environmentId: EnvironmentId, workspace })
      await withTimeout(declared.declared, 30_000, `the daemon's first heartbeat (log: ${child.logFile})`)
      const session = await sessionOf(core, device!.deviceId)
      const cpuOf = async () => {
        child.send({ op: "cpu" })
        const peer = (await child.next(op("cpu")))["micros"] as number
        const self = process.cpuUsage()
        return peer + self.user + self.system
      }
      /** MB/s (wall) and MB per CPU-second (both processes) of one body. */
      const measure = async (f: () => Promise<unknown>) => {
        const cpu0 = await cpuOf()
        const t0 = performance.now()
        await f()
        const seconds = (performance.now() - t0) / 1000
        const cpu = ((await cpuOf()) - cpu0) / 1e6
        return { wall: size / 1e6 / seconds, perCpu: size / 1e6 / cpu }
      }
      const daemonOnce = () =>
        core.runtime.runPromise(RuntimePrepare.prepare(session, {
          transferId: Ids.unsafeMake.transferId(randomUUID()),
          environmentId: EnvironmentId,
          sessionId: SessionId,
          step: { action: "file", path: "/workspace/bench/body.bin", body }
        }))
      const wire = { wall: [] as Array<number>, perCpu: [] as Array<number> }
      const base = { wall: [] as Array<number>, perCpu: [] as Array<number> }
      // One warm-up of each, then paired rounds (the order alternates per round).
      await daemonOnce()
      await raw.transfer(body)
      for (let i = 0; i < rounds; i++) {
        const runs: Array<[typeof wire, () => Promise<unknown>]> = [[wire, daemonOnce], [base, () => raw.transfer(body)]]
        if (i % 2 === 1) runs.reverse()
        for (const [into, f] of runs) {
          const m = await measure(f)
          into.wall.push(m.wall)
          into.perCpu.push(m.perCpu)
        }
        ctx.log(
          `transfer round ${i + 1}/${rounds}: ${wire.wall.at(-1)!.toFixed(0)} MB/s, ${wire.perCpu.at(-1)!.toFixed(0)} MB/CPU-s ` +
            `(raw ws ${base.wall.at(-1)!.toFixed(0)} MB/s, ${base.perCpu.at(-1)!.toFixed(0)} MB/CPU-s)`
        )
      }
      const figures: Array<Figure> = [
        figure({
          suite: "transfer",
          name: `runtime_prepare file, ${size / 1024 / 1024} MiB, receipt per 64 KiB`,
          unit: "MB/s",
          samples: wire.wall,
          baseline: { name: "raw ws, same request/receipt pattern, same two processes", samples: base.wall },
          target: { on: "value", op: ">=", value: 100 }
        }),
        figure({
          suite: "transfer",
          name: `runtime_prepare file, ${size / 1024 / 1024} MiB: bytes per CPU-second (both processes)`,
          unit: "MB/CPU-s",
          samples: wire.perCpu,
          baseline: { name: "raw ws, same request/receipt pattern, same two processes", samples: base.perCpu }
        })
      ]
      return {
        figures,
        notes: [
          "transfer: gateway + RuntimePrepare driver in the bench process, the daemon (staging file, SHA-256, fsync + atomic rename) in the " +
            "transfer-peer child, over loopback; the raw ws baseline runs between the same two processes with the same roles (server sends the " +
            `chunks, the child decodes each and answers) and does no disk or hashing work. CPU medians: daemon ${median(wire.perCpu).toFixed(1)}, ` +
            `raw ${median(base.perCpu).toFixed(1)} MB/CPU-s`
        ]
      }
    } finally {
      await child.stop()
      await raw.close()
      await core.dispose()
      rmSync(workspace, { recursive: true, force: true })
    }
  }
}
