/**
 * The `codex` Harness kind (issue #16; reference harnesses.md §1.2, §2): its static declaration, the launch
 * settings (`--codex-path`, `--codex-config`), discovery at daemon start and the Harness constructor.
 *
 * Discovery may only clear: an unusable binary (missing, older than `MinimumVersion`, or failing
 * `initialize`) registers `available: false` with the complete record and an `unavailableReason`.
 *
 * Secrets: a provider key reaches Codex only through the daemon's environment (`env_key`), held `Redacted` by
 * the adapter until the spawn; an override that would put a bearer token in argv is refused. Every `env_key` variable is excluded from the environment of the
 * commands Codex runs and from its shell snapshots (`shell_environment_policy.exclude`), and no AGENTWIRE_*
 * variable (the daemon's own credential) is passed to Codex at all.
 */
import { Data, type Duration, Effect, Option, Redacted, type Scope } from "effect"
import { execFile } from "node:child_process"
import * as Fs from "node:fs"
import * as FsAsync from "node:fs/promises"
import { createRequire } from "node:module"
import * as Path from "node:path"
import type { AgentKindCapabilities } from "../../../proto/Capabilities.js"
import type { Harness, HarnessDeclaration, PrepareRequest } from "../Harness.js"
import { PrepareFailed } from "../Harness.js"
import { appServerArgs, type CodexLaunch, prepareExecutor, processEnv, ReconnectBudget } from "./CodexExecutor.js"
import { spawn } from "../process/NativeProcess.js"
import { type RemoveDirectory, removeRecursively } from "../OwnedDirectory.js"
import * as P from "./CodexProtocol.js"
import { makeRpcClient } from "./CodexRpc.js"

export const CodexKind = "codex"
/** The pinned, tested version; discovery refuses anything older. */
export const MinimumVersion = "0.171.0"

/**
 * What the daemon composed with Codex supports, one explicit decision per field. `true` only where a test
 * against the real binary proves it (docs/harness-codex.md); everything else is refused before any native call.
 */
export const codexCapabilities: AgentKindCapabilities = {
  subagent_observations: true,
  streaming: true,
  permissions: true,
  usage: true,
  resume: true,
  native_session_recovery: false,
  workspace_authoring: false,
  steering: true,
  message_items: true,
  tool_observations: true,
  environment_none: true,
  local_environment: false,
  preparation: true,
  workspace_read_preparation: false,
  workspace_output_export: false,
  programmatic_tool_calling_disable: false,
  web_search_control: false,
  execution_controls: true,
  text_verbosity: false,
  structured_output: false,
  tool_search: false,
  message_images: false,
  function_result_images: false,
  subagent_control: true,
  durable_input_receipts: true,
  durable_turns: true,
  function_tools: true,
  mcp_http_tools: false,
  mcp_http_required: false,
  mcp_http_bearer_auth: false
}

export interface CodexSettings {
  /** `--codex-path` / AGENTWIRE_CODEX_PATH; absent: `codex` on PATH, else the pinned package's launcher. */
  readonly path: string | undefined
  /** `--codex-config KEY=VALUE` entries (env AGENTWIRE_CODEX_CONFIG, one per line). */
  readonly config: ReadonlyArray<string>
  /** The daemon's environment (passed through for the provider's `env_key`). */
  readonly env: Readonly<Record<string, string | undefined>>
  /** The daemon profile directory; Codex state lives in `<profile>/codex`. */
  readonly profileDir: string
  /** Observer of every spawned app-server pid (leak tests); never affects behaviour. */
  readonly observeSpawn?: ((pid: number) => void) | undefined
  /** The reconnect deadline of a Turn (default `ReconnectBudget`, 30 s; tests shorten it). */
  readonly reconnectBudget?: Duration.Duration | undefined
  /** Test-only: replaces the removal of Codex directories (fault injection: a removal that fails). */
  readonly removeDirectory?: RemoveDirectory | undefined
}

/** A `--codex-config` entry is malformed or would expose a secret. The entry's value is never echoed. */
export class CodexConfigInvalid extends Data.TaggedError("CodexConfigInvalid")<{ readonly key: string; readonly problem: string }> {
  override get message() {
    return `invalid --codex-config entry ${this.key}: ${this.problem}`
  }
}

