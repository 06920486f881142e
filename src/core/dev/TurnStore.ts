/**
 * Turns and everything recorded under them: the outcome, the ordered journal of Run frames as received,
 * active inputs with the Turn's input cursor, and interactions (permission requests, user-choice asks,
 * function calls) with the delivery outcome of their answer.
 *
 * Rules this store keeps:
 * - A terminal outcome is written once: `complete` never overwrites completed, failed or cancelled.
 * - The input cursor advances only through `acceptInput` (an `accepted` receipt), exactly once per input;
 *   `written`, a send failure or an unknown outcome never move it.
 * - The journal is append-only and ordered by `seq` (1, 2, …), one writer per Turn. It holds the Run frames
 *   as received (`frame`) and the delivery layer's other facts (`fact`), tagged with the delivery attempt.
 */
import { Array as Arr, Clock, Context, Effect, Layer, Option } from "effect"
import { fn } from "../TracedFn.js"
import { SqlClient } from "effect/sql"
import * as GroupCommit from "./GroupCommit.js"
import * as SqlBatch from "./SqlBatch.js"
import { type AttemptBegin, commitJournal } from "./JournalCommit.js"
import { createTurn, type NewTurn, type QueuedCreate } from "./TurnCreate.js"
import { type SettleJournal, settleTurn } from "./TurnSettle.js"
import { type StartChecks, startChecks } from "./TurnStartChecks.js"
import type { MessageInput } from "../../proto/MessageInput.js"
import type { TurnOutcome } from "../Outcome.js"
import { StoreFailed, storeFailed, toInt, toIntOrUndefined } from "./StoreErrors.js"
import { JournalFence, LeaseLost } from "./pg/OwnerLeases.js"
import {
  type AnswerOutcome,
  type InputRecord,
  type InputStatus,
  type InteractionKind,
  type InteractionRecord,
  type JournalKind,
  readInput,
  readInteraction,
  readTurn,
  type StoredEvent,
  type TurnRecord
} from "./TurnRecords.js"

export { type AttemptBegin, commitJournal, type JournalWrite } from "./JournalCommit.js"
export type { SettleJournal } from "./TurnSettle.js"
export {
  type AnswerOutcome,
  type InputRecord,
  type InputStatus,
  type InteractionKind,
  type InteractionRecord,
  type InteractionStatus,
  isTerminalStatus,
  type JournalKind,
  type StoredEvent,
  type TurnRecord,
  type TurnStatus
} from "./TurnRecords.js"

