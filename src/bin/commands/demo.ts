/**
 * `agentwire demo` (what `npm start` runs): one complete Turn between an embedded dev Core and a real daemon
 * with the `scripted` harness, shown live.
 *
 * Starts the dev Core on 127.0.0.1 (a free port and a temporary data directory unless `--port` / `--data-dir`
 * say otherwise), issues a device credential into a 0600 file, spawns this same binary as
 * `agentwire daemon …` (the credential only via `--credential-file`, never argv or the environment; its logs
 * go to `<data dir>/daemon.log`), waits for its first heartbeat, creates a Session and runs one Turn whose
 * scripted input streams thinking, deltas, a usage snapshot, waits for a steer (sent through Core's steering
 * API once the usage frame arrived: `written`, then `accepted`), more deltas, a final usage, writes and reads a
 * file in the daemon's bound workspace (`<data dir>/workspace`, a `self_hosted` Environment) and `done`; then the
 * Files API reads that file back (read-only preparation, read, release). Every frame is printed as it passes the gateway (FrameTap → LiveView). Then the daemon is stopped with SIGTERM
 * (it exits 0 after its cleanup) and Core closes.
 *
 *   --keep-running   leave Core and the daemon up and print how to talk to them (Ctrl-C stops both)
 *   --no-daemon      start only Core and print the exact `agentwire daemon …` command for a real daemon
 *   --harness KIND   scripted (default), codex or claude_code: a real harness runs one plain prompt (demoHarness.ts)
 *   --prompt TEXT    the real harness's prompt
 *   --port N         listen port (default 0: a free one)
 *   --data-dir DIR   data directory (default: a temporary one, removed at the end)
 *
 * Every way out runs the same cleanup: SIGINT, SIGTERM and SIGHUP (src/bin/agentwire.ts turns SIGHUP into
 * SIGTERM) interrupt the command, the daemon child is stopped (SIGTERM, SIGKILL after 20 s) and waited for,
 * Core closes, and the temporary data directory is removed. Only SIGKILL of the demo itself can leave them.
 *
 * Exit codes: 0 the Turn completed and both sides shut down cleanly; 1 otherwise (the reason is printed).
 */
import { Clock, Console, Context, Deferred, Duration, Effect, Exit, Fiber, Layer, Logger, Option, Redacted, References } from "effect"
import { Command, Flag } from "effect/cli"
import { type ChildProcess, spawn } from "node:child_process"
import { chmodSync, closeSync, mkdirSync, mkdtempSync, openSync, realpathSync, rmSync, writeFileSync } from "node:fs"
import * as Os from "node:os"
import { join } from "node:path"
import * as DevCore from "../../core/dev/DevCore.js"
import { DeviceDirectory } from "../../core/dev/DeviceDirectory.js"
import { Files } from "../../core/dev/Files.js"
import type { TappedFrame } from "../../core/FrameTap.js"
import { formatFrame, usageSummary } from "../../core/dev/LiveView.js"
import { Operator } from "../../core/dev/Operator.js"
import * as OperatorToken from "../../core/dev/OperatorToken.js"
import { ensureDataDir } from "../../core/dev/Store.js"
import { Turns } from "../../core/dev/Turns.js"
import { Ids, MessageInput, Version } from "../../proto/index.js"
import { status as fetchStatus } from "../../runtime/control/ControlClient.js"
import { CommandFailed, ExitCode } from "../Exit.js"
import { examples } from "../Help.js"
import { type DemoHarness, demoHarnessKinds, demoPassThrough, demoPrompts, missingSetup } from "./demoHarness.js"

/** The device id the demo's daemon uses. */
export const DemoDeviceId = "demo-device"
/** The local Environment the demo's scripted daemon is bound to (its workspace is `<data dir>/workspace`). */
export const DemoEnvironmentId = "0d3e5a1c-7b2f-4c6d-9e8a-5f4b3c2d1e0f"
/** The file the demo Turn writes and reads in the workspace, then the Files API reads back. */
export const DemoFile = { path: "notes/hello.txt", text: "hello from a Turn in the bound workspace\n" } as const

