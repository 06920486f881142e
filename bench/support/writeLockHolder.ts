/**
 * Another process that periodically holds a SQLite database's write lock, the way a second connection does in
 * production (`agentwire core credential create`, a backup, a long listing's transaction): `BEGIN IMMEDIATE`,
 * the lock held for `holdMs` (a synchronous wait, as a long statement would), `COMMIT`, then `gapMs` free, over
 * and over until stopped. A statement of the measured store that needs the write lock meanwhile waits in SQLite's
 * busy handler (the store's busy timeout) on whatever thread issued it: the event loop for the in-thread store,
 * the store's worker thread for the worker store. Used by the durable suite's event-loop check.
 *
 * The holder is a separate Node process (`process.execPath -e`), so its CPU is not the measured process's. It
 * says `ready` once its first hold has the lock, so a run started after `startWriteLockHolder` resolves always
 * meets a held lock first (before, `ready` came before the first `BEGIN IMMEDIATE`: a short run could take the
 * lock first and finish while the holder's busy handler slept, and then meet no hold at all). It prints one line
 * per released hold (`held <ms>`); `stop` kills it (a kill releases the lock: SQLite's locks are the OS's file
 * locks) and resolves with the holds it made.
 */
import { type ChildProcess, spawn } from "node:child_process"

export interface LockHolderOptions {
  readonly holdMs: number
  readonly gapMs: number
}

export interface LockHolder {
  /** Kills the holder and resolves with the holds it completed (count, total ms held). */
  readonly stop: () => Promise<{ readonly holds: number; readonly heldMs: number }>
}

/** The holder's program (CommonJS, run by `node -e`): argv = file, holdMs, gapMs. */
const program = `
const { DatabaseSync } = require("node:sqlite")
const [file, holdMs, gapMs] = [process.argv[1], Number(process.argv[2]), Number(process.argv[3])]
const db = new DatabaseSync(file, { timeout: 5000 })
const cell = new Int32Array(new SharedArrayBuffer(4))
const parent = process.ppid
let first = true
const hold = () => {
  if (process.ppid !== parent) process.exit(0)
  db.exec("BEGIN IMMEDIATE")
  if (first) process.stdout.write("ready\\n") // the lock is held now (a pipe write is synchronous on Linux)
  first = false
  const t0 = performance.now()
  Atomics.wait(cell, 0, 0, holdMs)
  db.exec("COMMIT")
  process.stdout.write("held " + (performance.now() - t0).toFixed(1) + "\\n")
  setTimeout(hold, gapMs)
}
hold()
`

/** Starts a holder on `file` (resolves once its first hold has the write lock). */
export const startWriteLockHolder = (file: string, options: LockHolderOptions): Promise<LockHolder> =>
  new Promise((resolve, reject) => {
    const child: ChildProcess = spawn(process.execPath, ["-e", program, file, String(options.holdMs), String(options.gapMs)], {
      stdio: ["ignore", "pipe", "pipe"]
    })
    let out = ""
    let err = ""
    let ready = false
    const exited = new Promise<void>((done) => child.once("exit", () => done()))
    child.stderr!.on("data", (chunk: Buffer) => {
      err += chunk.toString()
    })
    child.stdout!.on("data", (chunk: Buffer) => {
      out += chunk.toString()
      if (!ready && out.startsWith("ready\n")) {
        ready = true
        resolve({
          stop: async () => {
            if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
            await exited
            const held = out.split("\n").filter((l) => l.startsWith("held ")).map((l) => Number(l.slice(5)))
            return { holds: held.length, heldMs: held.reduce((a, b) => a + b, 0) }
          }
        })
      }
    })
    child.once("exit", (code, signal) => {
      if (!ready) reject(new Error(`write-lock holder exited before ready (${code ?? signal}): ${err.slice(0, 500)}`))
    })
  })
