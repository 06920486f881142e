/**
 * The dev Core end to end with the real binary over loopback: `agentwire core` + `agentwire daemon` (scripted
 * harness), driven through the operator API with SSE. Real processes and sockets, so small real waits.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { createHash } from "node:crypto"
import { readdirSync, readFileSync, rmSync } from "node:fs"
import { join } from "node:path"
import { DatabaseSync } from "node:sqlite"
import {
  type CoreProc,
  createCredential,
  eventually,
  operator,
  readSse,
  script,
  type SseEvent,
  startCore,
  startDaemon,
  stopAll,
  tempDir,
  upgradeStatus
} from "../support/devcoreLive.js"

let dir: string
let core: CoreProc
let token: string
let api: ReturnType<typeof operator>
let credentialA: { credential: string; file: string; stdout: string }

const frames = (events: ReadonlyArray<SseEvent>) =>
  events.filter((e) => e.event === "frame").map((e) => JSON.parse(e.data) as { type: string; id: string; payload: any })

const newSession = async () => {
  const created = await api.post("/sessions", { agent_kind: "scripted" })
  assert.strictEqual(created.status, 201)
  return created.body.session_id as string
}

beforeAll(async () => {
  dir = tempDir()
  core = await startCore(dir)
  token = readFileSync(join(dir, "operator-token"), "utf8").trim()
  api = operator(core.url, token)
  credentialA = await createCredential(dir, "dev-a")
  startDaemon(core.url, "dev-a", credentialA.file, join(dir, "profile-a"))
  await eventually(async () => {
    const device = await api.get("/devices/dev-a")
    return device.body?.online === true && device.body.declaration !== null ? true : undefined
  }, 25_000, "dev-a online with a declaration")
}, 60_000)

afterAll(async () => {
  await stopAll()
  rmSync(dir, { recursive: true, force: true })
}, 30_000)

describe("agentwire core (end to end)", () => {
  it("prints a created credential once and stores only its digest", () => {
    assert.match(credentialA.stdout, /^awdc_[A-Za-z0-9_-]{43}\n$/)
    const db = new DatabaseSync(join(dir, "agentwire.db"), { readOnly: true })
    try {
      const rows = db.prepare("SELECT digest FROM device_credentials WHERE device_id = 'dev-a'").all()
      assert.deepStrictEqual(rows.map((r) => r.digest), [createHash("sha256").update(credentialA.credential).digest("hex")])
    } finally {
      db.close()
    }
    const files = readdirSync(dir).filter((f) => f.startsWith("agentwire.db"))
    for (const f of files) assert.notInclude(readFileSync(join(dir, f)).toString("latin1"), credentialA.credential)
    assert.notInclude(core.stdout + core.stderr, credentialA.credential)
  })

  it("lists the device online with its declared kinds and capabilities", async () => {
    const list = await api.get("/devices")
    assert.strictEqual(list.status, 200)
    const device = list.body.devices.find((d: any) => d.device_id === "dev-a")
    assert.strictEqual(device.online, true)
    const kind = device.declaration.kinds.find((k: any) => k.kind === "scripted")
    assert.strictEqual(kind.available, true)
    assert.strictEqual(Object.keys(kind.capabilities).length, 30)
    assert.strictEqual(kind.capabilities.steering, true)
  })

  it("runs a Turn through the operator API: SSE, steer receipts, a permission and a question answered, usage, done", async () => {
    const sessionId = await newSession()
    const started = await api.post(`/sessions/${sessionId}/turns`, {
      input: script([
        { delta: "one " },
        { usage: { input_tokens: 7, output_tokens: 2 } },
        { await_steer: 1 },
        { permission: { request_id: "perm-e2e", tool: "shell", title: "list files" } },
        { ask: { ask_id: "ask-e2e", questions: [{ id: "q1", question: "Which?", options: [{ label: "a" }, { label: "b" }] }] } },
        { delta: "two" },
        { usage: { input_tokens: 9, output_tokens: 4 } }
      ])
    })
    assert.strictEqual(started.status, 202)
    const turnId = started.body.turn_id as string
    const answers: Array<unknown> = []
    const events = await readSse(core.url, token, turnId, async (event) => {
      if (event.event !== "frame") return
      const frame = JSON.parse(event.data)
      if (frame.type === "usage" && answers.length === 0) {
        const steer = await api.post(`/turns/${turnId}/steer`, { input: [{ content: [{ type: "input_text", text: "steered" }] }] })
        answers.push(steer.body)
      }
      if (frame.type === "permission_request") {
        const decision = await api.post(`/turns/${turnId}/permissions/${frame.payload.request_id}`, { approved: true })
        answers.push(decision.body)
      }
      if (frame.type === "prompt_for_user_choice") {
        // an answer naming a question that was not asked is refused before anything is sent
        const invalid = await api.post(`/turns/${turnId}/questions/${frame.payload.ask_id}`, { question_answers: [{ question_id: "nope", answers: ["a"] }] })
        assert.strictEqual(invalid.status, 400)
        const decision = await api.post(`/turns/${turnId}/questions/${frame.payload.ask_id}`, { question_answers: [{ question_id: "q1", answers: ["b"] }] })
        answers.push(decision.body)
      }
    })
    // the steer was accepted (cursor 1) and the decision applied
    assert.deepStrictEqual((answers[0] as any).status, "accepted")
    assert.deepStrictEqual((answers[0] as any).position, 1)
    assert.deepStrictEqual((answers[1] as any).outcome, "applied")
    assert.deepStrictEqual((answers[2] as any).outcome, "applied")
    // frames in order, ending with done, then the outcome as the last event
    const f = frames(events)
    const deltas = f.filter((x) => x.type === "delta").map((x) => x.payload.sequence)
    assert.deepStrictEqual(deltas, [...deltas].sort((a, b) => a - b))
    assert.strictEqual(f[f.length - 1]!.type, "done")
    const seqs = events.filter((e) => e.id !== undefined).map((e) => Number(e.id))
    assert.deepStrictEqual(seqs, seqs.map((_, i) => i + 1))
    const last = events[events.length - 1]!
    assert.strictEqual(last.event, "outcome")
    const outcome = JSON.parse(last.data).outcome
    assert.strictEqual(outcome.status, "completed")
    assert.deepStrictEqual(outcome.usage, { input_tokens: 9, output_tokens: 4 })
    // the steer receipts are journaled: written then accepted
    const facts = events.filter((e) => e.event === "fact").map((e) => JSON.parse(e.data).fact)
    assert.isAtLeast(facts.indexOf("input_written"), 0)
    assert.isBelow(facts.indexOf("input_written"), facts.indexOf("input_accepted"))
    const turn = await api.get(`/turns/${turnId}`)
    assert.strictEqual(turn.body.input_cursor, 1)
    assert.deepStrictEqual(turn.body.inputs.map((i: any) => [i.status, i.position]), [["accepted", 1]])
    assert.deepStrictEqual(turn.body.interactions.map((i: any) => [i.interaction_id, i.status, i.outcome]), [
      ["perm-e2e", "answered", "applied"],
      ["ask-e2e", "answered", "applied"]
    ])
    const read = await api.get(`/turns/${turnId}/outcome`)
    assert.strictEqual(read.body.status, "completed")
    // a replay after the end gives the same journal
    const replay = await readSse(core.url, token, turnId)
    assert.deepStrictEqual(replay.filter((e) => e.event !== "input" && e.event !== "interaction").map((e) => e.id), events.filter((e) => e.event !== "input" && e.event !== "interaction").map((e) => e.id))
  }, 30_000)

  it("cancels a running Turn: the receipt owns the outcome", async () => {
    const sessionId = await newSession()
    const started = await api.post(`/sessions/${sessionId}/turns`, { input: script([{ delta: "working" }, { hang: true }]) })
    const turnId = started.body.turn_id as string
    let cancel: any
    const events = await readSse(core.url, token, turnId, async (event) => {
      if (event.event === "frame" && JSON.parse(event.data).type === "delta" && cancel === undefined) {
        cancel = (await api.post(`/turns/${turnId}/cancel`)).body
      }
    })
    assert.strictEqual(cancel.status, "cancelled")
    assert.isString(cancel.delivery_id)
    const outcome = JSON.parse(events[events.length - 1]!.data).outcome
    assert.strictEqual(outcome.status, "cancelled")
    assert.strictEqual((await api.post(`/turns/${turnId}/cancel`)).status, 409)
  }, 30_000)

  it("refuses the operator token on the machine routes, and a daemon credential on the operator API", async () => {
    const bootstrap = await fetch(`${core.url}/api/v1/agent-daemon/bootstrap`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ device_id: "dev-a" })
    })
    assert.strictEqual(bootstrap.status, 401)
    assert.deepStrictEqual(await bootstrap.json(), { error: "bad_credential", detail: "credential rejected" })
    const upgrade = await upgradeStatus(`${core.url}/api/v1/agent-daemon/ws?device_id=dev-a&version=0.10.0`, {
      authorization: `Bearer ${token}`
    })
    assert.strictEqual(upgrade, 401)
    const status = await fetch(`${core.url}/api/v1/agent-daemon/device-status?device_id=dev-a`, { headers: { authorization: `Bearer ${token}` } })
    assert.strictEqual(status.status, 401)
    const asDaemon = await operator(core.url, credentialA.credential).get("/devices")
    assert.strictEqual(asDaemon.status, 401)
    const none = await fetch(`${core.url}/api/v1/operator/devices`)
    assert.strictEqual(none.status, 401)
  })

  it("closes a revoked device's connection and refuses it at the next connection", async () => {
    const b = await createCredential(dir, "dev-b")
    const daemon = startDaemon(core.url, "dev-b", b.file, join(dir, "profile-b"))
    await eventually(async () => ((await api.get("/devices/dev-b")).body?.online === true ? true : undefined), 25_000, "dev-b online")
    const revoked = await api.del("/devices/dev-b/credential")
    assert.deepStrictEqual(revoked.body, { device_id: "dev-b", revoked: true, disconnected: true })
    // 4001 "runtime retired" is permanent for the daemon: it exits with 3 and does not reconnect
    assert.strictEqual(await daemon.exited, 3)
    assert.notInclude(daemon.stderr + daemon.stdout, b.credential)
    // the next connection with the revoked credential is refused before any upgrade
    const bootstrap = await fetch(`${core.url}/api/v1/agent-daemon/bootstrap`, {
      method: "POST",
      headers: { authorization: `Bearer ${b.credential}`, "content-type": "application/json" },
      body: JSON.stringify({ device_id: "dev-b" })
    })
    assert.strictEqual(bootstrap.status, 401)
    const upgrade = await upgradeStatus(`${core.url}/api/v1/agent-daemon/ws?device_id=dev-b&version=0.10.0`, {
      authorization: `Bearer ${b.credential}`
    })
    assert.strictEqual(upgrade, 401)
    const device = await api.get("/devices/dev-b")
    assert.deepStrictEqual([device.body.online, device.body.revoked, device.body.has_credential], [false, true, false])
  }, 60_000)

  it("records a Turn in flight when Core restarts as failed (event_stream_incomplete, core_restarted), keeping its events", async () => {
    const sessionId = await newSession()
    const started = await api.post(`/sessions/${sessionId}/turns`, { input: script([{ delta: "before the restart" }, { hang: true }]) })
    const turnId = started.body.turn_id as string
    await eventually(async () => {
      const turn = await api.get(`/turns/${turnId}`)
      return turn.body.status === "running" && turn.body.dispatched_at_ms !== null ? true : undefined
    }, 20_000, "the Turn to run")
    // wait until the delta frame is journaled, then kill Core without any cleanup
    await readSse(core.url, token, turnId, (e) => (e.event === "frame" && JSON.parse(e.data).type === "delta" ? "stop" : undefined))
    core.child.kill("SIGKILL")
    await core.exited
    core = await startCore(dir, core.port)
    const turn = await api.get(`/turns/${turnId}`)
    assert.strictEqual(turn.body.status, "failed")
    assert.strictEqual(turn.body.outcome.error_code, "event_stream_incomplete")
    assert.strictEqual(turn.body.outcome.observation, "core_restarted")
    assert.isUndefined(turn.body.outcome.engine_error_code)
    const replay = await readSse(core.url, token, turnId)
    assert.deepStrictEqual(frames(replay).map((f) => f.type).filter((t) => t === "delta"), ["delta"])
    assert.strictEqual(replay[replay.length - 1]!.event, "outcome")
  }, 60_000)
})
