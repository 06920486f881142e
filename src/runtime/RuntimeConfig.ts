/**
 * The daemon's settings: where Core is, who we are, the credential (held `Redacted`), the profile directory,
 * local capacity policy, logging, the selected Harness kinds and the scripted harness's narrowing. Protocol constants are not settings
 * (they live in proto/Limits.ts).
 *
 * Sources, in order: a command-line flag, then its environment variable (`env` below, read through Effect
 * `Config`, so tests use a ConfigProvider instead of the process environment), then the default. The command
 * line in src/bin attaches the flags; `resolve` validates the merged input, reads the credential file and
 * returns a `DaemonConfig`. Nothing here reads `process`: the home directory comes from src/bin.
 *
 * Never: puts the credential in an error, a log line or a URL; accepts a Core URL with user info, a query or a
 * fragment.
 */
import { Config, Context, Duration, Effect, FileSystem, Layer, LogLevel, Option, Path, Redacted, Schema } from "effect"
import { type CapabilityName, capabilityNames } from "../proto/Capabilities.js"
import { fitsUtf8Bytes } from "../proto/Checks.js"
import { DeviceId } from "../proto/Ids.js"
import { defaultHarnessKinds, type HarnessKindName, harnessKindNames, isHarnessKindName } from "./harness/HarnessKinds.js"

import { env, EnvVars, type LogFormat } from "./RuntimeEnv.js"
import { type Binding, resolveBinding } from "./workspace/EnvironmentBinding.js"

export { env, EnvVars, LogFormat, parseLogLevel } from "./RuntimeEnv.js"

// ---------------------------------------------------------------------------------------------- settings

export const defaults = {
  profileDirName: ".agentwire",
  socketName: "agentwire.sock",
  maxActive: 4,
  maxIdleExecutors: 16,
  idleExecutorTtl: Duration.minutes(10),
  logFormat: "text" as LogFormat,
  /** A credential file larger than this is refused (a credential is a short token). */
  maxCredentialFileBytes: 16 * 1024,
  /** Unix socket paths longer than this do not fit `sockaddr_un` on every platform. */
  maxSocketPathBytes: 100
} as const

/** Where Core is: its origin (shown to operators) and the machine API base every request goes to. */
export interface CoreEndpoint {
  /** e.g. `https://core.example` */
  readonly origin: string
  /** e.g. `https://core.example/api/v1` (no trailing slash) */
  readonly apiBase: string
}

export interface DaemonConfig {
  readonly core: CoreEndpoint
  readonly deviceId: DeviceId
  readonly credential: Redacted.Redacted<string>
  /** Absolute profile (state) directory; created with mode 0700 when the daemon starts. */
  readonly profileDir: string
  /** `<profileDir>/agentwire.sock`, the local status socket. */
  readonly socketPath: string
  readonly maxActive: number
  readonly maxIdleExecutors: number
  readonly idleExecutorTtl: Duration.Duration
  /** Absent: keep the default level (Info) unless the command line set one. */
  readonly logLevel: Option.Option<LogLevel.LogLevel>
  readonly logFormat: LogFormat
  readonly scripted: {
    readonly disabledCapabilities: ReadonlyArray<CapabilityName>
    readonly available: boolean
  }
  /** The Harness kinds to register, in order (`--harness` / AGENTWIRE_HARNESS; default `scripted`). */
  readonly harnessKinds: ReadonlyArray<HarnessKindName>
  /** The `codex` kind's binary (`--codex-path`; absent: `codex` on PATH, else the pinned package) and overrides. */
  readonly codex: { readonly path: string | undefined; readonly config: ReadonlyArray<string> }
  /** `--claude-code-path` / AGENTWIRE_CLAUDE_CODE_PATH (absent: the default search, docs/harness-claude-code.md). */
  readonly claudeCodePath: Option.Option<string>
  /** The local Environment binding (`--environment-id`, `--workspace`, `--network-access`); absent: none. */
  readonly environment?: Binding | undefined
}

/** The daemon's settings as a service (process-level). */
export class RuntimeConfig extends Context.Service<RuntimeConfig, DaemonConfig>()("agentwire/runtime/RuntimeConfig") {
  static readonly layer = (config: DaemonConfig): Layer.Layer<RuntimeConfig> => Layer.succeed(RuntimeConfig, config)
}

/** A setting is missing or invalid. The message names the flag and variable and never contains the credential. */
export class DaemonConfigInvalid extends Schema.TaggedError<DaemonConfigInvalid>()("DaemonConfigInvalid", {
  setting: Schema.String,
  problem: Schema.String
}) {
  override get message() {
    return `invalid configuration: ${this.setting}: ${this.problem}`
  }
}

