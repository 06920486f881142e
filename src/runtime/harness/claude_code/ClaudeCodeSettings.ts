/**
 * Settings and discovery of the `claude_code` Harness kind (docs/harness-claude-code.md).
 *
 * - Binary: `--claude-code-path` / `AGENTWIRE_CLAUDE_CODE_PATH`, else the Agent SDK's bundled binary when that
 *   package is installed, else the `@anthropic-ai/claude-code` package's binary, else `claude` on PATH.
 * - Model endpoint and key come from the daemon's environment (`ANTHROPIC_API_KEY` / `ANTHROPIC_AUTH_TOKEN`,
 *   `ANTHROPIC_BASE_URL`, `ANTHROPIC_MODEL`). Keys are held `Redacted` and unwrapped only where the child's
 *   environment is built; they never reach argv, a frame, a log line or `agentwire status`.
 * - Discovery runs `<binary> --version` once at daemon start and requires at least `minimumVersion`, the first
 *   release observed to carry the receipt signals the adapter relies on (`msg_lifecycle_v1`,
 *   `interrupt_receipt_v1`, `interrupt_cancel_queued_v1` in `system/init.capabilities`; each Turn checks them
 *   again). Discovery can only make the kind unavailable; it never adds a capability.
 */
import { Duration, Effect, Option, Redacted } from "effect"
import { execFile } from "node:child_process"
import { accessSync, constants } from "node:fs"
import { createRequire } from "node:module"
import * as path from "node:path"
import type { RemoveDirectory } from "../OwnedDirectory.js"

export const ClaudeCodeKind = "claude_code"
export const minimumVersion = "2.1.332"
export const requiredNativeCapabilities = ["msg_lifecycle_v1", "interrupt_receipt_v1", "interrupt_cancel_queued_v1"] as const

export interface ClaudeCodeSettings {
  /** Explicit binary (flag or env); none selects the default search. */
  readonly binaryPath: Option.Option<string>
  /** `<profile>/claude-code`: per-Session config dirs and per-Executor scratch dirs live here. */
  readonly stateDir: string
  readonly apiKey: Option.Option<Redacted.Redacted<string>>
  readonly authToken: Option.Option<Redacted.Redacted<string>>
  readonly baseUrl: Option.Option<string>
  readonly model: Option.Option<string>
  /** PATH given to each Claude Code process (Bash tools need one). */
  readonly searchPath: string
  /** Further non-secret environment for every process (tests: retry and timeout knobs). */
  readonly extraEnv: Readonly<Record<string, string>>
  /** Bound of a preparation (spawn + initialize handshake). */
  readonly prepareTimeout: Duration.Duration
  /** SIGTERM → SIGKILL grace on close. */
  readonly grace: Duration.Duration
  /** Observer of every spawned pid (diagnostics and leak tests); never affects behaviour. */
  readonly observeSpawn?: ((pid: number) => void) | undefined
  /** Test-only: replaces the scratch directory's removal (fault injection: a removal that fails). */
  readonly removeDirectory?: RemoveDirectory | undefined
}

const nonEmpty = (v: string | undefined): Option.Option<string> =>
  v === undefined || v.trim() === "" ? Option.none() : Option.some(v)

/** Settings from the daemon's environment. */
export const settingsFromEnv = (
  env: Readonly<Record<string, string | undefined>>,
  options: { readonly profileDir: string; readonly binaryPath: Option.Option<string> }
): ClaudeCodeSettings => ({
  binaryPath: Option.orElse(options.binaryPath, () => nonEmpty(env.AGENTWIRE_CLAUDE_CODE_PATH)),
  stateDir: path.join(options.profileDir, "claude-code"),
  apiKey: Option.map(nonEmpty(env.ANTHROPIC_API_KEY), Redacted.make),
  authToken: Option.map(nonEmpty(env.ANTHROPIC_AUTH_TOKEN), Redacted.make),
  baseUrl: nonEmpty(env.ANTHROPIC_BASE_URL),
  model: nonEmpty(env.ANTHROPIC_MODEL),
  searchPath: env.PATH ?? "/usr/bin:/bin",
  extraEnv: {},
  prepareTimeout: Duration.seconds(60),
  grace: Duration.seconds(3)
})

