/**
 * Child processes of the bench: the bench bundle forked with `--child=<role>` and an IPC channel (configuration,
 * including bench credentials, travels over IPC, never argv or the environment). Their stdout and stderr go to
 * a log file in the run's temporary directory, named in failures; the directory is removed when the bench
 * ends unless `--keep-logs` is given (a failure prints the end of each log first).
 */
import { type ChildProcess, fork } from "node:child_process"
import { closeSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

export interface Child {
  readonly process: ChildProcess
  readonly logFile: string
  readonly send: (message: unknown) => void
  /** The next IPC message that satisfies `match` (rejects on an `{op: "error"}` message or an early exit). */
  readonly next: <A>(match: (message: unknown) => message is A, timeoutMs?: number) => Promise<A>
  /** Asks the child to exit (`{op: "exit"}`), then kills it after `graceMs`. */
  readonly stop: (graceMs?: number) => Promise<void>
}

let logDir: string | undefined
/**
 * The run's temporary directory (`<tmpdir>/agentwire-bench-*`: child logs, cold-start profiles and their
 * throwaway credential files), created on first use; the same directory until `removeBenchTempDir`.
 */
export const benchTempDir = (): string => (logDir ??= mkdtempSync(join(tmpdir(), "agentwire-bench-")))
/** The run's temporary directory if one was created. */
export const currentBenchTempDir = (): string | undefined => logDir
/** Removes the run's temporary directory, if one was created. Synchronous, so it can run in an `exit` handler. */
export const removeBenchTempDir = (): void => {
  if (logDir !== undefined) rmSync(logDir, { recursive: true, force: true })
  logDir = undefined
}

/**
 * The end of the last lines of each child log of the run (at most `maxBytes` per file), for a failure report
 * before the directory is removed. Child logs carry frame types, ids and sizes, never payloads or credentials.
 */
export const tailBenchLogs = (maxBytes = 2048): Array<{ readonly file: string; readonly tail: string }> => {
  if (logDir === undefined) return []
  const dir = logDir
  return readdirSync(dir)
    .filter((name) => name.endsWith(".log"))
    .map((name) => {
      const text = readFileSync(join(dir, name), "utf8")
      return { file: name, tail: text.length > maxBytes ? text.slice(text.length - maxBytes) : text }
    })
    .filter((log) => log.tail.trim() !== "")
}

/**
 * Removes the run's temporary directory whenever the bench process ends (normal end, failure, SIGINT or
 * SIGTERM), unless `keep` (`--keep-logs`), in which case its path is printed. Call once, first thing.
 */
export const removeBenchTempDirOnExit = (keep: boolean, log: (line: string) => void): void => {
  process.once("exit", () => {
    if (keep) {
      if (logDir !== undefined) log(`logs kept in ${logDir}`)
    } else removeBenchTempDir()
  })
  for (const [signal, code] of [["SIGINT", 130], ["SIGTERM", 143]] as const) {
    process.once(signal, () => process.exit(code))
  }
}

export const spawnChild = (
  self: string,
  role: string,
  options: { readonly execArgv?: ReadonlyArray<string>; readonly serialization?: "json" | "advanced" } = {}
): Child => {
  const logFile = join(benchTempDir(), `${role}-${Date.now()}.log`)
  const fd = openSync(logFile, "a", 0o600)
  const child = fork(self, [`--child=${role}`], {
    stdio: ["ignore", fd, fd, "ipc"],
    // "advanced" (structured clone) keeps what JSON loses, e.g. NaN samples in figures (support/isolatedSuite.ts).
    serialization: options.serialization ?? "json",
    // BENCH_CHILD_CPU_PROF=<dir> profiles every child (npx node --cpu-prof …): docs/performance.md;
    // BENCH_CHILD_CPU_PROF_INTERVAL=<µs> samples more often than the default 1000 µs (not allowed in NODE_OPTIONS).
    execArgv: [
      ...(options.execArgv ?? []),
      ...(process.env["BENCH_CHILD_EXEC_ARGV"] ? process.env["BENCH_CHILD_EXEC_ARGV"].split(" ") : []),
      ...(process.env["BENCH_CHILD_CPU_PROF"] ? ["--cpu-prof", `--cpu-prof-dir=${process.env["BENCH_CHILD_CPU_PROF"]}`] : []),
      ...(process.env["BENCH_CHILD_CPU_PROF"] && process.env["BENCH_CHILD_CPU_PROF_INTERVAL"]
        ? [`--cpu-prof-interval=${process.env["BENCH_CHILD_CPU_PROF_INTERVAL"]}`]
        : [])
    ],
    env: { ...process.env, NODE_OPTIONS: "" }
  })
  closeSync(fd)
  const inbox: Array<unknown> = []
  const waiters = new Set<(message: unknown) => boolean>()
  let exited: string | undefined
  const failAll = new Set<(error: Error) => void>()
  child.on("message", (message) => {
    for (const waiter of waiters) if (waiter(message)) return
    inbox.push(message)
  })
  child.on("exit", (code, signal) => {
    exited = `child ${role} exited (${code ?? signal}); log: ${logFile}`
    for (const fail of failAll) fail(new Error(exited))
  })
  const next = <A>(match: (message: unknown) => message is A, timeoutMs = 60_000): Promise<A> =>
    new Promise<A>((resolve, reject) => {
      const isError = (m: unknown): m is { op: "error"; message: string } =>
        typeof m === "object" && m !== null && (m as { op?: unknown }).op === "error"
      const i = inbox.findIndex((m) => match(m) || isError(m))
      if (i >= 0) {
        const [m] = inbox.splice(i, 1)
        return isError(m) ? reject(new Error(`child ${role}: ${m.message}; log: ${logFile}`)) : resolve(m as A)
      }
      if (exited !== undefined) return reject(new Error(exited))
      const cleanup = () => {
        clearTimeout(timer)
        waiters.delete(waiter)
        failAll.delete(fail)
      }
      const waiter = (m: unknown) => {
        if (isError(m)) {
          cleanup()
          reject(new Error(`child ${role}: ${m.message}; log: ${logFile}`))
          return true
        }
        if (!match(m)) return false
        cleanup()
        resolve(m)
        return true
      }
      const fail = (error: Error) => {
        cleanup()
        reject(error)
      }
      const timer = setTimeout(() => fail(new Error(`child ${role}: no reply within ${timeoutMs} ms; log: ${logFile}`)), timeoutMs)
      waiters.add(waiter)
      failAll.add(fail)
    })
  const stop = async (graceMs = 10_000) => {
    if (exited !== undefined) return
    const gone = new Promise<void>((resolve) => child.once("exit", () => resolve()))
    try {
      child.send({ op: "exit" })
    } catch {
      // the channel is already closed
    }
    const timer = setTimeout(() => child.kill("SIGKILL"), graceMs)
    await gone
    clearTimeout(timer)
  }
  return { process: child, logFile, send: (message) => child.send(message as object), next, stop }
}

/** A predicate for an IPC message with the given `op`. */
export const op = <O extends string>(name: O) => (message: unknown): message is { readonly op: O } & Record<string, unknown> =>
  typeof message === "object" && message !== null && (message as { op?: unknown }).op === name

/** Rejects with a message naming `what` when `promise` does not settle within `ms`. */
export const withTimeout = <A>(promise: Promise<A>, ms: number, what: string): Promise<A> =>
  new Promise<A>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms)
    promise.then(
      (a) => {
        clearTimeout(timer)
        resolve(a)
      },
      (e: unknown) => {
        clearTimeout(timer)
        reject(e)
      }
    )
  })
