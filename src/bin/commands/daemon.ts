/**
 * `agentwire daemon`: runs the Runtime daemon until Core asks it to shut down, Core refuses it permanently, or a
 * signal stops it. Builds the process graph once (config, logger, StatusBoard, RuntimeProcess, connector, local
 * status socket) and hands it to `Daemon.run`; the per-connection graph is built inside the loop.
 *
 * Flags fall back to environment variables (RuntimeConfig.EnvVars). The credential has no flag: it comes from a
 * file (`--credential-file` / AGENTWIRE_CREDENTIAL_FILE) or AGENTWIRE_CREDENTIAL, and never appears on a command
 * line, in a log line or in an error. Exit codes: src/bin/Exit.ts.
 */
import { Config, Context, Effect, FileSystem, Layer, Logger, LogLevel, Option, References } from "effect"
import { Command, Flag, GlobalFlag } from "effect/cli"
import * as Os from "node:os"
import * as Path from "node:path"
import { ProtocolVersion } from "../../proto/Version.js"
import * as ControlServer from "../../runtime/control/ControlServer.js"
import * as Daemon from "../../runtime/Daemon.js"
import { settingsFromEnv } from "../../runtime/harness/claude_code/ClaudeCodeSettings.js"
import { harnessKindNames } from "../../runtime/harness/HarnessKinds.js"
import * as RuntimeConfig from "../../runtime/RuntimeConfig.js"
import * as RuntimeProcess from "../../runtime/RuntimeProcess.js"
import * as SuspensionStore from "../../runtime/SuspensionStore.js"
import { StatusBoard } from "../../runtime/StatusBoard.js"
import { Connector } from "../../runtime/transport/Connector.js"
import { AgentwireVersion } from "../BuildInfo.js"
import { DurationText } from "../Durations.js"
import { loggerFor } from "../Logging.js"
import * as MetricsListener from "../MetricsListener.js"
import * as Signals from "../Signals.js"
import * as Telemetry from "../Telemetry.js"
import { CommandFailed, ExitCode, reportFailureAsJson } from "../Exit.js"
import { examples } from "../Help.js"

const { env, EnvVars } = RuntimeConfig