export class TurnStore extends Context.Service<TurnStore, {
  readonly create: (turn: {
    readonly turnId: string
    readonly sessionId: string
    readonly runId: string
    readonly input: MessageInput
  }) => Effect.Effect<TurnRecord, StoreFailed>
  /**
   * `create`, split: queues the row in the journal's group commit now and succeeds with its record and the wait
   * for its commit; a journal write queued after it commits in the same transaction or a later one (TurnCreate.ts).
   */
  readonly queueCreate: (turn: NewTurn) => Effect.Effect<QueuedCreate>
  readonly get: (turnId: string) => Effect.Effect<Option.Option<TurnRecord>, StoreFailed>
  readonly listBySession: (sessionId: string) => Effect.Effect<ReadonlyArray<TurnRecord>, StoreFailed>
  /** The Session's unfinished (queued or running) Turn, if any: one index probe, however many Turns it has. */
  readonly unfinishedOf: (sessionId: string) => Effect.Effect<Option.Option<TurnRecord>, StoreFailed>
  /** Whether a Turn of the Session (other than `exceptTurnId`) was ever dispatched: one index probe. */
  readonly hasDispatched: (sessionId: string, exceptTurnId?: string) => Effect.Effect<boolean, StoreFailed>
  /** `unfinishedOf` and `hasDispatched` of a Turn start in one statement (TurnStartChecks.ts). */
  readonly startChecks: (sessionId: string) => Effect.Effect<StartChecks, StoreFailed>
  /** Turns not in a terminal state (queued or running). */
  readonly listUnfinished: Effect.Effect<ReadonlyArray<TurnRecord>, StoreFailed>
  /**
   * Starts the next delivery attempt on `deviceId` (status `running`); succeeds with the attempt's number.
   * `owner` (several nodes, docs/multi-node.md): the node beginning it and the generation of the device's owner
   * lease it holds, recorded on the Turn (the lease sweeper reconciles it once that generation is stale).
   */
  readonly beginAttempt: (
    turnId: string,
    deviceId: string,
    owner?: { readonly nodeId: string; readonly generation: number }
  ) => Effect.Effect<number, StoreFailed>
  /** Records when the Run itself (execution_start / prompt_request) entered the send queue (first time only). */
  readonly markDispatched: (turnId: string) => Effect.Effect<void, StoreFailed>
  /** An attempt ended unclaimed (nothing executed): the Turn is queued again. */
  readonly requeue: (turnId: string) => Effect.Effect<void, StoreFailed>
  /** Writes the terminal outcome unless one is recorded already; succeeds with whether it wrote. */
  readonly complete: (turnId: string, outcome: TurnOutcome) => Effect.Effect<boolean, StoreFailed>
  /**
   * `complete` as one transaction with what settles with it (issue 18: one commit, not three; a write of the
   * journal's group commit, so it shares other Turns' commits, `TurnSettle.ts`): pending
   * interactions abandoned and, when `sessionId` is given and the outcome carries a native Session id, the
   * Session's latest native Session id. Succeeds with the record as written, or none when an outcome was
   * recorded already (nothing is overwritten; the Session's native id is still updated, as before). `journal`: the
   * Turn's last journal entries, stored in the same transaction (the entries and the outcome, or neither).
   */
  readonly settle: (
    turnId: string,
    outcome: TurnOutcome,
    sessionId?: string,
    journal?: SettleJournal
  ) => Effect.Effect<Option.Option<TurnRecord>, StoreFailed>
  /** `LeaseLost` only under a `JournalFence` (several nodes): a newer owner exists, nothing was stored. */
  readonly appendEvent: (turnId: string, event: Omit<StoredEvent, "receivedAtMs">) => Effect.Effect<void, StoreFailed | LeaseLost>
  /**
   * Appends several entries of one Turn: all are stored, or none. Appends of all Turns are group-committed
   * (`GroupCommit.ts`): success means the transaction holding them committed (the durability point).
   */
  readonly appendEvents: (
    turnId: string,
    events: ReadonlyArray<Omit<StoredEvent, "receivedAtMs">>,
    options?: AppendOptions
  ) => Effect.Effect<void, StoreFailed | LeaseLost>
  /** Journal entries after `afterSeq`, in order; only frames when `kind` is "frame". */
  readonly events: (turnId: string, afterSeq: number, kind?: JournalKind) => Effect.Effect<ReadonlyArray<StoredEvent>, StoreFailed>
  readonly lastSeq: (turnId: string) => Effect.Effect<number, StoreFailed>
  /** Persists an active input before it is sent (status `sending`). */
  readonly insertInput: (turnId: string, inputId: string, input: MessageInput) => Effect.Effect<void, StoreFailed>
  /** Records a non-accepting receipt fact (`written`, `not_sent`, `rejected`, `unknown`); never moves the cursor. */
  readonly setInputStatus: (
    turnId: string,
    inputId: string,
    status: Exclude<InputStatus, "accepted" | "sending">,
    errorCode?: string
  ) => Effect.Effect<void, StoreFailed>
  /**
   * `accepted`: advances the Turn's cursor by one, once per input (also when it is accepted twice at once);
   * succeeds with the input's position.
   */
  readonly acceptInput: (turnId: string, inputId: string) => Effect.Effect<number, StoreFailed>
  readonly inputs: (turnId: string) => Effect.Effect<ReadonlyArray<InputRecord>, StoreFailed>
  /** Records a request as pending; a repeated request id keeps the first record (succeeds with false). */
  readonly recordInteraction: (
    turnId: string,
    kind: InteractionKind,
    interactionId: string,
    request: unknown
  ) => Effect.Effect<boolean, StoreFailed>
  /**
   * Claims a pending interaction for an answer: `pending` → `answering` with the delivery id and answer.
   * Succeeds with false when it is not pending (already answered, withdrawn or abandoned).
   */
  readonly beginAnswer: (
    turnId: string,
    kind: InteractionKind,
    interactionId: string,
    deliveryId: string,
    answer: unknown
  ) => Effect.Effect<boolean, StoreFailed>
  readonly finishAnswer: (
    turnId: string,
    kind: InteractionKind,
    interactionId: string,
    outcome: AnswerOutcome,
    errorCode?: string
  ) => Effect.Effect<void, StoreFailed>
  /** permission_cancel: a pending permission request is withdrawn. */
  readonly withdrawInteraction: (turnId: string, kind: InteractionKind, interactionId: string) => Effect.Effect<void, StoreFailed>
  /** Marks every still-pending interaction of a Turn abandoned (the Turn ended first). */
  readonly abandonInteractions: (turnId: string) => Effect.Effect<void, StoreFailed>
  readonly interactions: (turnId: string) => Effect.Effect<ReadonlyArray<InteractionRecord>, StoreFailed>
  readonly getInteraction: (
    turnId: string,
    kind: InteractionKind,
    interactionId: string
  ) => Effect.Effect<Option.Option<InteractionRecord>, StoreFailed>
}>()("agentwire/core/dev/TurnStore") {}

