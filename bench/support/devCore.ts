/**
 * The dev Core as the scale suite measures it (`gateway-host` mode `devcore`): the whole `DevCore.layer` (the
 * gateway, the operator API and the SQLite store in a throwaway data directory, with the declaration
 * persistence a production Core runs), with every bench device and the digest of its credential written to
 * the store before the first connection. The operator token is random per run and travels nowhere.
 */
import { Array as Arr, Effect, Layer, Logger, ManagedRuntime, Metric, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { randomBytes } from "node:crypto"
import { digestCredential } from "../../src/core/DeviceCredentials.js"
import { loggerFor } from "../../src/bin/Logging.js"
import * as DevCore from "../../src/core/dev/DevCore.js"
import { journalTransactionWrites } from "../../src/core/dev/TurnTelemetry.js"
import type { BenchDevice } from "./core.js"

export interface BenchDevCore {
  readonly baseUrl: string
  readonly operatorToken: string
  /** Store counters: Turns, journal rows, and journal commits made by the group commit so far. */
  readonly stats: () => Promise<DevCoreStats>
  /**
   * Writes `count` finished (completed, dispatched) Turns of `sessionId` straight into the store, oldest first
   * and all before now: the rows earlier Turns of a Session leave (the turns suite's growth levels).
   */
  readonly seedTurns: (sessionId: string, count: number) => Promise<void>
  readonly dispose: () => Promise<void>
}

export interface DevCoreStats {
  readonly turns: number
  readonly events: number
  readonly journalCommits: number
}

/** Starts the dev Core on 127.0.0.1 with `devices` registered. */
export const startDevCore = async (
  dataDir: string,
  devices: ReadonlyArray<BenchDevice>,
  heartbeatSeconds: number,
  operatorToken: string = `bench-${randomBytes(18).toString("base64url")}`
): Promise<BenchDevCore> => {
  const layer = DevCore.layer({ dataDir, operatorToken: Redacted.make(operatorToken), heartbeatSeconds }).pipe(
    // As `agentwire core` logs by default: its logger, at Effect's default level, info (issue 18: the Core's figures at
    // Warn left out its three info lines per Turn).
    Layer.provide(Logger.layer([loggerFor("text")]))
  )
  const runtime = ManagedRuntime.make(layer)
  const url = await runtime.runPromise(Effect.gen(function* () {
    return (yield* DevCore.DevCore).url
  }))
  await runtime.runPromise(Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const now = Date.now()
    for (let i = 0; i < devices.length; i += 500) {
      const chunk = devices.slice(i, i + 500) as unknown as readonly [BenchDevice, ...Array<BenchDevice>]
      yield* sql.withTransaction(Effect.gen(function* () {
        yield* sql`INSERT INTO devices ${sql.insert(Arr.map(chunk, (d) => ({
          device_id: d.deviceId,
          workspace_id: "default",
          runtime_type: "agent-daemon",
          created_at_ms: now,
          revoked_at_ms: null
        })))}`
        yield* sql`INSERT INTO device_credentials ${sql.insert(Arr.map(chunk, (d) => ({
          credential_id: `bench-${d.deviceId}`,
          device_id: d.deviceId,
          digest: digestCredential(Redacted.make(d.credential)),
          created_at_ms: now,
          revoked_at_ms: null
        })))}`
      }))
    }
  }))
  const stats = () =>
    runtime.runPromise(Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const [turns] = yield* sql<{ readonly n: number }>`SELECT COUNT(*) AS n FROM turns`
      const [events] = yield* sql<{ readonly n: number }>`SELECT COUNT(*) AS n FROM turn_events`
      const commits = (yield* Metric.value(journalTransactionWrites)).count
      return { turns: Number(turns?.n ?? 0), events: Number(events?.n ?? 0), journalCommits: commits }
    }))
  const seedTurns = (sessionId: string, count: number) =>
    runtime.runPromise(Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const [row] = yield* sql<{ readonly n: number }>`SELECT COUNT(*) AS n FROM turns WHERE session_id = ${sessionId}`
      const offset = Number(row?.n ?? 0)
      const input = JSON.stringify([{ content: [{ type: "input_text", text: "seeded" }] }])
      const start = Date.now() - 10 * count
      for (let i = 0; i < count; i += 500) {
        const rows = Array.from({ length: Math.min(500, count - i) }, (_, k) => {
          const n = offset + i + k
          const at = start + 10 * (i + k)
          return {
            turn_id: `seed-${sessionId}-${n}`,
            session_id: sessionId,
            run_id: `run-seed-${sessionId}-${n}`,
            device_id: null,
            status: "completed",
            attempt: 1,
            input_json: input,
            input_cursor: 1,
            created_at_ms: at,
            dispatched_at_ms: at,
            completed_at_ms: at + 5
          }
        }) as unknown as readonly [Record<string, unknown>, ...Array<Record<string, unknown>>]
        yield* sql`INSERT INTO turns ${sql.insert(rows)}`
      }
    }))
  return { baseUrl: url, operatorToken, stats, seedTurns, dispose: () => runtime.dispose() }
}
