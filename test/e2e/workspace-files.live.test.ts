/**
 * The workspace families end to end: the dev Core in this process (its Files service and the gateway's write
 * driver) and the real daemon binary bound to a temporary workspace. Reads a file and a directory, writes a
 * 10 MiB file through the gateway driver (the public Files API bounds writes at 5 MiB) and reads it back
 * byte-identical, and exports the workspace, comparing the tar's file list and SHA-256 digests with the disk.
 * Real processes, sockets and files, so real time.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Effect, Exit, Option, Redacted } from "effect"
import { createHash, randomBytes } from "node:crypto"
import { mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import * as DevCore from "../../src/core/dev/DevCore.js"
import { Files } from "../../src/core/dev/Files.js"
import { Gateway } from "../../src/core/Gateway.js"
import * as WorkspaceWrite from "../../src/core/workspace/WorkspaceWrite.js"
import { Ids } from "../../src/proto/index.js"
import { run } from "../support/devcoreLive.js"
import { type InProcessDevCore, startInProcessDevCore } from "../support/inProcessDevCore.js"

const EnvironmentId = "6a1f0c2e-3b4d-4e5f-8a9b-0c1d2e3f4a5b"
const token = Redacted.make("awop_workspace-e2e-token")

let core: InProcessDevCore
let workspace: string
let sessionId: string

const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex")
const runIn = <A, E>(effect: Effect.Effect<A, E, DevCore.DevCoreServices>) => core.runIn(effect)

/** Every regular file below `root` (relative path → bytes). */
const walk = (root: string, prefix = ""): Map<string, Buffer> => {
  const out = new Map<string, Buffer>()
  for (const name of readdirSync(join(root, prefix))) {
    const rel = prefix === "" ? name : `${prefix}/${name}`
    const st = statSync(join(root, rel))
    if (st.isDirectory()) for (const [k, v] of walk(root, rel)) out.set(k, v)
    else if (st.isFile()) out.set(rel, readFileSync(join(root, rel)))
  }
  return out
}

/** The regular files of a ustar archive (name → bytes); a GNU long name (`L`) applies to the next entry. */
const untar = (tar: Buffer): Map<string, Buffer> => {
  const out = new Map<string, Buffer>()
  let offset = 0
  let longName: string | undefined
  while (offset + 512 <= tar.length) {
    const header = tar.subarray(offset, offset + 512)
    if (header.every((b) => b === 0)) break
    const field = (start: number, length: number) => header.subarray(start, start + length).toString("utf8").replace(/\0.*$/s, "")
    const size = parseInt(field(124, 12).trim() || "0", 8)
    const type = field(156, 1)
    const prefix = field(345, 155)
    const name = longName ?? (prefix === "" ? field(0, 100) : `${prefix}/${field(0, 100)}`)
    const body = tar.subarray(offset + 512, offset + 512 + size)
    longName = undefined
    if (type === "L") longName = body.toString("utf8").replace(/\0.*$/s, "")
    else if (type === "0" || type === "") out.set(name.replace(/^\.\//, ""), Buffer.from(body))
    offset += 512 + Math.ceil(size / 512) * 512
  }
  return out
}

beforeAll(async () => {
  core = await startInProcessDevCore({
    name: "wsf",
    deviceId: "dev-wsf",
    environmentId: EnvironmentId,
    operatorToken: token,
    seed: (root) => {
      mkdirSync(join(root, "src"))
      writeFileSync(join(root, "README.md"), "hello, workspace\n")
      writeFileSync(join(root, "src", "main.ts"), "export const answer = 42\n")
    }
  })
  workspace = core.workspace
  run(core.daemonArgs)
  await core.declared()
  sessionId = await core.createSession()
}, 60_000)

afterAll(() => core?.close(), 30_000)

describe("the workspace families against the real daemon", () => {
  it("reads a file and a directory through an idle read-only preparation", async () => {
    const file = await runIn(Effect.flatMap(Files, (f) => f.read(sessionId, "README.md", 1024)))
    assert.isTrue(Exit.isSuccess(file), String(file))
    if (Exit.isSuccess(file)) assert.strictEqual(Buffer.from(file.value.data).toString("utf8"), "hello, workspace\n")
    const root = await runIn(Effect.flatMap(Files, (f) => f.list(sessionId, "", 1024)))
    assert.isTrue(Exit.isSuccess(root), String(root))
    if (Exit.isSuccess(root)) {
      const names = root.value.entries.map((e) => `${e.kind}:${e.name}`).sort()
      assert.includeMembers(names, ["directory:src", "file:README.md"])
    }
  })

  it("writes a 10 MiB file in acknowledged chunks and reads it back byte-identical", async () => {
    const body = randomBytes(10 * 1024 * 1024)
    const written = await runIn(Effect.gen(function* () {
      const gateway = yield* Gateway
      const device = Option.getOrThrow(yield* gateway.session(Ids.unsafeMake.deviceId("dev-wsf")))
      return yield* WorkspaceWrite.write(device, {
        operationId: Ids.unsafeMake.operationId("0b1c2d3e-4f50-4a6b-8c7d-9e0f1a2b3c4d"),
        environmentId: EnvironmentId,
        sessionId,
        path: "data/big.bin",
        body
      })
    }))
    assert.isTrue(Exit.isSuccess(written), String(written))
    assert.strictEqual(sha(readFileSync(join(workspace, "data", "big.bin"))), sha(body))
    const head = await runIn(Effect.flatMap(Files, (f) => f.read(sessionId, "data/big.bin", 1024 * 1024)))
    assert.isTrue(Exit.isSuccess(head), String(head))
    if (Exit.isSuccess(head)) {
      assert.isTrue(head.value.truncated)
      assert.isTrue(Buffer.from(head.value.data).equals(body.subarray(0, 1024 * 1024)))
    }
  }, 120_000)

  it("exports the workspace: the tar's file list and digests equal the disk", async () => {
    const chunks: Array<Uint8Array> = []
    const exported = await runIn(Effect.flatMap(Files, (f) => f.exportTar(sessionId, (bytes) => Effect.sync(() => void chunks.push(bytes)))))
    assert.isTrue(Exit.isSuccess(exported), String(exported))
    const archive = untar(Buffer.concat(chunks))
    const disk = walk(workspace)
    assert.deepStrictEqual([...archive.keys()].sort(), [...disk.keys()].sort())
    for (const [name, bytes] of disk) assert.strictEqual(sha(archive.get(name)!), sha(bytes), name)
  }, 120_000)
})
