/**
 * The outcome a Turn's stored journal proves once its observer is gone (protocol "Failures, retries and
 * cleanup": Core reconciles from confirmed facts). The facts of the latest delivery attempt are replayed
 * through the delivery layer's projection (`Outcome.project`) with one more fact,
 * `RunObservationEnded{reason}`: `core_restarted` at start-up (`Recovery.ts`), `journal_unavailable` when a
 * Turn's runner failed (`TurnRunner.ts`). What each stored journal settles on is the table in `Recovery.ts`.
 */
import { Effect, Option } from "effect"
import * as Outcome from "../Outcome.js"
import type { StoreFailed } from "./StoreErrors.js"
import { fromEntry } from "./TurnJournal.js"
import type { TurnStore } from "./TurnStore.js"

/** What the journal proves: an outcome, or "requeued" for a Turn left unclaimed (nothing was executed). */
export type JournalVerdict = Outcome.TurnOutcome | "requeued"

/**
 * Projects the stored facts of the Turn's latest attempt. Still pending after them: no attempt began →
 * `delivery_failed` (definite, nothing sent); an attempt began with nothing proven → `delivery_unknown`.
 */
export const journalVerdict = (
  turns: TurnStore["Service"],
  turn: { readonly turnId: string; readonly runId: string; readonly attempt: number },
  reason: Outcome.ObservationEnd
): Effect.Effect<JournalVerdict, StoreFailed> =>
  Effect.map(turns.events(turn.turnId, 0), (entries) => {
    const facts = entries.filter((e) => e.attempt === turn.attempt).flatMap((e) => Option.toArray(fromEntry(e)))
    const resolution = Outcome.project(turn.runId, [...facts, { _tag: "RunObservationEnded", reason }])
    if (resolution._tag === "Unclaimed") return "requeued"
    if (resolution._tag === "Settled") return resolution.outcome
    return turn.attempt === 0
      ? { status: "failed", error_code: "delivery_failed", detail: reason, observation: reason }
      : { status: "failed", error_code: "delivery_unknown", observation: reason }
  })