/** The environment of one Claude Code process: complete, nothing inherited implicitly. */
export const childEnv = (
  settings: ClaudeCodeSettings,
  dirs: { readonly home: string; readonly configDir: string; readonly tmpDir: string }
): Record<string, string> => ({
  PATH: settings.searchPath,
  HOME: dirs.home,
  CLAUDE_CONFIG_DIR: dirs.configDir,
  TMPDIR: dirs.tmpDir,
  CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
  DISABLE_TELEMETRY: "1",
  DISABLE_AUTOUPDATER: "1",
  DISABLE_ERROR_REPORTING: "1",
  ...settings.extraEnv,
  ...Option.match(settings.baseUrl, { onNone: () => ({}), onSome: (url) => ({ ANTHROPIC_BASE_URL: url }) }),
  // The one place the keys are unwrapped: the child's environment (never argv).
  ...Option.match(settings.apiKey, { onNone: () => ({}), onSome: (k) => ({ ANTHROPIC_API_KEY: Redacted.value(k) }) }),
  ...Option.match(settings.authToken, { onNone: () => ({}), onSome: (k) => ({ ANTHROPIC_AUTH_TOKEN: Redacted.value(k) }) })
})

const executable = (file: string): boolean => {
  try {
    accessSync(file, constants.X_OK)
    return true
  } catch {
    return false
  }
}

const packaged = (specifier: string): Option.Option<string> => {
  try {
    const file = createRequire(import.meta.url).resolve(specifier)
    return executable(file) ? Option.some(file) : Option.none()
  } catch {
    return Option.none()
  }
}

/**
 * Where the binary is, and which rule found it. `resolvePackage` finds an installed package's executable (module
 * resolution; replaceable so the order of the rules can be tested where the packages are installed).
 */
export const resolveBinary = (
  settings: ClaudeCodeSettings,
  resolvePackage: (specifier: string) => Option.Option<string> = packaged
): Option.Option<{ readonly path: string; readonly source: string }> => {
  if (Option.isSome(settings.binaryPath)) {
    return executable(settings.binaryPath.value) ? Option.some({ path: settings.binaryPath.value, source: "configured" }) : Option.none()
  }
  const platform = `${process.platform}-${process.arch}`
  const sdk = resolvePackage(`@anthropic-ai/claude-agent-sdk-${platform}/claude`)
  if (Option.isSome(sdk)) return Option.some({ path: sdk.value, source: "agent-sdk" })
  const cli = resolvePackage("@anthropic-ai/claude-code/bin/claude.exe")
  if (Option.isSome(cli)) return Option.some({ path: cli.value, source: "claude-code-package" })
  for (const dir of settings.searchPath.split(path.delimiter)) {
    const candidate = path.join(dir, "claude")
    if (dir !== "" && executable(candidate)) return Option.some({ path: candidate, source: "PATH" })
  }
  return Option.none()
}

const parseVersion = (s: string): ReadonlyArray<number> | undefined => {
  const m = /^(\d+)\.(\d+)\.(\d+)/.exec(s.trim())
  return m === null ? undefined : [Number(m[1]), Number(m[2]), Number(m[3])]
}

export const atLeast = (version: string, minimum: string): boolean => {
  const a = parseVersion(version)
  const b = parseVersion(minimum)
  if (a === undefined || b === undefined) return false
  for (let i = 0; i < 3; i++) if (a[i] !== b[i]) return a[i]! > b[i]!
  return true
}

export type Discovery =
  | { readonly _tag: "Available"; readonly binary: string; readonly version: string }
  | { readonly _tag: "Unavailable"; readonly reason: string; readonly version?: string | undefined }

/** Runs the version check (bounded at 30 seconds). */
export const discover = (settings: ClaudeCodeSettings): Effect.Effect<Discovery> =>
  Effect.gen(function* () {
    const binary = resolveBinary(settings)
    if (Option.isNone(binary)) {
      return {
        _tag: "Unavailable",
        reason: Option.isSome(settings.binaryPath)
          ? "the configured Claude Code binary is missing or not executable (--claude-code-path / AGENTWIRE_CLAUDE_CODE_PATH)"
          : "no Claude Code binary found (Agent SDK, @anthropic-ai/claude-code, or claude on PATH); set --claude-code-path"
      } as const
    }
    const output = yield* Effect.callback<string | undefined>((resume) => {
      execFile(binary.value.path, ["--version"], { timeout: 30_000, env: { PATH: settings.searchPath } }, (error, stdout) =>
        resume(Effect.succeed(error ? undefined : stdout)))
    })
    const version = output === undefined ? undefined : /^\S+/.exec(output.trim())?.[0]
    if (version === undefined || parseVersion(version) === undefined) {
      return { _tag: "Unavailable", reason: "the Claude Code binary did not report a version (`--version` failed)" } as const
    }
    if (!atLeast(version, minimumVersion)) {
      return {
        _tag: "Unavailable",
        version,
        reason: `Claude Code ${version} is older than ${minimumVersion}, the first version with the receipt signals this adapter needs`
      } as const
    }
    if (Option.isNone(settings.apiKey) && Option.isNone(settings.authToken)) {
      return { _tag: "Unavailable", version, reason: "no model key: set ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN in the daemon's environment" } as const
    }
    return { _tag: "Available", binary: binary.value.path, version } as const
  })
