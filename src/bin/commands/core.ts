/**
 * `agentwire core`: runs the standalone dev Core (machine routes + operator API over the embedded store)
 * until a signal stops it; `agentwire core credential create|revoke` manage daemon credentials in the same
 * data directory without a running server.
 *
 *   agentwire core [--host 127.0.0.1] [--port 7400] [--data-dir DIR] [--database URL] [--public-url URL]
 *                  [--operator-token-file PATH] [--heartbeat-seconds N] [--durability full|normal]
 *   agentwire core credential create|revoke …   (./credential.ts)
 *
 * `--database postgres://…` (else AGENTWIRE_CORE_DATABASE, which the credential commands also read) keeps the
 * store in PostgreSQL instead of the data directory's SQLite file (docs/multi-node.md). The flag refuses a URL
 * with a password (argv is visible to every local user); the variable may carry one. Only the URL without its
 * password is ever printed. `--durability` (else AGENTWIRE_CORE_DURABILITY, default `full`) sets SQLite's
 * `synchronous` mode (docs/store.md "Durability").
 *
 * One Core per data directory: a second one fails with exit code 2 before it touches the store (DataDirLock).
 * Port 0 picks a free port. The first stdout line is the chosen URL alone (`http://127.0.0.1:PORT`, for
 * scripts: `read -r url`); human-readable lines follow (`agentwire core listening on URL`, data directory,
 * operator token source, the daemon command).
 * The operator token comes from `--operator-token-file`, else AGENTWIRE_OPERATOR_TOKEN, else
 * `<data dir>/operator-token` (generated at first start, mode 0600). Only its file path is ever printed.
 * Exit codes: src/bin/Exit.ts (0 stopped by a signal after a clean shutdown, 2 usage/configuration).
 */
import { Config, Console, Context, Effect, Layer, Logger, LogLevel, Option, Redacted } from "effect"
import { Command, Flag } from "effect/cli"
import { HttpMiddleware } from "effect/http"
import * as Os from "node:os"
import { join } from "node:path"
import * as DevCore from "../../core/dev/DevCore.js"
import { DevIds } from "../../core/dev/DevIds.js"
import * as FrameLog from "../../core/dev/FrameLog.js"
import * as OperatorToken from "../../core/dev/OperatorToken.js"
import * as PgStore from "../../core/dev/pg/PgStore.js"
import * as Store from "../../core/dev/Store.js"
import { CommandFailed, ExitCode, reportFailureAsJson } from "../Exit.js"
import { examples } from "../Help.js"
import { loggerFor } from "../Logging.js"
import * as MetricsListener from "../MetricsListener.js"
import * as Signals from "../Signals.js"
import * as Telemetry from "../Telemetry.js"
import { makeCredentialCommand } from "./credential.js"

export const CoreEnvVars = {
  dataDir: "AGENTWIRE_CORE_DATA_DIR",
  database: "AGENTWIRE_CORE_DATABASE",
  durability: "AGENTWIRE_CORE_DURABILITY",
  operatorToken: "AGENTWIRE_OPERATOR_TOKEN",
  logFormat: "AGENTWIRE_LOG_FORMAT"
} as const

/** The default data directory: `~/.agentwire/core`. */
export const defaultDataDir = (homeDir: string): string => join(homeDir, ".agentwire", "core")

/** The service name of the Core's traces and metrics unless OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES name one. */
export const TelemetryServiceName = "agentwire-core"

/** The default listen port of `agentwire core` (0 picks a free one). */
export const DefaultPort = 7400

const dataDirFlag = Flag.String("data-dir").pipe(
  Flag.withDescription(`Data directory (store, operator token); default ~/.agentwire/core. Env: ${CoreEnvVars.dataDir}`),
  Flag.withFallbackConfig(Config.String(CoreEnvVars.dataDir)),
  Flag.optional
)

const usage = (text: string) => new CommandFailed({ text, exitCode: ExitCode.usage })


const databaseFlag = Flag.String("database").pipe(
  Flag.withDescription(
    `PostgreSQL URL postgres://user@host:port/db for the store (default: SQLite in the data directory). No password here: put one in ${CoreEnvVars.database}`
  ),
  Flag.optional
)

/** The PostgreSQL URL from `--database`, else the environment; none selects the data directory's SQLite file. */
const resolveDatabase = (flag: Option.Option<string>) =>
  Effect.gen(function* () {
    if (Option.isSome(flag)) {
      if (!PgStore.isDatabaseUrl(flag.value)) return yield* usage("--database must be a postgres:// or postgresql:// URL")
      if (PgStore.hasPassword(flag.value)) {
        return yield* usage(`--database must not carry a password (argv is visible to other users); set ${CoreEnvVars.database} instead`)
      }
      return Option.some(Redacted.make(flag.value.trim()))
    }
    const fromEnv = yield* Config.option(Config.Redacted(CoreEnvVars.database)).pipe(
      Effect.mapError(() => usage(`${CoreEnvVars.database} is invalid`))
    )
    if (Option.isNone(fromEnv) || Redacted.value(fromEnv.value).trim() === "") return Option.none<Redacted.Redacted<string>>()
    if (!PgStore.isDatabaseUrl(Redacted.value(fromEnv.value))) {
      return yield* usage(`${CoreEnvVars.database} must be a postgres:// or postgresql:// URL`)
    }
    return Option.some(Redacted.make(Redacted.value(fromEnv.value).trim()))
  })

