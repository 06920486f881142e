/**
 * Errors of the workspace families (protocol "Workspace operations"; reference part 2 §7), named by what
 * they prove (style guide §6):
 *
 * - `WorkspaceRefused`: Core refused locally before anything was sent (invalid request, per-connection
 *   capacity, a send or waiter that could not be queued). Definite: the Runtime saw nothing.
 * - `ReadRejected` / `WriteRejected` / `ExportRejected`: the Runtime's exact refusal. Definite: nothing was read,
 *   installed or exported (a write refusal releases the mutation owner).
 * - `WriteFailed`: the transfer stopped before its `commit` was sent, so the installer never ran (reference
 *   §7.4: an incomplete or expired transfer never reaches the installer). Definite: the file is unchanged.
 * - `ExportFailed`: the Runtime ended the stream with `failed` (definite; nothing more will come).
 * - `ReadUnknown` / `WriteUnknown` / `ExportUnknown`: dispatched without proof (no receipt within the budget,
 *   the connection ended, an invalid receipt, or the Runtime's own `…_unconfirmed`). Never retried or
 *   replayed; a write keeps its uncertainty (the mutation owner stays reserved).
 *
 * No error carries a path, file bytes or peer text: only codes, stages and sizes.
 */
import { Schema } from "effect"
import { ExportErrorCode, ReadErrorCode, WriteErrorCode } from "../../proto/ErrorCodes.js"

export const WorkspaceFamily = Schema.Literals(["read", "write", "export"])
export type WorkspaceFamily = typeof WorkspaceFamily.Type

/** Why Core refused before sending. */
export const RefusalReason = Schema.Literals([
  "invalid_request", // the request breaks the family's validator or bounds
  "capacity", // the connection already has 4 reads / 1 write / 1 export in flight
  "not_sent", // the send queue refused the envelope (full, closed, too large)
  "waiter_rejected" // the reply waiter could not be registered (duplicate operation id, connection closed)
])
export type RefusalReason = typeof RefusalReason.Type

export class WorkspaceRefused extends Schema.TaggedError<WorkspaceRefused>()("WorkspaceRefused", {
  family: WorkspaceFamily,
  reason: RefusalReason,
  /** A short fixed description (a validator issue name), never peer data. */
  detail: Schema.optionalKey(Schema.String)
}) {
  override get message() {
    return `workspace ${this.family} refused before sending (${this.reason}${this.detail === undefined ? "" : `: ${this.detail}`})`
  }
}

/** Why an outcome stays unknown. */
export const UnknownReason = Schema.Literals([
  "budget_exceeded", // no (further) receipt within the family's budget: 17 s / 195 s / 180 s
  "connection_lost", // the connection ended (or was replaced) while waiting
  "receipt_overflow", // this waiter's bounded buffer overflowed
  "invalid_receipt", // a receipt broke the family's validity rule or the exact step order
  "runtime_unconfirmed" // the Runtime answered `unknown` (read_unconfirmed / write_unconfirmed)
])
export type UnknownReason = typeof UnknownReason.Type

export class ReadRejected extends Schema.TaggedError<ReadRejected>()("ReadRejected", { code: ReadErrorCode }) {
  override get message() {
    return `workspace read rejected (${this.code})`
  }
}

export class ReadUnknown extends Schema.TaggedError<ReadUnknown>()("ReadUnknown", { reason: UnknownReason }) {
  override get message() {
    return `workspace read outcome unknown (${this.reason})`
  }
}

export const WriteStage = Schema.Literals(["begin", "chunk", "commit"])
export type WriteStage = typeof WriteStage.Type

export class WriteRejected extends Schema.TaggedError<WriteRejected>()("WriteRejected", {
  code: WriteErrorCode,
  stage: WriteStage,
  reason: Schema.optionalKey(Schema.Literals(["destination_directory", "unsafe_destination"]))
}) {
  override get message() {
    return `workspace write rejected at ${this.stage} (${this.code}${this.reason === undefined ? "" : `/${this.reason}`})`
  }
}

export class WriteFailed extends Schema.TaggedError<WriteFailed>()("WriteFailed", {
  /** The step whose receipt was missing: the commit was never sent, so nothing was installed. */
  stage: Schema.Literals(["begin", "chunk"]),
  /** An unknown-reason name for the missing receipt, or `commit_not_sent` when Core itself did not commit. */
  reason: Schema.Literals([...UnknownReason.literals, "commit_not_sent"])
}) {
  override get message() {
    return `workspace write failed before commit at ${this.stage} (${this.reason}); nothing was installed`
  }
}

export class WriteUnknown extends Schema.TaggedError<WriteUnknown>()("WriteUnknown", {
  reason: UnknownReason
}) {
  override get message() {
    return `workspace write outcome unknown after commit (${this.reason}); nothing is replayed`
  }
}

export class ExportRejected extends Schema.TaggedError<ExportRejected>()("ExportRejected", { code: ExportErrorCode }) {
  override get message() {
    return `workspace export rejected (${this.code})`
  }
}

export class ExportFailed extends Schema.TaggedError<ExportFailed>()("ExportFailed", {
  code: ExportErrorCode,
  /** Bytes received before the failure. */
  offset: Schema.Number
}) {
  override get message() {
    return `workspace export failed at offset ${this.offset} (${this.code})`
  }
}

export class ExportUnknown extends Schema.TaggedError<ExportUnknown>()("ExportUnknown", {
  reason: UnknownReason,
  offset: Schema.Number
}) {
  override get message() {
    return `workspace export stopped at offset ${this.offset} without a final receipt (${this.reason})`
  }
}

export type ReadError = WorkspaceRefused | ReadRejected | ReadUnknown
export type WriteError = WorkspaceRefused | WriteRejected | WriteFailed | WriteUnknown
export type ExportError = WorkspaceRefused | ExportRejected | ExportFailed | ExportUnknown

/** The read-only preparation was sent but no `ready` (nor a definite refusal) arrived: the Runtime may hold it. */
export class ReadOnlyPreparationUnknown extends Schema.TaggedError<ReadOnlyPreparationUnknown>()("ReadOnlyPreparationUnknown", {
  reason: Schema.Literals(["budget_exceeded", "connection_lost", "invalid_status"])
}) {
  override get message() {
    return `read-only preparation outcome unknown (${this.reason})`
  }
}