// ---------------------------------------------------------------------------------------------- validation

const invalid = (setting: string, problem: string) => new DaemonConfigInvalid({ setting, problem })

const parseUrl = (text: string): URL | undefined => {
  try {
    return new URL(text)
  } catch {
    return undefined
  }
}

const decodeUtf8 = (bytes: Uint8Array): string | undefined => {
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes)
  } catch {
    return undefined
  }
}
const coreUrlSetting = `--core-url / ${EnvVars.coreUrl}`

/**
 * Accepts the Core origin (`https://core.example`) or the machine API base (`https://core.example/api/v1`, with
 * or without a trailing slash, possibly below a path prefix). Rejects other schemes, user info, a query, a
 * fragment and any other path.
 */
export const parseCoreUrl = (text: string): Effect.Effect<CoreEndpoint, DaemonConfigInvalid> =>
  Effect.gen(function* () {
    const trimmed = text.trim()
    const url = parseUrl(trimmed)
    if (url === undefined) return yield* invalid(coreUrlSetting, "not an absolute URL")
    if (url.protocol !== "http:" && url.protocol !== "https:") {
      return yield* invalid(coreUrlSetting, "the scheme must be http or https")
    }
    if (url.username !== "" || url.password !== "") {
      return yield* invalid(coreUrlSetting, "credentials in the URL are not allowed (use the credential file)")
    }
    if (url.search !== "" || trimmed.includes("?")) return yield* invalid(coreUrlSetting, "a query is not allowed")
    if (url.hash !== "" || trimmed.includes("#")) return yield* invalid(coreUrlSetting, "a fragment is not allowed")
    const path = url.pathname.replace(/\/+$/, "")
    if (path === "") return { origin: url.origin, apiBase: `${url.origin}/api/v1` }
    if (path.endsWith("/api/v1")) {
      const prefix = path.slice(0, -"/api/v1".length)
      return { origin: `${url.origin}${prefix}`, apiBase: `${url.origin}${path}` }
    }
    return yield* invalid(coreUrlSetting, "expected the Core origin or the machine API base ending in /api/v1")
  })

const decodeDeviceId = Schema.decodeUnknownOption(DeviceId)

/** A device id is non-blank, at most 128 bytes and has no whitespace or control characters. */
export const parseDeviceId = (text: string): Effect.Effect<DeviceId, DaemonConfigInvalid> => {
  const id = text.trim()
  const setting = `--device-id / ${EnvVars.deviceId}`
  if (id === "") return Effect.fail(invalid(setting, "must not be empty"))
  if (!fitsUtf8Bytes(id, 128)) return Effect.fail(invalid(setting, "longer than 128 bytes"))
  // eslint-disable-next-line no-control-regex
  if (/[\s\u0000-\u001f\u007f]/.test(id)) return Effect.fail(invalid(setting, "must not contain whitespace or control characters"))
  return Option.match(decodeDeviceId(id), {
    onNone: () => Effect.fail(invalid(setting, "not a valid device id")),
    onSome: Effect.succeed
  })
}

/**
 * Turns credential text into the credential: one trailing newline (`\n` or `\r\n`) is removed; the rest must be
 * non-empty and free of whitespace and control characters (Core trims, a header cannot carry them, and a stray
 * space is almost always a copy mistake). The text itself never appears in an error.
 */
export const parseCredential = (
  text: string,
  setting: string
): Effect.Effect<Redacted.Redacted<string>, DaemonConfigInvalid> => {
  const value = text.endsWith("\r\n") ? text.slice(0, -2) : text.endsWith("\n") ? text.slice(0, -1) : text
  if (value === "") return Effect.fail(invalid(setting, "the credential is empty"))
  // eslint-disable-next-line no-control-regex
  if (/[\s\u0000-\u001f\u007f]/.test(value)) {
    return Effect.fail(invalid(setting, "the credential contains whitespace or control characters"))
  }
  return Effect.succeed(Redacted.make(value, { label: "credential" }))
}

/** Parses `cap1,cap2` into capability names; an unknown name is an error that lists the valid ones. */
export const parseCapabilityList = (
  text: string
): Effect.Effect<ReadonlyArray<CapabilityName>, DaemonConfigInvalid> => {
  const names = text.split(",").map((s) => s.trim()).filter((s) => s !== "")
  const unknown = names.filter((n) => !(capabilityNames as ReadonlyArray<string>).includes(n))
  if (unknown.length > 0) {
    return Effect.fail(
      invalid(
        `--scripted-disable / ${EnvVars.scriptedDisable}`,
        `unknown capability ${unknown.map((n) => JSON.stringify(n.slice(0, 64))).join(", ")} (known: ${capabilityNames.join(", ")})`
      )
    )
  }
  return Effect.succeed([...new Set(names)] as ReadonlyArray<CapabilityName>)
}