/** Opens the store (the data directory's, or AGENTWIRE_CORE_DATABASE's) for one command (no server). */
const withStore = <A, E>(
  dataDir: string,
  effect: Effect.Effect<A, E, Store.StoreServices>
): Effect.Effect<A, E | CommandFailed> =>
  Effect.scoped(
    Effect.gen(function* () {
      const database = yield* resolveDatabase(Option.none())
      const location: Store.StoreLocation = Option.isSome(database)
        ? { _tag: "postgres", url: database.value }
        : { _tag: "sqlite", dataDir }
      const context = yield* Layer.build(Store.layer(location).pipe(Layer.provide(DevIds.layer))).pipe(
        Effect.mapError((e) => usage(e.message))
      )
      return yield* Effect.provideContext(effect, context)
    })
  )

/** Resolves the operator token: a file flag, the environment, or the data directory's (generated once). */
export const resolveOperatorToken = (dataDir: string, tokenFile: Option.Option<string>) =>
  Effect.gen(function* () {
    if (Option.isSome(tokenFile)) {
      const token = yield* OperatorToken.readFile(tokenFile.value).pipe(Effect.mapError((e) => usage(e.message)))
      return { token, source: tokenFile.value }
    }
    const fromEnv = yield* Config.option(Config.Redacted(CoreEnvVars.operatorToken)).pipe(
      Effect.mapError(() => usage(`${CoreEnvVars.operatorToken} is invalid`))
    )
    if (Option.isSome(fromEnv) && Redacted.value(fromEnv.value).trim() !== "") {
      return { token: Redacted.make(Redacted.value(fromEnv.value).trim()), source: `$${CoreEnvVars.operatorToken}` }
    }
    yield* Store.ensureDataDir(dataDir).pipe(Effect.mapError((e) => usage(e.message)))
    const token = yield* OperatorToken.loadOrCreate(dataDir).pipe(Effect.mapError((e) => usage(e.message)))
    return { token, source: OperatorToken.tokenFile(dataDir) }
  })

const coreFlags = {
  host: Flag.String("host").pipe(Flag.withDescription("Listen address (default 127.0.0.1)"), Flag.withDefault("127.0.0.1")),
  port: Flag.Int("port").pipe(Flag.withDescription(`Listen port (default ${DefaultPort}; 0 picks a free one)`), Flag.withDefault(DefaultPort)),
  dataDir: dataDirFlag,
  database: databaseFlag,
  durability: Flag.Literals("durability", ["full", "normal"]).pipe(
    Flag.withDescription(
      `SQLite commits: full (default) fsyncs every commit, normal survives a Core crash but not a power loss. Env: ${CoreEnvVars.durability}`
    ),
    Flag.withFallbackConfig(Config.Literals(["full", "normal"], CoreEnvVars.durability)),
    Flag.withDefault("full" as const)
  ),
  publicUrl: Flag.String("public-url").pipe(
    Flag.withDescription("Base URL daemons dial (default: the listen address)"),
    Flag.optional
  ),
  operatorTokenFile: Flag.String("operator-token-file").pipe(
    Flag.withDescription(`File holding the operator token (else ${CoreEnvVars.operatorToken}, else <data dir>/operator-token)`),
    Flag.optional
  ),
  heartbeatSeconds: Flag.Int("heartbeat-seconds").pipe(
    Flag.withDescription("Heartbeat cadence bootstrap tells daemons (default 15)"),
    Flag.optional
  ),
  metricsListen: Flag.String("metrics-listen").pipe(
    Flag.withDescription("Also serve GET /metrics (Prometheus text) without a token on HOST:PORT (e.g. 127.0.0.1:9464); /metrics on the main address needs the operator token"),
    Flag.optional
  ),
  logFormat: Flag.Literals("log-format", ["text", "json"]).pipe(
    Flag.withDescription(`Log format on stderr: text (logfmt, default) or json (one flat object per line). Env: ${CoreEnvVars.logFormat}`),
    Flag.withFallbackConfig(Config.Literals(["text", "json"], CoreEnvVars.logFormat)),
    Flag.withDefault("text" as const)
  )
}

type CoreInput = {
  readonly [K in keyof typeof coreFlags]: (typeof coreFlags)[K] extends Flag.Flag<infer A> ? A : never
}

