/**
 * End to end: `agentwire conformance runtime` (the bundled binary) serves a scripted Core, and the bundled
 * `agentwire daemon` is pointed at it exactly as the kit instructs. Proves the kit against agentwire's own
 * Runtime: a passing report for a selection of scenarios (each one a fresh connection after the daemon's
 * reconnect backoff, so real time passes), a stopping scenario last (426: the daemon exits 3), and a
 * divergence reported with its step, frame and values when the Runtime declares something else. The
 * throwaway credential directory the kit creates is gone once the kit has exited (pass, fail or SIGTERM).
 */
import { assert, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { type Proc, start, tempDir } from "../support/conformanceLive.js"

const daemonArgsFrom = (instructions: string): Array<string> => {
  const match = /agentwire daemon (--core-url \S+ --device-id \S+ --credential-file \S+)\)/.exec(instructions)
  assert.isNotNull(match, instructions)
  return match![1]!.split(" ")
}

const withProcs = async (f: (track: (p: Proc) => Proc) => Promise<void>) => {
  const procs: Array<Proc> = []
  try {
    await f((p) => {
      procs.push(p)
      return p
    })
  } finally {
    for (const p of procs) p.kill()
  }
}

describe("agentwire conformance runtime (live, against agentwire daemon)", () => {
  it("passes the selected scenarios and ends with the Runtime stopped by the version scenario", async () => {
    await withProcs(async (track) => {
      const scenarios = ["malformed-requests", "preparation-ready-start-done", "function-results", "connection-replacement", "incompatible-version"]
      const kit = track(start(["conformance", "runtime", "--listen", "127.0.0.1:0", "--json", ...scenarios.flatMap((s) => ["--scenario", s])]))
      const instructions = await kit.line(/for agentwire itself/, 10_000)
      // The throwaway credential exists (0600) while the kit runs; read it now, it is removed on exit.
      const credentialFile = daemonArgsFrom(instructions)[5]!
      assert.match(Path.basename(Path.dirname(credentialFile)), /^agentwire-conformance-/)
      const credential = Fs.readFileSync(credentialFile, "utf8").trim()
      assert.strictEqual(Fs.statSync(credentialFile).mode & 0o777, 0o600)
      const profile = tempDir()
      const daemon = track(start(["daemon", ...daemonArgsFrom(instructions), "--profile", profile]))
      assert.strictEqual(await kit.exited(60_000), 0, kit.stderr())
      const report = JSON.parse(kit.stdout()) as { summary: { passed: number; failed: number }; results: Array<{ scenario: string; verdict: { _tag: string } }> }
      assert.deepStrictEqual(report.results.map((r) => [r.scenario, r.verdict._tag]), scenarios.map((s) => [s, "Pass"]))
      assert.deepStrictEqual(report.summary, { passed: 5, failed: 0, skipped: 0 } as never)
      // The 426 is permanent for the daemon: it stops with its "rejected" exit code, and never printed the credential.
      assert.strictEqual(await daemon.exited(10_000), 3)
      for (const text of [kit.stdout(), kit.stderr(), daemon.stdout(), daemon.stderr()]) assert.notInclude(text, credential)
      // The kit removed its throwaway credential directory when it exited.
      assert.isFalse(Fs.existsSync(Path.dirname(credentialFile)), `${Path.dirname(credentialFile)} is left on disk`)
      Fs.rmSync(profile, { recursive: true, force: true })
    })
  }, 90_000)

  it("binds the Runtime to its workspace fixture and replays the workspace scenarios against the real daemon", async () => {
    await withProcs(async (track) => {
      const kit = track(start(["conformance", "runtime", "--listen", "127.0.0.1:0", "--json", "--workspace-fixture"]))
      const instructions = await kit.line(/for agentwire itself/, 10_000)
      const match = /agentwire daemon (--core-url \S+ --device-id \S+ --credential-file \S+ --environment-id \S+ --workspace (\S+))\)/.exec(instructions)
      assert.isNotNull(match, instructions)
      const workspace = match![2]!
      assert.match(Path.basename(workspace), /^agentwire-workspace-fixture-/)
      // The kit restores the tree before each scenario (remove, then write), so poll rather than catch it mid-restore.
      let present = false
      for (let i = 0; i < 100 && !present; i++) {
        present = Fs.existsSync(Path.join(workspace, "README.md"))
        if (!present) await new Promise((resolve) => setTimeout(resolve, 50))
      }
      assert.isTrue(present, "the fixture tree is in the workspace")
      const profile = tempDir()
      track(start(["daemon", ...match![1]!.split(" "), "--profile", profile]))
      assert.strictEqual(await kit.exited(120_000), 0, kit.stderr())
      const report = JSON.parse(kit.stdout()) as { results: Array<{ scenario: string; verdict: { _tag: string; reason?: string } }> }
      const verdicts = new Map(report.results.map((r) => [r.scenario, r.verdict._tag]))
      // Every workspace scenario the wire alone can reproduce passes against the real daemon and its real files.
      for (
        const name of [
          "workspace-read-bytes-and-directory",
          "workspace-write-transfer",
          "workspace-write-unconfirmed",
          "runtime-prepare-transfer",
          "workspace-export-pull",
          "workspace-export-failed-and-refused",
          "bounded-transfer-validation",
          "suspension-quiesce-busy"
        ]
      ) assert.strictEqual(verdicts.get(name), "Pass", name)
      // A native fault is in-process only; the scenarios of an unbound Runtime are skipped with their reason.
      assert.strictEqual(verdicts.get("workspace-read-unknown-no-replay"), "Skip")
      const unbound = report.results.find((r) => r.scenario === "preparation-ready-start-done")
      assert.match(unbound?.verdict.reason ?? "", /without an Environment binding/)
      // The fixture directory is removed when the kit exits.
      assert.isFalse(Fs.existsSync(workspace), `${workspace} is left on disk`)
      Fs.rmSync(profile, { recursive: true, force: true })
    })
  }, 150_000)

  it("reports the first divergent frame and exits 1 when the Runtime declares another declaration", async () => {
    await withProcs(async (track) => {
      const kit = track(start(["conformance", "runtime", "--listen", "127.0.0.1:0", "--scenario", "preparation-ready-start-done"]))
      const instructions = await kit.line(/for agentwire itself/, 10_000)
      const profile = tempDir()
      track(start(["daemon", ...daemonArgsFrom(instructions), "--profile", profile, "--scripted-disable", "permissions"]))
      assert.strictEqual(await kit.exited(30_000), 1, kit.stderr())
      const table = kit.stdout()
      assert.match(
        table,
        /preparation-ready-start-done\s+FAIL\s+step 2 \(Runtime\): frame differs at payload\.supported_agent_kinds\[0\]\.capabilities\.permissions \[heartbeat\]; expected true; got false/
      )
      assert.include(table, "0 passed, 1 failed, 0 skipped (runtime under test)")
      // A failing run removes its throwaway credential directory too.
      assert.isFalse(Fs.existsSync(Path.dirname(daemonArgsFrom(instructions)[5]!)))
      Fs.rmSync(profile, { recursive: true, force: true })
    })
  }, 60_000)

  it("removes its throwaway credential directory when stopped by SIGTERM before any Runtime connects", async () => {
    await withProcs(async (track) => {
      const kit = track(start(["conformance", "runtime", "--listen", "127.0.0.1:0", "--scenario", "preparation-ready-start-done"]))
      const instructions = await kit.line(/for agentwire itself/, 10_000)
      const directory = Path.dirname(daemonArgsFrom(instructions)[5]!)
      // A scenario the kit replays live, so the kit waits for a Runtime (a clock-controlled one is skipped at once).
      assert.isTrue(Fs.existsSync(directory), `${directory} missing while the kit waits; stderr:\n${kit.stderr()}`)
      kit.child.kill("SIGTERM")
      assert.strictEqual(await kit.exited(10_000), 0, kit.stderr())
      assert.isFalse(Fs.existsSync(directory), `${directory} is left on disk`)
    })
  }, 30_000)
})
