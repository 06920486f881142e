/**
 * One supervised `codex app-server` child process (reference harnesses.md §1.7 "Process supervision"): spawned
 * in its own process group with piped stdio, its stdout split into bounded lines, stderr drained and discarded
 * (never logged raw), and a scoped acquisition whose release is the last-resort stop: TERM to the group, a
 * grace period, KILL, then reaped (waits for the exit). After a confirmed `stop` the release is a no-op.
 *
 * Process exit is lifecycle supervision, never proof of a native cancellation.
 */
import { type Cause, Data, Deferred, Duration, Effect, Exit, Queue, type Scope } from "effect"
import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process"

/** Bound on one stdout line (a longer line is a protocol violation and stops the process). */
export const MaxLineBytes = 16 * 1024 * 1024

/** Grace between TERM and KILL. */
export const TermGrace = Duration.seconds(3)

/** The process could not be started (binary missing, not executable). Nothing is left running. */
export class SpawnFailed extends Data.TaggedError("SpawnFailed")<{ readonly reason: string }> {}

/** A line could not be written completely (the pipe closed or failed). */
export class WriteFailed extends Data.TaggedError("WriteFailed")<{ readonly reason: string }> {}

export interface ProcessSpec {
  readonly command: string
  readonly args: ReadonlyArray<string>
  readonly cwd: string
  readonly env: Readonly<Record<string, string>>
}

export interface CodexProcess {
  readonly pid: number
  /** stdout lines in order; ends (Queue `Done`) when stdout closes or a line exceeds `MaxLineBytes`. */
  readonly lines: Queue.Dequeue<string, Cause.Done>
  /**
   * Writes one line (a newline is appended). Succeeds only once the complete line was flushed to the pipe;
   * writes are serialized by the caller.
   */
  readonly writeLine: (line: string) => Effect.Effect<void, WriteFailed>
  /** Completes with the exit code (or a signal) when the process exited. */
  readonly exited: Deferred.Deferred<string>
  /**
   * Stops the process: closes stdin, waits `grace` for a voluntary exit, then TERM to the group, waits the TERM
   * grace, then KILL. Returns once the process exited (reaped); idempotent.
   */
  readonly stop: (grace: Duration.Duration) => Effect.Effect<void>
}

const signalGroup = (pid: number, signal: NodeJS.Signals) => {
  try {
    process.kill(-pid, signal)
  } catch {
    // ESRCH: the group is gone.
  }
}

/**
 * Spawns the process in its own group. The release (scope close) stops it if it is still running and kills any
 * group member that outlived the leader.
 */
export const spawnProcess = (spec: ProcessSpec): Effect.Effect<CodexProcess, SpawnFailed, Scope.Scope> =>
  Effect.gen(function* () {
    const lines = yield* Queue.unbounded<string, Cause.Done>()
    const exited = yield* Deferred.make<string>()
    const child = yield* Effect.acquireRelease(
      Effect.callback<ChildProcessWithoutNullStreams, SpawnFailed>((resume) => {
        const proc = spawn(spec.command, [...spec.args], {
          cwd: spec.cwd,
          env: spec.env,
          detached: true,
          stdio: ["pipe", "pipe", "pipe"]
        })
        proc.once("error", (e: NodeJS.ErrnoException) => {
          Deferred.doneUnsafe(exited, Exit.succeed(`spawn error ${e.code ?? "unknown"}`))
          resume(Effect.fail(new SpawnFailed({ reason: `could not start ${spec.command} (${e.code ?? "unknown error"})` })))
        })
        proc.once("spawn", () => resume(Effect.succeed(proc)))
        proc.once("exit", (code, signal) => Deferred.doneUnsafe(exited, Exit.succeed(signal ?? `code ${code}`)))
        proc.stdin.on("error", () => {})
        proc.stderr.resume()
        let pending: Array<Buffer> = []
        let pendingBytes = 0
        proc.stdout.on("data", (chunk: Buffer) => {
          let start = 0
          for (let i = chunk.indexOf(10); i >= 0; i = chunk.indexOf(10, start)) {
            pending.push(chunk.subarray(start, i))
            Queue.offerUnsafe(lines, Buffer.concat(pending).toString("utf8"))
            pending = []
            pendingBytes = 0
            start = i + 1
          }
          if (start < chunk.length) {
            pending.push(chunk.subarray(start))
            pendingBytes += chunk.length - start
            if (pendingBytes > MaxLineBytes) {
              pending = []
              Queue.endUnsafe(lines)
              signalGroup(proc.pid ?? 0, "SIGKILL")
            }
          }
        })
        proc.stdout.once("close", () => Queue.endUnsafe(lines))
      }),
      (proc) => stopChild(proc, exited, Duration.zero)
    )
    return {
      pid: child.pid ?? 0,
      lines,
      exited,
      writeLine: (line) =>
        Effect.callback<void, WriteFailed>((resume) => {
          if (child.stdin.destroyed || !child.stdin.writable) {
            resume(Effect.fail(new WriteFailed({ reason: "stdin closed" })))
            return
          }
          child.stdin.write(`${line}\n`, (error) =>
            resume(error ? Effect.fail(new WriteFailed({ reason: "stdin write failed" })) : Effect.void))
        }),
      stop: (grace) => stopChild(child, exited, grace)
    }
  })

const stopChild = (proc: ChildProcessWithoutNullStreams, exited: Deferred.Deferred<string>, grace: Duration.Duration) =>
  Effect.gen(function* () {
    const pid = proc.pid ?? 0
    const waitFor = (d: Duration.Duration) =>
      Deferred.await(exited).pipe(Effect.timeoutOrElse({ duration: d, orElse: () => Effect.succeed("timeout") }))
    if (!(yield* Deferred.isDone(exited))) {
      proc.stdin.end()
      if (Duration.isGreaterThan(grace, Duration.zero)) yield* waitFor(grace)
    }
    if (!(yield* Deferred.isDone(exited))) {
      signalGroup(pid, "SIGTERM")
      yield* waitFor(TermGrace)
    }
    if (!(yield* Deferred.isDone(exited))) signalGroup(pid, "SIGKILL")
    yield* Deferred.await(exited)
    // Reaper: members of the group that outlived the leader (the npm launcher's native child) are killed and
    // awaited (bounded: a zombie nobody reaps must not hold the close forever).
    for (let i = 0; i < 200 && groupAlive(pid); i++) {
      signalGroup(pid, "SIGKILL")
      yield* Effect.sleep("10 millis")
    }
  })

const groupAlive = (pid: number): boolean => {
  try {
    process.kill(-pid, 0)
    return true
  } catch {
    return false
  }
}
