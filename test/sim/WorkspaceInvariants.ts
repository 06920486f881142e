/**
 * The workspace invariants (docs/simulation.md "Invariants"), checked against the frames the Runtime received,
 * the in-memory workspace (MemoryWorkspace.ts: what was staged and installed) and Core's store (write
 * reservations, Session initialization):
 *
 * - **no replay**: each `workspace_write` operation and `runtime_prepare` transfer has its begin, each chunk
 *   offset and its commit received by the Runtime at most once, and never on a later connection than its begin;
 * - **installs**: a file is installed at most once per write or transfer; Core records a write `completed` only
 *   when its install was applied, and a `failed` / `rejected` write (or a `failed` initialization file) never
 *   installed anything;
 * - **reservations**: a write reservation is created only after the Session's previous one settled (a pending
 *   or `unknown` one blocks its successors), and a settlement is final — `unknown` changes only by the
 *   operator's settle, and a write whose commit may have been sent (`committing`) never becomes `failed`, across
 *   Core restarts;
 * - **liveness** (quiescence): every reservation settled or `unknown`, and no staging area left open.
 */
import { Effect, Option } from "effect"
import type { SqlClient } from "effect/sql"
import type { InitializationStore } from "../../src/core/dev/InitializationStore.js"
import type { Family } from "./Invariants.js"
import { openStaging, type WorkspaceLedger, writeTempName } from "./MemoryWorkspace.js"

interface Operation {
  readonly beginConnection: number
  readonly chunks: Set<number>
  commits: number
}

interface Row {
  readonly id: string
  readonly session: string
  readonly status: string
  readonly created: number
  readonly settled: number | undefined
}

export interface WorkspaceChecker {
  /** A `workspace_write` or `runtime_prepare` frame the Runtime received (delivered). */
  readonly received: (type: string, id: string, payload: Record<string, unknown>, connection: number) => void
  /** The operator settled this write (the only way an `unknown` write may change). */
  readonly operatorSettled: (writeId: string) => void
  readonly store: (sql: SqlClient.SqlClient, init: InitializationStore["Service"], sessions: ReadonlyArray<string>) => Effect.Effect<void>
  readonly quiescence: () => void
  /** Core is about to restart (after a `store` check): notes the writes still in flight, to count how they settle. */
  readonly coreRestarting: () => void
}

const settled = new Set(["completed", "rejected", "failed", "unknown"])

