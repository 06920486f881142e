/**
 * The workspace export routed between two `agentwire core` processes on one PostgreSQL schema (docs/multi-node.md
 * "Workspace export from any node"), with the real daemon on node B: the tar exported through node A is
 * byte-identical to the one node B serves itself; while a 16 MiB export streams through A the stream's rows in
 * PostgreSQL stay within the window (4 chunks and the final row); B killed (`SIGKILL`) while the export through
 * A is held mid-stream ends A's HTTP response incomplete (never a complete-looking short tar), and the stream's
 * rows are gone. Real processes.
 */
import { afterAll, assert, beforeAll, it } from "@effect/vitest"
import { randomBytes } from "node:crypto"
import { mkdirSync, realpathSync, rmSync, writeFileSync } from "node:fs"
import { get } from "node:http"
import { join } from "node:path"
import { eventually, operator, run, startCore, startDaemon, stopAll, tempDir } from "../../support/devcoreLive.js"
import { createSchema, describePostgres, dropSchema, schemaUrl, queryIn, testDatabaseUrl } from "../../support/postgres.js"

const EnvironmentId = "8e2d3c4b-5f6a-4b7c-9d8e-0f1a2b3c4d5e"
const MiB = 1024 * 1024

/** A Core node on the shared schema (`agentwire core`, URL from its first line). */
const startNode = async (dir: string, env: Record<string, string>) => {
  const proc = await startCore(dir, 0, { env })
  return { proc, url: proc.url }
}