/** The daemon's flags; each falls back to its environment variable (and to `--config FILE`: DaemonConfigFile.ts). */
export const daemonFlags = {
  config: Flag.String("config").pipe(
    Flag.withDescription(
      "File with the same keys as these flags (JSON, or key = value lines); flags override it, it overrides the environment. Never a secret: name the credential with credential-file"
    ),
    Flag.optional
  ),
  coreUrl: Flag.String("core-url").pipe(
    Flag.withDescription(`(required) Core origin or machine API base (…/api/v1). Env: ${EnvVars.coreUrl}`),
    Flag.withFallbackConfig(env.coreUrl),
    Flag.optional
  ),
  deviceId: Flag.String("device-id").pipe(
    Flag.withDescription(`(required) Device id the credential belongs to. Env: ${EnvVars.deviceId}`),
    Flag.withFallbackConfig(env.deviceId),
    Flag.optional
  ),
  credentialFile: Flag.String("credential-file").pipe(
    Flag.withDescription(
      `(required unless ${EnvVars.credential} is set) File holding the daemon credential (one trailing newline is ignored). Env: ${EnvVars.credentialFile}; or put the credential itself in ${EnvVars.credential}`
    ),
    Flag.withFallbackConfig(env.credentialFile),
    Flag.optional
  ),
  profile: Flag.String("profile").pipe(
    Flag.withDescription(`State directory (default ~/.agentwire); holds agentwire.sock. Env: ${EnvVars.profile}`),
    Flag.withFallbackConfig(env.profile),
    Flag.optional
  ),
  maxActive: Flag.Int("max-active").pipe(
    Flag.withDescription(`Bound on active preparations and executions (default 4). Env: ${EnvVars.maxActive}`),
    Flag.withFallbackConfig(env.maxActive),
    Flag.optional
  ),
  maxIdleExecutors: Flag.Int("max-idle-executors").pipe(
    Flag.withDescription(`Bound on idle retained Executors (default 16). Env: ${EnvVars.maxIdleExecutors}`),
    Flag.withFallbackConfig(env.maxIdleExecutors),
    Flag.optional
  ),
  idleExecutorTtl: Flag.String("idle-executor-ttl").pipe(
    Flag.withSchema(DurationText),
    Flag.withDescription(`Idle Executor expiry, e.g. 90s, 10m or "90 seconds" (default 10m). Env: ${EnvVars.idleExecutorTtl}`),
    Flag.withFallbackConfig(env.idleExecutorTtl),
    Flag.optional
  ),
  logFormat: Flag.Literals("log-format", ["text", "json"]).pipe(
    Flag.withDescription(`Log format on stderr: text (logfmt, default) or json. Env: ${EnvVars.logFormat}`),
    Flag.withFallbackConfig(env.logFormat),
    Flag.optional
  ),
  scriptedDisable: Flag.String("scripted-disable").pipe(
    Flag.withDescription(
      `Comma-separated capability names the scripted harness also declares unsupported (e.g. steering,permissions). Env: ${EnvVars.scriptedDisable}`
    ),
    Flag.withFallbackConfig(env.scriptedDisable),
    Flag.optional
  ),
  claudeCodePath: Flag.String("claude-code-path").pipe(
    Flag.withDescription(`Claude Code binary of the claude_code kind (default: the Agent SDK's, the @anthropic-ai/claude-code package's, or claude on PATH). Env: ${EnvVars.claudeCodePath}`),
    Flag.withFallbackConfig(env.claudeCodePath),
    Flag.optional
  ),
  harness: Flag.String("harness").pipe(
    Flag.withDescription(
      `Harness kind to run; repeatable (known: ${harnessKindNames.join(", ")}; default scripted). Env: ${EnvVars.harness} (comma-separated)`
    ),
    Flag.atLeast(0)
  ),
  codexPath: Flag.String("codex-path").pipe(
    Flag.withDescription(
      `The Codex binary or its npm launcher (default: codex on PATH, else the pinned @openai/codex). Env: ${EnvVars.codexPath}`
    ),
    Flag.withFallbackConfig(env.codexPath),
    Flag.optional
  ),
  codexConfig: Flag.String("codex-config").pipe(
    Flag.withDescription(
      `KEY=VALUE forwarded as -c to every codex app-server; repeatable; never a secret (use env_key). Env: ${EnvVars.codexConfig} (one per line)`
    ),
    Flag.atLeast(0)
  ),
  environmentId: Flag.String("environment-id").pipe(
    Flag.withDescription(`The local Environment this daemon is bound to (with --workspace). Env: ${EnvVars.environmentId}`),
    Flag.withFallbackConfig(env.environmentId),
    Flag.optional
  ),
  workspace: Flag.String("workspace").pipe(
    Flag.withDescription(`The bound Environment's workspace directory; must exist, its real path is the root. Env: ${EnvVars.workspace}`),
    Flag.withFallbackConfig(env.workspace),
    Flag.optional
  ),
  networkAccess: Flag.String("network-access").pipe(
    Flag.withDescription(`The bound Environment's network policy: enabled, disabled (default) or restricted. Env: ${EnvVars.networkAccess}`),
    Flag.withFallbackConfig(env.networkAccess),
    Flag.optional
  ),
  scriptedUnavailable: Flag.Boolean("scripted-unavailable").pipe(
    Flag.withDescription(`Declare the scripted harness unavailable. Env: ${EnvVars.scriptedUnavailable}`),
    Flag.withFallbackConfig(env.scriptedUnavailable),
    Flag.withDefault(false)
  ),
  metricsPort: Flag.Int("metrics-port").pipe(
    Flag.withDescription("Also serve GET /metrics (Prometheus text) on 127.0.0.1:PORT (0 picks a free port, logged); `agentwire status --metrics` reads the same values without it"),
    Flag.optional
  )
}

/** The parsed flag values. */
export type DaemonFlags = {
  readonly [K in keyof typeof daemonFlags]: (typeof daemonFlags)[K] extends Flag.Flag<infer A> ? A : never
}

