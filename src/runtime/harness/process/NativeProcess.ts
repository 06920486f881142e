/**
 * A supervised native child process for Harness adapters (reference harnesses.md §1.7, "process supervision
 * lessons"): started in its own process group, stdout read as complete lines, stderr drained into a bounded
 * tail (never logged raw), stdin written line by line with proof of the local write, and stopped with SIGTERM to
 * the whole group, then SIGKILL after a grace period. Exit is reaped by Node (the `exit` event); `terminate`
 * returns only once the leader is gone and no member of its group is left.
 *
 * `spawn` acquires the process with `Effect.acquireRelease` in the caller's Scope: the release is the
 * last-resort `terminate`, so an interruption anywhere after the spawn still stops it, and after a confirmed
 * `terminate` the release is a no-op. Process exit is lifecycle supervision, never proof of native cancellation
 * or of persisted history.
 *
 * Generic: it knows nothing about a Harness protocol. Both real adapters (Claude Code, Codex) use it.
 */
import { Cause, Data, Deferred, Duration, Effect, Option, Queue, Scope } from "effect"
import { spawn as nodeSpawn } from "node:child_process"
import { descendantGroups, groupMembers } from "./ProcessTable.js"

export interface ProcessSpec {
  readonly command: string
  readonly args: ReadonlyArray<string>
  readonly cwd: string
  /** The complete environment of the child (nothing is inherited implicitly). */
  readonly env: Readonly<Record<string, string>>
  /** Time between SIGTERM and SIGKILL (default 3 seconds). */
  readonly grace?: Duration.Input | undefined
  /**
   * Longest accepted stdout line in characters (default 16 Mi); a longer line is a protocol violation: the line
   * stream ends with `LineTooLong` and the process group is killed.
   */
  readonly maxLineBytes?: number | undefined
}

export interface ProcessExit {
  readonly code: number | null
  readonly signal: string | null
}

/** The process could not be started (nothing native is left). */
export class SpawnFailed extends Data.TaggedError("SpawnFailed")<{ readonly reason: string }> {}
/** A stdin write did not complete: the process may or may not have read part of it. */
export class WriteFailed extends Data.TaggedError("WriteFailed")<{ readonly reason: string }> {}
/**
 * Processes of the stopped process's groups were still running 10 s after SIGKILL: cleanup is not proven
 * (`pids` is bounded to the first few, for diagnostics).
 */
export class ProcessesLingering extends Data.TaggedError("ProcessesLingering")<{
  readonly count: number
  readonly pids: ReadonlyArray<number>
}> {}
/** stdout carried a line longer than the bound; reading stopped. */
export class LineTooLong extends Data.TaggedError("LineTooLong")<{ readonly limit: number }> {}

export interface NativeProcess {
  readonly pid: number
  /** stdout, one complete line per take; ends (Done) when stdout closes. */
  readonly lines: Queue.Dequeue<string, LineTooLong | Cause.Done>
  /** Writes one line (a newline is appended); succeeds once the local write completed. */
  readonly writeLine: (line: string) => Effect.Effect<void, WriteFailed>
  /** Waits for the exit of the leader. */
  readonly exited: Effect.Effect<ProcessExit>
  /** The exit, if it happened. */
  readonly exit: Effect.Effect<Option.Option<ProcessExit>>
  /**
   * SIGTERM to the group (and to the groups its descendants started), SIGKILL after the grace period; succeeds
   * once the leader exited and no process of those groups runs, else `ProcessesLingering`. Idempotent.
   */
  readonly terminate: Effect.Effect<ProcessExit, ProcessesLingering>
  /**
   * Closes stdin and waits up to `voluntary` for the process to exit by itself (a harness that exits on stdin EOF),
   * then `terminate`. Idempotent; `stop(0)` is `terminate`.
   */
  readonly stop: (voluntary: Duration.Input) => Effect.Effect<ProcessExit, ProcessesLingering>
  /** The last bytes of stderr (bounded), for diagnostics that are never logged raw. */
  readonly stderrTail: Effect.Effect<string>
}

const stderrTailBytes = 4096

const signalGroup = (pgid: number, signal: NodeJS.Signals) => {
  try {
    process.kill(-pgid, signal)
  } catch {
    // ESRCH: nothing left in the group.
  }
}

/** Starts a supervised process in the current Scope. */
export const spawn = (spec: ProcessSpec): Effect.Effect<NativeProcess, SpawnFailed, Scope.Scope> =>
  Effect.acquireRelease(start(spec), (p) =>
    p.terminate.pipe(
      Effect.asVoid,
      Effect.catch((e) => Effect.logWarning(`${e.count} native processes outlived SIGKILL`))
    ))

