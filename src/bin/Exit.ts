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
import { Cause, Exit, Runtime, Schema } from "effect"
import { CliError } from "effect/cli"

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

/** runMain's teardown: interrupts-only exits are clean (0), CLI usage errors exit 2, others use the error's code. */
export const teardown: Runtime.Teardown = (exit, onExit) => {
  if (Exit.isSuccess(exit)) return onExit(ExitCode.ok)
  if (Cause.hasInterruptsOnly(exit.cause)) return onExit(ExitCode.ok)
  const error = Cause.squash(exit.cause)
  if (CliError.isCliError(error) && error._tag !== "UserError") return onExit(ExitCode.usage)
  return onExit(Runtime.getErrorExitCode(error))
}
