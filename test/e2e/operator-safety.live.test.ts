/**
 * Operator safety with the real binary (issue #20): one Core per data directory, credential commands that
 * never create a store behind a typo, `--output` files that are 0600 from their first byte, and a revoke that
 * closes the device's live connection through the running Core and says so.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import { existsSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs"
import { join } from "node:path"
import { eventually, operator, runToEnd, startCore, startDaemon, stopAll, tempDir } from "../support/devcoreLive.js"

const dirs: Array<string> = []
const newDir = () => {
  const dir = tempDir("agentwire-safety-")
  dirs.push(dir)
  return dir
}

afterAll(async () => {
  await stopAll()
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
}, 30_000)

describe("operator safety (end to end)", () => {
  it("credential commands refuse a data directory without a store unless --init, and create nothing", async () => {
    const dir = join(newDir(), "typo")
    for (const command of ["create", "revoke"]) {
      const result = await runToEnd(["core", "credential", command, "--device-id", "dev-x", "--data-dir", dir])
      assert.strictEqual(result.code, 2, result.stderr)
      assert.include(result.stderr, `no agentwire store in ${dir}`)
      assert.include(result.stderr, "--init")
      assert.strictEqual(result.stdout, "")
      assert.isFalse(existsSync(dir), "nothing was created")
    }
  })

  it("create --init --output FILE writes the credential to a 0600 file and prints only where it went", async () => {
    const dir = newDir()
    const file = join(dir, "dev-x.credential")
    const result = await runToEnd(["core", "credential", "create", "--device-id", "dev-x", "--data-dir", dir, "--init", "--output", file])
    assert.strictEqual(result.code, 0, result.stderr)
    const credential = readFileSync(file, "utf8")
    assert.match(credential, /^awdc_[A-Za-z0-9_-]{43}\n$/)
    assert.strictEqual(statSync(file).mode & 0o777, 0o600)
    assert.strictEqual(result.stdout, `wrote the credential of device dev-x to ${file} (mode 0600)\n`)
    assert.notInclude(result.stdout + result.stderr, credential.trim())
    assert.deepStrictEqual(readdirSync(dir).filter((f) => f.endsWith(".tmp")), [], "no temporary file is left")
    // replacing: the same path gets the new credential, still 0600
    const again = await runToEnd(["core", "credential", "create", "--device-id", "dev-x", "--data-dir", dir, "--output", file])
    assert.strictEqual(again.code, 0, again.stderr)
    assert.notStrictEqual(readFileSync(file, "utf8"), credential)
    assert.strictEqual(statSync(file).mode & 0o777, 0o600)
  })

  it("a second Core on the same data directory exits 2 with a clear message, and the first keeps serving", async () => {
    const dir = newDir()
    const first = await startCore(dir)
    const second = await runToEnd(["core", "--port", "0", "--data-dir", dir])
    assert.strictEqual(second.code, 2, second.stderr)
    assert.include(second.stderr, `another agentwire core is using the data directory ${dir} (listening on ${first.url})`)
    assert.strictEqual(second.stdout, "")
    const token = readFileSync(join(dir, "operator-token"), "utf8").trim()
    assert.strictEqual((await operator(first.url, token).get("/devices")).status, 200)
    // a taken port names the address and the reason
    const other = newDir()
    const busy = await runToEnd(["core", "--port", String(first.port), "--data-dir", other])
    assert.strictEqual(busy.code, 2)
    assert.include(busy.stderr, `cannot listen on 127.0.0.1:${first.port} (EADDRINUSE: the port is already in use)`)
  })

  it("revoke goes through the running Core, closes the device's connection and says so; without a Core it says none was open", async () => {
    const dir = newDir()
    const core = await startCore(dir)
    const token = readFileSync(join(dir, "operator-token"), "utf8").trim()
    const api = operator(core.url, token)
    const file = join(dir, "dev-r.credential")
    assert.strictEqual((await runToEnd(["core", "credential", "create", "--device-id", "dev-r", "--data-dir", dir, "--output", file])).code, 0)
    startDaemon(core.url, "dev-r", file, join(dir, "profile"))
    await eventually(async () => ((await api.get("/devices/dev-r")).body?.online === true ? true : undefined), 25_000, "dev-r online")
    const revoked = await runToEnd(["core", "credential", "revoke", "--device-id", "dev-r", "--data-dir", dir])
    assert.strictEqual(revoked.code, 0, revoked.stderr)
    assert.strictEqual(
      revoked.stdout,
      `revoked the credentials of device dev-r through the running Core at ${core.url}; its live connection was closed\n`
    )
    const device = await api.get("/devices/dev-r")
    assert.deepStrictEqual([device.body.online, device.body.revoked], [false, true])
    const unknown = await runToEnd(["core", "credential", "revoke", "--device-id", "nobody", "--data-dir", dir])
    assert.strictEqual(unknown.code, 2)
    assert.include(unknown.stderr, "unknown device nobody")

    await stopAll()
    const offline = await runToEnd(["core", "credential", "revoke", "--device-id", "dev-r", "--data-dir", dir])
    assert.strictEqual(offline.code, 0, offline.stderr)
    assert.strictEqual(offline.stdout, `revoked the credentials of device dev-r; no Core is running on ${dir}, so it had no open connection\n`)
  }, 60_000)
})
