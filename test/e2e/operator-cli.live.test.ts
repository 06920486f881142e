/**
 * The operator client in the CLI against a real `agentwire core` and daemon (scripted harness): Sessions,
 * Turns started from text or a script file, steer, cancel, the live `turn watch` view, paged `turns list`,
 * `--json` everywhere, and errors as one line with the documented exit code. The token comes from the data
 * directory and the URL from the address the Core published there: no flag carries a secret.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { readFileSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { type CoreProc, eventually, operator, runToEnd, script, startCore, startDaemon, stopAll, tempDir } from "../support/devcoreLive.js"

let dir: string
let core: CoreProc
let token: string

const cli = (...args: ReadonlyArray<string>) => runToEnd([...args, "--data-dir", dir])

beforeAll(async () => {
  dir = tempDir("agentwire-opcli-")
  core = await startCore(dir)
  token = readFileSync(join(dir, "operator-token"), "utf8").trim()
  const file = join(dir, "dev-c.credential")
  assert.strictEqual((await runToEnd(["core", "credential", "create", "--device-id", "dev-c", "--data-dir", dir, "--output", file])).code, 0)
  startDaemon(core.url, "dev-c", file, join(dir, "profile"))
  await eventually(async () => ((await cli("devices", "list")).stdout.includes("online") ? true : undefined), 25_000, "dev-c online")
}, 60_000)

afterAll(async () => {
  await stopAll()
  rmSync(dir, { recursive: true, force: true })
}, 30_000)

const sessionId = async () => {
  const created = await cli("sessions", "create", "--agent-kind", "scripted")
  assert.strictEqual(created.code, 0, created.stderr)
  return created.stdout.trim()
}

describe("agentwire operator client (end to end)", () => {
  it("lists devices with their declared kinds, as text and as JSON", async () => {
    const text = await cli("devices", "list")
    assert.match(text.stdout, /^dev-c\s+online\s+kinds: .*scripted/m)
    const json = await cli("devices", "show", "dev-c", "--json")
    assert.strictEqual(json.code, 0, json.stderr)
    assert.strictEqual(JSON.parse(json.stdout).online, true)
  })

  it("starts a scripted Turn from a file and watches it live to its outcome", async () => {
    const session = await sessionId()
    const script = join(dir, "script.json")
    writeFileSync(script, JSON.stringify({ script: [{ delta: "hello " }, { delta: "world" }] }))
    const run = await cli("turn", "start", "--session", session, "--script", script, "--watch")
    assert.strictEqual(run.code, 0, run.stderr + run.stdout)
    const lines = run.stdout.split("\n")
    const at = (re: RegExp) => lines.findIndex((l) => re.test(l))
    const order = [at(/^turn \S+ \(run \S+\)$/), at(/← delta\s.*"hello "/), at(/← done\s/), at(/^outcome: completed/)]
    assert.notInclude(order, -1, run.stdout)
    assert.deepStrictEqual(order, [...order].sort((a, b) => a - b))
    assert.notInclude(run.stdout + run.stderr, token)
    const turnId = /^turn (\S+)/.exec(run.stdout)![1]!
    const shown = await cli("turns", "show", turnId, "--json")
    assert.strictEqual(JSON.parse(shown.stdout).status, "completed")
    const listed = await cli("turns", "list", "--session", session, "--json")
    assert.deepStrictEqual(JSON.parse(listed.stdout).turns.map((t: any) => t.turn_id), [turnId])
  }, 60_000)

  it("steers a waiting Turn (accepted, position 1), then cancels another", async () => {
    const session = await sessionId()
    const started = await cli("turn", "start", "--session", session, "--text", JSON.stringify({ script: [{ delta: "a" }, { await_steer: 1 }, { delta: "b" }] }))
    assert.strictEqual(started.code, 0, started.stderr)
    const turnId = started.stdout.trim()
    const steered = await eventually(async () => {
      const r = await cli("turn", "steer", turnId, "--text", "go on")
      return r.code === 0 && r.stdout.startsWith("accepted") ? r : undefined
    }, 20_000, "an accepted steer")
    assert.strictEqual(steered.stdout, "accepted position 1\n")
    const watched = await cli("turn", "watch", turnId)
    assert.strictEqual(watched.code, 0, watched.stderr)
    assert.match(watched.stdout, /input_accepted/)
    assert.match(watched.stdout, /^outcome: completed/m)

    const waiting = await cli("turn", "start", "--session", session, "--text", JSON.stringify({ script: [{ await_steer: 1 }] }))
    const waitingId = waiting.stdout.trim()
    await eventually(async () => (JSON.parse((await cli("turns", "show", waitingId, "--json")).stdout).status === "running" ? true : undefined), 20_000, "running")
    const cancelled = await cli("turn", "cancel", waitingId, "--json")
    assert.strictEqual(cancelled.code, 0, cancelled.stderr)
    assert.strictEqual(JSON.parse(cancelled.stdout).status, "cancelled")
    const after = await cli("turn", "watch", waitingId)
    assert.strictEqual(after.code, 1)
    assert.match(after.stdout, /^outcome: cancelled/m)
  }, 90_000)

  it("answers a permission request and a question with turn answer (applied), then the Turn completes", async () => {
    // Setup and polling through the API (each CLI run starts a process); the answers through the CLI.
    const api = operator(core.url, token)
    const session = await api.post("/sessions", { agent_kind: "scripted" })
    const steps = [
      { permission: { request_id: "perm-cli", tool: "shell", title: "list files" } },
      { ask: { ask_id: "ask-cli", questions: [{ id: "q1", question: "Which?", options: [{ label: "a" }, { label: "b" }] }] } },
      { delta: "answered" }
    ]
    const started = await api.post(`/sessions/${session.body.session_id}/turns`, { input: script(steps) })
    assert.strictEqual(started.status, 202)
    const turnId = started.body.turn_id as string
    const pending = (interactionId: string) =>
      eventually(async () => {
        const shown = (await api.get(`/turns/${turnId}`)).body
        return shown.interactions?.some((i: any) => i.interaction_id === interactionId && i.status === "pending") ? true : undefined
      }, 30_000, `${interactionId} pending`)
    await pending("perm-cli")
    const neither = await cli("turn", "answer", turnId, "--permission", "perm-cli")
    assert.deepStrictEqual([neither.code, neither.stdout], [2, ""])
    assert.match(neither.stderr, /exactly one of --allow and --deny/)
    const allowed = await cli("turn", "answer", turnId, "--permission", "perm-cli", "--allow")
    assert.strictEqual(allowed.code, 0, allowed.stderr)
    assert.strictEqual(allowed.stdout, "applied\n")
    await pending("ask-cli")
    const answered = await cli("turn", "answer", turnId, "--question", "ask-cli", "--answer", "q1=b", "--json")
    assert.strictEqual(answered.code, 0, answered.stderr)
    assert.strictEqual(JSON.parse(answered.stdout).outcome, "applied")
    const again = await cli("turn", "answer", turnId, "--question", "ask-cli", "--dismiss")
    assert.strictEqual(again.code, 1)
    // Answered already: not pending, or (once the Turn has gone on to its end) not running; a 409 either way.
    assert.match(again.stderr, /HTTP 409 (interaction_not_pending|turn_not_running)/)
    const done = await eventually(async () => {
      const shown = (await api.get(`/turns/${turnId}`)).body
      return shown.status === "completed" ? shown : undefined
    }, 30_000, "completed")
    assert.deepStrictEqual(
      done.interactions.map((i: any) => [i.interaction_id, i.status, i.outcome]),
      [["perm-cli", "answered", "applied"], ["ask-cli", "answered", "applied"]]
    )
  }, 180_000)

  it("pages turns list with a cursor hint, and reports API errors as one line with the exit code", async () => {
    const page = await cli("turns", "list", "--limit", "1")
    assert.strictEqual(page.code, 0, page.stderr)
    assert.match(page.stdout, /^more: agentwire turns list --cursor \S+$/m)
    const missing = await cli("turns", "show", "turn-nope")
    assert.strictEqual(missing.code, 1)
    assert.match(missing.stderr, /HTTP 404 not_found: turn not found/)
    const bad = await cli("turns", "list", "--limit", "500")
    assert.strictEqual(bad.code, 2)
    const wrongToken = join(dir, "wrong-token")
    writeFileSync(wrongToken, "awop_wrong\n", { mode: 0o600 })
    const denied = await cli("devices", "list", "--operator-token-file", wrongToken)
    assert.strictEqual(denied.code, 2)
    assert.match(denied.stderr, /HTTP 401 unauthorized/)
    const nowhere = await runToEnd(["devices", "list", "--url", "http://127.0.0.1:9", "--operator-token-file", wrongToken])
    assert.strictEqual(nowhere.code, 1)
    assert.match(nowhere.stderr, /no answer from the operator API at http:\/\/127\.0\.0\.1:9/)
  }, 60_000)

  it("creates a Session with an MCP server whose bearer comes from a file: never on argv, never printed or returned", async () => {
    const secret = "mcp-bearer-marker-7f3a"
    const tokenFile = join(dir, "tickets.token")
    writeFileSync(tokenFile, `${secret}\n`, { mode: 0o600 })
    const created = await cli(
      "sessions", "create", "--agent-kind", "scripted",
      "--mcp-server", "tickets=https://mcp.example.org/mcp",
      "--mcp-bearer-file", `tickets=${tokenFile}`,
      "--mcp-required", "tickets",
      "--mcp-allowed-tools", "tickets=lookup,search"
    )
    assert.strictEqual(created.code, 0, created.stderr)
    const shown = await cli("sessions", "show", created.stdout.trim(), "--json")
    assert.strictEqual(shown.code, 0, shown.stderr)
    const server = JSON.parse(shown.stdout).configuration.mcp_http_servers[0]
    assert.deepStrictEqual(
      [server.server_label, server.server_url, server.required, server.allowed_tools, server.bearer],
      ["tickets", "https://mcp.example.org/mcp", true, ["lookup", "search"], { set: true }]
    )
    for (const out of [created.stdout, created.stderr, shown.stdout, shown.stderr]) assert.notInclude(out, secret)
    const stray = await cli("sessions", "create", "--agent-kind", "scripted", "--mcp-required", "tickets")
    assert.deepStrictEqual([stray.code, stray.stdout], [2, ""])
    assert.match(stray.stderr, /need --mcp-server/)
    const unknown = await cli("sessions", "create", "--agent-kind", "scripted", "--mcp-server", "a=https://x.example/mcp", "--mcp-required", "b")
    assert.strictEqual(unknown.code, 2)
    assert.match(unknown.stderr, /no --mcp-server with the label b/)
    const insecure = await cli("sessions", "create", "--agent-kind", "scripted", "--mcp-server", "a=http://x.example/mcp", "--mcp-bearer-file", `a=${tokenFile}`)
    assert.notStrictEqual(insecure.code, 0)
    assert.match(insecure.stderr, /mcp_bearer_insecure/)
    assert.notInclude(insecure.stdout + insecure.stderr, secret)
  }, 60_000)
})
