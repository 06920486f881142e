/**
 * `agentwire conformance`: the wire conformance kit for other implementations (src/conformance/Kit.ts).
 *
 *   agentwire conformance runtime [--listen 127.0.0.1:PORT] [--device-id ID] [--credential-file PATH]
 *                                 [--scenario NAME]... [--max-active N] [--workspace-fixture] [--connect-timeout D]
 *                                 [--frame-timeout D] [--silence D] [--json]
 *     Serves a scripted Core on PORT (0 picks a free one) and prints, on stderr, the Core URL, device id and
 *     credential file a Runtime must be started with; then replays every scenario the Runtime side can replay
 *     from the wire alone, one connection after another, as the Runtime connects and reconnects. With
 *     --workspace-fixture it writes the workspace scenarios' fixture tree into a new temporary directory (removed on
 *     exit), prints the `--environment-id` / `--workspace` binding to start the Runtime with, and runs only the
 *     workspace scenarios (restoring the tree before each); without it they are skipped.
 *   agentwire conformance core --url URL --device-id ID --credential-file PATH [--scenario NAME]...
 *                              [--frame-timeout D] [--silence D] [--json]
 *     Acts as a scripted Runtime against a Core, for the scenarios Core can be checked on without a driver
 *     (connection rules, heartbeats and declarations, invalid frames, replacement).
 *
 * The report (a table, or JSON with --json) goes to stdout; progress and instructions go to stderr. Without
 * --credential-file the runtime kit generates a throwaway credential into a new 0600 file and prints only its
 * path: a credential is never printed. That file's temporary directory is removed when the command exits. Exit codes: 0 no scenario failed, 1 at least one failed, 2 usage.
 */
import { Console, Duration, Effect, FileSystem, Option, Path, Redacted } from "effect"
import { Command, Flag } from "effect/cli"
import { randomBytes, randomUUID } from "node:crypto"
import { allScenarios, scenarioNamed, type WireScenario } from "../../../scenarios/index.js"
import { EnvironmentId } from "../../../scenarios/Workspace.js"
import * as Kit from "../../conformance/Kit.js"
import { formatJson, formatTable, type Report, type ScenarioResult, summary } from "../../conformance/Report.js"
import * as WorkspaceFixture from "../../conformance/WorkspaceFixture.js"
import { DurationText } from "../Durations.js"
import { CommandFailed, ExitCode } from "../Exit.js"
import { examples } from "../Help.js"

const usage = (text: string) => new CommandFailed({ text, exitCode: ExitCode.usage })

const scenarioFlag = Flag.String("scenario").pipe(
  Flag.withDescription(`Run only this scenario (repeatable). Known: ${allScenarios.map((s) => s.name).join(", ")}`),
  Flag.atLeast(0)
)
const jsonFlag = Flag.Boolean("json").pipe(Flag.withDescription("Print the report as JSON"), Flag.withDefault(false))
const durationFlag = (name: string, description: string) =>
  Flag.String(name).pipe(Flag.withSchema(DurationText), Flag.withDescription(`${description}; e.g. 90s, 10m`), Flag.optional)

const timingFlags = {
  frameTimeout: durationFlag("frame-timeout", "How long to wait for an expected frame (default 10 seconds)"),
  silence: durationFlag("silence", "How long a silence step waits at most, in real time (default 300 millis)")
}

const timingOf = (input: { readonly frameTimeout: Option.Option<Duration.Duration>; readonly silence: Option.Option<Duration.Duration> }, connectTimeout?: Option.Option<Duration.Duration>): Kit.KitTiming => ({
  frameTimeout: Option.getOrElse(input.frameTimeout, () => Kit.defaultTiming.frameTimeout),
  silenceCap: Option.getOrElse(input.silence, () => Kit.defaultTiming.silenceCap),
  connectTimeout: Option.getOrElse(connectTimeout ?? Option.none(), () => Kit.defaultTiming.connectTimeout)
})

