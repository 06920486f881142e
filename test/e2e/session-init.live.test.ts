/**
 * Session initialization end to end with the real binary (issue #14): `agentwire core` + `agentwire daemon`
 * bound to a workspace; Sessions created with an `initialization` (files, a skill, env, a setup command) through
 * the API and through `agentwire sessions create --init-*`; the first Turn waits for it, reads the installed
 * file and completes; progress is visible in `GET /sessions/:id` and on the Turn's SSE stream; a failing setup
 * command fails the first Turn with `initialization_failed` and refuses later ones. Real processes, sockets
 * and files, so small real waits (each bounded).
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { skillZip } from "../support/zipWriter.js"
import { type BoundDevCore, startBoundDevCore, turnFinished } from "../support/boundDevCore.js"
import { type CoreProc, eventually, readSse, runToEnd, script, tempDir } from "../support/devcoreLive.js"

const EnvironmentId = "7d1e4c2a-9b3f-4a6e-8c5d-2f0a1b3c4d5e"
const Secret = "marker-value-not-to-be-returned"
const FileText = "installed before the first Turn\n"

let stack: BoundDevCore
let dir: string
let workspace: string
let core: CoreProc
let token: string
let api: BoundDevCore["api"]

const binding = () => stack.binding()
const finished = (turnId: string) => turnFinished(api, turnId, 30_000)

beforeAll(async () => {
  stack = await startBoundDevCore({ name: "init-e2e", deviceId: "dev-init", environmentId: EnvironmentId })
  ;({ dir, workspace, core, token, api } = stack)
}, 60_000)

afterAll(() => stack?.close(), 30_000)

describe("Session initialization (end to end)", () => {
  it("refuses an initialization that cannot run, before anything is stored", async () => {
    const none = await api.post("/sessions", { agent_kind: "scripted", initialization: { files: [{ path: "/workspace/a", content: "x" }] } })
    assert.deepStrictEqual([none.status, none.body.error], [400, "invalid_request"])
    const outside = await api.post("/sessions", {
      agent_kind: "scripted",
      device_id: "dev-init",
      environment: binding(),
      initialization: { files: [{ path: "/etc/passwd", content: "x" }] }
    })
    assert.deepStrictEqual([outside.status, outside.body.error], [400, "invalid_request"])
    const badSkill = await api.post("/sessions", {
      agent_kind: "scripted",
      device_id: "dev-init",
      environment: binding(),
      initialization: { skills: [{ name: "Bad Name", description: "d", archive_base64: skillZip("x", "d").toString("base64") }] }
    })
    assert.deepStrictEqual([badSkill.status, badSkill.body.error], [400, "invalid_request"])
  })

  // Runs before any Turn so no idle Executor blocks runtime_prepare (the daemon refuses it while one exists).
  it("a failing setup command fails the first Turn with initialization_failed; later Turns are refused", async () => {
    const created = await api.post("/sessions", {
      agent_kind: "scripted",
      device_id: "dev-init",
      environment: binding(),
      initialization: { setup: { command: "exit 3" } }
    })
    assert.strictEqual(created.status, 201, JSON.stringify(created.body))
    assert.strictEqual(created.body.initialization.state, "pending")
    const id = created.body.session_id
    const started = await api.post(`/sessions/${id}/turns`, { input: script([{ text: "never" }]) })
    assert.strictEqual(started.status, 202, JSON.stringify(started.body))
    const turn = await finished(started.body.turn_id)
    assert.strictEqual(turn.status, "failed")
    assert.strictEqual(turn.outcome.error_code, "initialization_failed")
    assert.strictEqual(turn.outcome.detail, "setup: runtime_preparation_failed (exit 3)")
    const session = await api.get(`/sessions/${id}`)
    assert.strictEqual(session.body.initialization.state, "failed")
    assert.deepStrictEqual(
      [session.body.initialization.steps[0].state, session.body.initialization.steps[0].exit_code],
      ["failed", 3]
    )
    const again = await api.post(`/sessions/${id}/turns`, { input: script([{ text: "never" }]) })
    assert.deepStrictEqual([again.status, again.body.error], [409, "initialization_failed"])
  })

  it("installs a file, a skill and env, runs setup, then the first Turn reads the file (CLI flags, API, SSE)", async () => {
    const local = tempDir("agentwire-init-local-")
    try {
      writeFileSync(join(local, "notes.txt"), FileText)
      writeFileSync(join(local, "review.zip"), skillZip("review-notes", "Reviews notes"))
      writeFileSync(join(local, "init.env"), `# the setup command's variables\nINIT_MARKER=${Secret}\n`, { mode: 0o600 })
      const cli = await runToEnd([
        "sessions", "create", "--data-dir", dir, "--agent-kind", "scripted", "--device-id", "dev-init",
        "--environment-id", EnvironmentId, "--workspace-directory", workspace,
        "--init-file", `${join(local, "notes.txt")}:/workspace/notes/init.txt`,
        "--init-skill", join(local, "review.zip"),
        "--init-env-file", join(local, "init.env"),
        // Waits for the test's go-ahead, so the step is observed running (then writes the env's value).
        "--init-setup", "while [ ! -f .go ]; do sleep 0.05; done; printf '%s' \"$INIT_MARKER\" > .setup-marker"
      ])
      assert.strictEqual(cli.code, 0, cli.stderr)
      const id = cli.stdout.trim()
      const created = await api.get(`/sessions/${id}`)
      assert.notInclude(JSON.stringify(created.body), Secret)
      assert.deepStrictEqual(created.body.initialization.steps.map((s: any) => [s.kind, s.label, s.state]), [
        ["file", "/workspace/notes/init.txt", "pending"],
        ["skill", "review-notes", "pending"],
        ["configure", "env", "pending"],
        ["setup", "setup", "pending"]
      ])
      assert.deepStrictEqual(created.body.initialization.env_names, ["INIT_MARKER"])

      const started = await api.post(`/sessions/${id}/turns`, { input: script([{ read_file: "notes/init.txt" }]) })
      assert.strictEqual(started.status, 202, JSON.stringify(started.body))
      const turnId = started.body.turn_id
      const running = await eventually(async () => {
        const s = await api.get(`/sessions/${id}`)
        return s.body.initialization.steps[3].state === "running" ? s.body.initialization : undefined
      }, 20_000, "the setup step to run")
      assert.deepStrictEqual(running.steps.slice(0, 3).map((s: any) => s.state), ["completed", "completed", "completed"])
      assert.strictEqual(running.steps[0].bytes_sent, FileText.length)
      assert.strictEqual(running.current_step, 3)
      assert.strictEqual((await api.get(`/turns/${turnId}`)).body.status, "queued")
      assert.isFalse(existsSync(join(workspace, ".setup-marker")))

      const sse = readSse(core.url, token, turnId)
      // The subscription is open before the go-ahead: the setup's completion arrives on the stream.
      await eventually(async () => ((await api.get(`/turns/${turnId}`)).status === 200 ? true : undefined), 5_000, "turn readable")
      await new Promise((r) => setTimeout(r, 300))
      writeFileSync(join(workspace, ".go"), "")
      const events = await sse
      const notices = events.filter((e) => e.event === "initialization").map((e) => JSON.parse(e.data))
      assert.isTrue(
        notices.some((n) => n.kind === "setup" && n.step_state === "completed" && n.state === "completed"),
        JSON.stringify(notices)
      )
      assert.notInclude(JSON.stringify(events), Secret)

      const turn = await finished(turnId)
      assert.strictEqual(turn.status, "completed", JSON.stringify(turn.outcome))
      assert.include(turn.outcome.content, FileText.trim())
      assert.strictEqual(readFileSync(join(workspace, "notes", "init.txt"), "utf8"), FileText)
      assert.include(readFileSync(join(workspace, ".agentwire", "skills", "review-notes", "SKILL.md"), "utf8"), "name: review-notes")
      assert.strictEqual(readFileSync(join(workspace, ".setup-marker"), "utf8"), Secret)

      const done = await api.get(`/sessions/${id}`)
      assert.strictEqual(done.body.initialization.state, "completed")
      assert.strictEqual(done.body.initialization.bytes_sent, done.body.initialization.bytes_total)
      const shown = await runToEnd(["sessions", "show", id, "--data-dir", dir])
      assert.match(shown.stdout, /initialization completed/)
      assert.match(shown.stdout, /skill\s+completed\s+\d+\/\d+\s+review-notes/)
      assert.notInclude(shown.stdout, Secret)
    } finally {
      rmSync(local, { recursive: true, force: true })
    }
  }, 90_000)
})
