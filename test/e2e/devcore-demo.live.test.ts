/**
 * `agentwire demo` (what `npm start` runs) with the real binary: one complete Turn between an embedded dev
 * Core and a spawned daemon, printed live. It must exit 0, print the frames in protocol order, and never print
 * a secret.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import { existsSync, readFileSync, rmSync } from "node:fs"
import { join } from "node:path"
import { run, stopAll, tempDir } from "../support/devcoreLive.js"

const dir = tempDir("agentwire-demo-e2e-")

afterAll(async () => {
  await stopAll()
  rmSync(dir, { recursive: true, force: true })
}, 30_000)

describe("agentwire demo (end to end)", () => {
  it("runs one Turn, prints the frames in order with their direction, and exits 0 after a clean shutdown", async () => {
    const demo = run(["demo", "--data-dir", dir])
    const code = await demo.exited
    assert.strictEqual(code, 0, demo.stdout + demo.stderr)
    const out = demo.stdout
    const lines = out.split("\n")
    const frameLine = (arrow: string, type: string, contains = "") =>
      lines.findIndex((l) => new RegExp(`^\\s+\\+\\d+\\.\\d{3}s\\s+${arrow} ${type}\\s`).test(l) && l.includes(contains))
    const order = [
      frameLine("←", "heartbeat"),
      frameLine("→", "execution_prepare"),
      frameLine("←", "preparation_status", "preparing"),
      frameLine("←", "preparation_status", "ready"),
      frameLine("→", "execution_start"),
      frameLine("←", "delta", "#1"),
      frameLine("←", "usage"),
      frameLine("→", "prompt_steer"),
      frameLine("←", "prompt_steer_ack", "written"),
      frameLine("←", "prompt_steer_ack", "accepted"),
      frameLine("←", "done"),
      lines.findIndex((l) => l.startsWith("outcome: completed")),
      // The Files API reads back the file the Turn wrote in the daemon's bound workspace.
      lines.findIndex((l) => l.startsWith("files: read back notes/hello.txt (41 bytes): \"hello from a Turn in the bound workspace\\n\"")),
      lines.findIndex((l) => l.startsWith("daemon exited with code 0"))
    ]
    assert.notInclude(order, -1, out)
    assert.deepStrictEqual(order, [...order].sort((a, b) => a - b), out)
    // secrets never appear: the credential, the operator token, bearer headers
    const credential = readFileSync(join(dir, "demo-device.credential"), "utf8").trim()
    const token = readFileSync(join(dir, "operator-token"), "utf8").trim()
    for (const secret of [credential, token]) {
      assert.notInclude(out + demo.stderr, secret)
      assert.notInclude(readFileSync(join(dir, "daemon.log"), "utf8"), secret)
    }
    assert.notInclude(out, "Bearer awdc_")
    assert.notInclude(out, "agent_options")
    assert.isTrue(existsSync(join(dir, "agentwire.db")))
    assert.strictEqual(readFileSync(join(dir, "workspace", "notes", "hello.txt"), "utf8"), "hello from a Turn in the bound workspace\n")
  }, 60_000)
})
