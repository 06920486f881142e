/**
 * Errors of Core's `runtime_prepare` driver (reference part 2 §6), named by what they prove (style guide §6):
 *
 * - `PrepareRefused`: Core refused locally before anything was sent (invalid header, the connection's one
 *   transfer slot taken, a send or waiter that could not be queued). Definite: the Runtime saw nothing.
 * - `PrepareRejected`: the Runtime's exact refusal at a step. Definite: nothing was installed or run.
 * - `PrepareFailed`: definite without installation — the Runtime answered `failed` (a command's `exit_code`
 *   when it has one), or the transfer stopped before its `commit` was sent (the Runtime never installs an
 *   incomplete transfer).
 * - `PrepareUnknown`: the commit was dispatched without proof (no receipt within 195 s, the connection ended, or
 *   the Runtime's `runtime_preparation_unconfirmed`), or a receipt at any step was invalid (reference: Core then
 *   treats the transfer as unknown). Never retried or replayed on a later connection.
 *
 * No error carries file bytes, paths or peer text: only codes, stages and numbers.
 */
import { Schema } from "effect"
import { RuntimePrepareErrorCode } from "../../proto/ErrorCodes.js"

export const PrepareStage = Schema.Literals(["begin", "chunk", "commit"])
export type PrepareStage = typeof PrepareStage.Type

export class PrepareRefused extends Schema.TaggedError<PrepareRefused>()("PrepareRefused", {
  reason: Schema.Literals(["invalid_request", "capacity", "not_sent", "waiter_rejected"]),
  /** A short fixed description (a validator issue name), never peer data. */
  detail: Schema.optionalKey(Schema.String)
}) {
  override get message() {
    return `runtime_prepare refused before sending (${this.reason}${this.detail === undefined ? "" : `: ${this.detail}`})`
  }
}

export class PrepareRejected extends Schema.TaggedError<PrepareRejected>()("PrepareRejected", {
  code: RuntimePrepareErrorCode,
  stage: PrepareStage
}) {
  override get message() {
    return `runtime_prepare rejected at ${this.stage} (${this.code})`
  }
}

export class PrepareFailed extends Schema.TaggedError<PrepareFailed>()("PrepareFailed", {
  stage: PrepareStage,
  reason: Schema.Literals(["runtime_failed", "connection_lost", "budget_exceeded", "receipt_overflow", "commit_not_sent"]),
  exit_code: Schema.optionalKey(Schema.Number)
}) {
  override get message() {
    return `runtime_prepare failed at ${this.stage} (${this.reason}${this.exit_code === undefined ? "" : `, exit ${this.exit_code}`})`
  }
}

export class PrepareUnknown extends Schema.TaggedError<PrepareUnknown>()("PrepareUnknown", {
  stage: PrepareStage,
  reason: Schema.Literals(["budget_exceeded", "connection_lost", "receipt_overflow", "invalid_receipt", "runtime_unconfirmed"])
}) {
  override get message() {
    return `runtime_prepare outcome unknown at ${this.stage} (${this.reason})`
  }
}

export type PrepareError = PrepareRefused | PrepareRejected | PrepareFailed | PrepareUnknown
