/**
 * Transfer suite (issue #14): `runtime_prepare` file throughput with a receipt per 64 KiB chunk over loopback,
 * in one process — the real gateway (`GatewayServer` on 127.0.0.1) with Core's `RuntimePrepare` driver, and the
 * real daemon (`Daemon.run`, production Connector, bound to a temporary workspace) whose `Transfer` service
 * stages, hashes and installs the file. Baseline: raw `ws` with the same request / receipt pattern (a JSON frame
 * with 64 KiB of base64 data, a small JSON receipt back, the next chunk only after it), the same process and the
 * same body size. Target: ≥ 100 MB/s (decimal) on the median.
 */
import { mkdtempSync, realpathSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type { AddressInfo } from "node:net"
import { WebSocket, WebSocketServer } from "ws"
import { randomUUID } from "node:crypto"
import * as RuntimePrepare from "../../src/core/prepare/RuntimePrepare.js"
import { Ids } from "../../src/proto/index.js"
import { figure, type Figure } from "../lib/figures.js"
import type { Suite, SuiteContext, SuiteResult } from "../lib/suite.js"
import { makeDevices, sessionOf, startCore, watchDeclared } from "../support/core.js"
import { startInProcessDaemon } from "../support/inProcessDaemon.js"

const Chunk = 64 * 1024
const EnvironmentId = "a2d4f6e8-1b3c-4d5e-9f70-8a9b0c1d2e3f"
const SessionId = "5f0c2d8e-9a41-4b37-8e6d-1c2f3a4b5d6e"

/** Raw `ws`: one server that answers each chunk frame with a small receipt; resolves with MB/s of one body. */
const rawTransfer = async (body: Uint8Array): Promise<number> => {
  const server = new WebSocketServer({ host: "127.0.0.1", port: 0, maxPayload: 4 * 1024 * 1024, perMessageDeflate: false })
  await new Promise<void>((resolve) => server.once("listening", () => resolve()))
  server.on("connection", (socket) => {
    let received = 0
    socket.on("message", (data) => {
      const frame = JSON.parse(String(data)) as { payload: { step: string; data?: string } }
      if (frame.payload.step === "chunk") received += Buffer.from(frame.payload.data ?? "", "base64").length
      socket.send(JSON.stringify({ type: "runtime_prepare_result", id: "t", payload: { outcome: "received", offset: received } }))
    })
  })
  const port = (server.address() as AddressInfo).port
  const client = new WebSocket(`ws://127.0.0.1:${port}`, { perMessageDeflate: false })
  await new Promise<void>((resolve, reject) => {
    client.once("open", () => resolve())
    client.once("error", reject)
  })
  const roundTrip = (text: string) =>
    new Promise<void>((resolve) => {
      client.once("message", () => resolve())
      client.send(text)
    })
  const t0 = performance.now()
  for (let offset = 0; offset < body.length; offset += Chunk) {
    const data = Buffer.from(body.subarray(offset, offset + Chunk)).toString("base64")
    await roundTrip(JSON.stringify({ type: "runtime_prepare", id: "t", payload: { step: "chunk", offset, data } }))
  }
  await roundTrip(JSON.stringify({ type: "runtime_prepare", id: "t", payload: { step: "commit" } }))
  const seconds = (performance.now() - t0) / 1000
  client.close()
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return body.length / 1e6 / seconds
}

export const transferSuite: Suite = {
  name: "transfer",
  describe: "runtime_prepare file throughput, a receipt per 64 KiB chunk, gateway ⇄ daemon over loopback vs raw ws",
  run: async (ctx: SuiteContext): Promise<SuiteResult> => {
    const rounds = ctx.quick ? 3 : 7
    const size = (ctx.quick ? 8 : 32) * 1024 * 1024
    const body = Uint8Array.from({ length: size }, (_, i) => (i * 2654435761) >>> 24)
    const workspace = realpathSync(mkdtempSync(join(tmpdir(), "agentwire-bench-ws-")))
    const [device] = makeDevices("bench-transfer", 1)
    const core = await startCore([device!])
    const declared = watchDeclared(core, device!.deviceId)
    await declared.ready
    const daemon = startInProcessDaemon(core, device!, EnvironmentId, workspace)
    try {
      await declared.declared
      const session = await sessionOf(core, device!.deviceId)
      const wire: Array<number> = []
      const raw: Array<number> = []
      // One warm-up of each, then paired rounds (wire, then raw, in the same round).
      const once = async () => {
        const t0 = performance.now()
        await core.runtime.runPromise(RuntimePrepare.prepare(session, {
          transferId: Ids.unsafeMake.transferId(randomUUID()),
          environmentId: EnvironmentId,
          sessionId: SessionId,
          step: { action: "file", path: "/workspace/bench/body.bin", body }
        }))
        return size / 1e6 / ((performance.now() - t0) / 1000)
      }
      await once()
      await rawTransfer(body)
      for (let i = 0; i < rounds; i++) {
        wire.push(await once())
        raw.push(await rawTransfer(body))
        ctx.log(`transfer round ${i + 1}/${rounds}: ${wire.at(-1)!.toFixed(0)} MB/s (raw ws ${raw.at(-1)!.toFixed(0)} MB/s)`)
      }
      const figures: Array<Figure> = [figure({
        suite: "transfer",
        name: `runtime_prepare file, ${size / 1024 / 1024} MiB, receipt per 64 KiB`,
        unit: "MB/s",
        samples: wire,
        baseline: { name: "raw ws, same request/receipt pattern", samples: raw },
        target: { on: "value", op: ">=", value: 100 }
      })]
      return {
        figures,
        notes: [
          "transfer: gateway + RuntimePrepare driver and the daemon (staging file, SHA-256, fsync + atomic rename) in one process over loopback; " +
            "the raw ws baseline moves the same JSON/base64 chunk frames with one receipt each and does no disk or hashing work"
        ]
      }
    } finally {
      await daemon.stop()
      await core.dispose()
      rmSync(workspace, { recursive: true, force: true })
    }
  }
}
