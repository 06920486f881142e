/**
 * Settling a Turn (`TurnStore.settle`, docs/store.md "What rides a journal transaction"): the terminal outcome and
 * what settles with it in ONE transaction (issue 18: one commit, not three) — the Turn row, only if it is not
 * terminal yet (a terminal outcome is written once), returned as written; its pending interactions abandoned;
 * and, when a Session is given and the outcome carries one, the Session's latest native Session id (updated even
 * when the outcome was recorded already, as the runner did before).
 *
 * The settle is a write of the journal's group commit (issue 18, tstore3: no commit of its own): it shares the
 * transaction, the fsync and the worker message of whatever journal appends, creates and settles of other Turns
 * are committed with it, and the commit answers the rows of its last statement. Its statements: the interactions
 * abandoned first, only while the Turn is still unfinished (the same condition the Turn row's update then applies,
 * in the same transaction), then the Session, and last the Turn row's `UPDATE … RETURNING`, whose rows are the
 * answer. Durability point: `settle` succeeds only after the transaction holding it committed, so an outcome
 * published after it (`JournalWriter.finish`) is stored. A settle that fails in a batch is committed again alone
 * (`GroupCommit.ts`), so it fails only by itself. Inside a transaction of the caller it runs on that transaction.
 *
 * `journal`: the Turn's last journal entries, stored in the same transaction before the outcome (issue 18,
 * "settlefacts": a Turn's final facts held until its outcome, `TurnFacts.ts`), with the Run's dispatch mark and the
 * attempt's begin when they ride it. Both are stored, or neither.
 */
import { Clock, Effect, Option } from "effect"
import type { SqlClient, Statement } from "effect/sql"
import type { TurnOutcome } from "../Outcome.js"
import { commitJournal, type JournalGroupCommit, type JournalWrite } from "./JournalCommit.js"
import * as SqlBatch from "./SqlBatch.js"
import { StoreFailed, storeFailed } from "./StoreErrors.js"
import { readTurn, type TurnRecord } from "./TurnRecords.js"

// The settle's statements as fixed texts with their values as parameters (built once per client): a `sql` template
// makes a segment per literal and per value and compiles them into the text again on every settle (turnmem, issue 18:
// with a Turn in flight across scavenges, those were the largest part of what a settle left in the old generation).
const abandonText = `UPDATE interactions SET status = 'abandoned' WHERE turn_id = ? AND status = 'pending'
  AND EXISTS (SELECT 1 FROM turns WHERE turn_id = ? AND status IN ('queued', 'running'))`
const nativeText = "UPDATE sessions SET native_session_id = ? WHERE session_id = ?"
const updateText = `UPDATE turns SET status = ?, error_code = ?, observation_reason = ?, engine_error_code = ?,
  engine_http_status = ?, usage_json = ?, content = ?, native_session_id = ?, outcome_json = ?, completed_at_ms = ?
  WHERE turn_id = ? AND status IN ('queued', 'running')
  RETURNING *`

/** What a settle stores in its transaction besides the outcome: the Turn's last journal entries (module comment). */
export type SettleJournal = Pick<JournalWrite, "events" | "markDispatched" | "begin">

export const settleTurn = (sql: SqlClient.SqlClient, commits: JournalGroupCommit) => {
  const numbered = SqlBatch.numbersPlaceholders(sql)
  const abandon = SqlBatch.placeholders(abandonText, numbered)
  const native = SqlBatch.placeholders(nativeText, numbered)
  const updateTurn = SqlBatch.placeholders(updateText, numbered)
  // Inside a caller's transaction with journal entries: the journal's own statements on that transaction.
  const nested = commitJournal(sql)
  // One generator function per store, not one per settle (docs/performance.md, "generators").
  const settle: (turnId: string, outcome: TurnOutcome, sessionId?: string, journal?: SettleJournal) => Effect.Effect<Option.Option<TurnRecord>, StoreFailed> =
    Effect.fnUntraced(function* (turnId: string, outcome: TurnOutcome, sessionId?: string, journal?: SettleJournal) {
      const at = yield* Clock.currentTimeMillis
      const statements: Array<Statement.Statement<unknown>> = [sql.unsafe(abandon, [turnId, turnId])]
      if (sessionId !== undefined && outcome.native_session_id !== undefined && outcome.native_session_id !== "") {
        statements.push(sql.unsafe(native, [outcome.native_session_id, sessionId]))
      }
      const update = sql.unsafe(updateTurn, [
        outcome.status,
        outcome.error_code ?? null,
        outcome.observation ?? null,
        outcome.engine_error_code ?? null,
        outcome.engine_http_status ?? null,
        outcome.usage === undefined ? null : JSON.stringify(outcome.usage),
        outcome.content ?? null,
        outcome.native_session_id ?? null,
        JSON.stringify(outcome),
        at,
        turnId
      ])
      // Inside a transaction of the caller (a reconcile under the lease sweeper's transaction): on that
      // transaction, which gives all or none (the group commit's writer runs on another connection).
      const open = yield* Effect.serviceOption(sql.transactionService)
      // Never fenced (no lease is carried), so never `LeaseLost`; a failure is the settle's.
      const write: JournalWrite = { turnId, events: [], ...journal, statements, returning: update }
      const rows = Option.isNone(open)
        ? yield* commits.submit(write).pipe(Effect.mapError(() => new StoreFailed({ operation: "complete_turn" })))
        : write.events.length === 0
        ? yield* SqlBatch.lastRows([...statements, update]).pipe(storeFailed("complete_turn"))
        : (yield* nested([write]).pipe(Effect.mapError(() => new StoreFailed({ operation: "complete_turn" }))))?.[0]
      return Option.map(Option.fromNullishOr(rows?.[0]), readTurn)
    })
  return settle
}
