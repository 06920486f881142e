/**
 * The `initialize` and `finalize` actions of `runtime_prepare` (reference part 2 §6.2), run at `commit`:
 *
 * - `configure`: records the environment variables for this connection's later initialization commands
 *   (they replace earlier ones key by key). Nothing native runs.
 * - `npm` / `python` / `setup`: one command in its own process group (NativeProcess.spawn, owned by the caller's
 *   Scope, so an interruption or the transfer budget stops the whole group): `npm install --no-audit --no-fund
 *   <packages>` in the workspace root; `python3 -m pip install --disable-pip-version-check --no-input --target
 *   <root>/.agentwire/python <packages>`; `/bin/sh -c <command>` in `cwd` (a logical path, reached through the
 *   verified descriptor chain). The child's environment is the daemon's child environment (`AGENTWIRE_*`
 *   removed) plus the configured variables; its output is discarded, never logged.
 *   Exit 0 is `completed`; another exit is `failed` / `runtime_preparation_failed` with `exit_code`; a signal or
 *   a command that could not start is `failed` without one.
 * - Network: a step that asks for `network: enabled` on a daemon whose binding is not `enabled` is rejected
 *   (`runtime_preparation_rejected`) before anything runs. With `network: disabled` the package managers run
 *   offline (`--offline`, `--no-index`) and proxy variables point nowhere; the daemon is not an isolation
 *   boundary (protocol "Ownership and connection"), so a setup command is not sandboxed.
 * - `finalize`: checks the frozen sources (each skill installed, each plugin installed in a slot, each directory an
 *   existing directory under /workspace) and records them in `.agentwire/capabilities.json` (atomic rename).
 */
import { Effect, Option, Queue } from "effect"
import type { CapabilitySources } from "../../proto/Execution.js"
import type { Initialization, RuntimePrepareResultPayload } from "../../proto/RuntimePrepare.js"
import { validateLogicalPath } from "../../proto/Transfer.js"
import { spawn } from "../harness/process/NativeProcess.js"
import type { Binding } from "../workspace/EnvironmentBinding.js"
import { createStaging, fdPath, installStaging, openDirectoryChain } from "../workspace/internal/safeFs.js"
import { validSkillName } from "./internal/capabilityRules.js"
import { installedPluginNames, OwnDir, skillInstalled } from "./internal/staging.js"
import * as FsP from "node:fs/promises"

type Result = RuntimePrepareResultPayload

const failed = (exitCode?: number): Result => ({
  outcome: "failed",
  error_code: "runtime_preparation_failed",
  ...(exitCode === undefined ? {} : { exit_code: exitCode })
})
const rejected: Result = { outcome: "rejected", error_code: "runtime_preparation_rejected" }

/** The begin-time refusal of an initialization header, if any (network policy, environment entries). */
export const initializationRefusal = (init: Initialization, binding: Binding): Result | undefined =>
  init.network === "enabled" && binding.networkAccess !== "enabled" ? rejected : undefined

/** The command an initialization runs (undefined for `configure`). */
const commandOf = (init: Initialization, root: string): { readonly command: string; readonly args: ReadonlyArray<string> } | undefined => {
  const offline = init.network !== "enabled"
  switch (init.action) {
    case "configure":
      return undefined
    case "npm":
      return { command: "npm", args: ["install", "--no-audit", "--no-fund", ...(offline ? ["--offline"] : []), ...(init.packages ?? [])] }
    case "python":
      return {
        command: "python3",
        args: ["-m", "pip", "install", "--disable-pip-version-check", "--no-input", ...(offline ? ["--no-index"] : []), "--target", `${root}/${OwnDir}/python`, ...(init.packages ?? [])]
      }
    case "setup":
      return { command: "/bin/sh", args: ["-c", init.command ?? ""] }
  }
}