const harnessSetting = `--harness / ${EnvVars.harness}`

/**
 * Parses the selected Harness kinds: each text is one or more comma-separated names (`--harness a --harness b`
 * or `AGENTWIRE_HARNESS=a,b`); duplicates collapse, order is kept, nothing selected is the default (`scripted`).
 * An unknown name is an error that lists the known ones (and never echoes more than 64 characters of it).
 */
export const parseHarnessKinds = (
  texts: ReadonlyArray<string>
): Effect.Effect<ReadonlyArray<HarnessKindName>, DaemonConfigInvalid> => {
  const names = texts.flatMap((t) => t.split(",")).map((n) => n.trim()).filter((n) => n !== "")
  const unknown = names.filter((n) => !isHarnessKindName(n))
  if (unknown.length > 0) {
    return Effect.fail(
      invalid(
        harnessSetting,
        `unknown harness kind ${unknown.map((n) => JSON.stringify(n.slice(0, 64))).join(", ")} (known: ${harnessKindNames.join(", ")})`
      )
    )
  }
  return Effect.succeed(names.length === 0 ? defaultHarnessKinds : [...new Set(names as ReadonlyArray<HarnessKindName>)])
}

/** The merged input (flag, else environment variable) before validation. */
export interface DaemonInput {
  readonly coreUrl: Option.Option<string>
  readonly deviceId: Option.Option<string>
  /** From `AGENTWIRE_CREDENTIAL`. */
  readonly credential: Option.Option<Redacted.Redacted<string>>
  /** From `--credential-file` or `AGENTWIRE_CREDENTIAL_FILE`; wins over `credential` when both are set. */
  readonly credentialFile: Option.Option<string>
  readonly profile: Option.Option<string>
  readonly maxActive: Option.Option<number>
  readonly maxIdleExecutors: Option.Option<number>
  readonly idleExecutorTtl: Option.Option<Duration.Duration>
  readonly logLevel: Option.Option<LogLevel.LogLevel>
  readonly logFormat: Option.Option<LogFormat>
  readonly scriptedDisable: Option.Option<string>
  readonly scriptedUnavailable: boolean
  /** `--harness` values, else `AGENTWIRE_HARNESS` (each comma-separated); absent or empty: `scripted`. */
  readonly harness?: ReadonlyArray<string> | undefined
  /** `--codex-path`, else `AGENTWIRE_CODEX_PATH`. */
  readonly codexPath?: Option.Option<string> | undefined
  /** `--codex-config` values, else the lines of `AGENTWIRE_CODEX_CONFIG`. */
  readonly codexConfig?: ReadonlyArray<string> | undefined
  readonly claudeCodePath?: Option.Option<string> | undefined
  readonly environmentId?: Option.Option<string> | undefined
  readonly workspace?: Option.Option<string> | undefined
  readonly networkAccess?: Option.Option<string> | undefined
}

/** Reads the environment-only inputs (the credential has no flag: it never goes on a command line). */
export const credentialFromEnv: Effect.Effect<Option.Option<Redacted.Redacted<string>>, DaemonConfigInvalid> = Config
  .option(env.credential).pipe(
    Effect.mapError(() => invalid(EnvVars.credential, "cannot be read"))
  )

const required = <A>(value: Option.Option<A>, setting: string, hint: string) =>
  Option.match(value, {
    onNone: () => Effect.fail(invalid(setting, `missing: ${hint}`)),
    onSome: Effect.succeed
  })

const readCredentialFile = (file: string) =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const setting = `credential file ${JSON.stringify(file)}`
    const bytes = yield* fs.readFile(file).pipe(
      Effect.mapError((e) => invalid(setting, `cannot be read (${e.reason._tag})`))
    )
    if (bytes.byteLength > defaults.maxCredentialFileBytes) {
      return yield* invalid(setting, `larger than ${defaults.maxCredentialFileBytes} bytes`)
    }
    const text = decodeUtf8(bytes)
    if (text === undefined) return yield* invalid(setting, "is not UTF-8 text")
    return yield* parseCredential(text, setting)
  })

const positiveInt = (value: number, setting: string) =>
  Number.isSafeInteger(value) && value >= 1 ? Effect.succeed(value) : Effect.fail(invalid(setting, "must be an integer >= 1"))