/** Merges the parsed flags (already falling back to env) with the env-only inputs into a validated config. */
export const resolveConfig = (
  input: DaemonFlags,
  homeDir: string
) =>
  Effect.gen(function* () {
    const credential = yield* RuntimeConfig.credentialFromEnv
    const flagLevel = yield* GlobalFlag.LogLevel
    const envLevelText = yield* Config.option(env.logLevel).pipe(
      Effect.mapError(() => new RuntimeConfig.DaemonConfigInvalid({ setting: EnvVars.logLevel, problem: "cannot be read" }))
    )
    const envLevel: Option.Option<LogLevel.LogLevel> = Option.isNone(envLevelText)
      ? Option.none()
      : RuntimeConfig.parseLogLevel(envLevelText.value)
    // A repeatable flag has no config fallback of its own: no --harness means AGENTWIRE_HARNESS, if set.
    const harness = input.harness.length > 0
      ? input.harness
      : Option.toArray(
        yield* Config.option(env.harness).pipe(
          Effect.mapError(() => new RuntimeConfig.DaemonConfigInvalid({ setting: EnvVars.harness, problem: "cannot be read" }))
        )
      )
    // Likewise: no --codex-config means the lines of AGENTWIRE_CODEX_CONFIG, if set.
    const codexConfig = input.codexConfig.length > 0
      ? input.codexConfig
      : Option.toArray(
        yield* Config.option(env.codexConfig).pipe(
          Effect.mapError(() => new RuntimeConfig.DaemonConfigInvalid({ setting: EnvVars.codexConfig, problem: "cannot be read" }))
        )
      ).flatMap((text) => text.split("\n"))
    if (Option.isSome(envLevelText) && Option.isNone(envLevel)) {
      return yield* new RuntimeConfig.DaemonConfigInvalid({
        setting: EnvVars.logLevel,
        problem: "expected one of all, trace, debug, info, warn, error, fatal, none"
      })
    }
    return yield* RuntimeConfig.resolve({
      coreUrl: input.coreUrl,
      deviceId: input.deviceId,
      credential,
      credentialFile: input.credentialFile,
      profile: input.profile,
      maxActive: input.maxActive,
      maxIdleExecutors: input.maxIdleExecutors,
      idleExecutorTtl: input.idleExecutorTtl,
      logLevel: Option.orElse(flagLevel, () => envLevel),
      logFormat: input.logFormat,
      scriptedDisable: input.scriptedDisable,
      scriptedUnavailable: input.scriptedUnavailable,
      harness,
      codexPath: input.codexPath,
      codexConfig,
      claudeCodePath: input.claudeCodePath,
      environmentId: input.environmentId,
      workspace: input.workspace,
      networkAccess: input.networkAccess
    }, { homeDir })
  })

export interface DaemonProcess {
  readonly pid: number
  /** `--metrics-port`: serve `/metrics` on 127.0.0.1 at this port. */
  readonly metricsPort?: number | undefined
}

/** The service name of the daemon's traces and metrics unless OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES name one. */
export const TelemetryServiceName = "agentwire-daemon"

/**
 * Runs the daemon with a validated config: creates the profile directory (0700), serves the status socket,
 * and runs the reconnect loop. Fails with `CommandFailed` (exit 2 for a profile in use, 3 for a permanent
 * rejection).
 */