/** The real directory of a logical path (`/workspace` or below), verified inside the root. */
const resolveCwd = (root: string, logical: string) =>
  Effect.tryPromise(async () => {
    const relative = logical === "/workspace" ? "" : logical.slice("/workspace/".length)
    const dir = await openDirectoryChain(root, relative === "" ? [] : relative.split("/"), { create: false, followLast: true })
    try {
      return await FsP.readlink(fdPath(dir.fd))
    } finally {
      await dir.close().catch(() => undefined)
    }
  }).pipe(Effect.option)

/**
 * Runs one initialization step. `configured` is this connection's `configure` environment (updated in place by
 * `configure`); `baseEnv` the daemon's child environment.
 */
export const runInitialization = (
  init: Initialization,
  binding: Binding,
  configured: Map<string, string>,
  baseEnv: Readonly<Record<string, string>>
): Effect.Effect<Result> =>
  Effect.scoped(Effect.gen(function* () {
    if (init.action === "configure") {
      for (const [k, v] of Object.entries(init.env ?? {})) configured.set(k, v)
      return { outcome: "completed" } satisfies Result
    }
    const spec = commandOf(init, binding.root)!
    const cwd = init.action === "setup" ? yield* resolveCwd(binding.root, init.cwd ?? "/workspace") : Option.some(binding.root)
    if (Option.isNone(cwd)) return rejected
    const env: Record<string, string> = { ...baseEnv, ...Object.fromEntries(configured) }
    if (init.network !== "enabled") {
      for (const k of ["http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"]) env[k] = "http://127.0.0.1:9"
      env["npm_config_offline"] = "true"
      env["PIP_NO_INDEX"] = "1"
    }
    const proc = yield* spawn({ command: spec.command, args: spec.args, cwd: cwd.value, env }).pipe(Effect.option)
    if (Option.isNone(proc)) return failed()
    // Output is discarded (never logged): the line queue is drained so it cannot grow.
    yield* Effect.forkScoped(Effect.forever(Queue.take(proc.value.lines)).pipe(Effect.ignore))
    const exit = yield* proc.value.exited
    if (exit.code === 0) return { outcome: "completed" } satisfies Result
    return exit.code === null ? failed() : failed(exit.code & 0xff)
  }))

/**
 * `finalize`: every named skill and plugin must be installed, every directory an existing directory below
 * /workspace; the sources are then recorded in `.agentwire/capabilities.json`. A failure after the rename is
 * `unknown` / `runtime_preparation_unconfirmed`.
 */
export const runFinalize = (sources: CapabilitySources, root: string): Effect.Effect<Result> =>
  Effect.promise(async (): Promise<Result> => {
    for (const skill of sources.skills ?? []) {
      if (!validSkillName(skill.name) || !(await skillInstalled(root, skill.name))) return rejected
    }
    const plugins = sources.plugins ?? []
    if (plugins.length > 0) {
      const installed = await installedPluginNames(root)
      if (plugins.some((p) => !installed.has(p.name))) return rejected
    }
    for (const dir of sources.directories ?? []) {
      if (Option.isSome(validateLogicalPath(dir, { allowRoot: true }))) return rejected
      const relative = dir === "/workspace" ? [] : dir.slice("/workspace/".length).split("/")
      const ok = await openDirectoryChain(root, relative, { create: false, followLast: true }).then((h) => h.close().then(() => true), () => false)
      if (!ok) return rejected
    }
    const body = Buffer.from(`${JSON.stringify({ skills: sources.skills ?? [], plugins, directories: sources.directories ?? [] }, null, 2)}\n`)
    let staging
    try {
      staging = await createStaging(root, `${OwnDir}/capabilities.json`, ".capabilities.json.tmp")
    } catch {
      return rejected
    }
    const progress = { renamed: false }
    try {
      await staging.file.write(body, 0, body.length, 0)
      await installStaging(staging, progress)
      return { outcome: "completed" }
    } catch {
      return progress.renamed ? { outcome: "unknown", error_code: "runtime_preparation_unconfirmed" } : rejected
    } finally {
      await FsP.unlink(fdPath(staging.dir.fd, staging.tempName)).catch(() => undefined)
      await staging.file.close().catch(() => undefined)
      await staging.dir.close().catch(() => undefined)
    }
  })
