/**
 * Creating a Turn (`TurnStore.create`, docs/store.md "What rides a journal transaction"): the Turn row, queued at
 * attempt 0, written by the journal's group commit (issue 18) as a statement of its own write, so it shares the
 * transaction, the fsync and the worker message of whatever journal appends of other Turns are committed with it
 * instead of being a commit of its own. Its durability point is the same as an append's: `create` succeeds only
 * after the transaction holding the row committed; a create that fails (an id taken) fails alone, as a failing
 * append does (`GroupCommit.ts`). Succeeds with the record as written, without reading it back.
 */
import { Clock, Effect } from "effect"
import { fn } from "../TracedFn.js"
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

export const createTurn = (sql: SqlClient.SqlClient, journal: JournalGroupCommit) => {
  // A fixed text with the values as parameters, built once (turnmem, issue 18): `sql.insert` in a template makes a
  // helper, its segments and the compiled text again on every create.
  const text = SqlBatch.insertText("turns", columns, 1, SqlBatch.numbersPlaceholders(sql))
  return fn("TurnStore.create")(function* (turn: NewTurn) {
    const createdAtMs = yield* Clock.currentTimeMillis
    const row = sql.unsafe(text, [turn.turnId, turn.sessionId, turn.runId, null, "queued", 0, JSON.stringify(turn.input), 0, createdAtMs])
    // Never fenced (no lease is carried), so never `LeaseLost`; a failure is the create's.
    yield* journal.submit({ turnId: turn.turnId, events: [], statements: [row] }).pipe(
      Effect.mapError(() => new StoreFailed({ operation: "create_turn" }))
    )
    return {
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
    } satisfies TurnRecord
  })
}
