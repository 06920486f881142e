/**
 * `agentwire status [--profile DIR] [--json | --metrics]`: asks the daemon running with that profile for its status
 * over the Unix socket `<profile>/agentwire.sock` and prints a summary (or the snapshot as JSON, or with
 * `--metrics` the daemon's metrics in the Prometheus text format, docs/observability.md). Read-only.
 * Exit codes: 0 printed, 1 no daemon answered, 2 usage.
 */
import { Console, Effect, Path } from "effect"
import { Command, Flag } from "effect/cli"
import * as Os from "node:os"
import { metrics as fetchMetrics, status as fetchStatus } from "../../runtime/control/ControlClient.js"
import * as RuntimeConfig from "../../runtime/RuntimeConfig.js"
import type { StatusSnapshot } from "../../runtime/StatusBoard.js"
import { CommandFailed, ExitCode } from "../Exit.js"
import { examples } from "../Help.js"

/** Admission states that still hold a reservation or a running Turn. */
const liveStates: ReadonlySet<string> = new Set(["preparing", "ready", "starting", "running"])

const time = (ms: number) => (ms > 0 ? new Date(ms).toISOString() : "-")

/** The human-readable summary of a snapshot. */
export const formatStatus = (s: StatusSnapshot): string => {
  const c = s.connection
  const lines = [
    `agentwire daemon ${s.daemon_version} (wire ${s.wire_version}), pid ${s.pid}`,
    `connection: ${c.state}${c.connection_number > 0 ? ` (#${c.connection_number})` : ""} since ${time(c.since_ms)}`,
    `  core:   ${c.core_url}`,
    `  device: ${c.device_id}`
  ]
  if (c.next_attempt_ms !== undefined) lines.push(`  next attempt: ${time(c.next_attempt_ms)}`)
  if (c.last_error !== undefined) lines.push(`  last error: ${c.last_error}`)
  const sus = s.suspension
  lines.push(
    sus.state === "open"
      ? "suspension: open"
      : `suspension: ${sus.state === "suspended" ? "suspended (fenced until the matching environment_resume)" : "quiescing"}, environment ${sus.environment_id ?? "-"}, suspend id ${sus.suspend_id ?? "-"}`
  )
  lines.push(`kinds: ${s.kinds.length === 0 ? "(none declared yet)" : ""}`)
  for (const k of s.kinds) {
    lines.push(
      `  ${k.kind}${k.version === undefined ? "" : ` ${k.version}`}: ${k.available ? "available" : "unavailable"}${
        k.unavailable_reason === undefined ? "" : ` (${k.unavailable_reason})`
      }, ${k.supported.length} capabilities supported`
    )
  }
  lines.push(`active runs: ${s.active_runs}`)
  const live = s.admissions.filter((a) => liveStates.has(a.state)).length
  lines.push(`admissions: ${s.admissions.length} (${live} live, ${s.admissions.length - live} ended)`)
  for (const a of s.admissions) {
    lines.push(
      `  ${a.handle} (request ${a.request_id}) ${a.state} rev ${a.revision}${a.executor_id === undefined ? "" : ` executor ${a.executor_id}`}${a.run_id === undefined ? "" : ` run ${a.run_id}`}${a.expires_at === undefined ? "" : ` expires ${time(a.expires_at)}`}`
    )
  }
  lines.push(`executors: ${s.executors.length}`)
  for (const e of s.executors) lines.push(`  ${e.executor_id} ${e.kind} ${e.state} (session ${e.session_id})`)
  lines.push(`runs: ${s.runs.length}`)
  for (const r of s.runs) {
    lines.push(`  ${r.run_id}${r.request_id === undefined ? " (direct)" : ` (turn request ${r.request_id})`} ${r.kind} ${r.state}${r.executor_id === undefined ? "" : ` executor ${r.executor_id}`}`)
  }
  lines.push(`cleanup unconfirmed: ${s.unconfirmed.length}`)
  for (const u of s.unconfirmed) lines.push(`  ${u.kind} ${u.resource}: ${u.attempts} attempts, last error: ${u.last_error}`)
  return lines.join("\n")
}

export const makeStatusCommand = (options: { readonly homeDir: string }) =>
  Command.make(
    "status",
    {
      profile: Flag.String("profile").pipe(
        Flag.withDescription(`The daemon's state directory (default ~/.agentwire). Env: ${RuntimeConfig.EnvVars.profile}`),
        Flag.withFallbackConfig(RuntimeConfig.env.profile),
        Flag.optional
      ),
      json: Flag.Boolean("json").pipe(Flag.withDescription("Print the status snapshot as JSON"), Flag.withDefault(false)),
      metrics: Flag.Boolean("metrics").pipe(
        Flag.withDescription("Print the daemon's metrics in the Prometheus text format instead of the status"),
        Flag.withDefault(false)
      )
    },
    (input) =>
      Effect.gen(function* () {
        const path = yield* Path.Path
        const { socketPath } = RuntimeConfig.profilePaths(path, input.profile, options.homeDir)
        if (input.metrics) {
          const text = yield* fetchMetrics(socketPath).pipe(
            Effect.mapError((e) => new CommandFailed({ text: e.message, exitCode: ExitCode.failure }))
          )
          return yield* Effect.sync(() => process.stdout.write(text))
        }
        const snapshot = yield* fetchStatus(socketPath).pipe(
          Effect.mapError((e) => new CommandFailed({ text: e.message, exitCode: ExitCode.failure }))
        )
        yield* Console.log(input.json ? JSON.stringify(snapshot, null, 2) : formatStatus(snapshot))
      })
  ).pipe(
    Command.withDescription(
      "Show the local daemon's status (connection, declared kinds, admissions, Executors, Runs, unconfirmed cleanups) over its Unix socket. Exit codes: 0 printed, 1 no daemon answered, 2 usage."
    ),
    examples("agentwire status", "agentwire status --profile ~/.agentwire --json", "agentwire status --metrics")
  )

/** The `status` subcommand of the binary. */
export const statusCommand = makeStatusCommand({ homeDir: Os.homedir() })
