/**
 * Issue #17, "a fast Turn never fails": the real dev Core binary (`agentwire core`, SQLite store) and a
 * scripted device over a real WebSocket on loopback (test/support/fastTurnDevice.ts). The device answers the
 * preparation, then sends `started`, 40,000 deltas of about 1 KiB and `done` as fast as its socket takes them.
 * The Turn must end `completed` with every delta journaled in order, with no SSE client, and again while an
 * SSE client that never reads follows the Turn. The PostgreSQL variant is test/e2e/pg/fast-turn.pg.live.test.ts.
 * Real processes and sockets: every wait is for an event, bounded by the test timeout.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { readFileSync, rmSync } from "node:fs"
import { join } from "node:path"
import { DatabaseSync } from "node:sqlite"
import { type CoreProc, createCredential, operator, startCore, stopAll, tempDir } from "../support/devcoreLive.js"
import { connectFastDevice, type FastDevice, stalledSseClient } from "../support/fastTurnDevice.js"

const Deltas = 40_000
const expected = Array.from({ length: Deltas }, (_, i) => i + 1)

let dir: string
let core: CoreProc
let token: string
let api: ReturnType<typeof operator>
let device: FastDevice | undefined

beforeAll(async () => {
  dir = tempDir()
  core = await startCore(dir)
  token = readFileSync(join(dir, "operator-token"), "utf8").trim()
  api = operator(core.url, token)
  const { credential } = await createCredential(dir, "dev-fast")
  device = await connectFastDevice(core.url, "dev-fast", credential, api)
}, 60_000)

afterAll(async () => {
  device?.close()
  await stopAll()
  rmSync(dir, { recursive: true, force: true })
}, 30_000)

/** The journaled delta sequences of a Turn, in journal order. */
const journaledDeltas = (turnId: string): ReadonlyArray<number> => {
  const db = new DatabaseSync(join(dir, "agentwire.db"), { readOnly: true })
  try {
    const rows = db.prepare("SELECT body_json FROM turn_events WHERE turn_id = ? AND kind = 'frame' AND type = 'delta' ORDER BY seq")
      .all(turnId) as unknown as ReadonlyArray<{ body_json: string }>
    return rows.map((row) => (JSON.parse(row.body_json) as { payload: { sequence: number } }).payload.sequence)
  } finally {
    db.close()
  }
}

describe("a fast Turn never fails (issue #17, SQLite)", () => {
  it("completes a Turn of 40,000 deltas sent as fast as the socket takes them, every delta journaled in order", async () => {
    const session = await api.post("/sessions", { agent_kind: "scripted" })
    assert.strictEqual(session.status, 201)
    const { outcome, turnId } = await device!.fastTurn(session.body.session_id, Deltas)
    assert.deepStrictEqual([outcome.status, outcome.error_code, outcome.content], ["completed", undefined, "all"])
    assert.deepStrictEqual(journaledDeltas(turnId), expected)
  }, 300_000)

  it("completes it while an SSE client that never reads follows the Turn", async () => {
    const session = await api.post("/sessions", { agent_kind: "scripted" })
    let drop = () => {}
    const { outcome, turnId } = await device!.fastTurn(session.body.session_id, Deltas, (id) => {
      drop = stalledSseClient(core.url, token, id)
    })
    drop()
    assert.deepStrictEqual([outcome.status, outcome.error_code], ["completed", undefined])
    assert.deepStrictEqual(journaledDeltas(turnId), expected)
  }, 300_000)
})
