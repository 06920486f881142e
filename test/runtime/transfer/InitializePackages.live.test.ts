/**
 * `runtime_prepare` `initialize` with `npm` and `python` package installs (issue #14), offline, against the real
 * package managers: what the Runtime really runs (Initialize.ts) with `network: disabled` on a daemon whose
 * binding is disabled — `npm install --offline` of a tarball `npm pack` made at test time, and `python3 -m pip
 * install --no-index --target <root>/.agentwire/python` of a wheel built at test time, found through
 * `PIP_FIND_LINKS` set by a `configure` step. Nothing touches a registry: a package that exists nowhere locally
 * fails (`runtime_preparation_failed` with the exit code) instead of being fetched; `network: enabled` on a
 * disabled binding is refused before anything runs. Skipped with a message when pip is absent.
 */
import { spawnSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { initializationRefusal, runInitialization } from "../../../src/runtime/transfer/Initialize.js"
import { childEnvFrom } from "../../../src/runtime/transfer/TransferSettings.js"
import { tempWorkspace } from "../../support/workspaceDir.js"

/** A scoped temporary directory (removed with the test's scope). */
const tempDir = Effect.acquireRelease(
  Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "agentwire-pkg-fixture-"))),
  (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
)

/** Exactly the base environment the daemon gives initialization commands (its allowlist), npm's cache in `cache`. */
const childEnv = (cache: string): Readonly<Record<string, string>> =>
  childEnvFrom({ ...process.env, npm_config_cache: Path.join(cache, "npm") })

const pipAvailable = spawnSync("python3", ["-m", "pip", "--version"], { stdio: "ignore" }).status === 0

/**
 * The directory of the interpreter `python3` resolves to. A version manager's shim (pyenv) runs a global `rehash`
 * after every `pip install`, under a machine-wide lock that a killed or concurrent run can hold for 60 s and then
 * fail the install; the test puts the real interpreter first on PATH so the Runtime's `python3` is that one.
 */
const interpreterDir = (): string => {
  const r = spawnSync("python3", ["-c", "import sys; print(sys.executable)"], { encoding: "utf8" })
  return Path.dirname(r.stdout.trim())
}

/** A wheel built by hand (a zip: the module, METADATA, WHEEL, RECORD), so no build backend or index is needed. */
const buildWheel = (dir: string): string => {
  const script = `
import base64, hashlib, sys, zipfile
out = sys.argv[1]
files = {
  "aw_fixture/__init__.py": "VALUE = 'installed offline'\\n",
  "aw_fixture-1.0.dist-info/METADATA": "Metadata-Version: 2.1\\nName: aw-fixture\\nVersion: 1.0\\n",
  "aw_fixture-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\\nGenerator: agentwire-test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n",
}
record = []
with zipfile.ZipFile(out, "w") as z:
  for name, text in files.items():
    data = text.encode()
    z.writestr(name, data)
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    record.append(f"{name},sha256={digest},{len(data)}")
  record.append("aw_fixture-1.0.dist-info/RECORD,,")
  z.writestr("aw_fixture-1.0.dist-info/RECORD", "\\n".join(record) + "\\n")
`
  const wheel = Path.join(dir, "aw_fixture-1.0-py3-none-any.whl")
  const r = spawnSync("python3", ["-c", script, wheel], { encoding: "utf8" })
  assert.strictEqual(r.status, 0, r.stderr)
  return wheel
}

describe("initialize: npm and python installs, offline", () => {
  it.live("npm install --offline of a local tarball completes; a package found nowhere locally fails, never fetched", () =>
    Effect.scoped(Effect.gen(function* () {
      const ws = yield* tempWorkspace
      const fixture = yield* tempDir
      const pkg = Path.join(fixture, "pkg")
      Fs.mkdirSync(pkg)
      Fs.writeFileSync(Path.join(pkg, "package.json"), JSON.stringify({ name: "aw-fixture-pkg", version: "1.0.0", main: "index.js" }))
      Fs.writeFileSync(Path.join(pkg, "index.js"), "module.exports = 'installed offline'\n")
      const env = childEnv(fixture)
      const packed = spawnSync("npm", ["pack", "--pack-destination", fixture, pkg], { encoding: "utf8", env: { ...process.env, ...env }, cwd: fixture })
      assert.strictEqual(packed.status, 0, packed.stderr)
      const tarball = Path.join(fixture, "aw-fixture-pkg-1.0.0.tgz")
      assert.isTrue(Fs.existsSync(tarball))

      const installed = yield* runInitialization({ action: "npm", network: "disabled", packages: [tarball] }, ws.binding, new Map(), env)
      assert.deepStrictEqual(installed, { outcome: "completed" })
      assert.strictEqual(Fs.readFileSync(ws.at("node_modules/aw-fixture-pkg/index.js"), "utf8"), "module.exports = 'installed offline'\n")

      const missing = yield* runInitialization(
        { action: "npm", network: "disabled", packages: ["aw-fixture-not-anywhere-7f3a"] },
        ws.binding,
        new Map(),
        env
      )
      assert.strictEqual(missing.outcome, "failed")
      assert.strictEqual(missing.error_code, "runtime_preparation_failed")
      assert.isTrue(typeof missing.exit_code === "number" && missing.exit_code !== 0)
      assert.isFalse(Fs.existsSync(ws.at("node_modules/aw-fixture-not-anywhere-7f3a")))

      // The network policy: a step asking for the network on a daemon without it is refused before anything runs.
      assert.deepStrictEqual(
        initializationRefusal({ action: "npm", network: "enabled", packages: [tarball] }, ws.binding),
        { outcome: "rejected", error_code: "runtime_preparation_rejected" }
      )
    })), 120_000)

  it.live(
    pipAvailable
      ? "pip install --no-index of a local wheel (find-links from a configure step) into .agentwire/python; a missing one fails"
      : "pip install --no-index (SKIPPED: python3 -m pip is not available on this machine)",
    () =>
      Effect.scoped(Effect.gen(function* () {
        if (!pipAvailable) return
        const ws = yield* tempWorkspace
        const fixture = yield* tempDir
        buildWheel(fixture)
        const base = childEnv(fixture)
        const env = { ...base, PATH: `${interpreterDir()}${Path.delimiter}${base["PATH"] ?? ""}` }
        const configured = new Map<string, string>()
        assert.deepStrictEqual(
          yield* runInitialization({ action: "configure", env: { PIP_FIND_LINKS: fixture } }, ws.binding, configured, env),
          { outcome: "completed" }
        )
        const installed = yield* runInitialization({ action: "python", network: "disabled", packages: ["aw-fixture"] }, ws.binding, configured, env)
        assert.deepStrictEqual(installed, { outcome: "completed" })
        assert.strictEqual(Fs.readFileSync(ws.at(".agentwire/python/aw_fixture/__init__.py"), "utf8"), "VALUE = 'installed offline'\n")
        const check = spawnSync("python3", ["-c", "import aw_fixture; print(aw_fixture.VALUE)"], {
          encoding: "utf8",
          env: { ...env, PYTHONPATH: ws.at(".agentwire/python") }
        })
        assert.strictEqual(check.stdout.trim(), "installed offline")

        const missing = yield* runInitialization({ action: "python", network: "disabled", packages: ["aw-fixture-not-anywhere"] }, ws.binding, configured, env)
        assert.strictEqual(missing.outcome, "failed")
        assert.isTrue(typeof missing.exit_code === "number" && missing.exit_code !== 0)
      })),
    120_000
  )
})
