/**
 * Installing agentwire as a user would (issue #20): `npm pack`, then `npm install -g` of the tarball into a
 * temporary prefix with `--offline` (the tarball must need nothing from a registry: every runtime dependency
 * is bundled), the `agentwire` command on that prefix's PATH, the `agentwire/proto` and `agentwire/gateway`
 * exports importable by a host that has `effect`, one clear line on a Node that is too old, and `npx
 * agentwire` inside the clone. dist/ is built by the global setup (`npm pack --ignore-scripts` packs it as is;
 * a real `npm pack` also runs `prepack`, which adds dist/types).
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import { execFile } from "node:child_process"
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, symlinkSync } from "node:fs"
import { tmpdir } from "node:os"
import { delimiter, dirname, join, resolve } from "node:path"

const root = resolve(import.meta.dirname, "../..")
const work = mkdtempSync(join(tmpdir(), "agentwire-install-"))

afterAll(() => rmSync(work, { recursive: true, force: true }))

/** PATH with the Node that runs this test first (the pinned Node 24), as `npm run` arranges it. */
const path = [dirname(process.execPath), process.env.PATH ?? ""].join(delimiter)

const exec = (file: string, args: ReadonlyArray<string>, options: { cwd?: string; env?: NodeJS.ProcessEnv } = {}) =>
  new Promise<{ code: number; stdout: string; stderr: string }>((done) => {
    execFile(file, args, { cwd: options.cwd ?? work, env: { ...process.env, PATH: path, ...options.env }, timeout: 120_000 }, (error, stdout, stderr) =>
      done({ code: error === null ? 0 : typeof error.code === "number" ? error.code : 1, stdout, stderr }))
  })

const du = (dir: string): number =>
  readdirSync(dir, { withFileTypes: true }).reduce((sum, entry) => {
    const full = join(dir, entry.name)
    return sum + (entry.isDirectory() ? du(full) : entry.isFile() ? statSync(full).size : 0)
  }, 0)

/** A Node older than 22.19 on this machine's PATH (outside node_modules), if there is one. */
const oldNode = async (): Promise<string | undefined> => {
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    if (dir.includes("node_modules")) continue
    const candidate = join(dir, "node")
    if (!existsSync(candidate)) continue
    const version = await exec(candidate, ["-p", "process.versions.node"])
    const [major = 0, minor = 0] = version.stdout.trim().split(".").map(Number)
    if (version.code === 0 && (major < 22 || (major === 22 && minor < 19))) return candidate
  }
  return undefined
}

describe("install from a packed tarball (end to end)", () => {
  it("packs only what the command and the libraries need, installs offline with no dependencies, and runs", async () => {
    const packed = await exec("npm", ["pack", "--ignore-scripts", "--json", "--pack-destination", work], { cwd: root })
    assert.strictEqual(packed.code, 0, packed.stderr)
    const [info] = JSON.parse(packed.stdout) as Array<{ filename: string; files: Array<{ path: string }> }>
    const files = info!.files.map((f) => f.path).sort()
    for (const needed of ["package.json", "README.md", "dist/agentwire.mjs", "dist/agentwire-main.mjs", "dist/lib/proto.mjs", "dist/lib/gateway.mjs"]) {
      assert.include(files, needed)
    }
    assert.deepStrictEqual(files.filter((f) => /^(src|test|bench|scenarios|node_modules)\/|\.map$|meta\.json$/.test(f)), [])

    const prefix = join(work, "prefix")
    const installed = await exec("npm", ["install", "-g", "--offline", "--no-audit", "--no-fund", "--prefix", prefix, join(work, info!.filename)])
    assert.strictEqual(installed.code, 0, installed.stderr)
    const pkg = join(prefix, "lib", "node_modules", "agentwire")
    assert.isFalse(existsSync(join(pkg, "node_modules")), "no dependency was installed")
    const bytes = du(pkg)
    assert.isBelow(bytes, 8 * 1024 * 1024, `installed size ${bytes} bytes`)

    const version = await exec(join(prefix, "bin", "agentwire"), ["--version"])
    assert.strictEqual(version.code, 0, version.stderr)
    assert.match(version.stdout, /^agentwire v\d+\.\d+\.\d+ \(wire \d+\.\d+\.\d+\)\n$/)

    // the library exports, from a host project that has effect and @effect/platform-node (the peers)
    const host = join(work, "host")
    mkdirSync(join(host, "node_modules", "@effect"), { recursive: true })
    cpSync(pkg, join(host, "node_modules", "agentwire"), { recursive: true })
    symlinkSync(join(root, "node_modules", "effect"), join(host, "node_modules", "effect"))
    symlinkSync(join(root, "node_modules", "@effect", "platform-node"), join(host, "node_modules", "@effect", "platform-node"))
    const imported = await exec(process.execPath, [
      "--input-type=module",
      "-e",
      `const proto = await import("agentwire/proto"); const gateway = await import("agentwire/gateway");
       console.log(proto.Version.ProtocolVersion, typeof gateway.GatewayServer.GatewayServer.layer, typeof gateway.Gateway.Gateway)`
    ], { cwd: host })
    assert.strictEqual(imported.code, 0, imported.stderr)
    assert.match(imported.stdout, /^\d+\.\d+\.\d+ function function\n$/)
  }, 180_000)

  it("prints one line and exits 2 on a Node older than 22.19 (before anything imports node:sqlite)", async (ctx) => {
    const old = await oldNode()
    if (old === undefined) {
      console.warn("skipped: no Node older than 22.19 on PATH to run the launcher with")
      ctx.skip()
      return
    }
    const result = await exec(old, [join(root, "dist", "agentwire.mjs"), "core", "--help"])
    assert.strictEqual(result.code, 2)
    assert.strictEqual(result.stdout, "")
    assert.match(result.stderr, /^agentwire: Node\.js >= 22\.19 is required \(this is v\d+\.\d+\.\d+\); install a newer Node\.js\n$/)
  }, 30_000)

  it("npx agentwire runs the clone's own command", async () => {
    const result = await exec("npx", ["--no-install", "agentwire", "--version"], { cwd: root })
    assert.strictEqual(result.code, 0, result.stderr)
    assert.match(result.stdout, /^agentwire v/)
  }, 60_000)
})
