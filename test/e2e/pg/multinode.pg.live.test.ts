/**
 * Two `agentwire core` processes on one PostgreSQL schema (docs/multi-node.md): a device's owner lease
 * follows its connection from one node to the other with a growing generation, both nodes report the same
 * owner, and a Turn runs on the owning node with its records visible from the other; a Turn started, steered,
 * cancelled and followed (SSE) through the node that does not hold the device, and the Files API through it, are
 * routed to the one that does (docs/multi-node.md "Routing"). Real processes.
 */
import { afterAll, assert, beforeAll, it } from "@effect/vitest"
import { realpathSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { eventually, operator, type Proc, readSse, run, startCore, script, startDaemon, stopAll, tempDir } from "../../support/devcoreLive.js"
import { createSchema, describePostgres, dropSchema, schemaUrl, testDatabaseUrl } from "../../support/postgres.js"

const EnvironmentId = "7d1c2b3a-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
/** Directories outside `dir` (workspaces), removed after the suite. */
const extraDirs: Array<string> = []

/** A Core node on the shared schema (`agentwire core`, URL from its first line). */
const startNode = async (dir: string, env: Record<string, string>) => {
  const proc = await startCore(dir, 0, { env })
  return { proc, url: proc.url }
}

describePostgres("several Core nodes on PostgreSQL (end to end)", (url) => {
  let schema: string
  let dir: string
  let env: Record<string, string>

  beforeAll(async () => {
    schema = await createSchema(url)
    dir = tempDir("agentwire-pg-nodes-")
    env = { AGENTWIRE_CORE_DATABASE: schemaUrl(url, schema) }
  }, 30_000)

  afterAll(async () => {
    await stopAll()
    if (testDatabaseUrl !== undefined && schema !== undefined) await dropSchema(testDatabaseUrl, schema)
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
    for (const extra of extraDirs) rmSync(extra, { recursive: true, force: true })
  }, 30_000)

  it("moves the owner lease with the device's connection, and both nodes see the same owner and Turns", async () => {
    // One data directory per node (each holds its lock); the store and the operator token are shared.
    const token = "op-token-multinode-e2e"
    const nodeEnv = { ...env, AGENTWIRE_OPERATOR_TOKEN: token }
    const a = await startNode(join(dir, "a"), nodeEnv)
    const b = await startNode(join(dir, "b"), nodeEnv)
    const apiA = operator(a.url, token)
    const apiB = operator(b.url, token)

    const issue = run(["core", "credential", "create", "--device-id", "flap-1", "--data-dir", join(dir, "c"), "--init"], env)
    assert.strictEqual(await issue.exited, 0)
    const credentialFile = join(dir, "flap-1.cred")
    writeFileSync(credentialFile, issue.stdout.trim() + "\n", { mode: 0o600 })

    const ownerSeenBy = (api: ReturnType<typeof operator>, nodeUrl: string, minGeneration: number) =>
      eventually(async () => {
        const owner = (await api.get("/devices/flap-1")).body?.owner
        return owner?.node_url === nodeUrl && owner.live === true && owner.generation >= minGeneration ? owner : undefined
      }, 25_000, `owner ${nodeUrl}`)

    const first: Proc = startDaemon(a.url, "flap-1", credentialFile, join(dir, "profile-1"))
    const ownerA = await ownerSeenBy(apiA, a.url, 1)
    const same = (o: any) => [o.node_id, o.node_url, o.generation]
    assert.deepStrictEqual(same(await ownerSeenBy(apiB, a.url, 1)), same(ownerA))
    assert.strictEqual(ownerA.node_id, a.url)

    // A Turn through the owning node; its records are visible from the other node too. It needs the device's
    // declaration there, which may come after its lease (a loaded machine answered 422 without this wait).
    await eventually(async () =>
      (await apiA.get("/devices/flap-1")).body?.declaration?.source === "live" ? true : undefined, 25_000, "device flap-1 declared on node A")
    const session = await apiA.post("/sessions", { agent_kind: "scripted" })
    const started = await apiA.post(`/sessions/${session.body.session_id}/turns`, { input: script([{ delta: "from a" }]) })
    assert.strictEqual(started.status, 202)
    const events = await readSse(a.url, token, started.body.turn_id)
    assert.strictEqual(JSON.parse(events[events.length - 1]!.data).outcome.status, "completed")
    assert.strictEqual((await apiB.get(`/turns/${started.body.turn_id}`)).body.status, "completed")

    // The device moves to node B: a new lease with a higher generation, reported by both nodes.
    first.child.kill("SIGTERM")
    await first.exited
    startDaemon(b.url, "flap-1", credentialFile, join(dir, "profile-2"))
    const ownerB = await ownerSeenBy(apiB, b.url, ownerA.generation + 1)
    assert.isAbove(ownerB.generation, ownerA.generation)
    assert.deepStrictEqual(same(await ownerSeenBy(apiA, b.url, ownerB.generation)), same(ownerB))
  }, 120_000)

  it("routes Turn start, steer, cancel and Files from the node without the device to its owner, and streams every event once on both", async () => {
    const token = "op-token-routing-e2e"
    const nodeEnv = { ...env, AGENTWIRE_OPERATOR_TOKEN: token }
    const a = await startNode(join(dir, "ra"), nodeEnv)
    const b = await startNode(join(dir, "rb"), nodeEnv)
    const apiA = operator(a.url, token)
    const apiB = operator(b.url, token)
    const issue = run(["core", "credential", "create", "--device-id", "route-1", "--data-dir", join(dir, "rc"), "--init"], env)
    assert.strictEqual(await issue.exited, 0)
    const credentialFile = join(dir, "route-1.cred")
    writeFileSync(credentialFile, issue.stdout.trim() + "\n", { mode: 0o600 })
    const workspace = realpathSync(tempDir("agentwire-pg-nodes-ws-"))
    extraDirs.push(workspace)
    writeFileSync(join(workspace, "README.md"), "hello from b\n")
    startDaemon(b.url, "route-1", credentialFile, join(dir, "profile-r"), {
      args: ["--environment-id", EnvironmentId, "--workspace", workspace]
    })
    await eventually(async () => {
      const seenByA = (await apiA.get("/devices/route-1")).body
      const seenByB = (await apiB.get("/devices/route-1")).body
      return seenByA?.owner?.node_url === b.url && seenByA.owner.live === true && seenByB?.declaration?.source === "live"
        ? seenByA
        : undefined
    }, 25_000, "device route-1 owned by node B and declared there")

    // 1. A Turn started through A (no device there) runs on B and completes; SSE on A has every event once.
    const session = await apiA.post("/sessions", { agent_kind: "scripted" })
    assert.strictEqual(session.status, 201)
    const done = await apiA.post(`/sessions/${session.body.session_id}/turns`, { input: script([{ delta: "via a" }, { delta: " to b" }]) })
    assert.strictEqual(done.status, 202)
    assert.strictEqual(done.body.device_id, "route-1")
    const doneEvents = await readSse(a.url, token, done.body.turn_id)
    const last = doneEvents[doneEvents.length - 1]!
    assert.strictEqual(last.event, "outcome")
    assert.strictEqual(JSON.parse(last.data).outcome.status, "completed")
    const seqsA = doneEvents.filter((e) => e.id !== undefined).map((e) => Number(e.id))
    assert.deepStrictEqual(seqsA, seqsA.map((_, i) => i + 1))
    const seqsB = (await readSse(b.url, token, done.body.turn_id)).filter((e) => e.id !== undefined).map((e) => Number(e.id))
    assert.deepStrictEqual(seqsA, seqsB)

    // 2. Steer and cancel through A reach the Run on B; SSE on A follows it live to its outcome.
    const running = await apiA.post(`/sessions/${session.body.session_id}/turns`, {
      input: script([{ delta: "one" }, { await_steer: 1 }, { delta: "two" }, { hang: true }])
    })
    assert.strictEqual(running.status, 202)
    const turnId = running.body.turn_id as string
    let steer: any
    let cancel: any
    const live = await readSse(a.url, token, turnId, async (event) => {
      if (event.event !== "frame") return
      const frame = JSON.parse(event.data)
      if (frame.type === "delta" && steer === undefined) {
        steer = await apiA.post(`/turns/${turnId}/steer`, { input: [{ content: [{ type: "input_text", text: "steered via a" }] }] })
      } else if (frame.type === "delta" && cancel === undefined) {
        cancel = await apiA.post(`/turns/${turnId}/cancel`, {})
      }
    })
    assert.strictEqual(steer.status, 200)
    assert.deepStrictEqual([steer.body.status, steer.body.position], ["accepted", 1])
    assert.strictEqual(cancel.status, 200)
    assert.strictEqual(cancel.body.status, "cancelled")
    assert.strictEqual(JSON.parse(live[live.length - 1]!.data).outcome.status, "cancelled")
    const seqs = live.filter((e) => e.id !== undefined).map((e) => Number(e.id))
    assert.deepStrictEqual(seqs, seqs.map((_, i) => i + 1))
    const deltas = live.filter((e) => e.event === "frame").map((e) => JSON.parse(e.data)).filter((f) => f.type === "delta")
    // The scripted agent echoes the steered input as a delta: the steer sent through A reached the Run on B.
    assert.deepStrictEqual(deltas.slice(0, 2).map((f) => f.payload.delta), ["one", "steered via a"])
    // The same journal from B, and the same records from both nodes.
    const fromB = (await readSse(b.url, token, turnId)).filter((e) => e.id !== undefined).map((e) => [e.id, e.data])
    assert.deepStrictEqual(live.filter((e) => e.id !== undefined).map((e) => [e.id, e.data]), fromB)
    assert.deepStrictEqual((await apiA.get(`/turns/${turnId}`)).body.inputs.map((i: any) => [i.status, i.position]), [["accepted", 1]])

    // 3. A finished Turn answers the same on both nodes (no route needed).
    const again = await apiA.post(`/turns/${turnId}/cancel`, {})
    assert.deepStrictEqual([again.status, again.body.error], [409, "turn_not_running"])
    const againB = await apiB.post(`/turns/${turnId}/cancel`, {})
    assert.deepStrictEqual([againB.status, againB.body], [again.status, again.body])

    // 4. The Files API through A reaches the workspace of the daemon on B (write, list, read), with B's answers.
    const bound = await apiA.post("/sessions", {
      agent_kind: "scripted",
      device_id: "route-1",
      environment: { type: "self_hosted", id: EnvironmentId, workspace_directory: workspace }
    })
    assert.strictEqual(bound.status, 201, JSON.stringify(bound.body))
    const s = bound.body.session_id as string
    // A write reaches the Runtime on B through A: the daemon still holds the idle executor of the Turns above, so
    // it refuses the write at begin (resource_unavailable, nothing installed), the same answer B gives itself.
    const put = (url: string) =>
      fetch(`${url}/api/v1/operator/sessions/${s}/files/content`, {
        method: "PUT",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: JSON.stringify({ path: "written.txt", data: Buffer.from("from a").toString("base64") })
      }).then(async (res) => [res.status, await res.json()] as const)
    const putA = await put(a.url)
    assert.deepStrictEqual(putA, await put(b.url))
    assert.deepStrictEqual([putA[0], (putA[1] as any).error, (putA[1] as any).source], [409, "resource_unavailable", "runtime"])
    const listed = await apiA.get(`/sessions/${s}/files?path=`)
    assert.strictEqual(listed.status, 200, JSON.stringify(listed.body))
    assert.deepStrictEqual(listed.body.entries.map((e: any) => e.name), ["README.md"])
    const readA = await apiA.get(`/sessions/${s}/files/content?path=README.md`)
    assert.deepStrictEqual(readA.body, { data: Buffer.from("hello from b\n").toString("base64"), size_bytes: 13, truncated: false })
    const missingA = await apiA.get(`/sessions/${s}/files/content?path=nope.txt`)
    const missingB = await apiB.get(`/sessions/${s}/files/content?path=nope.txt`)
    assert.deepStrictEqual([missingA.status, missingA.body], [missingB.status, missingB.body])
    assert.deepStrictEqual([missingA.status, missingA.body.error], [404, "file_not_found"])
  }, 120_000)
})
