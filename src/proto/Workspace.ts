/**
 * Workspace operations (protocol "Workspace operations", reference part 2 §7): bounded reads (bytes or one
 * directory level), acknowledged writes of a complete body, and pull-based export of the workspace outputs.
 * A successful read requires complete bytes or explicit truncation and an acknowledged native close; an
 * interrupted or ambiguous read stays unknown. An exact write commit or rejection releases the mutation
 * owner; a missing receipt keeps the uncertainty.
 */
import { Option, Result, Schema } from "effect"
import { fitsUtf8Bytes, isMaxBytes, isNonBlank, NonNegativeInt } from "./Checks.js"
import { ExportErrorCode, ReadErrorCode, WriteErrorCode } from "./ErrorCodes.js"
import { AdmissionHandle, RunId } from "./Ids.js"
import { MaxCorrelationIdBytes, MaxDirectoryEntries, MaxEntryNameBytes, MaxReadResultBytes, MaxTransferBytes } from "./Limits.js"
import { decodeChunkData, validateRelativePath } from "./Transfer.js"

// ---------------------------------------------------------------------------------------------- read

export const ReadOperation = Schema.Literals(["", "directory"])
export type ReadOperation = typeof ReadOperation.Type

/** Read from a preparation handle or an active Run on this connection (exactly one of the two). */
export const WorkspaceReadPayload = Schema.Struct({
  handle: Schema.optionalKey(AdmissionHandle),
  run_id: Schema.optionalKey(RunId),
  environment_id: Schema.String.check(isNonBlank),
  /** Workspace-relative; "" selects the root for directory reads. */
  path: Schema.String,
  /** Byte read: 1..1 MiB. Directory read: 0. Always written. */
  max_bytes: NonNegativeInt,
  operation: Schema.optionalKey(ReadOperation),
  /** Directory read: 1..1024. Byte read: absent or 0. */
  max_entries: Schema.optionalKey(NonNegativeInt)
})
export type WorkspaceReadPayload = typeof WorkspaceReadPayload.Type

export const EntryKind = Schema.Literals(["file", "directory", "symlink", "other"])
export type EntryKind = typeof EntryKind.Type

/** One directory entry: a single path component; `size_bytes` is a number for files and null otherwise. */
export const DirectoryEntry = Schema.Struct({
  name: Schema.String,
  kind: EntryKind,
  size_bytes: Schema.NullOr(NonNegativeInt)
})
export type DirectoryEntry = typeof DirectoryEntry.Type

/** One level of a directory: no recursion, snapshot or pagination; truncation is explicit. */
export const DirectoryResult = Schema.Struct({
  entries: Schema.Array(DirectoryEntry),
  truncated: Schema.Boolean
})
export type DirectoryResult = typeof DirectoryResult.Type

export const ReadOutcome = Schema.Literals(["completed", "rejected", "unknown"])
export type ReadOutcome = typeof ReadOutcome.Type

export const WorkspaceReadResultPayload = Schema.Struct({
  outcome: ReadOutcome,
  /** Byte reads: standard base64, at most `max_bytes` decoded. */
  data: Schema.optionalKey(Schema.String),
  truncated: Schema.optionalKey(Schema.Boolean),
  close_acknowledged: Schema.optionalKey(Schema.Boolean),
  error_code: Schema.optionalKey(ReadErrorCode),
  directory: Schema.optionalKey(DirectoryResult)
})
export type WorkspaceReadResultPayload = typeof WorkspaceReadResultPayload.Type

/** Why a read request is invalid (reply: `rejected` / `invalid_request`). */
export type ReadRequestIssue = "target" | "limits" | "path"

