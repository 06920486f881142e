/**
 * `agentwire core` on PostgreSQL, end to end with the real binary: the store URL (with a password) comes from
 * AGENTWIRE_CORE_DATABASE, a daemon connects, a Turn runs through the operator API and lands in the database
 * (not in the data directory). The password never appears in anything the processes print, and the
 * `--database` flag refuses a URL carrying one. Real processes and sockets, so small real waits.
 */
import { afterAll, assert, beforeAll, it } from "@effect/vitest"
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { eventually, operator, readSse, run, script, startDaemon, stopAll, tempDir } from "../../support/devcoreLive.js"
import { createSchema, describePostgres, dropSchema, schemaUrl, queryIn, testDatabaseUrl } from "../../support/postgres.js"

const secret = "e2e-pg-secret-9f3"

describePostgres("agentwire core --database (end to end)", (url) => {
  let schema: string
  let dir: string
  let databaseUrl: string
  let coreOut = ""

  beforeAll(async () => {
    schema = await createSchema(url)
    dir = tempDir("agentwire-pg-e2e-")
    databaseUrl = schemaUrl(url, schema, secret)
  }, 30_000)

  afterAll(async () => {
    await stopAll()
    if (testDatabaseUrl !== undefined && schema !== undefined) await dropSchema(testDatabaseUrl, schema)
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
  }, 30_000)

  it("runs a Turn with the store in PostgreSQL and never prints the URL's password", async () => {
    const env = { AGENTWIRE_CORE_DATABASE: databaseUrl }
    const core = run(["core", "--port", "0", "--data-dir", dir, "--heartbeat-seconds", "1"], env)
    const lines = await eventually(() => {
      const all = core.stdout.split("\n")
      return all.length > 5 ? all : undefined
    }, 20_000, "core to listen")
    const coreUrl = lines[0]!
    assert.match(coreUrl, /^http:\/\/127\.0\.0\.1:\d+$/)
    assert.include(lines, `store: ${new URL(url).protocol}//${new URL(databaseUrl).username}:***@${new URL(url).host}${new URL(url).pathname}`)

    const issue = run(["core", "credential", "create", "--device-id", "pg-dev", "--data-dir", dir, "--init"], env)
    assert.strictEqual(await issue.exited, 0)
    const credentialFile = join(dir, "pg-dev.cred")
    writeFileSync(credentialFile, issue.stdout.trim() + "\n", { mode: 0o600 })
    startDaemon(coreUrl, "pg-dev", credentialFile, join(dir, "profile"))

    const api = operator(coreUrl, readFileSync(join(dir, "operator-token"), "utf8").trim())
    // Online and declared: a start before the first declaration is refused 422 (capabilities_undeclared).
    await eventually(async () => {
      const device = await api.get("/devices/pg-dev")
      return device.body?.online === true && device.body.declaration != null ? true : undefined
    }, 25_000, "pg-dev online and declared")
    const session = await api.post("/sessions", { agent_kind: "scripted" })
    assert.strictEqual(session.status, 201)
    const started = await api.post(`/sessions/${session.body.session_id}/turns`, { input: script([{ delta: "on " }, { delta: "postgres" }]) })
    assert.strictEqual(started.status, 202)
    const turnId = started.body.turn_id as string
    const events = await readSse(coreUrl, readFileSync(join(dir, "operator-token"), "utf8").trim(), turnId)
    const last = events[events.length - 1]!
    assert.strictEqual(last.event, "outcome")
    assert.strictEqual(JSON.parse(last.data).outcome.status, "completed")

    // The records are in the database, and no SQLite file was made in the data directory.
    const rows = await queryIn(url, schema, `SELECT status, content FROM turns WHERE turn_id = '${turnId}'`)
    assert.deepStrictEqual(rows.map((r) => [r.status, r.content]), [["completed", "on postgres"]])
    const frames = await queryIn(url, schema, `SELECT type FROM turn_events WHERE turn_id = '${turnId}' AND kind = 'frame' ORDER BY seq`)
    assert.deepStrictEqual(frames.map((r) => r.type).filter((t) => t === "delta" || t === "done"), ["delta", "delta", "done"])
    assert.isFalse(existsSync(join(dir, "agentwire.db")))
    coreOut = core.stdout + core.stderr + issue.stdout + issue.stderr
    assert.notInclude(coreOut, secret)
  }, 60_000)

  it("refuses a password in the --database flag without echoing it", async () => {
    const refused = run(["core", "--port", "0", "--data-dir", tempDir("agentwire-pg-refused-"), "--database", databaseUrl])
    assert.strictEqual(await refused.exited, 2)
    assert.include(refused.stderr, "--database must not carry a password")
    assert.notInclude(refused.stdout + refused.stderr, secret)
  }, 30_000)
})