export const make = (
  ws: WorkspaceLedger,
  fail: (text: string) => void,
  tick: (family: Family, n?: number) => void,
  exercise: (key: string) => void
): WorkspaceChecker => {
  const operations = new Map<string, Operation>()
  const lastStatus = new Map<string, string>()
  const byOperator = new Set<string>()
  let rows: ReadonlyArray<Row> = []
  const initInstalled = new Set<string>()
  const inFlightAtRestart = new Set<string>()

  const received = (type: string, id: string, p: Record<string, unknown>, connection: number) => {
    const what = type === "workspace_write" ? `write ${id}` : `transfer ${id}`
    const key = `${type}|${id}`
    const step = p.step
    tick("no_replay")
    const op = operations.get(key)
    if (step === "begin") {
      if (op !== undefined) return fail(`no replay: the begin of ${what} reached the Runtime twice (connections ${op.beginConnection}, ${connection})`)
      operations.set(key, { beginConnection: connection, chunks: new Set(), commits: 0 })
      return
    }
    if (op === undefined) return
    if (connection !== op.beginConnection) {
      return fail(`no replay: a ${String(step)} of ${what} reached the Runtime on connection ${connection}, its begin on ${op.beginConnection}`)
    }
    if (step === "chunk") {
      const offset = Number(p.offset ?? 0)
      if (offset > 0 && !op.chunks.has(offset)) exercise(`${type} chunk after the first`)
      if (op.chunks.has(offset)) fail(`no replay: the chunk at ${offset} of ${what} reached the Runtime twice`)
      op.chunks.add(offset)
    } else if (step === "commit") {
      op.commits++
      if (op.commits > 1) fail(`no replay: the commit of ${what} reached the Runtime twice`)
    }
  }

  const installed = (tempName: string) => (ws.installs.get(tempName) ?? 0) > 0

  const store = (sql: SqlClient.SqlClient, init: InitializationStore["Service"], sessions: ReadonlyArray<string>) =>
    Effect.gen(function* () {
      for (const [name, n] of ws.installs) {
        tick("workspace")
        if (n > 1) fail(`workspace: staging ${name} was installed ${n} times`)
      }
      const found = yield* sql`SELECT reservation_id, session_id, status, created_at_ms, settled_at_ms FROM write_reservations
        ORDER BY created_at_ms, rowid`.pipe(Effect.orElseSucceed(() => []))
      rows = found.map((r) => ({
        id: String(r.reservation_id),
        session: String(r.session_id),
        status: String(r.status),
        created: Number(r.created_at_ms),
        settled: r.settled_at_ms === null || r.settled_at_ms === undefined ? undefined : Number(r.settled_at_ms)
      }))
      const previous = new Map<string, Row>()
      for (const row of rows) {
        tick("workspace", 3)
        const before = lastStatus.get(row.id)
        if (before !== undefined && before !== row.status) {
          if (before === "unknown" && !byOperator.has(row.id)) fail(`workspace: write ${row.id} was unknown, then became ${row.status} without the operator`)
          else if (before !== "unknown" && settled.has(before)) fail(`workspace: write ${row.id} settled ${before}, then became ${row.status}`)
          if (before === "committing" && row.status === "failed") fail(`workspace: write ${row.id} was committing (its commit may have been sent), then recorded failed`)
        }
        if (before !== row.status && settled.has(row.status)) {
          exercise(`workspace write ${row.status}`)
          if (inFlightAtRestart.delete(row.id)) exercise(`workspace write in flight across a core restart, then ${row.status}`)
        }
        lastStatus.set(row.id, row.status)
        const done = installed(writeTempName(row.id))
        if (row.status === "completed" && !done) fail(`workspace: write ${row.id} recorded completed but its install was never applied`)
        if ((row.status === "failed" || row.status === "rejected") && done) fail(`workspace: write ${row.id} recorded ${row.status} but its file was installed`)
        const earlier = previous.get(row.session)
        if (earlier !== undefined && (earlier.settled === undefined || earlier.settled > row.created)) {
          fail(`workspace: write ${row.id} was reserved while ${earlier.id} of the same Session was unsettled (${earlier.status})`)
        }
        previous.set(row.session, row)
      }
      for (const session of sessions) {
        const record = yield* init.get(session).pipe(Effect.orElseSucceed(() => Option.none()))
        if (Option.isNone(record)) continue
        for (const step of record.value.steps) {
          if (step.kind !== "file") continue
          tick("workspace")
          const path = step.label.slice("/workspace/".length)
          if (step.state === "completed" && !initInstalled.has(`${session}|${path}`)) {
            initInstalled.add(`${session}|${path}`)
            exercise("initialization file completed")
          }
          if (step.state === "completed" && !ws.files.has(path)) fail(`workspace: initialization file ${step.label} of ${session} completed but never installed`)
          if (step.state === "failed" && ws.files.has(path)) fail(`workspace: initialization file ${step.label} of ${session} failed but was installed`)
        }
      }
    })

  return {
    received,
    operatorSettled: (writeId) => void byOperator.add(writeId),
    store,
    coreRestarting: () => {
      for (const row of rows) if (!settled.has(row.status)) inFlightAtRestart.add(row.id)
    },
    quiescence: () => {
      tick("liveness", 2)
      for (const row of rows) {
        if (!settled.has(row.status)) fail(`liveness: write ${row.id} still ${row.status} after faults stopped`)
      }
      const open = openStaging(ws)
      if (open.length > 0) fail(`liveness: ${open.length} staging area(s) still open after faults stopped (${open.slice(0, 3).join(", ")})`)
    }
  }
}
