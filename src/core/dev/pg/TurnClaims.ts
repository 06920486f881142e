/**
 * Database-level Turn claims (docs/multi-node.md "Turn claims"): the node that dispatches a Turn first claims
 * it in its row (`UPDATE turns SET claimed_by = node WHERE claimed_by IS NULL`, or already ours: a restart of
 * the same node), so two nodes can never both run one Turn — e.g. two nodes starting together both finding
 * the same queued Turn to resume. Used with PostgreSQL only; a single SQLite node never claims.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { storeFailed } from "../StoreErrors.js"

/**
 * Claims `turnId` for `nodeId`: true when it is now this node's. `resume` (a Turn this node left queued at its
 * last stop): also when it is ours already. Otherwise only an unclaimed row is claimed, so a Turn just created
 * here and the periodic pickup of released Turns on this same node never both win it (one runner per Turn).
 */
export const claimTurn = (nodeId: string, turnId: string, resume = false) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    (resume
      ? sql`UPDATE turns SET claimed_by = ${nodeId}
        WHERE turn_id = ${turnId} AND (claimed_by IS NULL OR claimed_by = ${nodeId})
        RETURNING turn_id`
      : sql`UPDATE turns SET claimed_by = ${nodeId}
        WHERE turn_id = ${turnId} AND claimed_by IS NULL
        RETURNING turn_id`).pipe(
      Effect.map((rows) => rows.length === 1),
      storeFailed("claim_turn")
    ))

/**
 * Releases the claims of dead nodes on their **queued** Turns (never dispatched, or requeued unclaimed: no
 * delivery attempt in flight, so nothing was sent for the current attempt): a node is dead when its
 * `core_nodes` row expired at `now` (it stopped sweeping for a lease TTL). Never a Turn of `nodeId` or of a
 * live node, never a running Turn (the lease sweeper reconciles those). The released Turns' ids.
 */
export const releaseDeadClaims = (nodeId: string, now: number) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql`UPDATE turns SET claimed_by = NULL
      WHERE status = 'queued' AND claimed_by IS NOT NULL AND claimed_by <> ${nodeId}
        AND claimed_by IN (SELECT node_id FROM core_nodes WHERE expires_at_ms <= ${now})
      RETURNING turn_id`.pipe(
      Effect.map((rows) => rows.map((r) => String(r.turn_id))),
      storeFailed("release_dead_claims")
    ))

/** Queued Turns no node claims (released from a dead node), oldest first, at most `limit`. */
export const unclaimedQueued = (limit: number) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql`SELECT turn_id FROM turns WHERE status = 'queued' AND claimed_by IS NULL
      ORDER BY created_at_ms, turn_id LIMIT ${limit}`.pipe(
      Effect.map((rows) => rows.map((r) => String(r.turn_id))),
      storeFailed("unclaimed_turns")
    ))
