/**
 * `agentwire demo --keep-running` / `--no-daemon` ended by a signal (issue #20): the demo stops its daemon
 * child, waits for it, and removes its temporary data directory (credential, token, database) on SIGTERM,
 * SIGHUP and SIGINT alike. TMPDIR points at a directory of the test's own, so "nothing left" is checkable.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import { readdirSync, rmSync } from "node:fs"
import { eventually, run, stopAll, tempDir } from "../support/devcoreLive.js"

const parents: Array<string> = []

afterAll(async () => {
  await stopAll()
  for (const dir of parents) rmSync(dir, { recursive: true, force: true })
}, 30_000)

const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

describe("agentwire demo cleanup on signals (end to end)", () => {
  for (const signal of ["SIGTERM", "SIGHUP"] as const) {
    it(`--keep-running stopped by ${signal}: the daemon child exits and the temporary directory is removed`, async () => {
      const parent = tempDir("agentwire-demo-signal-")
      parents.push(parent)
      const demo = run(["demo", "--keep-running"], { TMPDIR: parent })
      await eventually(() => (demo.stdout.includes("Core and the daemon keep running") ? true : undefined), 40_000, "the kept-running demo")
      const pid = Number(/daemon {4}pid (\d+)/.exec(demo.stdout)?.[1])
      assert.isTrue(Number.isInteger(pid) && alive(pid), demo.stdout)
      assert.strictEqual(readdirSync(parent).length, 1, "the demo's temporary directory exists while it runs")
      demo.child.kill(signal)
      assert.strictEqual(await demo.exited, 0, demo.stderr)
      assert.isFalse(alive(pid), "the daemon child was stopped")
      assert.deepStrictEqual(readdirSync(parent), [], "the temporary directory was removed")
    }, 60_000)
  }

  it("--no-daemon stopped by SIGINT removes its temporary directory", async () => {
    const parent = tempDir("agentwire-demo-signal-")
    parents.push(parent)
    const demo = run(["demo", "--no-daemon"], { TMPDIR: parent })
    await eventually(() => (demo.stdout.includes("Ctrl-C stops Core") ? true : undefined), 30_000, "the Core-only demo")
    demo.child.kill("SIGINT")
    assert.strictEqual(await demo.exited, 0, demo.stderr)
    assert.deepStrictEqual(readdirSync(parent), [])
  }, 60_000)
})