const unquote = (value: string) => value.trim().replace(/^"(.*)"$/, "$1").replace(/^'(.*)'$/, "$1")

/** The environment variables named by `…env_key` overrides: the provider keys. */
export const envKeyNames = (config: ReadonlyArray<string>): ReadonlyArray<string> =>
  config.flatMap((entry) => {
    const eq = entry.indexOf("=")
    return eq > 0 && entry.slice(0, eq).trim().endsWith("env_key") ? [unquote(entry.slice(eq + 1))] : []
  })

/** Validates the overrides and adds the `env_key` exclusion. */
export const overridesFor = (config: ReadonlyArray<string>): Effect.Effect<ReadonlyArray<string>, CodexConfigInvalid> =>
  Effect.gen(function* () {
    for (const entry of config) {
      const eq = entry.indexOf("=")
      const key = eq < 0 ? entry.slice(0, 40) : entry.slice(0, eq).trim()
      if (eq <= 0 || key === "") return yield* new CodexConfigInvalid({ key: key.slice(0, 40), problem: "expected KEY=VALUE" })
      if (/(bearer_token|api_key|secret)$/i.test(key)) {
        return yield* new CodexConfigInvalid({ key, problem: "secrets never go on a command line; use env_key with an environment variable" })
      }
    }
    const envKeys = envKeyNames(config)
    const exclusion = envKeys.length === 0 ? [] : [`shell_environment_policy.exclude=${JSON.stringify(envKeys)}`]
    return [...config, ...exclusion]
  })

/** The command that runs Codex: the given path, `codex` on PATH, or the pinned package's Node launcher. */
export const resolveCommand = (settings: CodexSettings): Option.Option<{ command: string; prefix: ReadonlyArray<string> }> => {
  const launcherOf = (path: string) =>
    path.endsWith(".js") ? { command: process.execPath, prefix: [path] } : { command: path, prefix: [] }
  if (settings.path !== undefined && settings.path !== "") return Option.some(launcherOf(settings.path))
  for (const dir of (settings.env["PATH"] ?? "").split(Path.delimiter)) {
    if (dir === "") continue
    const candidate = Path.join(dir, "codex")
    try {
      Fs.accessSync(candidate, Fs.constants.X_OK)
      return Option.some(launcherOf(candidate))
    } catch {
      // not here
    }
  }
  try {
    return Option.some(launcherOf(createRequire(import.meta.url).resolve("@openai/codex/bin/codex.js")))
  } catch {
    return Option.none()
  }
}

/** `a >= b` for dotted numeric versions. */
export const versionAtLeast = (a: string, b: string): boolean => {
  const pa = a.split(".").map(Number)
  const pb = b.split(".").map(Number)
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const x = pa[i] ?? 0
    const y = pb[i] ?? 0
    if (x !== y) return x > y
  }
  return true
}

/**
 * The app-server environment as the daemon holds it: the daemon's variables without any AGENTWIRE_* one, and each
 * provider key (a variable an `env_key` override names) apart and `Redacted`, unwrapped only into the child's
 * environment at the spawn (`CodexExecutor.processEnv`).
 */
export const launchEnvironment = (
  env: CodexSettings["env"],
  config: ReadonlyArray<string>
): Pick<CodexLaunch, "env" | "secrets"> => {
  const keys = new Set(envKeyNames(config))
  const plain: Record<string, string> = {}
  const secrets: Record<string, Redacted.Redacted<string>> = {}
  for (const [k, v] of Object.entries(env)) {
    if (v === undefined || k.startsWith("AGENTWIRE_")) continue
    if (keys.has(k)) secrets[k] = Redacted.make(v)
    else plain[k] = v
  }
  return { env: plain, secrets }
}

const readVersion = (command: string, prefix: ReadonlyArray<string>, env: Record<string, string>) =>
  Effect.callback<Option.Option<string>>((resume) => {
    execFile(command, [...prefix, "--version"], { env, timeout: 20_000 }, (error, stdout) => {
      const match = /(\d+\.\d+\.\d+)/.exec(String(stdout))
      resume(Effect.succeed(error === null && match !== null ? Option.some(match[1]!) : Option.none()))
    })
  })

