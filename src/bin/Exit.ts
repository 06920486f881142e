/**
 * Exit codes of the agentwire binary, and the error a command fails with to choose one.
 *
 * 0  success; also an interruption by SIGINT/SIGTERM/SIGHUP once every finalizer (confirmed cleanup) has run
 * 1  a failure (a defect, an operator call with an error answer or no answer, a Turn that did not complete)
 * 2  a usage or configuration error (unknown flag, missing or invalid setting, profile or data directory in
 *    use, a data directory without a store, a port that cannot be bound, a 400/401 from the operator API,
 *    a Node older than 22.19: src/bin/launcher.ts)
 * 3  Core refused the daemon permanently (426 incompatible_version, 401/403, close code 4001)
 * docs/operations.md "Exit codes" is the operator's copy of this table.
 */
import { Cause, Clock, Console, Effect, Exit, Runtime, Schema } from "effect"
import { CliError } from "effect/cli"
import { flatJsonLine, flushLogLines } from "./Logging.js"

export const ExitCode = { ok: 0, failure: 1, usage: 2, rejected: 3 } as const

/**
 * A command failed with a message for the operator and a chosen exit code. `Command.run` prints the message
 * (through the CLI formatter, to stderr) and the teardown below exits with the code.
 */
export class CommandFailed extends Schema.TaggedError<CommandFailed>()("CommandFailed", {
  text: Schema.String,
  exitCode: Schema.Int
}) {
  override get message() {
    return this.text
  }
  override get [Runtime.errorExitCode]() {
    return this.exitCode
  }
  override get [CliError.userMessage]() {
    return this.text
  }
}

/**
 * A command's failure already written as a JSON log line (`reportFailureAsJson`): it carries only the exit
 * code, so neither the CLI (no user message) nor runMain (reported) prints it again.
 */
export class FailureReported extends Schema.TaggedError<FailureReported>()("FailureReported", {
  exitCode: Schema.Int
}) {
  override get [Runtime.errorExitCode]() {
    return this.exitCode
  }
  override get [Runtime.errorReported]() {
    return false
  }
}

/**
 * With `--log-format json`, a command's failure (a `CommandFailed`, any other error, a defect) is one flat JSON
 * object on stderr, `{"ts","level":"FATAL","msg":<the operator text>,"exit_code":N}` (a defect adds `cause`),
 * instead of the CLI's plain-text `ERROR` block, so a log pipeline sees every line of the process as JSON. It is
 * written directly, not through the logger, so `--log-level none` never hides why the process exited. An
 * interruption (a signal) is not a failure and passes through. `text` leaves the failure to the CLI.
 */
export const reportFailureAsJson = (format: "text" | "json") =>
<A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | FailureReported, R> =>
  format === "text" ? effect : Effect.catchCause(effect, (cause) =>
    Effect.gen(function* () {
      if (Cause.hasInterruptsOnly(cause)) return yield* Effect.failCause(cause)
      const error = Cause.squash(cause)
      const failed = Cause.hasFails(cause)
      const text = typeof error === "object" && error !== null
        ? CliError.getUserMessage(error) ?? (error instanceof Error ? error.message : String(error))
        : String(error)
      const exitCode = Runtime.getErrorExitCode(error)
      const now = yield* Clock.currentTimeMillis
      yield* Effect.sync(flushLogLines) // the lines logged before the failure come first
      yield* Console.error(flatJsonLine({
        timestamp: new Date(now).toISOString(),
        level: "FATAL",
        message: text,
        cause: failed ? undefined : Cause.pretty(cause),
        annotations: { exit_code: exitCode },
        spans: {}
      }))
      return yield* new FailureReported({ exitCode })
    }))

/** runMain's teardown: interrupts-only exits are clean (0), CLI usage errors exit 2, others use the error's code. */
export const teardown: Runtime.Teardown = (exit, onExit) => {
  if (Exit.isSuccess(exit)) return onExit(ExitCode.ok)
  if (Cause.hasInterruptsOnly(exit.cause)) return onExit(ExitCode.ok)
  const error = Cause.squash(exit.cause)
  if (CliError.isCliError(error) && error._tag !== "UserError") return onExit(ExitCode.usage)
  return onExit(Runtime.getErrorExitCode(error))
}
