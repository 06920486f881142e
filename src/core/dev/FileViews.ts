/**
 * What the dev Core's Files operations return and refuse with (Files.ts), in a module of their own so the
 * multi-node routing (pg/RoutedFiles.ts) shares them without importing the service.
 */
import type { DirectoryEntry } from "../../proto/Workspace.js"
import type { AdmissionRejection } from "../Outcome.js"
import type * as ReadOnlyPreparation from "../workspace/ReadOnlyPreparation.js"
import type { ExportError, ReadError, WriteError } from "../workspace/WorkspaceErrors.js"
import type { OperatorConflict, OperatorNotFound, OperatorRequestInvalid, OperatorUnavailable } from "./OperatorErrors.js"

/** Errors every Files operation can return before anything is sent. */
export type FilesRefusal = OperatorNotFound | OperatorConflict | OperatorRequestInvalid | OperatorUnavailable | AdmissionRejection

export type FilesReadError = FilesRefusal | ReadError | ReadOnlyPreparation.ReadOnlyPreparationError
export type FilesWriteError = FilesRefusal | WriteError
export type FilesExportError = FilesRefusal | ExportError | ReadOnlyPreparation.ReadOnlyPreparationError

export interface FileListing {
  readonly entries: ReadonlyArray<DirectoryEntry>
  readonly truncated: boolean
}
export interface FileBytes {
  readonly data: Uint8Array
  readonly truncated: boolean
}
export interface WriteSettled {
  readonly write_id: string
  readonly status: "completed" | "failed"
}

export interface FileWritten {
  readonly size_bytes: number
  readonly sha256: string
  /** The durable mutation id (also the wire operation id). */
  readonly write_id: string
}