/** The scenarios named on the command line (all when none). */
const select = (names: ReadonlyArray<string>): Effect.Effect<ReadonlyArray<WireScenario>, CommandFailed> =>
  Effect.suspend(() => {
    if (names.length === 0) return Effect.succeed(allScenarios)
    const unknown = names.filter((n) => scenarioNamed(n) === undefined)
    if (unknown.length > 0) {
      return Effect.fail(usage(`unknown scenario ${unknown.join(", ")}; known: ${allScenarios.map((s) => s.name).join(", ")}`))
    }
    return Effect.succeed(allScenarios.filter((s) => names.includes(s.name)))
  })

/** Reads a credential file (one trailing newline ignored). The value never appears in a message. */
const readCredential = (file: string) =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const text = yield* fs.readFileString(file).pipe(Effect.mapError(() => usage(`cannot read the credential file ${file}`)))
    const value = text.replace(/\r?\n$/, "")
    if (value === "" || /\s/.test(value)) return yield* usage(`the credential file ${file} must hold one credential without whitespace`)
    return Redacted.make(value)
  })

/**
 * A throwaway credential in a new 0600 file inside a new 0700 temporary directory; returns the credential and
 * the file path. The directory belongs to the caller's Scope: it is removed, with the file, when the command
 * ends (success, failure, or SIGINT/SIGTERM), so no credential is left on disk.
 */
const throwawayCredential = Effect.gen(function* () {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const dir = yield* fs.makeTempDirectoryScoped({ prefix: "agentwire-conformance-" }).pipe(
    Effect.mapError(() => usage("cannot create a temporary directory for the credential"))
  )
  const file = path.join(dir, "credential")
  const credential = Redacted.make(`awdc_${randomBytes(32).toString("base64url")}`)
  yield* fs.writeFileString(file, `${Redacted.value(credential)}\n`, { mode: 0o600 }).pipe(
    Effect.mapError(() => usage(`cannot write ${file}`))
  )
  return { credential, file }
})

const progress = (json: boolean) => (result: ScenarioResult) =>
  json ? Effect.void : Console.error(`${result.verdict._tag === "Pass" ? "pass" : result.verdict._tag === "Fail" ? "FAIL" : "skip"}  ${result.scenario}`)

const finish = (report: Report, json: boolean) =>
  Effect.gen(function* () {
    yield* Console.log(json ? formatJson(report) : formatTable(report))
    const s = summary(report)
    if (s.failed > 0) {
      return yield* new CommandFailed({ text: `${s.failed} scenario(s) failed`, exitCode: ExitCode.failure })
    }
  })

