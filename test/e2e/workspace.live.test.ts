/**
 * A self_hosted workspace end to end with the real binary: `agentwire core` + `agentwire daemon` bound to a
 * local Environment (`--environment-id`, `--workspace`), a Session naming that device and Environment, a Turn
 * that writes and reads a file in the workspace, and the Files API reading, writing and exporting the same
 * directory. Real processes, sockets and files, so small real waits.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { createHash } from "node:crypto"
import { mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { readTar } from "../support/tarReader.js"
import { type BoundDevCore, startBoundDevCore, turnFinished } from "../support/boundDevCore.js"
import { type CoreProc, runToEnd, script } from "../support/devcoreLive.js"

const EnvironmentId = "5c2f7b7e-1a0b-4e7e-9d55-6b1f0a2c3d4e"

let stack: BoundDevCore
let dir: string
let workspace: string
let core: CoreProc
let token: string
let api: BoundDevCore["api"]

const session = async () => {
  const created = await api.post("/sessions", { agent_kind: "scripted", device_id: "dev-ws", environment: stack.binding() })
  assert.strictEqual(created.status, 201, JSON.stringify(created.body))
  return created.body.session_id as string
}

beforeAll(async () => {
  stack = await startBoundDevCore({
    name: "ws-e2e",
    deviceId: "dev-ws",
    environmentId: EnvironmentId,
    seed: (root) => {
      mkdirSync(join(root, "src"))
      writeFileSync(join(root, "README.md"), "hello, workspace\n")
      writeFileSync(join(root, "src", "main.ts"), "export {}\n")
    }
  })
  ;({ dir, workspace, core, token, api } = stack)
}, 60_000)

afterAll(() => stack?.close(), 30_000)

describe("a self_hosted workspace (end to end)", () => {
  it("runs a Turn with the exact binding: it writes and reads a file in the workspace root", async () => {
    const device = await api.get("/devices/dev-ws")
    const scripted = device.body.declaration.kinds.find((k: any) => k.kind === "scripted")
    for (const c of ["local_environment", "workspace_read_preparation", "workspace_output_export"]) {
      assert.isTrue(scripted.capabilities[c], c)
    }
    const s = await session()
    const started = await api.post(`/sessions/${s}/turns`, {
      input: script([{ write_file: { path: "notes/from-turn.txt", text: "written by a Turn" } }, { read_file: "notes/from-turn.txt" }])
    })
    assert.strictEqual(started.status, 202, JSON.stringify(started.body))
    const outcome = await turnFinished(api, started.body.turn_id)
    assert.strictEqual(outcome.status, "completed", JSON.stringify(outcome.outcome))
    assert.strictEqual(readFileSync(join(workspace, "notes", "from-turn.txt"), "utf8"), "written by a Turn")
    assert.include(outcome.outcome.content, "written by a Turn")
  })

  it("refuses a Session whose binding is not the daemon's: the Turn fails, nothing is written", async () => {
    const other = await api.post("/sessions", {
      agent_kind: "scripted",
      device_id: "dev-ws",
      environment: { type: "self_hosted", id: "00000000-0000-4000-8000-000000000001", workspace_directory: workspace }
    })
    assert.strictEqual(other.status, 201)
    const started = await api.post(`/sessions/${other.body.session_id}/turns`, {
      input: script([{ write_file: { path: "must-not-exist.txt", text: "x" } }])
    })
    const outcome = await turnFinished(api, started.body.turn_id)
    assert.notStrictEqual(outcome.status, "completed")
    assert.throws(() => readFileSync(join(workspace, "must-not-exist.txt")))
  })

  it("lists a directory and reads a file through the Files API (idle read-only preparation on the real daemon)", async () => {
    const s = await session()
    const root = await api.get(`/sessions/${s}/files?path=`)
    assert.strictEqual(root.status, 200, JSON.stringify(root.body))
    const names = root.body.entries.map((e: any) => `${e.kind}:${e.name}`)
    assert.includeMembers(names, ["file:README.md", "directory:src"])
    const readme = root.body.entries.find((e: any) => e.name === "README.md")
    assert.strictEqual(readme.size_bytes, "hello, workspace\n".length)
    const src = await api.get(`/sessions/${s}/files?path=src`)
    assert.deepStrictEqual(src.body, { entries: [{ name: "main.ts", kind: "file", size_bytes: 10 }], truncated: false })
    const file = await api.get(`/sessions/${s}/files/content?path=README.md`)
    assert.deepStrictEqual(file.body, { data: Buffer.from("hello, workspace\n").toString("base64"), size_bytes: 17, truncated: false })
    const head = await api.get(`/sessions/${s}/files/content?path=README.md&max_bytes=5`)
    assert.deepStrictEqual(head.body, { data: Buffer.from("hello").toString("base64"), size_bytes: 5, truncated: true })
    const missing = await api.get(`/sessions/${s}/files/content?path=nope.txt`)
    assert.deepStrictEqual([missing.status, missing.body.error, missing.body.source], [404, "file_not_found", "runtime"])
    assert.deepStrictEqual((await api.get(`/sessions/${s}/files?path=README.md`)).body, { entries: [], truncated: false })
    const escape = await api.get(`/sessions/${s}/files/content?path=../etc/passwd`)
    assert.deepStrictEqual([escape.status, escape.body.source], [400, "core"])
  })

  it("the operator client: sessions create with the binding flags, files list and files read", async () => {
    const cli = (...args: ReadonlyArray<string>) => runToEnd([...args, "--data-dir", dir])
    const created = await cli(
      "sessions", "create", "--agent-kind", "scripted", "--device-id", "dev-ws",
      "--environment-id", EnvironmentId, "--workspace-directory", workspace
    )
    assert.strictEqual(created.code, 0, created.stderr)
    const s = created.stdout.trim()
    const listed = await cli("files", "list", "--session", s)
    assert.strictEqual(listed.code, 0, listed.stderr)
    assert.match(listed.stdout, /file\s+17\s+README\.md/)
    assert.match(listed.stdout, /directory\s+-\s+src/)
    const read = await cli("files", "read", "--session", s, "--path", "README.md")
    assert.deepStrictEqual([read.code, read.stdout], [0, "hello, workspace\n"])
    const truncated = await cli("files", "read", "--session", s, "--path", "README.md", "--max-bytes", "5")
    assert.deepStrictEqual([truncated.stdout, truncated.stderr.trim()], ["hello", "(truncated at 5 bytes)"])
    const missing = await cli("files", "read", "--session", s, "--path", "nope.txt")
    assert.strictEqual(missing.code, 1)
    assert.match(missing.stderr, /404 file_not_found/)
    const half = await cli("sessions", "create", "--agent-kind", "scripted", "--environment-id", EnvironmentId)
    assert.strictEqual(half.code, 2)
  })

  it("exports the workspace as a tar through the Files API and the operator client: file list and digests match", async () => {
    const big = Buffer.from(Array.from({ length: 300_001 }, (_, i) => (i * 7) % 256))
    writeFileSync(join(workspace, "src", "big.bin"), big)
    const digest = (b: Uint8Array) => createHash("sha256").update(b).digest("hex")
    const expected = new Map<string, string>()
    for (const rel of readdirSync(workspace, { recursive: true }) as Array<string>) {
      if (statSync(join(workspace, rel)).isFile()) expected.set(rel, digest(readFileSync(join(workspace, rel))))
    }
    const s = await session()
    const res = await fetch(`${core.url}/api/v1/operator/sessions/${s}/files/export`, { headers: { authorization: `Bearer ${token}` } })
    assert.strictEqual(res.status, 200)
    const archive = Buffer.from(await res.arrayBuffer())
    const files = readTar(archive).filter((e) => e.type === "file")
    assert.deepStrictEqual(new Map(files.map((e) => [e.path, e.sha256])), expected)
    assert.isTrue(expected.has("src/big.bin"))
    const output = join(dir, "export.tar")
    const cli = await runToEnd(["files", "export", "--session", s, "--output", output, "--data-dir", dir])
    assert.strictEqual(cli.code, 0, cli.stderr)
    assert.strictEqual(digest(readFileSync(output)), digest(archive))
  })
})
