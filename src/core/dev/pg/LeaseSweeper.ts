/**
 * The expired-lease sweeper (docs/multi-node.md "Reconciling the Turns of a lost owner"). Every Core node on a
 * shared database runs one: every `intervalMs` (a third of the lease TTL by default) it finds the running Turns whose recorded owner (`turns.owner_generation`, written when
 * the attempt began) is no longer the device's live owner lease, and reconciles exactly those from their
 * journal with the rules of start-up recovery (`Recovery.reconcileTurn`: `delivery_unknown` /
 * `event_stream_incomplete`, never an invented outcome):
 *
 * - the lease is still the owner's generation but **expired** (the owner node died or lost the database):
 *   the sweeper first moves the generation forward (`OwnerLeases.takeExpired`), which fences the old owner —
 *   a write of it in flight commits first, every later one and its renewals are refused — then reconciles
 *   with `core_restarted`;
 * - the lease moved to a **newer generation** (the device connected to another node; the old owner's writes
 *   are refused): reconciled with `replaced`, the reason the single-node gateway gives a replaced connection.
 *
 * A Turn whose owner still holds the live lease of its generation is never touched. Then the **queued** Turns
 * claimed by a dead node (its `core_nodes` row expired) are released (`TurnClaims.releaseDeadClaims`) for the
 * node holding their device to dispatch (Turns.ts). Each sweep ends by renewing this node's row in `core_nodes`. Two nodes sweeping at once
 * reconcile a Turn once: each Turn is reconciled in one transaction that first locks its row on the stale
 * owner generation (`FOR UPDATE` on PostgreSQL) and finds it still running; the loser finds it terminal.
 * A store failure is logged and the sweep runs again at the next tick. Times come from `Clock`.
 */
import { Clock, Duration, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import type * as Outcome from "../../Outcome.js"
import { reconcileTurn, type RecoveredTurn } from "../Recovery.js"
import { StoreFailed, storeFailed, toInt, toIntOrUndefined } from "../StoreErrors.js"
import type { TurnStore } from "../TurnStore.js"
import { OwnerLeases } from "./OwnerLeases.js"
import { releaseDeadClaims } from "./TurnClaims.js"

export interface LeaseSweeperOptions {
  /** How often the sweep runs (default: a third of the lease TTL). */
  readonly intervalMs?: number
}

/** Renews this node's row in `core_nodes` (alive until now + the lease TTL). */
const heartbeat = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const leases = yield* OwnerLeases
  const now = yield* Clock.currentTimeMillis
  yield* sql`INSERT INTO core_nodes (node_id, node_url, expires_at_ms)
    VALUES (${leases.node.nodeId}, ${leases.node.nodeUrl}, ${now + leases.node.ttlMs})
    ON CONFLICT (node_id) DO UPDATE SET node_url = excluded.node_url, expires_at_ms = excluded.expires_at_ms`.pipe(
    storeFailed("node_heartbeat")
  )
})

/**
 * Reconciles the Turn in one transaction when it is still running on `ownerGeneration` and that generation
 * is stale; undefined when another node got there first (or the owner still holds it).
 */
const claimAndReconcile = (
  turn: { readonly turnId: string; readonly runId: string; readonly attempt: number },
  ownerGeneration: number,
  reason: Outcome.ObservationEnd
) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    return yield* sql.withTransaction(Effect.gen(function* () {
      const stale = yield* sql.onDialectOrElse({
        pg: () =>
          sql`SELECT t.turn_id FROM turns t JOIN device_leases l ON l.device_id = t.device_id
            WHERE t.turn_id = ${turn.turnId} AND t.status = 'running' AND t.owner_generation = ${ownerGeneration}
              AND l.generation <> t.owner_generation
            FOR UPDATE OF t`,
        orElse: () =>
          sql`SELECT t.turn_id FROM turns t JOIN device_leases l ON l.device_id = t.device_id
            WHERE t.turn_id = ${turn.turnId} AND t.status = 'running' AND t.owner_generation = ${ownerGeneration}
              AND l.generation <> t.owner_generation`
      }).pipe(storeFailed("claim_stale_turn"))
      if (stale.length === 0) return undefined
      return yield* reconcileTurn(turn, reason)
    })).pipe(Effect.catchTag("SqlError", () => Effect.fail(new StoreFailed({ operation: "reconcile_stale_turn" }))))
  })

