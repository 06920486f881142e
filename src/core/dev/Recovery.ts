/**
 * Start-up reconciliation (protocol "Failures, retries and cleanup": Core keeps the durable truth and
 * reconciles from confirmed facts). A Turn a previous process left unfinished lost its observer: this process
 * holds no subscription for its Run, and a reconnection never replays. Its stored journal (the facts of its
 * latest delivery attempt) is replayed through the delivery layer's projection (`Outcome.project`) with one
 * more fact, `RunObservationEnded{reason: "core_restarted"}`, so restart and live delivery share one rule:
 *
 * | stored facts                                                        | projected outcome                                   |
 * |---------------------------------------------------------------------|-----------------------------------------------------|
 * | the Run was dispatched and Run frames were observed                  | failed, `event_stream_incomplete`, `core_restarted` |
 * | dispatched, nothing observed afterwards                              | failed, `delivery_unknown`, `core_restarted`        |
 * | `Dispatching` for start / prompt_request, nothing after it           | failed, `delivery_unknown`, `core_restarted`        |
 * | only the preparation was (or may have been) dispatched               | failed, `delivery_unknown` / `preparation_interrupted` |
 * | `done` (or a cancellation receipt) was already stored               | what it proves (completed, cancelled, …)             |
 * | a `NotDispatched` for the Turn's first request                       | failed, `delivery_failed` (definite: nothing sent)  |
 * | a delivery attempt began and nothing more was stored                 | failed, `delivery_unknown`, `core_restarted`        |
 * | no delivery attempt began                                            | failed, `delivery_failed` (definite: nothing sent)  |
 *
 * A definite `delivery_failed` needs proof: a stored `NotDispatched`, or no attempt at all. An attempt that
 * began with nothing stored may have crashed between a send and its journal write (a journal written before
 * the durable `Dispatching` boundary existed, or a store that failed), so it is unknown, never failed.
 * Never invented as completed or as an engine failure; the stored events stay as they are. A Turn the
 * previous process left unclaimed (a `preparation_capacity` refusal) stays queued for another attempt.
 * Inputs still waiting for a receipt become `unknown` (the cursor does not move); answers still waiting for
 * a receipt become `unknown`; open interactions are abandoned with the Turn.
 *
 * Several nodes on one database (docs/multi-node.md): when owner leases are in use, a Turn whose device
 * holds a live lease of another node is that node's, and is left alone, and so is a Turn no attempt bound to
 * a device yet (it is queued in the memory of the node that accepted it); only Turns of devices whose lease
 * expired, was this node's (a previous process of it), or never existed are reconciled.
 */
import { Clock, Effect, Option } from "effect"
import { SqlClient } from "effect/sql"
import { Ids } from "../../proto/index.js"
import * as Outcome from "../Outcome.js"
import { McpSecrets, sessionBearers } from "./McpSecrets.js"
import { executionSpec, sealedBearerIndexes, type SessionConfiguration } from "./SessionConfig.js"
import { SessionStore } from "./SessionStore.js"
import type { TurnPlan } from "./TurnRunner.js"
import type { StoreFailed } from "./StoreErrors.js"
import { storeFailed } from "./StoreErrors.js"
import { OwnerLeases } from "./pg/OwnerLeases.js"
import { journalVerdict } from "./JournalOutcome.js"
import { type TurnRecord, TurnStore } from "./TurnStore.js"

export interface RecoveredTurn {
  readonly turnId: string
  /** `requeued` when the Turn stays unclaimed for another attempt. */
  readonly outcome: Outcome.TurnOutcome | "requeued"
}

/** Reconciles every unfinished Turn as described above; succeeds with what it recorded. */
export const recoverUnfinishedTurns: Effect.Effect<
  ReadonlyArray<RecoveredTurn>,
  StoreFailed,
  TurnStore | SqlClient.SqlClient
> = Effect.gen(function* () {
  const turns = yield* TurnStore
  const leases = yield* Effect.serviceOption(OwnerLeases)
  const now = yield* Clock.currentTimeMillis
  /**
   * Whether the Turn may belong to a live node: another node holds a live lease on its device, or (with
   * leases) no attempt bound it to a device yet — a queued Turn is in the memory of the node that took it.
   */
  const ownedElsewhere = (deviceId: string | undefined) =>
    Option.isNone(leases)
      ? Effect.succeed(false)
      : deviceId === undefined
      ? Effect.succeed(true)
      : Effect.map(leases.value.get(deviceId), (lease) =>
        Option.isSome(lease) && lease.value.expiresAtMs > now && lease.value.nodeId !== leases.value.node.nodeId)
  const unfinished = yield* turns.listUnfinished
  const recovered: Array<RecoveredTurn> = []
  for (const turn of unfinished) {
    if (yield* ownedElsewhere(turn.deviceId)) continue
    const outcome = yield* reconcileTurn(turn, "core_restarted")
    if (outcome !== undefined) recovered.push({ turnId: turn.turnId, outcome })
  }
  if (recovered.length > 0) {
    yield* Effect.logWarning("reconciled Turns left unfinished by a previous process").pipe(
      Effect.annotateLogs({ turns: recovered.length })
    )
  }
  return recovered
})

