/**
 * The wire scenarios that need an operator (Turns, Files), replayed through **one node of a three-node Core** on
 * PostgreSQL (docs/multi-node.md "Operator scenarios through one node of three"): three real `agentwire core`
 * processes on one schema, the real daemon (the `scripted` kind, a bound workspace) connected to node B. Each
 * scenario runs twice with the same operator API calls: on node B, which holds the device's connection (the
 * single-node path: nothing is routed), then on node C, which does not (every call is routed to B, every SSE
 * stream follows the journal from the database). The two runs must come to the same outcome (statuses, bodies
 * without generated ids, frame types in order, Turn records, workspace bytes), and each outcome is also checked
 * against what the scenario expects. Real processes and time: a *.live.test.ts.
 */
import { afterAll, assert, beforeAll, it } from "@effect/vitest"
import { mkdirSync, realpathSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { eventually, operator, readSse, run, startCore, script, type SseEvent, startDaemon, stopAll, tempDir } from "../../support/devcoreLive.js"
import { createSchema, describePostgres, dropSchema, schemaUrl, testDatabaseUrl } from "../../support/postgres.js"
import { readTar } from "../../support/tarReader.js"

const EnvironmentId = "9f3e4d5c-6a7b-4c8d-8e9f-1a2b3c4d5e6f"
const Device = "ops3-1"
const token = "op-token-operator3-e2e"

/** A Core node on the shared schema (`agentwire core`, URL from its first line). */
const startNode = async (dir: string, env: Record<string, string>) => {
  const proc = await startCore(dir, 0, { env })
  return { proc, url: proc.url }
}

type Api = ReturnType<typeof operator>
interface Node {
  readonly name: string
  readonly url: string
  readonly api: Api
}

const frames = (events: ReadonlyArray<SseEvent>) => events.filter((e) => e.event === "frame").map((e) => JSON.parse(e.data))
const outcomeOf = (events: ReadonlyArray<SseEvent>) => JSON.parse(events[events.length - 1]!.data).outcome
const seqsInOrder = (events: ReadonlyArray<SseEvent>) => {
  const seqs = events.filter((e) => e.id !== undefined).map((e) => Number(e.id))
  assert.deepStrictEqual(seqs, seqs.map((_, i) => i + 1), "every journal entry once, in order")
}
const raw = async (node: Node, method: string, path: string, body?: unknown) => {
  const res = await fetch(`${node.url}/api/v1/operator${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })
  return { status: res.status, type: res.headers.get("content-type"), bytes: Buffer.from(await res.arrayBuffer()) }
}
const put = async (node: Node, path: string, body: unknown) => {
  const res = await raw(node, "PUT", path, body)
  return { status: res.status, body: JSON.parse(res.bytes.toString("utf8")) }
}
/**
 * An answer to an interaction or a function call, sent the moment its frame is seen in the stream: the owning
 * node stores an interaction pending before it journals the frame, so the answer is never early (no retry).
 */
const answer = (api: Api, path: string, body: unknown) => api.post(path, body)
const b64 = (s: string) => Buffer.from(s).toString("base64")

describePostgres("operator-driven wire scenarios through one node of a three-node Core", (url) => {
  let schema: string
  let dir: string
  let workspace: string
  let nodeB: Node
  let nodeC: Node
  let workspaceSession: string

  beforeAll(async () => {
    schema = await createSchema(url)
    dir = tempDir("agentwire-pg-ops3-")
    workspace = realpathSync(tempDir("agentwire-pg-ops3-ws-"))
    mkdirSync(join(workspace, "src"))
    writeFileSync(join(workspace, "README.md"), "hello from the workspace\n")
    writeFileSync(join(workspace, "src", "main.ts"), "export const answer = 42\n")
    const env = { AGENTWIRE_CORE_DATABASE: schemaUrl(url, schema), AGENTWIRE_OPERATOR_TOKEN: token }
    // One node first (it migrates), then the two others.
    await startNode(join(dir, "a"), env)
    const [b, c] = await Promise.all(["b", "c"].map((name) => startNode(join(dir, name), env)))
    nodeB = { name: "b", url: b!.url, api: operator(b!.url, token) }
    nodeC = { name: "c", url: c!.url, api: operator(c!.url, token) }
    const issue = run(["core", "credential", "create", "--device-id", Device, "--data-dir", join(dir, "cred"), "--init"], env)
    assert.strictEqual(await issue.exited, 0)
    const credentialFile = join(dir, "device.cred")
    writeFileSync(credentialFile, issue.stdout.trim() + "\n", { mode: 0o600 })
    startDaemon(nodeB.url, Device, credentialFile, join(dir, "profile"), {
      args: ["--environment-id", EnvironmentId, "--workspace", workspace]
    })
    await eventually(async () => {
      const seenByC = (await nodeC.api.get(`/devices/${Device}`)).body
      const seenByB = (await nodeB.api.get(`/devices/${Device}`)).body
      return seenByC?.owner?.node_url === nodeB.url && seenByC.owner.live === true && seenByB?.declaration?.source === "live"
        ? true
        : undefined
    }, 30_000, "the device owned by node B and declared there")
    const session = await nodeC.api.post("/sessions", {
      agent_kind: "scripted",
      device_id: Device,
      environment: { type: "self_hosted", id: EnvironmentId, workspace_directory: workspace },
      configuration: { function_tools: [{ name: "lookup", description: "looks up", parameters: { type: "object" }, defer_loading: false }] }
    })
    assert.strictEqual(session.status, 201, JSON.stringify(session.body))
    workspaceSession = session.body.session_id
  }, 120_000)

  afterAll(async () => {
    await stopAll()
    if (testDatabaseUrl !== undefined && schema !== undefined) await dropSchema(testDatabaseUrl, schema)
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
    if (workspace !== undefined) rmSync(workspace, { recursive: true, force: true })
  }, 60_000)

  /** Runs `scenario` on B (the owner: single-node path) then on C (routed); both outcomes must be equal. */
  const onBothNodes = async <A>(scenario: (node: Node) => Promise<A>): Promise<A> => {
    const single = await scenario(nodeB)
    const routed = await scenario(nodeC)
    assert.deepStrictEqual(routed, single, "the node without the device's connection answers as the owning node")
    return routed
  }

  it("Files: list, read (bytes, truncation, a missing file), write and export give the owner's answers", async () => {
    const s = workspaceSession
    // workspace-read-bytes-and-directory
    const reads = await onBothNodes(async ({ api }) => {
      const root = await api.get(`/sessions/${s}/files?path=`)
      const src = await api.get(`/sessions/${s}/files?path=src`)
      const notDir = await api.get(`/sessions/${s}/files?path=README.md`)
      const bytes = await api.get(`/sessions/${s}/files/content?path=src/main.ts`)
      const truncated = await api.get(`/sessions/${s}/files/content?path=README.md&max_bytes=5`)
      const missing = await api.get(`/sessions/${s}/files/content?path=nope.txt`)
      const unsafe = await api.get(`/sessions/${s}/files/content?path=../etc/passwd`)
      return [root, src, notDir, bytes, truncated, missing, unsafe].map((r) => [r.status, r.body])
    })
    assert.deepStrictEqual(reads[0]![1].entries.map((e: any) => [e.name, e.kind]), [["README.md", "file"], ["src", "directory"]])
    assert.deepStrictEqual(reads[2], [200, { entries: [], truncated: false }])
    assert.deepStrictEqual(reads[3], [200, { data: b64("export const answer = 42\n"), size_bytes: 25, truncated: false }])
    assert.deepStrictEqual(reads[4], [200, { data: b64("hello"), size_bytes: 5, truncated: true }])
    assert.deepStrictEqual([reads[5]![0], reads[5]![1].error], [404, "file_not_found"])
    assert.strictEqual(reads[6]![0], 400)

    // A write, then the file read back (each node writes its own content to the same path).
    await onBothNodes(async (node) => {
      const wrote = await put(node, `/sessions/${s}/files/content`, { path: "notes/out.txt", data: b64("written\n") })
      const back = await node.api.get(`/sessions/${s}/files/content?path=notes/out.txt`)
      const { write_id, ...written } = wrote.body
      assert.isString(write_id)
      assert.deepStrictEqual([wrote.status, back.status], [200, 200], JSON.stringify(wrote.body))
      return [written, back.body]
    })

    // workspace-export-pull: the same archive (entries and digests) through both nodes.
    const archive = await onBothNodes(async (node) => {
      const res = await raw(node, "GET", `/sessions/${s}/files/export`)
      assert.deepStrictEqual([res.status, res.type], [200, "application/x-tar"])
      return readTar(res.bytes).map((e) => [e.path, e.type, e.size, e.sha256 ?? null]).sort((x, y) => String(x[0]).localeCompare(String(y[0])))
    })
    assert.includeMembers(archive.map((e) => e[0]), ["README.md", "src/main.ts", "notes/out.txt"])
  }, 60_000)

  it("Turns: every event, a steer, a permission and a question, a function result, an error, a cancel", async () => {
    const newSession = async (api: Api) => (await api.post("/sessions", { agent_kind: "scripted", device_id: Device })).body.session_id as string
    const start = async (api: Api, sessionId: string, steps: ReadonlyArray<unknown>) => {
      const started = await api.post(`/sessions/${sessionId}/turns`, { input: script(steps) })
      assert.strictEqual(started.status, 202, JSON.stringify(started.body))
      assert.strictEqual(started.body.device_id, Device)
      return started.body.turn_id as string
    }

    // prompt-request-every-event
    const everyEvent = await onBothNodes(async ({ api, name, url: base }) => {
      const turnId = await start(api, await newSession(api), [
        { delta: "one " },
        { thinking: "hmm" },
        { tool_call: { id: `tool-${name}`, name: "shell", args: { cmd: "ls" }, result: { ok: true } } },
        { usage: { input_tokens: 3, output_tokens: 1 } },
        { delta: "two" }
      ])
      const events = await readSse(base, token, turnId)
      seqsInOrder(events)
      const outcome = outcomeOf(events)
      return { frames: frames(events).map((f) => f.type), status: outcome.status, usage: outcome.usage, text: outcome.text ?? null }
    })
    assert.strictEqual(everyEvent.status, "completed")
    assert.strictEqual(everyEvent.frames[everyEvent.frames.length - 1], "done")
    assert.includeMembers(everyEvent.frames, ["delta", "usage"])

    // active-input-written-accepted, interaction-decisions-valid (permission, user choice with an invalid answer first)
    // Interaction and call ids are the script's, per run: the daemon reuses its idle executor across Turns, and
    // a native id seen before would not be waited for again. The results name them without the run's suffix.
    const decisions = await onBothNodes(async ({ api, name, url: base }) => {
      const turnId = await start(api, await newSession(api), [
        { delta: "one " },
        { usage: { input_tokens: 7, output_tokens: 2 } },
        { await_steer: 1 },
        { permission: { request_id: `perm-ops3-${name}`, tool: "shell", title: "list files" } },
        { ask: { ask_id: `ask-ops3-${name}`, questions: [{ id: "q1", question: "Which?", options: [{ label: "a" }, { label: "b" }] }] } },
        { delta: "two" }
      ])
      const answers: Array<unknown> = []
      const events = await readSse(base, token, turnId, async (event) => {
        if (event.event !== "frame") return
        const frame = JSON.parse(event.data)
        if (frame.type === "usage" && answers.length === 0) {
          const steer = await api.post(`/turns/${turnId}/steer`, { input: [{ content: [{ type: "input_text", text: "steered" }] }] })
          answers.push([steer.status, steer.body.status, steer.body.position])
        }
        if (frame.type === "permission_request") {
          const d = await answer(api, `/turns/${turnId}/permissions/${frame.payload.request_id}`, { approved: true })
          answers.push([d.status, d.body.outcome])
        }
        if (frame.type === "prompt_for_user_choice") {
          const invalid = await answer(api, `/turns/${turnId}/questions/${frame.payload.ask_id}`, { question_answers: [{ question_id: "nope", answers: ["a"] }] })
          answers.push([invalid.status, invalid.body.error])
          const d = await answer(api, `/turns/${turnId}/questions/${frame.payload.ask_id}`, { question_answers: [{ question_id: "q1", answers: ["b"] }] })
          answers.push([d.status, d.body.outcome])
        }
      })
      seqsInOrder(events)
      const turn = (await api.get(`/turns/${turnId}`)).body
      return {
        answers,
        frames: frames(events).map((f) => f.type),
        status: outcomeOf(events).status,
        inputs: turn.inputs.map((i: any) => [i.status, i.position]),
        interactions: turn.interactions.map((i: any) => [String(i.interaction_id).replace(`-${name}`, ""), i.status, i.outcome])
      }
    })
    assert.deepStrictEqual(decisions.answers, [[200, "accepted", 1], [200, "applied"], [400, "invalid_request"], [200, "applied"]])
    assert.strictEqual(decisions.status, "completed")
    assert.deepStrictEqual(decisions.inputs, [["accepted", 1]])
    assert.deepStrictEqual(decisions.interactions, [["perm-ops3", "answered", "applied"], ["ask-ops3", "answered", "applied"]])

    // function-results
    const functionResult = await onBothNodes(async ({ api, name, url: base }) => {
      const turnId = await start(api, workspaceSession, [
        { function_call: { call_id: `call-ops3-${name}`, name: "lookup", arguments: { q: 1 } } },
        { delta: "after the result" }
      ])
      const answers: Array<unknown> = []
      const events = await readSse(base, token, turnId, async (event) => {
        if (event.event !== "frame") return
        const frame = JSON.parse(event.data)
        if (frame.type === "function_call") {
          const r = await answer(api, `/turns/${turnId}/functions/${frame.payload.call_id}`, { output: "42" })
          answers.push([r.status, r.body.outcome])
        }
      })
      seqsInOrder(events)
      return { answers, frames: frames(events).map((f) => f.type), status: outcomeOf(events).status }
    })
    assert.deepStrictEqual(functionResult.answers, [[200, "applied"]])
    assert.strictEqual(functionResult.status, "completed")

    // error-then-done
    const failed = await onBothNodes(async ({ api, url: base }) => {
      const turnId = await start(api, await newSession(api), [{ delta: "x" }, { error: { message: "engine broke", code: "internal_error" } }])
      const events = await readSse(base, token, turnId)
      const outcome = outcomeOf(events)
      return { frames: frames(events).map((f) => f.type), status: outcome.status, error: outcome.error?.code ?? null }
    })
    assert.strictEqual(failed.status, "failed")

    // cancellation, with the Files refusals and the read of the Run while the Turn runs (workspace-export refused)
    const cancelled = await onBothNodes(async (node) => {
      const { api, url: base } = node
      const turnId = await start(api, workspaceSession, [{ delta: "working" }, { hang: true }])
      const during: Array<unknown> = []
      const events = await readSse(base, token, turnId, async (event) => {
        if (event.event === "frame" && JSON.parse(event.data).type === "delta" && during.length === 0) {
          const exported = await raw(node, "GET", `/sessions/${workspaceSession}/files/export`)
          during.push([exported.status, JSON.parse(exported.bytes.toString("utf8")).error])
          const wrote = await put(node, `/sessions/${workspaceSession}/files/content`, { path: "x.txt", data: b64("x") })
          during.push([wrote.status, wrote.body.error])
          const listed = await api.get(`/sessions/${workspaceSession}/files?path=src`)
          during.push([listed.status, listed.body.entries?.map((e: any) => e.name)])
          const cancel = await api.post(`/turns/${turnId}/cancel`)
          during.push([cancel.status, cancel.body.status])
        }
      })
      seqsInOrder(events)
      // After the outcome: refused at once (the owner stops taking operations before it records the outcome).
      const again = await api.post(`/turns/${turnId}/cancel`)
      return { during, again: [again.status, again.body.error], status: outcomeOf(events).status }
    })
    assert.deepStrictEqual(cancelled, {
      during: [[409, "turn_active"], [409, "turn_active"], [200, ["main.ts"]], [200, "cancelled"]],
      again: [409, "turn_not_running"],
      status: "cancelled"
    })
  }, 60_000)
})
