/**
 * Which signal is stopping the process, for the shutdown line both long-running commands log ("daemon
 * stopping" / "core stopping", with `reason`). runMain turns SIGINT and SIGTERM into an interruption;
 * agentwire.ts re-raises SIGHUP as SIGTERM after recording it here, so the line names the signal received.
 */
import { Effect } from "effect"

let received: string | undefined

/** Records a signal (the first one wins: a SIGHUP re-raised as SIGTERM stays SIGHUP). */
export const record = (signal: string): void => {
  received ??= signal
}

/** Records SIGINT and SIGTERM as they arrive (SIGHUP is recorded by its own handler). */
export const install = (): void => {
  process.on("SIGINT", () => record("SIGINT"))
  process.on("SIGTERM", () => record("SIGTERM"))
}

/** The info line of an interrupted command: the signal, or `interrupted` when none was received. */
export const logStopping = (what: string) =>
  Effect.suspend(() => Effect.logInfo(`${what} stopping`).pipe(Effect.annotateLogs({ reason: received ?? "interrupted" })))