/**
 * Reconciles one unfinished Turn whose observer is gone, by the rules above with `reason` as the observation
 * end: open inputs and answers become `unknown`, then the outcome the journal proves is written (or the Turn
 * is queued again when it was left unclaimed). Succeeds with what it recorded; undefined when the Turn was
 * already terminal (another writer settled it first).
 */
export const reconcileTurn = (
  turn: { readonly turnId: string; readonly runId: string; readonly attempt: number },
  reason: Outcome.ObservationEnd
): Effect.Effect<Outcome.TurnOutcome | "requeued" | undefined, StoreFailed, TurnStore | SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const turns = yield* TurnStore
    const sql = yield* SqlClient.SqlClient
    const verdict = yield* journalVerdict(turns, turn, reason)
    yield* sql`UPDATE turn_inputs SET status = 'unknown' WHERE turn_id = ${turn.turnId} AND status IN ('sending', 'written')`.pipe(
      storeFailed("recover_inputs")
    )
    yield* sql`UPDATE interactions SET status = 'answered', outcome = 'unknown'
      WHERE turn_id = ${turn.turnId} AND status = 'answering'`.pipe(storeFailed("recover_interactions"))
    if (verdict === "requeued") {
      yield* sql`UPDATE turns SET status = 'queued' WHERE turn_id = ${turn.turnId}`.pipe(storeFailed("requeue_turn"))
      return "requeued" as const
    }
    return (yield* turns.complete(turn.turnId, verdict)) ? verdict : undefined
  })

/**
 * The plan of a queued Turn whose Session still exists, for its runner (on the Turn's device, else the
 * Session's bound device); none when it has neither.
 */
export const planFor = (turn: TurnRecord): Effect.Effect<Option.Option<TurnPlan>, never, TurnStore | SessionStore> =>
  Effect.gen(function* () {
    const turns = yield* TurnStore
    const sessions = yield* SessionStore
    const secrets = yield* Effect.serviceOption(McpSecrets)
    const session = yield* Effect.option(sessions.get(turn.sessionId)).pipe(Effect.map(Option.flatten))
    if (Option.isNone(session)) return Option.none()
    const deviceId = turn.deviceId ?? session.value.deviceId
    if (deviceId === undefined) return Option.none()
    const started = yield* Effect.orElseSucceed(turns.hasDispatched(turn.sessionId, turn.turnId), () => false)
    const configuration = session.value.configuration as SessionConfiguration
    // A Session whose bearer secrets cannot be decrypted resumes nothing now (its Turn stays queued).
    const bearers = yield* Effect.result(sessionBearers(secrets, turn.sessionId, sealedBearerIndexes(configuration)))
    if (bearers._tag === "Failure") {
      yield* Effect.logError(bearers.failure.message).pipe(Effect.annotateLogs({ turn_id: turn.turnId, reason: bearers.failure.reason }))
      return Option.none()
    }
    return Option.some({
      turnId: turn.turnId,
      sessionId: turn.sessionId,
      runId: Ids.unsafeMake.runId(turn.runId),
      deviceId,
      spec: executionSpec({
        sessionId: turn.sessionId,
        agentKind: session.value.agentKind,
        configuration,
        hasStartedTurn: started,
        nativeSessionId: session.value.nativeSessionId,
        environment: session.value.environment,
        mcpBearers: bearers.success
      }),
      input: turn.input
    })
  })

/**
 * The queued Turns a previous process left (never dispatched, or unclaimed) whose Session still exists, as
 * plans for their runners. A store that cannot be read resumes nothing now (the Turns stay queued).
 */
export const resumableTurns: Effect.Effect<ReadonlyArray<TurnPlan>, never, TurnStore | SessionStore> = Effect.gen(function* () {
  const turns = yield* TurnStore
  const plans: Array<TurnPlan> = []
  for (const turn of yield* Effect.orElseSucceed(turns.listUnfinished, () => [])) {
    if (turn.status !== "queued" || turn.deviceId === undefined) continue
    const plan = yield* planFor(turn)
    if (Option.isSome(plan)) plans.push(plan.value)
  }
  return plans
})
