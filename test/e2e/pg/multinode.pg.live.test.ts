/**
 * Two `agentwire core` processes on one PostgreSQL schema (docs/multi-node.md): a device's owner lease
 * follows its connection from one node to the other with a growing generation, both nodes report the same
 * owner, and a Turn runs on the owning node with its records visible from the other. Real processes.
 */
import { afterAll, assert, beforeAll, it } from "@effect/vitest"
import { rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { eventually, operator, type Proc, readSse, run, script, startDaemon, stopAll, tempDir } from "../../support/devcoreLive.js"
import { createSchema, describePostgres, dropSchema, testDatabaseUrl } from "../../support/postgres.js"

const startNode = async (dir: string, env: Record<string, string>) => {
  const proc = run(["core", "--port", "0", "--data-dir", dir, "--heartbeat-seconds", "1"], env)
  const lines = await eventually(() => {
    const all = proc.stdout.split("\n")
    return all.length > 2 ? all : undefined
  }, 20_000, "core to listen")
  return { proc, url: lines[0]! }
}

describePostgres("several Core nodes on PostgreSQL (end to end)", (url) => {
  let schema: string
  let dir: string
  let env: Record<string, string>

  beforeAll(async () => {
    schema = await createSchema(url)
    dir = tempDir("agentwire-pg-nodes-")
    const parsed = new URL(url)
    parsed.searchParams.set("options", `-c search_path=${schema}`)
    env = { AGENTWIRE_CORE_DATABASE: parsed.toString() }
  }, 30_000)

  afterAll(async () => {
    await stopAll()
    if (testDatabaseUrl !== undefined && schema !== undefined) await dropSchema(testDatabaseUrl, schema)
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
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

    // A Turn through the owning node; its records are visible from the other node too.
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
})
