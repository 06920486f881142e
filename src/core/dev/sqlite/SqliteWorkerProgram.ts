/**
 * The program of the SQLite worker thread (`WorkerSqliteClient.ts`, docs/store.md "Off the event loop"): it owns
 * the `node:sqlite` `DatabaseSync` handle and runs every statement the main thread sends, one message at a time,
 * so a slow statement, a lock wait or an fsync blocks this thread and never the main event loop.
 *
 * The worker is started from source text (`new Worker(source, { eval: true })`), so the single-file bundle needs
 * no side file: `sqliteWorkerSource` is this function's own text. The function is therefore self-contained: it
 * uses no import and no module-level binding, only globals (`process.getBuiltinModule`).
 *
 * Framing: the worker posts `0` once it listens, then the reply object per request, in the order of the
 * requests; the main thread posts the request object per request and `1` (`closeMessage`) to close (the worker
 * then closes the database and its port, and exits). No array wraps a message (issue 18: each is one object less
 * to serialize and to rebuild). Each reply says whether the connection is inside
 * a transaction (`tx`), which the main thread's one-permit acquirers read. Errors are sent as their SQLite result
 * code and message only (never the statement or its parameters).
 *
 * On Linux the thread lowers its own priority (nice + 5) at start, so that when it and the event loop want the
 * same CPU the event loop keeps it (docs/store.md "Off the event loop").
 */

/** The durability of commits (`synchronous`), as in `NodeSqliteClient.Durability`. */
export type WorkerDurability = "full" | "normal"

export type WorkerParams = ReadonlyArray<null | number | bigint | string | Uint8Array>

/** What the main thread asks. `id` pairs the reply. */
export type WorkerRequest =
  | {
    readonly id: number
    readonly op: "open"
    readonly filename: string
    readonly busyTimeoutMs: number
    readonly durability: WorkerDurability
  }
  /** Rows as objects (`arrays: false`) or as arrays of values; a statement without columns runs and gives []. */
  | {
    readonly id: number
    readonly op: "all"
    readonly sql: string
    readonly params: WorkerParams
    readonly cached: boolean
    readonly arrays: boolean
  }
  /** Runs one statement: `{ changes, lastInsertRowid }`. */
  | { readonly id: number; readonly op: "run"; readonly sql: string; readonly params: WorkerParams }
  /**
   * `BEGIN IMMEDIATE`, every statement, `COMMIT`, all in this thread: all rows or none (ROLLBACK on error). With
   * `rows`, the reply's value is the last statement's rows (as objects), else null.
   */
  | {
    readonly id: number
    readonly op: "batch"
    readonly statements: ReadonlyArray<readonly [sql: string, params: WorkerParams]>
    readonly rows?: boolean
  }
  /**
   * `before`, rows of one table, then `statements`, in one transaction (`BEGIN IMMEDIATE` … `COMMIT`, ROLLBACK on error; a
   * single statement in all runs alone). `values` holds the rows one after another, `width` values each; they go
   * in `INSERT`s of `sizes[i]` rows (`prefix` `INSERT INTO t (c1, …) VALUES` and that many tuples of `?`), whose
   * prepared statements are kept per row count. With `returning`, the reply's value is the rows (as objects) of
   * the statements at those indexes of `statements`, in that order, else null.
   */
  | {
    readonly id: number
    readonly op: "insert"
    readonly prefix: string
    readonly width: number
    readonly sizes: ReadonlyArray<number>
    readonly values: WorkerParams
    readonly statements: ReadonlyArray<readonly [sql: string, params: WorkerParams]>
    readonly before?: ReadonlyArray<readonly [sql: string, params: WorkerParams]>
    readonly returning?: ReadonlyArray<number>
  }

export interface WorkerFailure {
  /** SQLite's result code when the error came from SQLite. */
  readonly errcode: number | undefined
  readonly message: string
}

export type WorkerReply =
  | { readonly id: number; readonly tx: boolean; readonly ok: true; readonly value: unknown }
  | { readonly id: number; readonly tx: boolean; readonly ok: false; readonly error: WorkerFailure }

