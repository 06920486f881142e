/**
 * Suspension fencing end to end: the dev Core in this process (operator routes, the persisted attempts, the
 * gateway's suspension driver) and the real daemon binary bound to a temporary workspace. Quiesce through the
 * operator API; the daemon persists the suspend id in its profile, closes, reconnects fenced, survives a restart
 * fenced, and reopens admission only with the resume; the device listing shows each state. Real processes,
 * sockets and files, so real time.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Effect, Exit, Option, Redacted } from "effect"
import { existsSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import * as DevCore from "../../src/core/dev/DevCore.js"
import { Files } from "../../src/core/dev/Files.js"
import { eventually, operator as operatorClient, type Proc, run } from "../support/devcoreLive.js"
import { type InProcessDevCore, startInProcessDevCore } from "../support/inProcessDevCore.js"

const EnvironmentId = "7b2e1d3c-4a5f-4e6d-9c8b-1a2b3c4d5e6f"
const DeviceId = "dev-susp"
const token = Redacted.make("awop_suspension-e2e-token")

let core: InProcessDevCore
let sessionId: string
let api: ReturnType<typeof operatorClient>
let daemon: Proc

const runIn = <A, E>(effect: Effect.Effect<A, E, DevCore.DevCoreServices>) => core.runIn(effect)
const profile = () => join(core.dir, "profile")
const stateFile = () => join(profile(), "suspension.json")
const startDaemon = () => run(core.daemonArgs)

const device = async () => (await api.get(`/devices/${DeviceId}`)).body
/** Waits until the device is online on a connection numbered above `after`. */
const onlineAfter = (after: number) =>
  eventually(async () => {
    const d = await device()
    return d.online === true && typeof d.connection_number === "number" && d.connection_number > after ? d : undefined
  }, 25_000, `${DeviceId} online after connection ${after}`)

beforeAll(async () => {
  core = await startInProcessDevCore({
    name: "susp",
    deviceId: DeviceId,
    environmentId: EnvironmentId,
    operatorToken: token,
    seed: (root) => writeFileSync(join(root, "README.md"), "hello, suspension\n")
  })
  api = operatorClient(core.url, Redacted.value(token))
  daemon = startDaemon()
  await core.declared()
  sessionId = await core.createSession()
}, 60_000)

afterAll(() => core?.close(), 30_000)

describe("suspension fencing against the real daemon", () => {
  it("quiesce, fenced reconnect, fenced restart, resume; refusals are definite and nothing is replayed", async () => {
    assert.strictEqual((await device()).suspension, null)
    const before = (await device()).connection_number as number

    // Nothing to resume yet.
    const early = await api.post(`/devices/${DeviceId}/resume`, {})
    assert.strictEqual(early.status, 409)
    assert.strictEqual(early.body.error, "not_suspended")

    // Another Environment: the Runtime refuses definitely; nothing is suspended.
    const wrong = await api.post(`/devices/${DeviceId}/quiesce`, { environment_id: "another-environment" })
    assert.strictEqual(wrong.status, 200)
    assert.strictEqual(wrong.body.state, "quiesce_rejected")
    assert.strictEqual(wrong.body.reason, "invalid_request")
    assert.isFalse(existsSync(stateFile()))

    const quiesced = await api.post(`/devices/${DeviceId}/quiesce`, { environment_id: EnvironmentId })
    assert.strictEqual(quiesced.status, 200, JSON.stringify(quiesced.body))
    assert.strictEqual(quiesced.body.state, "suspended")
    const suspendId = quiesced.body.suspend_id as string
    const persisted = JSON.parse(readFileSync(stateFile(), "utf8"))
    assert.deepStrictEqual(persisted.suspended, { environment_id: EnvironmentId, suspend_id: suspendId })

    // The daemon closed and reconnected, fenced; a second quiesce is refused locally while one is unsettled.
    const fenced = await onlineAfter(before)
    assert.strictEqual(fenced.suspension.state, "suspended")
    const again = await api.post(`/devices/${DeviceId}/quiesce`, { environment_id: EnvironmentId })
    assert.strictEqual(again.status, 409)
    assert.strictEqual(again.body.error, "suspension_unsettled")

    // A restart keeps the fence: the new process reads the suspend id from its profile.
    daemon.child.kill("SIGTERM")
    await daemon.exited
    daemon = startDaemon()
    const restarted = await onlineAfter(0)
    assert.isTrue(existsSync(stateFile()))

    const resumed = await api.post(`/devices/${DeviceId}/resume`, {})
    assert.strictEqual(resumed.status, 200, JSON.stringify(resumed.body))
    assert.strictEqual(resumed.body.state, "resumed")
    assert.strictEqual(resumed.body.suspend_id, suspendId)
    assert.strictEqual(JSON.parse(readFileSync(stateFile(), "utf8")).suspended, null)
    assert.strictEqual((await device()).connection_number, restarted.connection_number, "the resume reopened this connection")

    // Admission is open again: a Files read runs a read-only preparation on the daemon.
    const file = await runIn(Effect.flatMap(Files, (f) => f.read(sessionId, "README.md", 1024)))
    assert.isTrue(Exit.isSuccess(file), String(file))
    if (Exit.isSuccess(file)) assert.strictEqual(Buffer.from(file.value.data).toString("utf8"), "hello, suspension\n")
    assert.strictEqual((await device()).suspension.state, "resumed")
    assert.isTrue(Option.isSome(Option.fromNullishOr((await api.get("/devices")).body.devices.find((d: { device_id: string }) => d.device_id === DeviceId)?.suspension)))
  }, 120_000)
})