const start = (spec: ProcessSpec): Effect.Effect<NativeProcess, SpawnFailed> =>
  Effect.gen(function* () {
    const maxLine = spec.maxLineBytes ?? 16 * 1024 * 1024
    const grace = Duration.fromInputUnsafe(spec.grace ?? "3 seconds")
    const lines = yield* Queue.unbounded<string, LineTooLong | Cause.Done>()
    const exited = yield* Deferred.make<ProcessExit>()
    let stderr = ""

    const child = yield* Effect.try({
      try: () =>
        nodeSpawn(spec.command, [...spec.args], {
          cwd: spec.cwd,
          env: { ...spec.env },
          detached: true, // its own process group: signals reach every descendant
          stdio: ["pipe", "pipe", "pipe"]
        }),
      catch: (e) => new SpawnFailed({ reason: e instanceof Error ? e.message : "spawn failed" })
    })
    let exitInfo: ProcessExit | undefined
    child.on("exit", (code, signal) => {
      exitInfo = { code, signal }
      Deferred.doneUnsafe(exited, Effect.succeed(exitInfo))
    })
    const spawned = yield* Effect.callback<number, SpawnFailed>((resume) => {
      const onError = (e: Error) => resume(Effect.fail(new SpawnFailed({ reason: e.message })))
      child.once("error", onError)
      child.once("spawn", () => {
        child.off("error", onError)
        child.on("error", () => {}) // later errors surface through exit and write callbacks
        resume(Effect.succeed(child.pid!))
      })
    })

    let pending = ""
    child.stdout!.setEncoding("utf8")
    child.stdout!.on("data", (chunk: string) => {
      pending += chunk
      let nl = pending.indexOf("\n")
      while (nl >= 0) {
        const line = pending.slice(0, nl)
        pending = pending.slice(nl + 1)
        if (line.trim().length > 0) Queue.offerUnsafe(lines, line)
        nl = pending.indexOf("\n")
      }
      if (pending.length > maxLine) {
        pending = ""
        Queue.failCauseUnsafe(lines, Cause.fail(new LineTooLong({ limit: maxLine })))
        signalGroup(spawned, "SIGKILL")
      }
    })
    child.stdout!.on("end", () => {
      Queue.endUnsafe(lines)
    })
    child.stderr!.setEncoding("utf8")
    child.stderr!.on("data", (chunk: string) => {
      stderr = (stderr + chunk).slice(-stderrTailBytes)
    })
    child.stdin!.on("error", () => {}) // EPIPE after exit is reported through the write callback

    const writeLine = (line: string) =>
      Effect.callback<void, WriteFailed>((resume) => {
        if (child.stdin!.destroyed || child.stdin!.writableEnded) {
          resume(Effect.fail(new WriteFailed({ reason: "stdin is closed" })))
          return
        }
        child.stdin!.write(`${line}\n`, (error) =>
          resume(error ? Effect.fail(new WriteFailed({ reason: error.message })) : Effect.void))
      })

    // The groups to stop: the leader's, plus those its descendants started in new sessions, collected while the
    // leader runs (afterwards its orphans are reparented and no longer traceable).
    const groups = new Set<number>([spawned])
    const track = () => {
      if (exitInfo === undefined) for (const g of descendantGroups(spawned)) groups.add(g)
    }
    const signalAll = (signal: NodeJS.Signals) => {
      for (const g of groups) signalGroup(g, signal)
    }

    const stop = (voluntary: Duration.Input): Effect.Effect<ProcessExit, ProcessesLingering> => Effect.gen(function* () {
      track()
      if (!(yield* Deferred.isDone(exited))) {
        child.stdin!.end()
        const patience = Duration.fromInputUnsafe(voluntary)
        if (Duration.isGreaterThan(patience, Duration.zero)) yield* Effect.ignore(Deferred.await(exited).pipe(Effect.timeoutOption(patience)))
      }
      if (!(yield* Deferred.isDone(exited))) {
        track()
        signalAll("SIGTERM")
        const inTime = yield* Deferred.await(exited).pipe(Effect.timeoutOption(grace))
        if (Option.isNone(inTime)) {
          track()
          signalAll("SIGKILL")
        }
      }
      const result = yield* Deferred.await(exited)
      // Members that outlived the leader (its descendants) are killed too, and waited for: a loaded machine can
      // take well over a second to tear down a many-threaded native process after SIGKILL.
      let left = groupMembers(groups)
      if (left.length > 0) {
        signalAll("SIGKILL")
        for (let i = 0; i < 1000 && left.length > 0; i++) {
          yield* Effect.sleep("10 millis")
          left = groupMembers(groups)
        }
      }
      if (left.length > 0) return yield* new ProcessesLingering({ count: left.length, pids: left.slice(0, 8) })
      return result
    })
    const terminate = stop(Duration.zero)

    return {
      pid: spawned,
      lines,
      writeLine,
      exited: Deferred.await(exited),
      exit: Effect.sync(() => Option.fromNullishOr(exitInfo)),
      terminate,
      stop,
      stderrTail: Effect.sync(() => stderr)
    } satisfies NativeProcess
  })