/**
 * The profile directory (absolute; `~` and `~/…` expand to `homeDir`; default `~/.agentwire`) and its status
 * socket. Shared by the daemon and `agentwire status`, so both find the same socket.
 */
export const profilePaths = (
  path: Path.Path,
  profile: Option.Option<string>,
  homeDir: string
): { readonly profileDir: string; readonly socketPath: string } => {
  const expand = (p: string) => (p === "~" ? homeDir : p.startsWith("~/") ? path.join(homeDir, p.slice(2)) : p)
  const profileDir = path.resolve(
    Option.match(profile, {
      onNone: () => path.join(homeDir, defaults.profileDirName),
      onSome: (p) => expand(p.trim())
    })
  )
  return { profileDir, socketPath: path.join(profileDir, defaults.socketName) }
}

/**
 * Validates the merged input and reads the credential file. Fails with `DaemonConfigInvalid` naming the flag
 * and variable; the credential never appears in it. `homeDir` is the user's home (from src/bin), used for the
 * default profile `~/.agentwire` and to expand a leading `~`.
 */
export const resolve = Effect.fn("RuntimeConfig.resolve")(function* (
  input: DaemonInput,
  context: { readonly homeDir: string }
) {
  const path = yield* Path.Path
  const core = yield* parseCoreUrl(
    yield* required(input.coreUrl, coreUrlSetting, `pass --core-url URL or set ${EnvVars.coreUrl}`)
  )
  const deviceId = yield* parseDeviceId(
    yield* required(input.deviceId, `--device-id / ${EnvVars.deviceId}`, `pass --device-id ID or set ${EnvVars.deviceId}`)
  )
  const credential = Option.isSome(input.credentialFile)
    ? yield* readCredentialFile(input.credentialFile.value)
    : Option.isSome(input.credential)
    ? yield* parseCredential(Redacted.value(input.credential.value), EnvVars.credential)
    : yield* invalid(
      "credential",
      `missing: pass --credential-file PATH, or set ${EnvVars.credentialFile} or ${EnvVars.credential}`
    )
  const { profileDir, socketPath } = profilePaths(path, input.profile, context.homeDir)
  if (!fitsUtf8Bytes(socketPath, defaults.maxSocketPathBytes)) {
    return yield* invalid(
      `--profile / ${EnvVars.profile}`,
      `the status socket path ${JSON.stringify(socketPath)} is longer than ${defaults.maxSocketPathBytes} bytes; choose a shorter profile directory`
    )
  }
  const maxActive = yield* positiveInt(
    Option.getOrElse(input.maxActive, () => defaults.maxActive),
    `--max-active / ${EnvVars.maxActive}`
  )
  const maxIdleExecutors = Option.getOrElse(input.maxIdleExecutors, () => defaults.maxIdleExecutors)
  if (!Number.isSafeInteger(maxIdleExecutors) || maxIdleExecutors < 0) {
    return yield* invalid(`--max-idle-executors / ${EnvVars.maxIdleExecutors}`, "must be an integer >= 0")
  }
  const idleExecutorTtl = Option.getOrElse(input.idleExecutorTtl, () => defaults.idleExecutorTtl)
  if (!Duration.isGreaterThan(idleExecutorTtl, Duration.zero)) {
    return yield* invalid(`--idle-executor-ttl / ${EnvVars.idleExecutorTtl}`, "must be a positive duration")
  }
  const disabledCapabilities = Option.isSome(input.scriptedDisable)
    ? yield* parseCapabilityList(input.scriptedDisable.value)
    : []
  const harnessKinds = yield* parseHarnessKinds(input.harness ?? [])
  const environment = yield* resolveBinding({
    environmentId: input.environmentId ?? Option.none(),
    workspace: input.workspace ?? Option.none(),
    networkAccess: input.networkAccess ?? Option.none()
  }, (p) => path.resolve(p)).pipe(Effect.mapError((e) => invalid(e.setting, e.problem)))
  return {
    core,
    deviceId,
    credential,
    profileDir,
    socketPath,
    maxActive,
    maxIdleExecutors,
    idleExecutorTtl,
    logLevel: input.logLevel,
    logFormat: Option.getOrElse(input.logFormat, () => defaults.logFormat),
    scripted: { disabledCapabilities, available: !input.scriptedUnavailable },
    harnessKinds,
    codex: {
      path: Option.getOrUndefined(input.codexPath ?? Option.none()),
      config: (input.codexConfig ?? []).map((line) => line.trim()).filter((line) => line !== "")
    },
    claudeCodePath: input.claudeCodePath ?? Option.none(),
    environment
  } satisfies DaemonConfig
})
