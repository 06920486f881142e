/**
 * Creating a Turn (`TurnStore.create`, docs/store.md "What rides a journal transaction"): the Turn row, queued at
 * attempt 0, written by the journal's group commit (issue 18) as a statement of its own write, so it shares the
 * transaction, the fsync and the worker message of whatever journal appends of other Turns are committed with it
 * instead of being a commit of its own. Its durability point is the same as an append's: `create` succeeds only
 * after the transaction holding the row committed; a create that fails (an id taken) fails alone, as a failing
 * append does (`GroupCommit.ts`). Succeeds with the record as written, without reading it back.
 *
 * `queueCreate` queues the row at once and leaves the wait to the caller, so what the caller queues next (the Turn's
 * first journal append, by its runner) rides the same transaction or a later one, never an earlier one
 * (`GroupCommit.enqueue`; the row goes before the batch's journal rows, which reference it: `JournalCommit.ts`).
 */
import { Clock, Effect } from "effect"
import type { SqlClient } from "effect/sql"
import type { MessageInput } from "../../proto/MessageInput.js"
import type { JournalGroupCommit } from "./JournalCommit.js"
import * as SqlBatch from "./SqlBatch.js"
import { StoreFailed } from "./StoreErrors.js"
import type { TurnRecord } from "./TurnRecords.js"

export interface NewTurn {
  readonly turnId: string
  readonly sessionId: string
  readonly runId: string
  readonly input: MessageInput
}

/** The Turn row's columns, in the order of `createTurn`'s values. */
const columns = ["turn_id", "session_id", "run_id", "device_id", "status", "attempt", "input_json", "input_cursor", "created_at_ms"]

/** A Turn's creation queued in the journal's group commit (`queueCreate`): its record, and the wait for its commit. */
export interface QueuedCreate {
  readonly record: TurnRecord
  /** Succeeds once the transaction holding the row committed (the create's durability point). */
  readonly committed: Effect.Effect<void, StoreFailed>
}

export const createTurn = (sql: SqlClient.SqlClient, journal: JournalGroupCommit) => {
  // A fixed text with the values as parameters, built once (turnmem, issue 18): `sql.insert` in a template makes a
  // helper, its segments and the compiled text again on every create.
  const text = SqlBatch.insertText("turns", columns, 1, SqlBatch.numbersPlaceholders(sql))
  const queueCreate = Effect.fnUntraced(function* (turn: NewTurn) {
    const createdAtMs = yield* Clock.currentTimeMillis
    const row = sql.unsafe(text, [turn.turnId, turn.sessionId, turn.runId, null, "queued", 0, JSON.stringify(turn.input), 0, createdAtMs])
    // Never fenced (no lease is carried), so never `LeaseLost`; a failure is the create's.
    const commit = yield* journal.enqueue({ turnId: turn.turnId, events: [], statements: [row] })
    const committed = commit.pipe(
      Effect.mapError(() => new StoreFailed({ operation: "create_turn" })),
      Effect.asVoid,
      Effect.withSpan("TurnStore.create", undefined, { captureStackTrace: false })
    )
    const record: TurnRecord = {
      turnId: turn.turnId,
      sessionId: turn.sessionId,
      runId: turn.runId,
      deviceId: undefined,
      status: "queued",
      attempt: 0,
      errorCode: undefined,
      observationReason: undefined,
      engineErrorCode: undefined,
      engineHttpStatus: undefined,
      usage: undefined,
      content: undefined,
      nativeSessionId: undefined,
      outcome: undefined,
      input: turn.input,
      inputCursor: 0,
      createdAtMs,
      dispatchedAtMs: undefined,
      completedAtMs: undefined
    }
    return { record, committed } satisfies QueuedCreate
  })
  const create = (turn: NewTurn): Effect.Effect<TurnRecord, StoreFailed> =>
    Effect.flatMap(queueCreate(turn), (queued) => Effect.as(queued.committed, queued.record))
  return { create, queueCreate }
}
