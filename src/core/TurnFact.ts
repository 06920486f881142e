/**
 * The Turn fact journal (protocol "Failures, retries and cleanup"): one thing a Turn observed or did, in
 * order, as plain data. The dev Core persists facts as they arrive (`TurnJournal`) and replays them through
 * the same projection after a restart (`TurnProjection.project`).
 *
 * Facts carry what the projection needs as typed values (an admission refusal carries its error): nothing is
 * rebuilt later by parsing strings.
 */
import { Schema } from "effect"
import { ErrorCodes, Interaction, Messages, Preparation } from "../proto/index.js"
import { type RunEvent, runEventTypes } from "./RunEvent.js"
import {
  BindingInvalid,
  CapabilitiesUndeclared,
  CapabilityUnsupported,
  ConfigurationRejected,
  HarnessUnavailable,
  InputUnknownReason,
  ObservationEnd
} from "./TurnErrors.js"

/** Every refusal of the final admission check, as stored in an `AdmissionRejected` fact. */
export const AdmissionRefusal = Schema.Union([
  CapabilitiesUndeclared,
  HarnessUnavailable,
  BindingInvalid,
  CapabilityUnsupported,
  ConfigurationRejected
])
export type AdmissionRefusal = typeof AdmissionRefusal.Type

/** Requests whose dispatch a Turn records. */
export const DispatchType = Schema.Literals([
  "execution_prepare",
  "execution_start",
  "execution_release",
  "prompt_request",
  "prompt_cancel",
  "prompt_steer"
])
export type DispatchType = typeof DispatchType.Type

/** The wire schema of a Run event (persisted facts decode with it). */
export const RunEventSchema = Schema.Union(runEventTypes.map((t) => Messages.runtimeToCore[t].schema)) as unknown as Schema.Codec<
  RunEvent,
  unknown
>

/**
 * One thing a Turn observed or did, in order. Facts are plain data: the dev Core persists them and replays
 * them through `project` after a restart (appending `RunObservationEnded{reason: "core_restarted"}` for a
 * Turn that was in flight).
 */
export const TurnFact = Schema.Union([
  /** The final admission check refused the Turn (nothing sent). `error` is the refusal itself. */
  Schema.TaggedStruct("AdmissionRejected", {
    rejection: Schema.Literals([
      "capabilities_undeclared",
      "harness_unavailable",
      "binding_invalid",
      "capability_unsupported",
      "configuration_rejected"
    ]),
    detail: Schema.String,
    error: AdmissionRefusal
  }),
  /**
   * Core is about to hand a Run-carrying request (`execution_prepare`, `execution_start`, `prompt_request`)
   * to the send queue. Journaled before the send when the boundary is durable: alone (no `Dispatched` /
   * `NotDispatched` after it) it means the request may have left.
   */
  Schema.TaggedStruct("Dispatching", { type: DispatchType }),
  /** The envelope entered the send queue (proves nothing more). */
  Schema.TaggedStruct("Dispatched", {
    type: DispatchType,
    delivery_id: Schema.optionalKey(Schema.String),
    input_id: Schema.optionalKey(Schema.String)
  }),
  /** The envelope did not enter the send queue, or its waiter could not be registered. Definite: nothing sent. */
  Schema.TaggedStruct("NotDispatched", {
    type: DispatchType,
    reason: Schema.Literals([
      "queue_full",
      "connection_closed",
      "invalid_message",
      "frame_too_large",
      "subscription_rejected",
      "journal_unavailable" // the durable boundary was refused: the journal could not record `Dispatching`
    ]),
    delivery_id: Schema.optionalKey(Schema.String),
    input_id: Schema.optionalKey(Schema.String)
  }),
  /** A preparation status (already revision-filtered by the session; the reducer applies the rule again). */
  Schema.TaggedStruct("PreparationStatus", { status: Preparation.PreparationStatusPayload }),
  /** The preparation status subscription ended without a terminal state. */
  Schema.TaggedStruct("PreparationObservationEnded", { reason: ObservationEnd }),
  /** A Run event as received. */
  Schema.TaggedStruct("RunEvent", { event: RunEventSchema }),
  /** The Run subscription ended without `done` (or Core restarted while the Turn was in flight). */
  Schema.TaggedStruct("RunObservationEnded", { reason: ObservationEnd }),
  /** The cancellation receipt matched by Run id and delivery id. */
  Schema.TaggedStruct("CancelReceipt", {
    delivery_id: Schema.String,
    ack: Interaction.InteractionDecisionAckPayload
  }),
  /** No cancellation receipt: 15 s passed or the connection ended. */
  Schema.TaggedStruct("CancelUnconfirmed", {
    delivery_id: Schema.String,
    reason: Schema.Literals(["no_receipt", "connection_lost", "receipt_overflow"])
  }),
  Schema.TaggedStruct("InputWritten", { input_id: Schema.String }),
  Schema.TaggedStruct("InputAccepted", { input_id: Schema.String }),
  Schema.TaggedStruct("InputRejected", { input_id: Schema.String, code: ErrorCodes.SteerErrorCode }),
  Schema.TaggedStruct("InputUnknown", { input_id: Schema.String, reason: InputUnknownReason }),
  /** Core decided not to start the prepared admission (before execution_start was sent). */
  Schema.TaggedStruct("Abandoned", {})
])
export type TurnFact = typeof TurnFact.Type