export const makeCoreCommand = (options: { readonly homeDir: string }) => {
  const dataDirOf = (flag: Option.Option<string>) => Option.getOrElse(flag, () => defaultDataDir(options.homeDir))

  const credential = makeCredentialCommand({
    dataDirFlag,
    dataDirOf,
    withStore,
    operatorToken: (dataDir, tokenFile) => resolveOperatorToken(dataDir, tokenFile)
  })

  return Command.make(
    "core",
    coreFlags,
    (input) =>
      Effect.gen(function* () {
        // Telemetry first: the exporters (when OTEL_* asks for them) outlive the Core, so its shutdown spans leave.
        const metricsListen = Option.map(input.metricsListen, MetricsListener.parseListen)
        if (Option.isSome(metricsListen) && metricsListen.value === undefined) {
          return yield* usage("--metrics-listen must be HOST:PORT (e.g. 127.0.0.1:9464)")
        }
        const telemetry = yield* Telemetry.fromEnv(TelemetryServiceName)
        return yield* runCore(input, Option.getOrUndefined(metricsListen)).pipe(
          Effect.provide(Layer.mergeAll(
            telemetry,
            Telemetry.eventLoopDelay("agentwire_core"),
            HttpMiddleware.layerTracerDisabledForUrls([MetricsListener.MetricsPath])
          ))
        )
      }).pipe(Effect.provide(Logger.layer([loggerFor(input.logFormat)])), reportFailureAsJson(input.logFormat))
  ).pipe(
    Command.withDescription(
      "Run the standalone dev Core: machine routes, the operator API and the web console (at /) over an embedded store. Exit codes: 0 stopped by a signal, 2 usage/configuration (data directory in use, port taken)."
    ),
    Command.withSubcommands([credential]),
    examples(
      "agentwire core --port 7400 --data-dir ./core-data",
      "AGENTWIRE_CORE_DATABASE=postgres://core:secret@db:5432/agentwire agentwire core --log-format json",
      "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 agentwire core --metrics-listen 127.0.0.1:9464"
    )
  )

  function runCore(input: CoreInput, metricsListen: { readonly host: string; readonly port: number } | undefined) {
    return Effect.scoped(Effect.gen(function* () {
        if (input.port < 0 || input.port > 65535) return yield* usage("--port must be 0..65535")
        if (Option.isSome(input.heartbeatSeconds) && input.heartbeatSeconds.value < 1) {
          return yield* usage("--heartbeat-seconds must be at least 1")
        }
        const dataDir = dataDirOf(input.dataDir)
        const database = yield* resolveDatabase(input.database)
        const { source, token } = yield* resolveOperatorToken(dataDir, input.operatorTokenFile)
        // A debug line per frame only when debug lines are on (otherwise the gateway does no tap work at all).
        const frameLines = yield* LogLevel.isEnabled("Debug")
        const context = yield* Layer.build(DevCore.layer({
          ...(frameLines ? { tap: FrameLog.logFrame } : {}),
          host: input.host,
          port: input.port,
          dataDir,
          ...(Option.isSome(database) ? { database: database.value } : {}),
          durability: input.durability,
          operatorToken: token,
          ...(Option.isSome(input.publicUrl) ? { publicUrl: input.publicUrl.value } : {}),
          ...(Option.isSome(input.heartbeatSeconds) ? { heartbeatSeconds: input.heartbeatSeconds.value } : {})
        })).pipe(Effect.mapError((e) => usage(`dev Core failed to start: ${DevCore.startErrorMessage(e, input.host, input.port)}`)))
        const info = Context.get(context, DevCore.DevCore)
        const metricsUrl = metricsListen === undefined ? undefined : Context.get(
          yield* Layer.build(MetricsListener.layer(metricsListen.host, metricsListen.port)).pipe(
            Effect.mapError(() => usage(`cannot listen on ${metricsListen.host}:${metricsListen.port} for --metrics-listen`))
          ),
          MetricsListener.MetricsListener
        ).url
        // The URL alone first, so a script can read one line; the human text follows on lines of its own.
        yield* Console.log(info.url)
        yield* Console.log(`agentwire core listening on ${info.url}`)
        yield* Console.log(`data directory: ${dataDir}`)
        yield* Console.log(`store: ${info.store}`)
        yield* Console.log(`operator token: ${source}`)
        yield* Console.log(`daemons connect with: agentwire daemon --core-url ${info.publicUrl} --device-id ID --credential-file FILE`)
        if (metricsUrl !== undefined) yield* Console.log(`metrics (no token): ${metricsUrl}${MetricsListener.MetricsPath}`)
        yield* Effect.logInfo("agentwire core listening").pipe(Effect.annotateLogs({ url: info.url, store: info.store }))
        return yield* Effect.never.pipe(Effect.onInterrupt(() => Signals.logStopping("core")))
      }))
  }
}

/** The `core` subcommand of the binary. */
export const coreCommand = makeCoreCommand({ homeDir: Os.homedir() })