/** Exactly one target; byte and entry limits mutually exclusive and in range; a valid relative path. */
export const validateReadRequest = (r: WorkspaceReadPayload): Option.Option<ReadRequestIssue> => {
  if ((r.handle === undefined) === (r.run_id === undefined)) return Option.some("target")
  const directory = r.operation === "directory"
  const entries = r.max_entries ?? 0
  if (directory ? r.max_bytes !== 0 || entries < 1 || entries > MaxDirectoryEntries : r.max_bytes < 1 || r.max_bytes > MaxReadResultBytes || entries !== 0) {
    return Option.some("limits")
  }
  return Option.isSome(validateRelativePath(r.path, { allowRoot: directory })) ? Option.some("path") : Option.none()
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/

/** Why a directory listing is invalid. */
export type DirectoryIssue = "too_many_entries" | "entry_name" | "duplicate_name" | "entry_size"

/**
 * A directory result: at most `maxEntries` (≤ 1024) entries, each a single UTF-8 component of at most 255
 * bytes that is not "", "." or ".." and has no "/", "\", NUL, CR or LF, unique in the listing; a file has a
 * size, every other kind has null.
 */
export const validateDirectoryResult = (dir: DirectoryResult, maxEntries: number): Option.Option<DirectoryIssue> => {
  if (dir.entries.length > Math.min(maxEntries, MaxDirectoryEntries)) return Option.some("too_many_entries")
  const seen = new Set<string>()
  for (const entry of dir.entries) {
    const n = entry.name
    if (n === "" || n === "." || n === ".." || /[/\\\u0000\r\n]/.test(n) || !fitsUtf8Bytes(n, MaxEntryNameBytes) || LONE_SURROGATE.test(n)) {
      return Option.some("entry_name")
    }
    if (seen.has(n)) return Option.some("duplicate_name")
    seen.add(n)
    if ((entry.kind === "file") !== (entry.size_bytes !== null)) return Option.some("entry_size")
  }
  return Option.none()
}

/**
 * Core's validity rule for a read result given its request: a completed directory read has
 * close_acknowledged, no data, no top-level truncated and a valid listing; a completed byte read has
 * close_acknowledged, no directory and at most `max_bytes` of data (truncated only when exactly full);
 * every other outcome carries no data, truncated or close_acknowledged, and has an error code.
 */
export const validateReadResult = (request: WorkspaceReadPayload, r: WorkspaceReadResultPayload): boolean => {
  if (r.outcome !== "completed") {
    return r.error_code !== undefined && r.data === undefined && r.truncated === undefined &&
      r.close_acknowledged !== true && r.directory === undefined &&
      (r.outcome === "unknown" ? r.error_code === "read_unconfirmed" : r.error_code !== "read_unconfirmed") &&
      (r.error_code !== "not_directory" || request.operation === "directory")
  }
  if (r.close_acknowledged !== true || r.error_code !== undefined) return false
  if (request.operation === "directory") {
    return r.data === undefined && r.truncated !== true && r.directory !== undefined &&
      Option.isNone(validateDirectoryResult(r.directory, request.max_entries ?? 0))
  }
  if (r.directory !== undefined) return false
  let length = 0
  if (r.data !== undefined) {
    const bytes = decodeChunkData(r.data)
    if (Result.isFailure(bytes)) return false
    length = bytes.success.length
  }
  if (length > request.max_bytes) return false
  return r.truncated !== true || length === request.max_bytes
}

// ---------------------------------------------------------------------------------------------- write

export const TransferStep = Schema.Literals(["begin", "chunk", "commit"])

/** One frame of a write transfer; Envelope.id = the durable Core mutation id (not a retry key). */
export const WorkspaceWritePayload = Schema.Struct({
  step: TransferStep,
  environment_id: Schema.optionalKey(Schema.String),
  session_id: Schema.optionalKey(Schema.String),
  path: Schema.optionalKey(Schema.String),
  size_bytes: Schema.optionalKey(NonNegativeInt),
  sha256: Schema.optionalKey(Schema.String),
  offset: Schema.optionalKey(NonNegativeInt),
  data: Schema.optionalKey(Schema.String)
})
export type WorkspaceWritePayload = typeof WorkspaceWritePayload.Type

export const WriteOutcome = Schema.Literals(["ready", "received", "completed", "rejected", "unknown"])
export type WriteOutcome = typeof WriteOutcome.Type

export const WorkspaceWriteResultPayload = Schema.Struct({
  outcome: WriteOutcome,
  offset: Schema.optionalKey(NonNegativeInt),
  size_bytes: Schema.optionalKey(NonNegativeInt),
  error_code: Schema.optionalKey(WriteErrorCode),
  reason: Schema.optionalKey(Schema.Literals(["destination_directory", "unsafe_destination"]))
})
export type WorkspaceWriteResultPayload = typeof WorkspaceWriteResultPayload.Type

/** Why a write frame is invalid (reply: `rejected` / `invalid_request`). */
export type WriteRequestIssue = "identity" | "path" | "size" | "digest" | "step_members"

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/
const SHA = /^[0-9a-f]{64}$/

export const validateWriteRequest = (w: WorkspaceWritePayload): Option.Option<WriteRequestIssue> => {
  const beginMembers = [w.environment_id, w.session_id, w.path, w.size_bytes, w.sha256]
  if (w.step !== "begin") {
    if (beginMembers.some((m) => m !== undefined)) return Option.some("step_members")
    if (w.step === "chunk" && w.data === undefined) return Option.some("step_members")
    if (w.step === "commit" && (w.data !== undefined || (w.offset ?? 0) !== 0)) return Option.some("step_members")
    return Option.none()
  }
  if (w.data !== undefined || (w.offset ?? 0) !== 0) return Option.some("step_members")
  const uuidOk = (s: string | undefined) => s !== undefined && UUID.test(s) && s !== "00000000-0000-0000-0000-000000000000"
  if (!uuidOk(w.environment_id) || !uuidOk(w.session_id)) return Option.some("identity")
  if (w.path === undefined || Option.isSome(validateRelativePath(w.path, { allowRoot: false }))) return Option.some("path")
  if (w.size_bytes === undefined || w.size_bytes > MaxTransferBytes) return Option.some("size")
  if (w.sha256 === undefined || !SHA.test(w.sha256)) return Option.some("digest")
  return Option.none()
}

// ---------------------------------------------------------------------------------------------- export

export const ExportStep = Schema.Literals(["begin", "next", "cancel"])
export type ExportStep = typeof ExportStep.Type

/** Pull-based export of a ready read-only preparation's outputs as a tar stream. */
export const WorkspaceExportPayload = Schema.Struct({
  step: ExportStep,
  handle: Schema.optionalKey(AdmissionHandle),
  /** 1..128 bytes (reference: export handle and Environment id). */
  environment_id: Schema.optionalKey(Schema.String.check(isNonBlank, isMaxBytes(MaxCorrelationIdBytes))),
  offset: Schema.optionalKey(NonNegativeInt)
})
export type WorkspaceExportPayload = typeof WorkspaceExportPayload.Type

export const ExportOutcome = Schema.Literals(["chunk", "completed", "failed", "rejected"])
export type ExportOutcome = typeof ExportOutcome.Type

export const WorkspaceExportResultPayload = Schema.Struct({
  outcome: ExportOutcome,
  /** The stream offset at which this reply starts; always written. */
  offset: NonNegativeInt,
  data: Schema.optionalKey(Schema.String),
  error_code: Schema.optionalKey(ExportErrorCode)
})
export type WorkspaceExportResultPayload = typeof WorkspaceExportResultPayload.Type

/** begin needs handle + environment_id and offset 0; next needs only an offset; cancel carries nothing else. */
export const validateExportRequest = (e: WorkspaceExportPayload): Option.Option<"step_members"> => {
  switch (e.step) {
    case "begin":
      return e.handle === undefined || e.environment_id === undefined || (e.offset ?? 0) !== 0
        ? Option.some("step_members")
        : Option.none()
    case "next":
    case "cancel":
      return e.handle !== undefined || e.environment_id !== undefined || (e.step === "cancel" && (e.offset ?? 0) !== 0)
        ? Option.some("step_members")
        : Option.none()
  }
}