const runtimeCommand = Command.make(
  "runtime",
  {
    listen: Flag.String("listen").pipe(
      Flag.withDescription("Address of the scripted Core, HOST:PORT (port 0 picks a free one); default 127.0.0.1:0"),
      Flag.withDefault("127.0.0.1:0")
    ),
    deviceId: Flag.String("device-id").pipe(Flag.withDescription("Device id the Runtime uses (default: a new UUID)"), Flag.optional),
    credentialFile: Flag.String("credential-file").pipe(
      Flag.withDescription("File holding the credential the Runtime presents (default: a new throwaway credential file)"),
      Flag.optional
    ),
    scenario: scenarioFlag,
    maxActive: Flag.Int("max-active").pipe(
      Flag.withDescription("The Runtime's bound on active preparations, to also run the scenarios that need one"),
      Flag.optional
    ),
    workspaceFixture: Flag.Boolean("workspace-fixture").pipe(
      Flag.withDescription("Bind the Runtime to a fixture workspace the kit creates, and run the workspace scenarios only"),
      Flag.withDefault(false)
    ),
    connectTimeout: durationFlag("connect-timeout", "How long to wait for the Runtime to connect (default 60 seconds)"),
    json: jsonFlag,
    ...timingFlags
  },
  (input) =>
    // Scoped: the throwaway credential directory lives exactly as long as the command.
    Effect.scoped(Effect.gen(function* () {
      const match = /^(.+):(\d+)$/.exec(input.listen)
      const port = match === null ? Number.NaN : Number(match[2])
      if (match === null || !(port >= 0 && port <= 65535)) return yield* usage("--listen must be HOST:PORT (port 0..65535)")
      const scenarios = yield* select(input.scenario)
      const deviceId = Option.getOrElse(input.deviceId, () => randomUUID())
      const { credential, file } = Option.isSome(input.credentialFile)
        ? { credential: yield* readCredential(input.credentialFile.value), file: input.credentialFile.value }
        : yield* throwawayCredential
      // The fixture directory lives exactly as long as the command, like the throwaway credential.
      const workspace = input.workspaceFixture
        ? yield* WorkspaceFixture.scoped.pipe(Effect.mapError((e) => usage(e.message)))
        : undefined
      const binding = workspace === undefined ? "" : ` --environment-id ${EnvironmentId} --workspace ${workspace}`
      const report = yield* Effect.scoped(Kit.runRuntimeKit({
        host: match[1]!,
        port,
        deviceId,
        credential,
        scenarios,
        ...(Option.isSome(input.maxActive) ? { maxActive: input.maxActive.value } : {}),
        ...(workspace === undefined ? {} : { workspace }),
        timing: timingOf(input, input.connectTimeout),
        onListening: ({ coreUrl }) =>
          Console.error(
            [
              `agentwire conformance: scripted Core listening on ${coreUrl}`,
              `start the Runtime under test with: --core-url ${coreUrl} --device-id ${deviceId} --credential-file ${file}${binding}`,
              `(for agentwire itself: agentwire daemon --core-url ${coreUrl} --device-id ${deviceId} --credential-file ${file}${binding})`,
              `running ${scenarios.length} scenario(s) as the Runtime connects…`
            ].join("\n")
          ),
        onResult: progress(input.json)
      })).pipe(Effect.mapError((e) => usage(e.message)))
      return yield* finish(report, input.json)
    }))
).pipe(
  Command.withDescription(
    "Act as a scripted Core: point any Runtime at it and get a pass/fail report per wire scenario. Exit codes: 0 no failure, 1 a scenario failed, 2 usage."
  ),
  examples("agentwire conformance runtime", "agentwire conformance runtime --json > report.json", "agentwire conformance runtime --workspace-fixture")
)

const coreCommand = Command.make(
  "core",
  {
    url: Flag.String("url").pipe(Flag.withDescription("(required) The Core's origin or machine API base (…/api/v1)")),
    deviceId: Flag.String("device-id").pipe(Flag.withDescription("(required) A device registered with the Core (agent-daemon)")),
    credentialFile: Flag.String("credential-file").pipe(Flag.withDescription("(required) File holding that device's daemon credential")),
    scenario: scenarioFlag,
    json: jsonFlag,
    ...timingFlags
  },
  (input) =>
    Effect.gen(function* () {
      if (!/^https?:\/\//.test(input.url)) return yield* usage("--url must be an http(s) URL")
      const scenarios = yield* select(input.scenario)
      const credential = yield* readCredential(input.credentialFile)
      if (!input.json) yield* Console.error(`agentwire conformance: scripted Runtime against ${input.url} as device ${input.deviceId}`)
      const report = yield* Kit.runCoreKit({
        coreUrl: input.url,
        deviceId: input.deviceId,
        credential,
        scenarios,
        timing: timingOf(input),
        onResult: progress(input.json)
      })
      return yield* finish(report, input.json)
    })
).pipe(
  Command.withDescription(
    "Act as a scripted Runtime against a Core (scenarios that need no Core driver). Exit codes: 0 no failure, 1 a scenario failed, 2 usage."
  ),
  examples("agentwire conformance core --url http://127.0.0.1:7400 --device-id conf-1 --credential-file conf-1.cred")
)

/** The `conformance` subcommand of the binary. */
export const conformanceCommand = Command.make("conformance").pipe(
  Command.withDescription("Wire conformance kit: replay the wire scenarios against another Runtime or Core"),
  Command.withSubcommands([runtimeCommand, coreCommand]),
  examples("agentwire conformance runtime", "agentwire conformance core --url http://127.0.0.1:7400 --device-id conf-1 --credential-file conf-1.cred")
)
