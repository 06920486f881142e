/**
 * Issue #17's hostile-connection report, end to end against the real binary: 1,100 idle unauthenticated TCP
 * sockets used to exhaust a Core limited to 1,024 file descriptors, so no bootstrap or operator request got an
 * answer. `agentwire core` runs here under `ulimit -n 1024`; while 1,100 idle sockets are open against it, a
 * daemon bootstrap and an operator request are still answered, because at most 256 unauthenticated
 * connections are held (the oldest is evicted; docs/gateway.md), leaving descriptors for authenticated work.
 * Every wait is an event (a socket's connect or close, a response); the fetches carry a hang guard only.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { existsSync, readFileSync, rmSync } from "node:fs"
import { connect, type Socket } from "node:net"
import { join } from "node:path"
import { type CoreProc, createCredential, operator, startCore, stopAll, tempDir } from "../support/devcoreLive.js"

const IdleSockets = 1_100
const FileLimit = 1_024

let dir: string
let core: CoreProc
let token: string
let credential: string
const sockets: Array<Socket> = []

beforeAll(async () => {
  dir = tempDir("agentwire-hostile-")
  // Generous waits: starting a process is slow on a loaded machine, and nothing here measures it.
  core = await startCore(dir, 0, { nofile: FileLimit, listenWithinMs: 90_000 })
  token = readFileSync(join(dir, "operator-token"), "utf8").trim()
  credential = (await createCredential(dir, "dev-1")).credential
}, 180_000)

afterAll(async () => {
  for (const socket of sockets) socket.destroy()
  await stopAll()
  rmSync(dir, { recursive: true, force: true })
}, 30_000)

/** Opens one raw TCP socket that never sends a byte; resolves once connected (or refused / reset). */
const idle = () =>
  new Promise<"connected" | "failed">((done) => {
    const socket = connect({ host: "127.0.0.1", port: core.port })
    sockets.push(socket)
    socket.on("error", () => done("failed"))
    socket.once("connect", () => done("connected"))
  })

describe("Core under 1,100 idle unauthenticated sockets with 1,024 file descriptors (end to end)", () => {
  it("still answers a daemon bootstrap and an operator request, and keeps running", async () => {
    const limits = `/proc/${core.child.pid}/limits`
    if (existsSync(limits)) assert.match(readFileSync(limits, "utf8"), new RegExp(`Max open files\\s+${FileLimit}\\s+${FileLimit}`))
    // In batches, so the listen backlog is never the limit being tested.
    const results: Array<"connected" | "failed"> = []
    for (let i = 0; i < IdleSockets; i += 100) {
      results.push(...await Promise.all(Array.from({ length: Math.min(100, IdleSockets - i) }, idle)))
    }
    assert.strictEqual(results.filter((r) => r === "connected").length, IdleSockets, "every idle socket was accepted")

    const bootstrap = await fetch(`${core.url}/api/v1/agent-daemon/bootstrap`, {
      method: "POST",
      headers: { authorization: `Bearer ${credential}`, "content-type": "application/json" },
      body: JSON.stringify({ device_id: "dev-1" }),
      signal: AbortSignal.timeout(20_000)
    })
    assert.strictEqual(bootstrap.status, 200)
    assert.strictEqual((await bootstrap.json() as { device_id: string }).device_id, "dev-1")

    const device = await operator(core.url, token).get("/devices/dev-1")
    assert.strictEqual(device.status, 200)

    assert.strictEqual(core.child.exitCode, null, "Core is still running")
    assert.notInclude(core.stderr + core.stdout, "EMFILE")
  }, 120_000)
})