describePostgres("the workspace export routed between Core nodes (end to end)", (url) => {
  let schema: string
  let dir: string
  let workspace: string
  let env: Record<string, string>

  beforeAll(async () => {
    schema = await createSchema(url)
    dir = tempDir("agentwire-pg-export-")
    workspace = realpathSync(tempDir("agentwire-pg-export-ws-"))
    env = { AGENTWIRE_CORE_DATABASE: schemaUrl(url, schema) }
  }, 30_000)

  afterAll(async () => {
    await stopAll()
    if (testDatabaseUrl !== undefined && schema !== undefined) await dropSchema(testDatabaseUrl, schema)
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
    if (workspace !== undefined) rmSync(workspace, { recursive: true, force: true })
  }, 30_000)

  it("streams the owner's tar through the other node, identical and with bounded rows; a killed owner cuts it", async () => {
    const token = "op-token-export-e2e"
    const nodeEnv = { ...env, AGENTWIRE_OPERATOR_TOKEN: token }
    const a = await startNode(join(dir, "a"), nodeEnv)
    const b = await startNode(join(dir, "b"), nodeEnv)
    const apiA = operator(a.url, token)
    const apiB = operator(b.url, token)
    const issue = run(["core", "credential", "create", "--device-id", "export-1", "--data-dir", join(dir, "c"), "--init"], env)
    assert.strictEqual(await issue.exited, 0)
    const credentialFile = join(dir, "export-1.cred")
    writeFileSync(credentialFile, issue.stdout.trim() + "\n", { mode: 0o600 })
    // 16 MiB of incompressible bytes in four files, and a small one.
    mkdirSync(join(workspace, "data"))
    for (let i = 0; i < 4; i++) writeFileSync(join(workspace, "data", `blob-${i}.bin`), randomBytes(4 * MiB))
    writeFileSync(join(workspace, "README.md"), "exported from b\n")
    const daemon = startDaemon(b.url, "export-1", credentialFile, join(dir, "profile"), {
      args: ["--environment-id", EnvironmentId, "--workspace", workspace]
    })
    await eventually(async () => {
      const seenByA = (await apiA.get("/devices/export-1")).body
      const seenByB = (await apiB.get("/devices/export-1")).body
      return seenByA?.owner?.node_url === b.url && seenByA.owner.live === true && seenByB?.declaration?.source === "live"
        ? seenByA
        : undefined
    }, 25_000, "device export-1 owned by node B and declared there")
    const session = await apiA.post("/sessions", {
      agent_kind: "scripted",
      device_id: "export-1",
      environment: { type: "self_hosted", id: EnvironmentId, workspace_directory: workspace }
    })
    assert.strictEqual(session.status, 201, JSON.stringify(session.body))
    const exportPath = `/api/v1/operator/sessions/${session.body.session_id}/files/export`
    const download = async (base: string) => {
      const res = await fetch(`${base}${exportPath}`, { headers: { authorization: `Bearer ${token}` } })
      assert.strictEqual(res.status, 200)
      assert.strictEqual(res.headers.get("content-type"), "application/x-tar")
      return Buffer.from(await res.arrayBuffer())
    }
    const rowCounts = async () =>
      (await queryIn(url, schema, `SELECT (SELECT count(*) FROM node_streams) AS streams,
        (SELECT count(*) FROM node_stream_chunks) AS chunks,
        (SELECT count(*) FROM node_stream_chunks WHERE final_json IS NOT NULL) AS finals`))
        .map((r) => ({ streams: Number(r.streams), chunks: Number(r.chunks), finals: Number(r.finals) }))[0]!

    // 1. Through B (local) and through A (routed): the same bytes; rows sampled while A's export streams.
    const fromB = await download(b.url)
    assert.isAbove(fromB.length, 16 * MiB)
    let sampling = true
    const samples: Array<{ streams: number; chunks: number; finals: number }> = []
    const sampler = (async () => {
      while (sampling) samples.push(await rowCounts())
    })()
    const fromA = await download(a.url)
    sampling = false
    await sampler
    assert.strictEqual(fromA.length, fromB.length)
    assert.isTrue(fromA.equals(fromB), "the tar through A is byte-identical to B's")
    // Bounded rows: at most the window (4 data chunks) plus the final row, whatever the export's size.
    assert.isAbove(samples.filter((s) => s.chunks > 0).length, 0, "rows were seen while streaming")
    assert.isAtMost(Math.max(...samples.map((s) => s.chunks - s.finals)), 4)
    assert.isAtMost(Math.max(...samples.map((s) => s.chunks)), 5)
    assert.deepStrictEqual(await eventually(async () => {
      const c = await rowCounts()
      return c.streams === 0 && c.chunks === 0 ? c : undefined
    }, 10_000, "stream rows deleted after completion"), { streams: 0, chunks: 0, finals: 0 })

    // 2. Held mid-stream through A (the reader stops after 1 MiB), then B is killed: A's response ends incomplete.
    const cut = await new Promise<{ complete: boolean; received: number }>((done, failed) => {
      const request = get(`${a.url}${exportPath}`, { headers: { authorization: `Bearer ${token}` } }, (res) => {
        assert.strictEqual(res.statusCode, 200)
        let received = 0
        let killed = false
        res.on("data", (chunk: Buffer) => {
          received += chunk.length
          if (received >= MiB && !killed) {
            killed = true
            res.pause()
            // The producer on B waits on the window: four unread chunks, no final row.
            eventually(async () => {
              const c = await rowCounts()
              return c.streams === 1 && c.chunks === 4 && c.finals === 0 ? c : undefined
            }, 20_000, "the producer on B blocked by the window").then(() => {
              b.proc.child.kill("SIGKILL")
              res.resume()
            }, failed)
          }
        })
        res.on("error", () => undefined)
        res.on("close", () => done({ complete: res.complete, received }))
      })
      request.on("error", failed)
    })
    assert.isFalse(cut.complete, "the response through A is cut, not ended as a complete tar")
    assert.isBelow(cut.received, fromB.length)
    assert.deepStrictEqual(await eventually(async () => {
      const c = await rowCounts()
      return c.streams === 0 && c.chunks === 0 ? c : undefined
    }, 20_000, "stream rows deleted after the cut"), { streams: 0, chunks: 0, finals: 0 })
    daemon.child.kill("SIGTERM")
  }, 150_000)
})
