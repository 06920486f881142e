/**
 * The reply families a device session delivers through its one Correlator, and the key each is correlated
 * by (reference §1.6 "Correlation"). A reply reaches only the waiter registered for its family and key.
 */
import type { Ids, Messages } from "../proto/index.js"

/** Reply families delivered through the one Correlator, with the key each is correlated by. */
export interface ReplyFamilies {
  /** key: delivery_id (the envelope id must also be the expected interaction or Run id; checked by the caller). */
  readonly interaction_decision_ack: Messages.MessageOfType<"interaction_decision_ack">
  /** key: `${runId}\u0000${input_id}`; several receipts per input (written, then accepted). */
  readonly prompt_steer_ack: Messages.MessageOfType<"prompt_steer_ack">
  /** key: transfer id; one receipt per step. */
  readonly runtime_prepare_result: Messages.MessageOfType<"runtime_prepare_result">
  /** key: operation id. */
  readonly workspace_read_result: Messages.MessageOfType<"workspace_read_result">
  readonly workspace_write_result: Messages.MessageOfType<"workspace_write_result">
  readonly workspace_export_result: Messages.MessageOfType<"workspace_export_result">
  readonly environment_quiesced: Messages.MessageOfType<"environment_quiesced">
  readonly environment_resumed: Messages.MessageOfType<"environment_resumed">
}
export type ReplyFamily = keyof ReplyFamilies

/** The correlation key of a steer receipt. */
export const steerAckKey = (runId: Ids.RunId, inputId: string): string => `${runId}\u0000${inputId}`

/** Reply families correlated by the envelope id. */
export type ReplyKeyedById = "runtime_prepare_result" | "workspace_read_result" | "workspace_write_result" |
  "workspace_export_result" | "environment_quiesced" | "environment_resumed"
export const replyTypesKeyedById: ReadonlySet<string> = new Set<ReplyKeyedById>([
  "runtime_prepare_result",
  "workspace_read_result",
  "workspace_write_result",
  "workspace_export_result",
  "environment_quiesced",
  "environment_resumed"
])
