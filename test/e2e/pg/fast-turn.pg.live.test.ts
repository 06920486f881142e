/**
 * Issue #17, "a fast Turn never fails", with the dev Core's store in PostgreSQL (every journal write is a
 * network round trip, so the journal is far slower than the socket): the real `agentwire core` binary and a
 * scripted device over a real WebSocket (test/support/fastTurnDevice.ts) sending 40,000 deltas of about 1 KiB
 * and `done` as fast as its socket takes them. The Turn must end `completed` with every delta journaled in
 * order: the connection stops reading while the Turn's journal catches up (backpressure), it never gives up
 * on a consumer that is merely slow.
 */
import { afterAll, assert, beforeAll, it } from "@effect/vitest"
import { readFileSync, rmSync } from "node:fs"
import { join } from "node:path"
import { eventually, operator, run, stopAll, tempDir } from "../../support/devcoreLive.js"
import { connectFastDevice, type FastDevice } from "../../support/fastTurnDevice.js"
import { createSchema, describePostgres, dropSchema, schemaUrl, queryIn, testDatabaseUrl } from "../../support/postgres.js"

const Deltas = 40_000

describePostgres("a fast Turn never fails (issue #17, PostgreSQL)", (url) => {
  let schema: string
  let dir: string
  let device: FastDevice | undefined
  let api: ReturnType<typeof operator>

  beforeAll(async () => {
    schema = await createSchema(url)
    dir = tempDir("agentwire-pg-fast-")
    const env = { AGENTWIRE_CORE_DATABASE: schemaUrl(url, schema) }
    const core = run(["core", "--port", "0", "--data-dir", dir, "--heartbeat-seconds", "1"], env)
    const lines = await eventually(() => {
      const all = core.stdout.split("\n")
      return all.length > 2 ? all : undefined
    }, 20_000, "core to listen")
    const coreUrl = lines[0]!
    const issue = run(["core", "credential", "create", "--device-id", "pg-fast", "--data-dir", dir, "--init"], env)
    assert.strictEqual(await issue.exited, 0)
    api = operator(coreUrl, readFileSync(join(dir, "operator-token"), "utf8").trim())
    device = await connectFastDevice(coreUrl, "pg-fast", issue.stdout.trim(), api)
  }, 60_000)

  afterAll(async () => {
    device?.close()
    await stopAll()
    if (testDatabaseUrl !== undefined && schema !== undefined) await dropSchema(testDatabaseUrl, schema)
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
  }, 30_000)

  it("completes a Turn of 40,000 deltas, every delta journaled in order", async () => {
    const session = await api.post("/sessions", { agent_kind: "scripted" })
    assert.strictEqual(session.status, 201)
    const { outcome, turnId } = await device!.fastTurn(session.body.session_id, Deltas)
    assert.deepStrictEqual([outcome.status, outcome.error_code, outcome.observation], ["completed", undefined, undefined])
    const rows = await queryIn(url, schema, `SELECT body_json FROM turn_events WHERE turn_id = '${turnId}' AND kind = 'frame' AND type = 'delta' ORDER BY seq`)
    const sequences = rows.map((r) => (JSON.parse(String(r.body_json)) as { payload: { sequence: number } }).payload.sequence)
    assert.deepStrictEqual(sequences, Array.from({ length: Deltas }, (_, i) => i + 1))
  }, 300_000)
})
