/**
 * Settling a Turn (`TurnStore.settle`, docs/store.md "What rides a journal transaction"): the terminal outcome and
 * what settles with it in ONE transaction (issue 18: one commit, not three) — the Turn row, only if it is not
 * terminal yet (a terminal outcome is written once), returned as written; its pending interactions abandoned;
 * and, when a Session is given and the outcome carries one, the Session's latest native Session id (updated even
 * when the outcome was recorded already, as the runner did before).
 *
 * The transaction is one `SqlBatch.transactionRows` (with the worker store: ONE message, not BEGIN, three
 * statements and COMMIT as five): the interactions are abandoned first, only while the Turn is still unfinished
 * (the same condition the Turn row's update then applies, in the same transaction), then the Session, and last the
 * Turn row's `UPDATE … RETURNING`, whose rows are the batch's answer.
 */
import { Clock, Effect, Option } from "effect"
import type { SqlClient, Statement } from "effect/sql"
import type { TurnOutcome } from "../Outcome.js"
import type * as SqlBatch from "./SqlBatch.js"
import { type StoreFailed, storeFailed } from "./StoreErrors.js"
import { readTurn, type TurnRecord } from "./TurnRecords.js"

export const settleTurn = (sql: SqlClient.SqlClient, batch: SqlBatch.SqlBatch["Service"]) =>
  (turnId: string, outcome: TurnOutcome, sessionId?: string): Effect.Effect<Option.Option<TurnRecord>, StoreFailed> =>
    Effect.gen(function* () {
      const at = yield* Clock.currentTimeMillis
      const statements: Array<Statement.Statement<unknown>> = [
        sql`UPDATE interactions SET status = 'abandoned' WHERE turn_id = ${turnId} AND status = 'pending'
          AND EXISTS (SELECT 1 FROM turns WHERE turn_id = ${turnId} AND status IN ('queued', 'running'))`
      ]
      if (sessionId !== undefined && outcome.native_session_id !== undefined && outcome.native_session_id !== "") {
        statements.push(sql`UPDATE sessions SET native_session_id = ${outcome.native_session_id} WHERE session_id = ${sessionId}`)
      }
      statements.push(sql`UPDATE turns SET
          status = ${outcome.status},
          error_code = ${outcome.error_code ?? null},
          observation_reason = ${outcome.observation ?? null},
          engine_error_code = ${outcome.engine_error_code ?? null},
          engine_http_status = ${outcome.engine_http_status ?? null},
          usage_json = ${outcome.usage === undefined ? null : JSON.stringify(outcome.usage)},
          content = ${outcome.content ?? null},
          native_session_id = ${outcome.native_session_id ?? null},
          outcome_json = ${JSON.stringify(outcome)},
          completed_at_ms = ${at}
        WHERE turn_id = ${turnId} AND status IN ('queued', 'running')
        RETURNING *`)
      const rows = yield* batch.transactionRows(statements)
      return Option.map(Option.fromNullishOr(rows[0]), readTurn)
    }).pipe(storeFailed("complete_turn"))