/** Discovery: binary present, version at or above the minimum, `initialize` succeeds. */
const discover = (launch: CodexLaunch) =>
  Effect.gen(function* () {
    const version = yield* readVersion(launch.command, launch.prefix, launch.env)
    if (Option.isNone(version)) return { version: undefined, reason: `codex did not report a version (${launch.command})` }
    if (!versionAtLeast(version.value, MinimumVersion)) {
      return { version: version.value, reason: `codex ${version.value} is older than the minimum ${MinimumVersion}` }
    }
    const home = Path.join(launch.root, "discovery")
    const removeDirectory = launch.removeDirectory ?? removeRecursively
    const ok = yield* Effect.scoped(Effect.gen(function* () {
      // Not an Executor's directory (no connection exists yet): one removal attempt, a failure logged. Retrying
      // until confirmed here would keep the daemon from starting; the path is fixed, so the next discovery
      // reuses it and removes it again (at most one is ever left).
      yield* Effect.acquireRelease(
        Effect.tryPromise(() => FsAsync.mkdir(home, { recursive: true, mode: 0o700 })),
        () =>
          Effect.tryPromise(() => removeDirectory(home)).pipe(
            Effect.catch(() => Effect.logWarning("codex: the discovery CODEX_HOME was not removed; the next discovery removes it"))
          )
      )
      const proc = yield* spawn({
        command: launch.command,
        args: appServerArgs(launch),
        cwd: home,
        env: processEnv(launch, home)
      })
      const rpc = yield* makeRpcClient(proc)
      yield* rpc.call("initialize", { clientInfo: { name: "agentwire", version: "0.1.0" }, capabilities: { experimentalApi: true } }, P.InitializeResult, { timeout: "30 seconds" })
    })).pipe(Effect.as(true), Effect.catch(() => Effect.succeed(false)))
    return ok
      ? { version: version.value, reason: undefined }
      : { version: version.value, reason: "codex app-server did not complete initialize" }
  })

/** The declaration for a discovery result (availability and reason only; capabilities never widen). */
export const codexDeclaration = (version: string | undefined, reason: string | undefined): HarnessDeclaration => ({
  kind: CodexKind,
  available: reason === undefined,
  version,
  unavailableReason: reason,
  capabilities: codexCapabilities
})

/**
 * Builds the `codex` Harness once at daemon start (contract: a constructor in the daemon's scope). Runs
 * discovery; a configuration error makes the kind unavailable with its reason.
 */
export const makeCodexHarness = (settings: CodexSettings): Effect.Effect<Harness, never, Scope.Scope> =>
  Effect.gen(function* () {
    const root = Path.join(settings.profileDir, "codex")
    const resolved = resolveCommand(settings)
    const overrides = yield* Effect.result(overridesFor(settings.config))
    if (overrides._tag === "Failure") return unavailable(overrides.failure.message)
    if (Option.isNone(resolved)) return unavailable("codex was not found (set --codex-path or AGENTWIRE_CODEX_PATH)")
    const launch: CodexLaunch = {
      ...resolved.value,
      overrides: overrides.success,
      ...launchEnvironment(settings.env, settings.config),
      root,
      observeSpawn: settings.observeSpawn,
      reconnectBudget: settings.reconnectBudget ?? ReconnectBudget,
      removeDirectory: settings.removeDirectory
    }
    const found = yield* discover(launch)
    const declaration = codexDeclaration(found.version, found.reason)
    return { declaration, prepare: (request: PrepareRequest) => prepareExecutor(launch, request) }
  })

/** The kind selected without settings (a daemon always passes them): unavailable, with the reason. */
export const unconfiguredCodexHarness: Effect.Effect<Harness> = Effect.sync(() => unavailable("codex settings missing"))

const unavailable = (reason: string): Harness => ({
  declaration: codexDeclaration(undefined, reason),
  prepare: () => Effect.fail(new PrepareFailed({ reason }))
})