/** The scripted Turn of the demo (README "What `npm start` shows"). */
export const demoScript = {
  script: [
    { thinking: "Plan: stream a short answer, report usage, take one steer, finish." },
    { delta: "Hello from the scripted harness. " },
    { delta: "This answer arrives as deltas, " },
    { delta: "one frame at a time. " },
    {
      usage: {
        tokens: { input_tokens: 42, cached_input_tokens: 0, output_tokens: 18, reasoning_output_tokens: 0, total_tokens: 60 },
        model: "scripted"
      }
    },
    { await_steer: 1 },
    { delta: " Steer received; wrapping up." },
    { write_file: DemoFile },
    { read_file: DemoFile.path },
    {
      usage: {
        tokens: { input_tokens: 51, cached_input_tokens: 0, output_tokens: 31, reasoning_output_tokens: 0, total_tokens: 82 },
        model: "scripted"
      }
    }
  ]
} as const

/** The active input the demo steers the Turn with. */
export const demoSteerText = "(steer) Please keep it short."

const failed = (text: string) => new CommandFailed({ text, exitCode: ExitCode.failure })


/** Env for the child daemon: without any credential-bearing or demo-overriding variables. */
const childEnv = (): NodeJS.ProcessEnv => {
  const env: NodeJS.ProcessEnv = {}
  for (const [key, value] of Object.entries(process.env)) {
    if (!key.startsWith("AGENTWIRE_") || demoPassThrough.has(key)) env[key] = value
  }
  return env
}

interface Daemon {
  readonly child: ChildProcess
  readonly exited: Deferred.Deferred<number | null>
}

/** Spawns `agentwire daemon …`; the scope's end stops it (SIGTERM, then SIGKILL after 20 s). */
const spawnDaemon = (args: ReadonlyArray<string>, logFile: string) =>
  Effect.acquireRelease(
    Effect.gen(function* () {
      const exited = yield* Deferred.make<number | null>()
      const child = yield* Effect.try({
        try: () => {
          const fd = openSync(logFile, "a", 0o600)
          try {
            return spawn(process.execPath, [process.argv[1]!, "daemon", ...args], {
              stdio: ["ignore", fd, fd],
              env: childEnv()
            })
          } finally {
            closeSync(fd)
          }
        },
        catch: () => failed("could not start the daemon process")
      })
      child.on("exit", (code, signal) => Deferred.doneUnsafe(exited, Exit.succeed(code ?? (signal === null ? null : -1))))
      child.on("error", () => Deferred.doneUnsafe(exited, Exit.succeed(null)))
      return { child, exited } satisfies Daemon
    }),
    (daemon) => stopDaemon(daemon).pipe(Effect.asVoid)
  )

/** SIGTERM and wait for the exit (SIGKILL after 20 s); succeeds with the exit code. */
const stopDaemon = (daemon: Daemon) =>
  Effect.gen(function* () {
    const done = yield* Deferred.poll(daemon.exited)
    if (Option.isSome(done)) return yield* done.value
    daemon.child.kill("SIGTERM")
    return yield* Deferred.await(daemon.exited).pipe(
      Effect.timeoutOrElse({
        duration: Duration.seconds(20),
        orElse: () => Effect.sync(() => daemon.child.kill("SIGKILL")).pipe(Effect.andThen(Deferred.await(daemon.exited)))
      })
    )
  })