/** The worker thread's main (runs only inside a worker; see the module header). */
export function sqliteWorkerMain(): void {
  const threads = process.getBuiltinModule("node:worker_threads")
  const sqlite = process.getBuiltinModule("node:sqlite")
  const port = threads.parentPort
  if (port === null) throw new Error("the SQLite worker program runs only in a worker thread")
  // Prepared statements kept per connection; past this the cache starts over (the statement set is small).
  const cacheSize = 256
  const cache = new Map<string, import("node:sqlite").StatementSync>()
  let db: import("node:sqlite").DatabaseSync | undefined

  const open = (): import("node:sqlite").DatabaseSync => {
    if (db === undefined || !db.isOpen) throw new Error("the database is not open")
    return db
  }
  const prepare = (sql: string, cached: boolean) => {
    const handle = open()
    if (!cached) return handle.prepare(sql)
    const hit = cache.get(sql)
    if (hit !== undefined) return hit
    if (cache.size >= cacheSize) cache.clear()
    const statement = handle.prepare(sql)
    cache.set(sql, statement)
    return statement
  }
  /** The text of an INSERT of `rows` tuples of `width` placeholders after `prefix`, built once per shape. */
  const texts = new Map<string, string>()
  const insertText = (prefix: string, width: number, rows: number): string => {
    const key = `${rows}:${width}:${prefix}`
    let text = texts.get(key)
    if (text === undefined) {
      const tuple = `(${new Array<string>(width).fill("?").join(", ")})`
      text = `${prefix} ${new Array<string>(rows).fill(tuple).join(", ")}`
      if (texts.size >= cacheSize) texts.clear()
      texts.set(key, text)
    }
    return text
  }
  /** Runs `work` in one `BEGIN IMMEDIATE` … `COMMIT` (ROLLBACK when it throws). */
  const inTransaction = (work: () => void) => {
    const handle = open()
    handle.exec("BEGIN IMMEDIATE")
    try {
      work()
      handle.exec("COMMIT")
    } catch (cause) {
      if (handle.isTransaction) handle.exec("ROLLBACK")
      throw cause
    }
  }
  const handle = (request: WorkerRequest): unknown => {
    switch (request.op) {
      case "open": {
        const opened = new sqlite.DatabaseSync(request.filename, { timeout: request.busyTimeoutMs })
        try {
          if (request.filename !== ":memory:") opened.exec("PRAGMA journal_mode = WAL")
          opened.exec(request.durability === "normal" ? "PRAGMA synchronous = NORMAL" : "PRAGMA synchronous = FULL")
          opened.exec("PRAGMA foreign_keys = ON")
          // Statement journals and sorts in memory (issue 18): a write statement inside a transaction past 64 KiB of
          // statement journal otherwise spills it to a new temporary file (create, unlink, writes; ≈ 8 syscalls
          // per Turn on this thread). Only transient data: what a commit makes durable is unchanged.
          opened.exec("PRAGMA temp_store = MEMORY")
        } catch (cause) {
          opened.close()
          throw cause
        }
        db = opened
        return null
      }
      case "all": {
        const statement = prepare(request.sql, request.cached)
        if (statement.columns().length === 0) {
          statement.run(...request.params)
          return []
        }
        statement.setReturnArrays(request.arrays)
        try {
          return statement.all(...request.params)
        } finally {
          statement.setReturnArrays(false)
        }
      }
      case "run": {
        const result = prepare(request.sql, true).run(...request.params)
        return { changes: Number(result.changes), lastInsertRowid: result.lastInsertRowid }
      }
      case "batch": {
        const { statements } = request
        const returning = request.rows === true ? statements.length - 1 : -1
        let rows: unknown = null
        inTransaction(() => {
          for (let i = 0; i < statements.length; i++) {
            const [sql, params] = statements[i]!
            if (i === returning) rows = prepare(sql, true).all(...params)
            else prepare(sql, true).run(...params)
          }
        })
        return rows
      }
      case "insert": {
        const { before = [], prefix, returning, sizes, statements, values, width } = request
        const answered = new Map<number, unknown>()
        const work = () => {
          for (const [sql, params] of before) prepare(sql, true).run(...params)
          let from = 0
          for (const rows of sizes) {
            const to = from + rows * width
            prepare(insertText(prefix, width, rows), true).run(...values.slice(from, to))
            from = to
          }
          for (let i = 0; i < statements.length; i++) {
            const [sql, params] = statements[i]!
            if (returning !== undefined && returning.includes(i)) answered.set(i, prepare(sql, true).all(...params))
            else prepare(sql, true).run(...params)
          }
        }
        if (before.length + sizes.length + statements.length === 1) work()
        else inTransaction(work)
        return returning === undefined ? null : returning.map((i) => answered.get(i) ?? [])
      }
    }
  }
  const failure = (cause: unknown) => {
    const native = cause as { readonly errcode?: unknown; readonly message?: unknown } | undefined
    return {
      errcode: typeof native?.errcode === "number" ? native.errcode : undefined,
      message: typeof native?.message === "string" ? native.message : "unknown error"
    }
  }
  port.on("message", (message: WorkerRequest | 1) => {
    if (message === 1) {
      cache.clear()
      if (db !== undefined && db.isOpen) db.close()
      port.close()
      return
    }
    const request = message
    try {
      const value = handle(request)
      port.postMessage({ id: request.id, tx: db?.isOpen === true && db.isTransaction, ok: true, value })
    } catch (cause) {
      port.postMessage({ id: request.id, tx: db?.isOpen === true && db.isTransaction, ok: false, error: failure(cause) })
    }
  })
  // The event loop first (issue 18): on Linux each thread has its own nice value, and this one is lowered by
  // `yieldBy` below the thread that started it. When both threads want one CPU, the scheduler keeps the event loop
  // on it instead of letting this thread, woken by a request, preempt it for the statement's CPU (measured on a
  // loaded 2-vCPU VM: 0.3–1.1 ms of the main thread's wall time and 0.16–0.29 ms of its CPU per request inside
  // `postMessage`, about 40 % less at nice + 5). Best effort, and only on Linux (elsewhere `setPriority(0, …)`
  // sets the whole process's priority).
  if (process.platform === "linux") {
    const os = process.getBuiltinModule("node:os")
    const yieldBy = 5
    try {
      os.setPriority(Math.min(19, os.getPriority() + yieldBy))
    } catch {
      // the thread keeps the priority it was started with
    }
  }
  port.postMessage(0)
}

/** What the main thread posts to close the worker (see the framing above). */
export const closeMessage = 1

/** The worker's source text, for `new Worker(sqliteWorkerSource(), { eval: true })`. */
export const sqliteWorkerSource = (): string => `(${sqliteWorkerMain.toString()})()`
