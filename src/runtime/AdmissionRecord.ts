/**
 * One admission record of a connection and how its `preparation_status` frames are sent (protocol "Preparation
 * and execution order"): every resource status increments the record's revision under its lock and is sent in
 * revision order; a `rejected` reply has revision 0, carries `operation` + `error_code` and never changes the
 * record. Each status send has its own 5 s budget.
 */
import { Effect, Semaphore } from "effect"
import type { PreparationErrorCode } from "../proto/ErrorCodes.js"
import type { PromptRequestPayload } from "../proto/Execution.js"
import { type AdmissionHandle, type PreparationRequestId, printable, type RunId } from "../proto/Ids.js"
import { StatusSendBudget } from "../proto/Limits.js"
import type { ControlOperation, PreparationStatusPayload } from "../proto/Preparation.js"
import type { ExecutorEntry } from "./Executors.js"
import type { Harness, HarnessDeclaration } from "./harness/Harness.js"
import { type OutboundShape, type SendOutcome, withTrace } from "./Outbound.js"
import * as RuntimeMetrics from "./RuntimeMetrics.js"

export type AdmissionState = "preparing" | "ready" | "starting" | "started" | "released" | "expired" | "failed"

export const terminal: ReadonlySet<AdmissionState> = new Set(["started", "released", "expired", "failed"])

export interface AdmissionRecord {
  readonly requestId: PreparationRequestId
  readonly handle: AdmissionHandle
  readonly fingerprint: string
  readonly readOnly: boolean
  readonly snapshot: HarnessDeclaration
  readonly harness: Harness | undefined
  readonly entry: ExecutorEntry
  readonly configuration: PromptRequestPayload
  readonly reused: boolean
  readonly trace: string | undefined
  readonly lock: Semaphore.Semaphore
  state: AdmissionState
  revision: number
  expiresAt: number | undefined
  runId: RunId | undefined
  startFingerprint: string | undefined
  last: PreparationStatusPayload | undefined
}

/** What a new record is made from. */
export type NewRecord = Pick<
  AdmissionRecord,
  "requestId" | "fingerprint" | "readOnly" | "snapshot" | "harness" | "entry" | "configuration" | "reused" | "trace"
>

/** A fresh record in `preparing`, revision 0, holding `handle`. */
export const makeRecord = (fields: NewRecord, handle: AdmissionHandle): AdmissionRecord => ({
  ...fields,
  handle,
  lock: Semaphore.makeUnsafe(1),
  state: "preparing",
  revision: 0,
  expiresAt: undefined,
  runId: undefined,
  startFingerprint: undefined,
  last: undefined
})

/**
 * Makes room for one more record in a table bounded at `max`: `room` when there already is, `pruned` after
 * deleting terminal records (oldest first) until there is, `full` when only live records remain (none deleted
 * beyond what was pruned; a live record is never displaced).
 */
/** Status state: a started record is `running` while its Run is active, then `finished` (no Effect: issue 18). */
export const statusState = (record: AdmissionRecord, active: ReadonlySet<string>): string =>
  record.state !== "started" || record.runId === undefined
    ? record.state
    : active.has(record.runId) ? "running" : "finished"

export const makeRoom = (records: Map<PreparationRequestId, AdmissionRecord>, max: number): "room" | "pruned" | "full" => {
  if (records.size < max) return "room"
  for (const [id, record] of records) {
    if (!terminal.has(record.state)) continue
    records.delete(id)
    if (records.size < max) return "pruned"
  }
  return "full"
}

/** The status sends of one connection's admissions; `changed` runs before each resource status goes out. */
export const statusSender = (outbound: OutboundShape, changed: Effect.Effect<void>) => {
  const reject = (
    operation: ControlOperation,
    requestId: PreparationRequestId,
    code: PreparationErrorCode,
    trace: string | undefined,
    extra: { readonly handle?: AdmissionHandle; readonly executor_id?: ExecutorEntry["id"] } = {}
  ) =>
    Effect.logInfo("admission rejected").pipe(
      Effect.annotateLogs({ request_id: printable(requestId), operation, error_code: code }),
      Effect.andThen(RuntimeMetrics.admission("rejected", code)),
      Effect.andThen(outbound.sendWithin(
        withTrace({
          type: "preparation_status",
          id: requestId,
          payload: { ...extra, revision: 0, state: "rejected", operation, error_code: code }
        }, trace),
        StatusSendBudget
      ))
    )

  /** Moves a record to `state` with the next revision and sends it. Call under the record's lock. */
  const publish = (
    record: AdmissionRecord,
    state: AdmissionState,
    extra: { readonly error_code?: PreparationErrorCode; readonly trace?: string | undefined } = {}
  ): Effect.Effect<SendOutcome> =>
    Effect.suspend(() => {
      record.state = state
      record.revision += 1
      const status: PreparationStatusPayload = {
        executor_id: record.entry.id,
        ...(record.reused ? { reused: true } : {}),
        handle: record.handle,
        revision: record.revision,
        state,
        ...(record.expiresAt === undefined ? {} : { expires_at: record.expiresAt }),
        ...(record.runId === undefined ? {} : { run_id: record.runId }),
        ...(extra.error_code === undefined ? {} : { error_code: extra.error_code })
      }
      record.last = status
      // Operator lines for the states that decide something (ready = admitted); the transient ones at debug.
      const line = state === "preparing" || state === "starting" ? Effect.logDebug : Effect.logInfo
      return Effect.andThen(
        Effect.andThen(
          Effect.andThen(changed, RuntimeMetrics.admission(state, extra.error_code)),
          line(`admission ${state === "ready" ? "admitted (ready)" : state}`).pipe(Effect.annotateLogs({
            request_id: printable(record.requestId),
            handle: record.handle,
            kind: record.entry.kind,
            ...(record.runId === undefined ? {} : { run_id: record.runId }),
            ...(extra.error_code === undefined ? {} : { error_code: extra.error_code })
          }))
        ),
        outbound.sendWithin(
          withTrace({ type: "preparation_status", id: record.requestId, payload: status }, extra.trace ?? record.trace),
          StatusSendBudget
        )
      )
    })

  const republish = (record: AdmissionRecord, trace: string | undefined) =>
    record.last === undefined
      ? Effect.void
      : outbound.sendWithin(
        withTrace({ type: "preparation_status", id: record.requestId, payload: record.last }, trace),
        StatusSendBudget
      ).pipe(Effect.asVoid)

  return { reject, publish, republish }
}