/** What else an append records in its own transaction. */
export interface AppendOptions {
  /** The fact dispatched the Run itself: `dispatched_at_ms` set (first time only) with it (`markDispatched`). */
  readonly markDispatched?: boolean
  /** The first append of an attempt not begun yet: `beginAttempt`'s update in its transaction (issue 18). */
  readonly begin?: AttemptBegin | undefined
}

export interface TurnStoreOptions {
  /** The journal's group commit (default: up to 64 appends of any Turns per transaction). */
  readonly groupCommit?: GroupCommit.GroupCommitOptions
}

const make = (options: TurnStoreOptions) => Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const now = Clock.currentTimeMillis

  const get = (turnId: string) =>
    sql`SELECT * FROM turns WHERE turn_id = ${turnId}`.pipe(
      Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), readTurn)),
      storeFailed("get_turn")
    )

  const batch = yield* SqlBatch.current
  const journal = yield* GroupCommit.make(commitJournal(sql, batch), options.groupCommit)

  // Per fact (issue 18): the fence is read from the fiber in the same step as the write is handed over.
  const appendEvents: TurnStore["Service"]["appendEvents"] = (turnId, events, options) =>
    Arr.isReadonlyArrayNonEmpty(events)
      ? Effect.withFiber((fiber) => {
        const lease = fiber.getRef(JournalFence)
        return journal.submit({
          turnId,
          events,
          fence: lease === undefined ? undefined : { deviceId: lease.deviceId, generation: lease.generation },
          markDispatched: options?.markDispatched === true,
          begin: options?.begin
        })
      })
      : Effect.void
  const settle = settleTurn(sql, journal)

  return TurnStore.of({
    ...createTurn(sql, journal),
    get,
    listBySession: (sessionId) =>
      sql`SELECT * FROM turns WHERE session_id = ${sessionId} ORDER BY created_at_ms, turn_id`.pipe(
        Effect.map((rows) => rows.map(readTurn)),
        storeFailed("list_turns")
      ),
    unfinishedOf: (sessionId) =>
      sql`SELECT * FROM turns WHERE session_id = ${sessionId} AND status IN ('queued', 'running') LIMIT 1`.pipe(
        Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), readTurn)),
        storeFailed("list_turns")
      ),
    hasDispatched: (sessionId, exceptTurnId) =>
      (exceptTurnId === undefined
        ? sql`SELECT turn_id FROM turns WHERE session_id = ${sessionId} AND dispatched_at_ms IS NOT NULL LIMIT 1`
        : sql`SELECT turn_id FROM turns WHERE session_id = ${sessionId} AND dispatched_at_ms IS NOT NULL
            AND turn_id <> ${exceptTurnId} LIMIT 1`).pipe(
          Effect.map((rows) => rows.length > 0),
          storeFailed("list_turns")
        ),
    startChecks: startChecks(sql),
    listUnfinished: sql`SELECT * FROM turns WHERE status IN ('queued', 'running') ORDER BY created_at_ms, turn_id`.pipe(
      Effect.map((rows) => rows.map(readTurn)),
      storeFailed("list_unfinished_turns")
    ),
    beginAttempt: fn("TurnStore.beginAttempt")(function* (turnId, deviceId, owner) {
      // One statement (its own commit): the attempt it wrote; a Turn already terminal keeps its attempt.
      const begun = yield* sql`UPDATE turns SET attempt = attempt + 1, status = 'running', device_id = ${deviceId},
          owner_node = ${owner?.nodeId ?? null}, owner_generation = ${owner?.generation ?? null}
        WHERE turn_id = ${turnId} AND status IN ('queued', 'running')
        RETURNING attempt`.pipe(storeFailed("begin_attempt"))
      if (begun.length > 0) return toInt(begun[0]!.attempt)
      const rows = yield* sql`SELECT attempt FROM turns WHERE turn_id = ${turnId}`.pipe(storeFailed("begin_attempt"))
      return toInt(rows[0]?.attempt ?? 0)
    }),
    markDispatched: fn("TurnStore.markDispatched")(function* (turnId) {
      const at = yield* now
      yield* sql`UPDATE turns SET dispatched_at_ms = ${at} WHERE turn_id = ${turnId} AND dispatched_at_ms IS NULL`.pipe(
        storeFailed("mark_dispatched")
      )
    }),
    requeue: (turnId) =>
      sql`UPDATE turns SET status = 'queued' WHERE turn_id = ${turnId} AND status = 'running'`.pipe(
        Effect.asVoid,
        storeFailed("requeue_turn")
      ),
    complete: (turnId, outcome) => Effect.map(settle(turnId, outcome), Option.isSome),
    settle,
    appendEvent: (turnId, event) => appendEvents(turnId, [event]),
    appendEvents,
    events: (turnId, afterSeq, kind) =>
      (kind === undefined
        ? sql`SELECT * FROM turn_events WHERE turn_id = ${turnId} AND seq > ${afterSeq} ORDER BY seq`
        : sql`SELECT * FROM turn_events WHERE turn_id = ${turnId} AND seq > ${afterSeq} AND kind = ${kind} ORDER BY seq`).pipe(
          Effect.map((rows) =>
            rows.map((row): StoredEvent => ({
              seq: toInt(row.seq),
              attempt: toInt(row.attempt),
              kind: String(row.kind) as JournalKind,
              type: String(row.type),
              bodyJson: String(row.body_json),
              receivedAtMs: toInt(row.received_at_ms)
            }))
          ),
          storeFailed("list_events")
        ),
    lastSeq: (turnId) =>
      sql`SELECT MAX(seq) AS last_seq FROM turn_events WHERE turn_id = ${turnId}`.pipe(
        Effect.map((rows) => toIntOrUndefined(rows[0]?.last_seq) ?? 0),
        storeFailed("last_event")
      ),
    insertInput: fn("TurnStore.insertInput")(function* (turnId, inputId, input) {
      const at = yield* now
      yield* sql`INSERT INTO turn_inputs ${
        sql.insert({
          turn_id: turnId,
          input_id: inputId,
          input_json: JSON.stringify(input),
          status: "sending",
          error_code: null,
          position: null,
          created_at_ms: at,
          updated_at_ms: at
        })
      }`.pipe(storeFailed("insert_input"))
    }),
    setInputStatus: fn("TurnStore.setInputStatus")(function* (turnId, inputId, status, errorCode) {
      const at = yield* now
      // An accepted input stays accepted: a late or duplicate receipt never rewinds it.
      yield* sql`UPDATE turn_inputs SET status = ${status}, error_code = ${errorCode ?? null}, updated_at_ms = ${at}
        WHERE turn_id = ${turnId} AND input_id = ${inputId} AND status <> 'accepted'`.pipe(storeFailed("set_input_status"))
    }),
    acceptInput: fn("TurnStore.acceptInput")(function* (turnId, inputId) {
      const at = yield* now
      // The input's row first: its row lock orders concurrent acceptances of one input (the runner's
      // `InputAccepted` fact and the steer's own answer both accept it, on two PostgreSQL connections), and the
      // later one finds it accepted. Reading `status` and then `input_cursor` unlocked let an acceptance that
      // committed between the two reads count the input twice (position 2 for a Turn's first input).
      return yield* sql.withTransaction(Effect.gen(function* () {
        const claimed = yield* sql`UPDATE turn_inputs SET status = 'accepted', error_code = NULL, updated_at_ms = ${at}
          WHERE turn_id = ${turnId} AND input_id = ${inputId} AND status <> 'accepted' RETURNING input_id`
        if (claimed.length === 0) {
          const rows = yield* sql`SELECT position FROM turn_inputs WHERE turn_id = ${turnId} AND input_id = ${inputId}`
          if (rows[0] !== undefined) return toInt(rows[0].position)
        }
        // The increment is one statement (the Turn's row lock): two inputs accepted at once get two positions.
        const cursor = yield* sql`UPDATE turns SET input_cursor = input_cursor + 1 WHERE turn_id = ${turnId} RETURNING input_cursor`
        const position = cursor[0] === undefined ? 1 : toInt(cursor[0].input_cursor)
        if (claimed.length > 0) {
          yield* sql`UPDATE turn_inputs SET position = ${position} WHERE turn_id = ${turnId} AND input_id = ${inputId}`
        }
        return position
      })).pipe(storeFailed("accept_input"))
    }),
    inputs: (turnId) =>
      sql`SELECT * FROM turn_inputs WHERE turn_id = ${turnId} ORDER BY created_at_ms, input_id`.pipe(
        Effect.map((rows) => rows.map(readInput)),
        storeFailed("list_inputs")
      ),
    recordInteraction: fn("TurnStore.recordInteraction")(function* (turnId, kind, interactionId, request) {
      const at = yield* now
      const rows = yield* sql`INSERT INTO interactions
          (turn_id, interaction_id, kind, request_json, status, created_at_ms)
        VALUES (${turnId}, ${interactionId}, ${kind}, ${JSON.stringify(request)}, 'pending', ${at})
        ON CONFLICT (turn_id, kind, interaction_id) DO NOTHING
        RETURNING interaction_id`.pipe(storeFailed("record_interaction"))
      return rows.length > 0
    }),
    beginAnswer: fn("TurnStore.beginAnswer")(function* (turnId, kind, interactionId, deliveryId, answer) {
      const at = yield* now
      const rows = yield* sql`UPDATE interactions SET status = 'answering', delivery_id = ${deliveryId},
          answer_json = ${JSON.stringify(answer)}, answered_at_ms = ${at}
        WHERE turn_id = ${turnId} AND kind = ${kind} AND interaction_id = ${interactionId} AND status = 'pending'
        RETURNING interaction_id`.pipe(storeFailed("begin_answer"))
      return rows.length > 0
    }),
    finishAnswer: fn("TurnStore.finishAnswer")(function* (turnId, kind, interactionId, outcome, errorCode) {
      // not_sent is definite: nothing left Core, so the interaction can be answered again.
      const status = outcome === "not_sent" ? "pending" : "answered"
      yield* sql`UPDATE interactions SET status = ${status}, outcome = ${outcome}, outcome_error_code = ${errorCode ?? null}
        WHERE turn_id = ${turnId} AND kind = ${kind} AND interaction_id = ${interactionId} AND status = 'answering'`.pipe(
        storeFailed("finish_answer")
      )
    }),
    withdrawInteraction: (turnId, kind, interactionId) =>
      sql`UPDATE interactions SET status = 'withdrawn'
        WHERE turn_id = ${turnId} AND kind = ${kind} AND interaction_id = ${interactionId} AND status = 'pending'`.pipe(
        Effect.asVoid,
        storeFailed("withdraw_interaction")
      ),
    abandonInteractions: (turnId) =>
      sql`UPDATE interactions SET status = 'abandoned' WHERE turn_id = ${turnId} AND status = 'pending'`.pipe(
        Effect.asVoid,
        storeFailed("abandon_interactions")
      ),
    interactions: (turnId) =>
      sql`SELECT * FROM interactions WHERE turn_id = ${turnId} ORDER BY created_at_ms, interaction_id`.pipe(
        Effect.map((rows) => rows.map(readInteraction)),
        storeFailed("list_interactions")
      ),
    getInteraction: (turnId, kind, interactionId) =>
      sql`SELECT * FROM interactions WHERE turn_id = ${turnId} AND kind = ${kind} AND interaction_id = ${interactionId}`.pipe(
        Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), readInteraction)),
        storeFailed("get_interaction")
      )
  })
})

export const layerWith = (options: TurnStoreOptions): Layer.Layer<TurnStore, never, SqlClient.SqlClient> =>
  Layer.effect(TurnStore, make(options))

export const layer: Layer.Layer<TurnStore, never, SqlClient.SqlClient> = layerWith({})