/** One sweep: what it reconciled (empty when nothing had a lost owner). */
export const sweepOnce: Effect.Effect<
  ReadonlyArray<RecoveredTurn>,
  StoreFailed,
  SqlClient.SqlClient | OwnerLeases | TurnStore
> = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const leases = yield* OwnerLeases
  const now = yield* Clock.currentTimeMillis
  const candidates = yield* sql`SELECT t.turn_id, t.run_id, t.attempt, t.device_id, t.owner_generation,
      l.generation AS lease_generation, l.expires_at_ms AS lease_expires_at_ms
    FROM turns t JOIN device_leases l ON l.device_id = t.device_id
    WHERE t.status = 'running' AND t.owner_generation IS NOT NULL
      AND (l.generation <> t.owner_generation OR l.expires_at_ms <= ${now})`.pipe(storeFailed("find_stale_turns"))
  const reconciled: Array<RecoveredTurn> = []
  for (const row of candidates) {
    const turn = { turnId: String(row.turn_id), runId: String(row.run_id), attempt: toInt(row.attempt) }
    const ownerGeneration = toInt(row.owner_generation)
    const expired = (toIntOrUndefined(row.lease_expires_at_ms) ?? 0) <= now
    // The owner may still be writing: fence it by moving the expired lease's generation forward first.
    if (toInt(row.lease_generation) === ownerGeneration) yield* leases.takeExpired(String(row.device_id), ownerGeneration)
    const outcome = yield* claimAndReconcile(turn, ownerGeneration, expired ? "core_restarted" : "replaced")
    if (outcome !== undefined) reconciled.push({ turnId: turn.turnId, outcome })
  }
  // Queued Turns claimed by a node that stopped sweeping (dead): released for a live node to dispatch.
  const released = yield* releaseDeadClaims(leases.node.nodeId, now)
  if (released.length > 0) {
    yield* Effect.logWarning("released the queued Turns of a dead node").pipe(
      Effect.annotateLogs({ turns: released.length, turn_ids: released.slice(0, 20).join(",") })
    )
  }
  // Last: a node's row says it completed a sweep recently.
  yield* heartbeat
  if (reconciled.length > 0) {
    yield* Effect.logWarning("reconciled Turns whose owner lease was lost").pipe(
      Effect.annotateLogs({ turns: reconciled.length, turn_ids: reconciled.map((r) => r.turnId).slice(0, 20).join(",") })
    )
  }
  return reconciled
})

/** Runs `sweepOnce` every `intervalMs` for the layer's lifetime (first after one interval). */
export const layer = (options: LeaseSweeperOptions = {}): Layer.Layer<never, never, SqlClient.SqlClient | OwnerLeases | TurnStore> =>
  Layer.effectDiscard(Effect.gen(function* () {
    const leases = yield* OwnerLeases
    const interval = Duration.millis(options.intervalMs ?? Math.max(1, Math.floor(leases.node.ttlMs / 3)))
    const sweep = sweepOnce.pipe(
      Effect.catchTag("StoreFailed", (e) =>
        Effect.logWarning("lease sweep failed; retrying at the next tick").pipe(Effect.annotateLogs({ store_operation: e.operation })))
    )
    // Alive from the start (a node restarted under its id is not taken for its dead predecessor).
    yield* heartbeat.pipe(Effect.catchTag("StoreFailed", () => Effect.void))
    yield* Effect.sleep(interval).pipe(Effect.andThen(sweep), Effect.forever, Effect.forkScoped)
  }))