export const runDaemon = (config: RuntimeConfig.DaemonConfig, proc: DaemonProcess) => {
  const logger = loggerFor(config.logFormat === "json" ? "json" : "text")
  const userAgent = `agentwire/${AgentwireVersion}`
  return Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    yield* fs.makeDirectory(config.profileDir, { recursive: true, mode: 0o700 }).pipe(
      Effect.mapError(() =>
        new CommandFailed({ text: `cannot create the profile directory ${config.profileDir}`, exitCode: ExitCode.usage })
      )
    )
    // A suspension survives a restart: the state is read before anything connects (SuspensionStore.ts).
    const suspensionFile = Path.join(config.profileDir, "suspension.json")
    const suspension = yield* SuspensionStore.load(suspensionFile).pipe(
      Effect.mapError((e) => new CommandFailed({ text: e.message, exitCode: ExitCode.usage }))
    )
    yield* Effect.logInfo("agentwire daemon starting").pipe(
      Effect.annotateLogs({
        version: AgentwireVersion,
        wire_version: ProtocolVersion,
        core_url: config.core.origin,
        profile: config.profileDir,
        pid: proc.pid
      })
    )
    // The process graph, built once: every connection shares it (style guide §8).
    const processLayer = Layer.mergeAll(
      ControlServer.layer(config.socketPath),
      Connector.layer({
        apiBase: config.core.apiBase,
        deviceId: config.deviceId,
        credential: config.credential,
        userAgent
      }),
      RuntimeProcess.layer({
        maxActive: config.maxActive,
        maxIdleExecutors: config.maxIdleExecutors,
        idleExecutorTtl: config.idleExecutorTtl,
        scripted: config.scripted,
        kinds: config.harnessKinds,
        environment: config.environment,
        // Initialization commands inherit only an allowlist of it (runtime/transfer/TransferSettings.ts).
        childEnv: process.env,
        suspension: { file: suspensionFile, initial: suspension },
        // The daemon's environment reaches Codex (for the provider's env_key); the adapter drops AGENTWIRE_*.
        codex: { ...config.codex, env: process.env, profileDir: config.profileDir },
        // Model endpoint and key come from the daemon's environment, held Redacted from here on.
        ...(config.harnessKinds.includes("claude_code")
          ? { claudeCode: settingsFromEnv(process.env, { profileDir: config.profileDir, binaryPath: config.claudeCodePath }) }
          : {})
      })
    ).pipe(
      Layer.provideMerge(StatusBoard.layer({
        daemonVersion: AgentwireVersion,
        wireVersion: ProtocolVersion,
        pid: proc.pid,
        deviceId: config.deviceId,
        coreUrl: config.core.origin
      })),
      Layer.provideMerge(RuntimeConfig.RuntimeConfig.layer(config))
    )
    if (proc.metricsPort !== undefined) {
      const listener = yield* Layer.build(MetricsListener.layer("127.0.0.1", proc.metricsPort)).pipe(
        Effect.mapError(() => new CommandFailed({ text: `cannot listen on 127.0.0.1:${proc.metricsPort} for --metrics-port`, exitCode: ExitCode.usage }))
      )
      yield* Effect.logInfo("serving metrics").pipe(
        Effect.annotateLogs({ url: `${Context.get(listener, MetricsListener.MetricsListener).url}${MetricsListener.MetricsPath}` })
      )
    }
    yield* Daemon.run({ deviceId: config.deviceId, coreOrigin: config.core.origin }).pipe(
      // The shutdown reason first, then the connection's confirmed cleanup runs (its own lines follow).
      Effect.onInterrupt(() => Signals.logStopping("daemon")),
      Effect.provide(processLayer)
    )
  }).pipe(
    Effect.scoped,
    Effect.catchTags({
      DaemonRejected: (e) => Effect.fail(new CommandFailed({ text: e.message, exitCode: ExitCode.rejected })),
      ControlSocketUnavailable: (e) => Effect.fail(new CommandFailed({ text: e.message, exitCode: ExitCode.usage }))
    }),
    Effect.annotateLogs({ device_id: config.deviceId }),
    // Telemetry outside everything else: the exporters (when OTEL_* asks for them) post the last spans after
    // the connection's confirmed cleanup.
    (daemon) => Effect.flatMap(Telemetry.fromEnv(TelemetryServiceName), (telemetry) =>
      Effect.provide(daemon, Layer.mergeAll(telemetry, Telemetry.eventLoopDelay("agentwire_daemon")))),
    Effect.provide(Logger.layer([logger])),
    Option.isSome(config.logLevel) ? Effect.provideService(References.MinimumLogLevel, config.logLevel.value) : (e) => e
  )
}

/**
 * Builds the command. `homeDir` locates the default profile; `run` is replaceable so tests can check the
 * resolved configuration without starting a daemon.
 */
export const makeDaemonCommand = (options: {
  readonly homeDir: string
  readonly pid: number
  readonly run?: (config: RuntimeConfig.DaemonConfig) => Effect.Effect<void, CommandFailed, FileSystem.FileSystem>
}) =>
  Command.make("daemon", daemonFlags, (input) =>
    resolveConfig(input, options.homeDir).pipe(
      Effect.catchTag("DaemonConfigInvalid", (e) =>
        Effect.fail(new CommandFailed({ text: e.message, exitCode: ExitCode.usage }))),
      Effect.flatMap((config) => {
        if (Option.isSome(input.metricsPort) && (input.metricsPort.value < 0 || input.metricsPort.value > 65535)) {
          return Effect.fail(new CommandFailed({ text: "--metrics-port must be 0..65535", exitCode: ExitCode.usage }))
        }
        const proc = { pid: options.pid, metricsPort: Option.getOrUndefined(input.metricsPort) }
        return (options.run ?? ((c) => runDaemon(c, proc)))(config)
      }),
      // With json logs, the reason the daemon exits is a JSON line too (docs/operations.md "Logs").
      reportFailureAsJson(Option.getOrElse(input.logFormat, () => "text" as const))
    )).pipe(
      Command.withDescription(
        "Run the Runtime daemon: bootstrap, connect to Core over WebSocket, serve Harness work, reconnect with backoff. --core-url, --device-id and a credential (--credential-file or AGENTWIRE_CREDENTIAL) are required (by flag, --config file or environment). Exit codes: 0 shutdown requested or signal (after confirmed cleanup), 2 usage/configuration, 3 permanently rejected by Core."
      ),
      examples(
        "agentwire daemon --core-url http://127.0.0.1:7400 --device-id laptop-1 --credential-file laptop-1.cred",
        "agentwire daemon --config ~/.agentwire/daemon.conf --log-level debug",
        "agentwire daemon --config daemon.conf --harness scripted --harness codex"
      )
    )

/** The `daemon` subcommand of the binary. */
export const daemonCommand = makeDaemonCommand({ homeDir: Os.homedir(), pid: process.pid })
