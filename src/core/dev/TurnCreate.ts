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
import { StoreFailed } from "./StoreErrors.js"
import type { TurnRecord } from "./TurnRecords.js"

export interface NewTurn {
  readonly turnId: string
  readonly sessionId: string
  readonly runId: string
  readonly input: MessageInput
}

export const createTurn = (sql: SqlClient.SqlClient, journal: JournalGroupCommit) =>
  fn("TurnStore.create")(function* (turn: NewTurn) {
    const createdAtMs = yield* Clock.currentTimeMillis
    const row = sql`INSERT INTO turns ${
      sql.insert({
        turn_id: turn.turnId,
        session_id: turn.sessionId,
        run_id: turn.runId,
        device_id: null,
        status: "queued",
        attempt: 0,
        input_json: JSON.stringify(turn.input),
        input_cursor: 0,
        created_at_ms: createdAtMs
      })
    }`
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
