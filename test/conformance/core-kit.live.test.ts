/**
 * End to end: `agentwire conformance core` (the bundled binary) acts as a scripted Runtime against the bundled
 * dev Core (`agentwire core`) with a device credential created by `agentwire core credential create`. Proves
 * the Core kit against agentwire's own gateway, and that a wrong credential makes it report failures.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { coreKitScenarios, start, tempDir } from "../support/conformanceLive.js"

const device = "7f0c1a52-3b7e-4d52-9a55-0c2f4c6f9b11"
const eligible = coreKitScenarios

describe("agentwire conformance core (live, against agentwire core)", () => {
  it("passes every scenario a Runtime can drive against the dev Core, and fails them with a revoked credential", async () => {
    const dataDir = tempDir()
    const create = start(["core", "credential", "create", "--device-id", device, "--data-dir", dataDir, "--init"])
    assert.strictEqual(await create.exited(20_000), 0, create.stderr())
    const credentialFile = Path.join(dataDir, "device.credential")
    Fs.writeFileSync(credentialFile, create.stdout(), { mode: 0o600 })
    const core = start(["core", "--port", "0", "--data-dir", dataDir])
    try {
      const url = await new Promise<string>((resolve, reject) => {
        const deadline = Date.now() + 15_000
        const look = () => {
          const m = /agentwire core listening on (\S+)/.exec(core.stdout())
          if (m !== null) resolve(m[1]!)
          else if (Date.now() > deadline) reject(new Error(core.stderr()))
          else setTimeout(look, 20)
        }
        look()
      })
      const kit = start(["conformance", "core", "--url", url, "--device-id", device, "--credential-file", credentialFile, "--json"])
      assert.strictEqual(await kit.exited(60_000), 0, kit.stderr() + kit.stdout())
      const report = JSON.parse(kit.stdout()) as { results: Array<{ scenario: string; verdict: { _tag: string } }> }
      const passed = report.results.filter((r) => r.verdict._tag === "Pass").map((r) => r.scenario)
      assert.deepStrictEqual([...passed].sort(), [...eligible].sort())
      assert.isTrue(report.results.every((r) => r.verdict._tag !== "Fail"))
      assert.notInclude(kit.stdout() + kit.stderr(), create.stdout().trim())

      const wrong = Path.join(dataDir, "wrong.credential")
      Fs.writeFileSync(wrong, "awdc_not-the-credential\n", { mode: 0o600 })
      const failing = start(["conformance", "core", "--url", url, "--device-id", device, "--credential-file", wrong, "--scenario", "heartbeat-and-declaration"])
      assert.strictEqual(await failing.exited(30_000), 1)
      assert.match(failing.stdout(), /heartbeat-and-declaration\s+FAIL\s+step 1 \(Connect\): bootstrap was refused; expected 200; got 401 bad_credential/)
    } finally {
      core.kill()
      Fs.rmSync(dataDir, { recursive: true, force: true })
    }
  }, 90_000)
})
