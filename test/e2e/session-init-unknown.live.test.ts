/**
 * `initialization_unknown` against the real binary (issue #14): a Session's setup command is running on the
 * daemon (its commit was sent) when the daemon is killed (SIGKILL: no reply, no close handshake). The dev Core
 * cannot know whether the command ran to the end, so the initialization is `unknown` — never `failed` — the
 * first Turn fails with `initialization_unknown`, and a later Turn is refused rather than replaying the step.
 * Real processes and sockets, so small real waits (each bounded).
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { existsSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { type BoundDevCore, startBoundDevCore, turnFinished } from "../support/boundDevCore.js"
import { eventually, script } from "../support/devcoreLive.js"

const EnvironmentId = "3c9e1f7a-2b4d-4e6f-8a1c-5d7e9f0b2c4a"

let stack: BoundDevCore

beforeAll(async () => {
  stack = await startBoundDevCore({ name: "init-unknown", deviceId: "dev-init-unknown", environmentId: EnvironmentId })
}, 60_000)

afterAll(async () => {
  // The killed daemon's setup command waits for this file; let it end.
  if (stack !== undefined) {
    writeFileSync(join(stack.workspace, ".go"), "")
    await new Promise((r) => setTimeout(r, 300))
  }
  await stack?.close()
}, 30_000)

describe("Session initialization: the daemon dies mid-setup", () => {
  it("the step and the Turn are unknown (initialization_unknown), never failed; nothing is replayed", async () => {
    const { api } = stack
    const created = await api.post("/sessions", {
      agent_kind: "scripted",
      device_id: "dev-init-unknown",
      environment: stack.binding(),
      // Bounded (60 s) so an orphan left by the killed daemon always ends, even if the workspace is gone.
      initialization: { setup: { command: "touch .started; i=0; while [ ! -f .go ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done" } }
    })
    assert.strictEqual(created.status, 201, JSON.stringify(created.body))
    const id = created.body.session_id
    const started = await api.post(`/sessions/${id}/turns`, { input: script([{ text: "never" }]) })
    assert.strictEqual(started.status, 202, JSON.stringify(started.body))
    await eventually(async () => {
      const s = await api.get(`/sessions/${id}`)
      return s.body.initialization.steps[0].state === "running" ? true : undefined
    }, 20_000, "the setup step to run")
    // The command itself runs (so its commit was sent and received): only now is the outcome uncertain. A kill
    // before the commit is a definite failure (nothing can have run), which is not this test.
    await eventually(async () => (existsSync(join(stack.workspace, ".started")) ? true : undefined), 20_000, "the setup command to start")

    stack.daemon.child.kill("SIGKILL")
    await stack.daemon.exited

    const turn = await turnFinished(api, started.body.turn_id, 30_000)
    assert.strictEqual(turn.status, "failed")
    assert.strictEqual(turn.outcome.error_code, "initialization_unknown", JSON.stringify(turn.outcome))
    const session = await api.get(`/sessions/${id}`)
    assert.strictEqual(session.body.initialization.state, "unknown")
    assert.notStrictEqual(session.body.initialization.steps[0].state, "failed")
    const again = await api.post(`/sessions/${id}/turns`, { input: script([{ text: "never" }]) })
    assert.deepStrictEqual([again.status, again.body.error], [409, "initialization_unknown"])
  }, 90_000)
})
