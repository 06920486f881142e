/**
 * Database-level Turn claims (docs/multi-node.md "Turn claims"): the node that dispatches a Turn first claims
 * it in its row (`UPDATE turns SET claimed_by = node WHERE claimed_by IS NULL`, or already ours: a restart of
 * the same node), so two nodes can never both run one Turn — e.g. two nodes starting together both finding
 * the same queued Turn to resume. Used with PostgreSQL only; a single SQLite node never claims.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { storeFailed } from "../StoreErrors.js"

/** Claims `turnId` for `nodeId`: true when it is now this node's (it was unclaimed or already ours). */
export const claimTurn = (nodeId: string, turnId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql`UPDATE turns SET claimed_by = ${nodeId}
      WHERE turn_id = ${turnId} AND (claimed_by IS NULL OR claimed_by = ${nodeId})
      RETURNING turn_id`.pipe(
      Effect.map((rows) => rows.length === 1),
      storeFailed("claim_turn")
    ))