export const makeDemoCommand = (options: { readonly tmpDir: string }) =>
  Command.make(
    "demo",
    {
      keepRunning: Flag.Boolean("keep-running").pipe(
        Flag.withDescription("Leave Core and the daemon running after the Turn and print how to talk to them"),
        Flag.withDefault(false)
      ),
      noDaemon: Flag.Boolean("no-daemon").pipe(
        Flag.withDescription("Start only Core and print the command that points a real daemon at it"),
        Flag.withDefault(false)
      ),
      harness: Flag.Literals("harness", demoHarnessKinds).pipe(
        Flag.withDescription(
          "The Harness kind of the demo Turn: scripted (default, no setup), codex (needs AGENTWIRE_CODEX_CONFIG, README " +
            "\"The codex harness\") or claude_code (needs ANTHROPIC_API_KEY, README \"The claude_code harness\")"
        ),
        Flag.withDefault("scripted" as const)
      ),
      prompt: Flag.String("prompt").pipe(
        Flag.withDescription(
          `The Turn's text for codex / claude_code (default: ${JSON.stringify(demoPrompts.codex)} / ${JSON.stringify(demoPrompts.claude_code)})`
        ),
        Flag.optional
      ),
      port: Flag.Int("port").pipe(Flag.withDescription("Listen port (default 0: a free one)"), Flag.withDefault(0)),
      dataDir: Flag.String("data-dir").pipe(
        Flag.withDescription("Data directory (default: a temporary one, removed at the end)"),
        Flag.optional
      )
    },
    (input) =>
      Effect.scoped(Effect.gen(function* () {
        // A real kind runs one plain prompt; only the scripted Turn is steered.
        const native = input.harness !== "scripted"
        const missing = missingSetup(input.harness, process.env)
        if (missing !== undefined) return yield* failed(missing)
        const startMs = yield* Clock.currentTimeMillis
        const temporary = Option.isNone(input.dataDir)
        const dataDir = Option.getOrElse(input.dataDir, () => mkdtempSync(join(options.tmpDir, "agentwire-demo-")))
        // Registered first, so it runs last: after the daemon stopped and the store closed. Every run removes
        // its temporary directory (credential, token, database), also `--keep-running` / `--no-daemon` runs
        // ended by a signal; a `--data-dir` the operator chose is kept.
        if (temporary) {
          yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dataDir, { recursive: true, force: true })))
        }
        yield* ensureDataDir(dataDir).pipe(Effect.mapError((e) => failed(e.message)))
        const token = yield* OperatorToken.loadOrCreate(dataDir).pipe(Effect.mapError((e) => failed(e.message)))

        const line = (text: string) => Console.log(text)
        // The live view prints on the tap's own fiber; progress lines wait for the frames they follow.
        const seen = {
          heartbeat: yield* Deferred.make<void>(),
          usage: yield* Deferred.make<void>(),
          accepted: yield* Deferred.make<void>(),
          done: yield* Deferred.make<void>()
        }
        const signal = (frame: TappedFrame) => {
          if (frame.direction !== "runtime→core" || frame.message === undefined) return Effect.void
          const m = frame.message
          switch (m.type) {
            case "heartbeat":
              return Deferred.succeed(seen.heartbeat, undefined)
            case "usage":
              return Deferred.succeed(seen.usage, undefined)
            case "prompt_steer_ack":
              return m.payload.accepted ? Deferred.succeed(seen.accepted, undefined) : Effect.void
            case "done":
              return Deferred.succeed(seen.done, undefined)
            default:
              return Effect.void
          }
        }
        const after = (d: Deferred.Deferred<void>) =>
          Deferred.await(d).pipe(Effect.timeoutOrElse({ duration: Duration.seconds(2), orElse: () => Effect.void }))
        const context = yield* Layer.build(DevCore.layer({
          host: "127.0.0.1",
          port: input.port,
          dataDir,
          operatorToken: token,
          tap: (frame) => Console.log(formatFrame(frame, startMs)).pipe(Effect.andThen(signal(frame)))
        })).pipe(Effect.mapError((e) => failed(`dev Core failed to start: ${e.message}`)))
        const core = Context.get(context, DevCore.DevCore)
        const operator = Context.get(context, Operator)
        const turns = Context.get(context, Turns)
        const directory = Context.get(context, DeviceDirectory)

        yield* line(`agentwire demo · wire ${Version.ProtocolVersion}`)
        yield* line(`  core      ${core.url}   (data directory ${dataDir})`)

        // The credential goes to a 0600 file only; it is never printed.
        const issued = yield* operator.createCredential(DemoDeviceId).pipe(Effect.mapError((e) => failed(e.message)))
        const credentialFile = join(dataDir, `${DemoDeviceId}.credential`)
        yield* Effect.try({
          try: () => {
            writeFileSync(credentialFile, Redacted.value(issued.credential) + "\n", { mode: 0o600 })
            chmodSync(credentialFile, 0o600)
          },
          catch: () => failed(`cannot write ${credentialFile}`)
        })
        const profile = join(dataDir, "daemon")
        const workspace = join(dataDir, "workspace")
        yield* Effect.try({ try: () => mkdirSync(workspace, { recursive: true }), catch: () => failed(`cannot create ${workspace}`) })
        const daemonArgs = [
          "--core-url",
          core.publicUrl,
          "--device-id",
          DemoDeviceId,
          "--credential-file",
          credentialFile,
          "--profile",
          profile,
          "--harness",
          input.harness,
          // The scripted daemon is bound to a workspace: its Turns write there and the Files API reads it.
          ...(native ? [] : ["--environment-id", DemoEnvironmentId, "--workspace", workspace])
        ]
        yield* line(`  device    ${DemoDeviceId}   (credential file ${credentialFile}, mode 0600)`)

        if (input.noDaemon) {
          yield* line("")
          yield* line("Core is running without a daemon. Point a daemon at it with:")
          yield* line(`  agentwire daemon ${daemonArgs.join(" ")}`)
          yield* line(`Operator API: ${core.url}/api/v1/operator (Authorization: Bearer $(cat ${OperatorToken.tokenFile(dataDir)}))`)
          yield* line("Frames appear below as they pass. Ctrl-C stops Core (and removes a temporary data directory).")
          return yield* Effect.never
        }

        const logFile = join(dataDir, "daemon.log")
        const daemon = yield* spawnDaemon(daemonArgs, logFile)
        yield* line(`  daemon    pid ${daemon.child.pid ?? "?"}   (logs ${logFile})`)
        yield* line("")
        yield* line("waiting for the daemon's first heartbeat …")
        const declared = yield* directory.awaitDeclared(DemoDeviceId).pipe(
          Effect.raceFirst(
            Effect.flatMap(Deferred.await(daemon.exited), (code) => Effect.fail(failed(`the daemon exited (code ${code}) before it connected; see ${logFile}`)))
          ),
          Effect.timeoutOrElse({
            duration: Duration.seconds(30),
            orElse: () => Effect.fail(failed(`the daemon did not connect within 30 s; see ${logFile}`))
          })
        )
        yield* after(seen.heartbeat)
        const kind = declared.kinds.get(input.harness)
        if (kind === undefined || !kind.available) {
          const reason = yield* fetchStatus(join(profile, "agentwire.sock")).pipe(
            Effect.map((s) => s.kinds.find((k) => k.kind === input.harness)?.unavailable_reason ?? "no reason reported"),
            Effect.orElseSucceed(() => "the daemon did not answer its status")
          )
          return yield* failed(`${input.harness} is unavailable on the daemon: ${reason}`)
        }

        const environment = native
          ? { type: "none" as const }
          : { type: "self_hosted" as const, id: DemoEnvironmentId, workspace_directory: realpathSync(workspace) }
        const session = yield* operator.createSession({
          agent_kind: input.harness,
          environment,
          ...(native ? {} : { device_id: Ids.unsafeMake.deviceId(DemoDeviceId) })
        }).pipe(Effect.mapError((e) => failed(e.message)))
        yield* line(
          `session ${session.session_id} (agent kind ${input.harness}${kind.version === undefined ? "" : ` ${kind.version}`}, ` +
            `environment ${native ? "none" : `self_hosted, workspace ${workspace}`})`
        )
        const turnInput = input.harness === "scripted"
          ? JSON.stringify(demoScript)
          : Option.getOrElse(input.prompt, () => demoPrompts[input.harness as Exclude<DemoHarness, "scripted">])
        const turn = yield* turns.start(session.session_id, MessageInput.text(turnInput)).pipe(
          Effect.mapError((e) => failed(`the Turn was refused: ${e.message}`))
        )
        yield* line(`turn ${turn.turn_id} (run ${turn.run_id}) on ${turn.device_id}`)

        // Steer once the first usage snapshot arrived (the script then waits for it).
        const steered = yield* Deferred.await(seen.usage).pipe(
          Effect.andThen(line(`steering the Turn: ${JSON.stringify(demoSteerText)}`)),
          Effect.andThen(turns.steer(turn.turn_id, MessageInput.text(demoSteerText))),
          Effect.tap((result) =>
            result.status === "accepted"
              ? after(seen.accepted).pipe(Effect.andThen(line(`steer accepted: input cursor → ${result.position}`)))
              : line(`steer ${result.status}: ${"error_code" in result ? result.error_code : "reason" in result ? result.reason : ""}`)
          ),
          Effect.catch((e) => line(`steer not sent: ${e.message}`)),
          Effect.asVoid,
          (steer) => (native ? Effect.void : steer),
          Effect.forkScoped
        )

        const outcome = yield* turns.awaitOutcome(turn.turn_id).pipe(Effect.mapError((e) => failed(e.message)))
        yield* Fiber.await(steered)
        if (outcome.status === "completed") yield* after(seen.done)
        const o = outcome.outcome
        yield* line("")
        yield* line(
          `outcome: ${outcome.status}${o?.error_code === undefined ? "" : ` (${o.error_code}${o.observation === undefined ? "" : `, ${o.observation}`})`}` +
            ` · ${usageSummary(o?.usage)} · input cursor ${outcome.inputCursor}`
        )
        if (o?.content !== undefined) yield* line(`content: ${JSON.stringify(o.content)}`)
        if (!native && outcome.status === "completed") {
          // The Files API reads back what the Turn wrote (an idle read: read-only preparation, read, release).
          const files = Context.get(context, Files)
          yield* files.read(session.session_id, DemoFile.path, 4096).pipe(
            Effect.flatMap((r) => line(`files: read back ${DemoFile.path} (${r.data.length} bytes): ${JSON.stringify(new TextDecoder().decode(r.data))}`)),
            Effect.catch((e) => line(`files: reading ${DemoFile.path} failed: ${e.message}`))
          )
        }

        if (input.keepRunning) {
          yield* line("")
          yield* line("Core and the daemon keep running (Ctrl-C stops both and removes a temporary data directory).")
          yield* line(`  operator API  ${core.url}/api/v1/operator`)
          yield* line(`  token         ${OperatorToken.tokenFile(dataDir)}  (send it as Authorization: Bearer …)`)
          yield* line(`  try           curl -H "Authorization: Bearer $(cat ${OperatorToken.tokenFile(dataDir)})" ${core.url}/api/v1/operator/devices`)
          yield* line(`  daemon status agentwire status --profile ${profile}`)
          return yield* Effect.never
        }

        yield* line("")
        yield* line("shutting down: daemon (SIGTERM) …")
        const code = yield* stopDaemon(daemon)
        yield* line(`daemon exited with code ${code}; closing Core …`)
        if (code !== 0) return yield* failed(`the daemon exited with code ${code}; see ${logFile}`)
        if (outcome.status !== "completed") return yield* failed(`the Turn did not complete (${outcome.status})`)
      })).pipe(
        Effect.andThen(Console.log("done.")),
        // The live view is the output; Core's own log lines (info) would interleave with it.
        Effect.provideService(References.MinimumLogLevel, "Warn"),
        Effect.provide(Logger.layer([Logger.withConsoleError(Logger.formatLogFmt)]))
      )
  ).pipe(
    Command.withDescription(
      "Run one complete Turn between an embedded dev Core and the daemon with the scripted harness, shown live (npm start). Exit codes: 0 the Turn completed (or a signal stopped --keep-running), 1 it did not, 2 usage."
    ),
    examples("agentwire demo", "agentwire demo --keep-running")
  )

/** The `demo` subcommand of the binary. */
export const demoCommand = makeDemoCommand({ tmpDir: Os.tmpdir() })
