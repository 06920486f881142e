/**
 * Core's `workspace_read` driver (protocol "Workspace operations"; reference §7.2–§7.3): one bounded byte
 * read or one directory level, on an idle preparation handle or an active Run of this connection, with the
 * exact frozen Environment id.
 *
 * - At most 4 reads per connection (a fifth is refused locally with `capacity`); the request is validated
 *   with the proto validator and bounded at 8 KiB encoded before anything is sent.
 * - The waiter is registered under the exact operation id before the send; only a reply with that id
 *   reaches it. Core waits 17 s from the send; a reply that raced the deadline wins.
 * - A result is accepted only when `validateReadResult` holds for its request (a complete byte read or
 *   explicit truncation, an acknowledged close, a valid listing); anything else is `ReadUnknown`.
 * - Never retried, never replayed after a reconnect: the driver is bound to one connection.
 */
import { Duration, Effect, Option, Result } from "effect"
import { type Ids, Limits, Transfer, Workspace } from "../../proto/index.js"
import type { DeviceSession } from "../DeviceSession.js"
import { acquireSlot, expect, sendOrRefuse } from "./internal/replies.js"
import { type ReadError, ReadRejected, ReadUnknown, WorkspaceRefused } from "./WorkspaceErrors.js"

/** What to read: bytes (1..1 MiB) or one directory level (1..1024 entries). */
export type ReadKind =
  | { readonly _tag: "Bytes"; readonly maxBytes: number }
  | { readonly _tag: "Directory"; readonly maxEntries: number }

/** The target: a ready preparation handle on this connection, or an active Run on it. */
export type ReadTarget =
  | { readonly handle: Ids.AdmissionHandle }
  | { readonly run_id: Ids.RunId }

export interface ReadRequest {
  /** A fresh id per read (never reused: a duplicate pending id is refused). */
  readonly operationId: Ids.OperationId
  readonly target: ReadTarget
  readonly environmentId: string
  /** Workspace-relative; "" selects the root for directory reads. */
  readonly path: string
  readonly kind: ReadKind
}

/** A completed read: the native close was acknowledged. */
export type ReadCompleted =
  | { readonly _tag: "Bytes"; readonly data: Uint8Array; readonly truncated: boolean }
  | { readonly _tag: "Directory"; readonly entries: ReadonlyArray<Workspace.DirectoryEntry>; readonly truncated: boolean }

export interface ReadOptions {
  /** Core's wait for the result (default 17 s). */
  readonly budget?: Duration.Input
}

/** The wire payload of a read request. */
export const readPayload = (request: ReadRequest): Workspace.WorkspaceReadPayload => ({
  ...request.target,
  environment_id: request.environmentId,
  path: request.path,
  ...(request.kind._tag === "Bytes"
    ? { max_bytes: request.kind.maxBytes }
    : { max_bytes: 0, operation: "directory" as const, max_entries: request.kind.maxEntries })
})

/**
 * Reads once. Success proves the Runtime read the bytes (or listing) and confirmed the native close. Errors:
 * `WorkspaceRefused` (nothing sent), `ReadRejected` (the Runtime's definite refusal), `ReadUnknown` (sent
 * without proof; the Runtime may still hold the native read for its own 12 s bound).
 */
export const read = (
  session: DeviceSession,
  request: ReadRequest,
  options: ReadOptions = {}
): Effect.Effect<ReadCompleted, ReadError> =>
  Effect.scoped(Effect.gen(function*() {
    const payload = readPayload(request)
    const issue = Workspace.validateReadRequest(payload)
    if (Option.isSome(issue)) return yield* new WorkspaceRefused({ family: "read", reason: "invalid_request", detail: issue.value })
    if (Buffer.byteLength(JSON.stringify(payload), "utf8") > Limits.MaxRequestPayloadBytes) {
      return yield* new WorkspaceRefused({ family: "read", reason: "invalid_request", detail: "payload_too_large" })
    }
    yield* acquireSlot(session, "read")
    const waiter = yield* expect(session, "workspace_read_result", "read", request.operationId)
    yield* sendOrRefuse(session, "read", { type: "workspace_read", id: request.operationId, payload })
    yield* waiter.startBudget(options.budget ?? Limits.ReadResultBudget)
    const reply = yield* waiter.next
    if (Result.isFailure(reply)) return yield* new ReadUnknown({ reason: reply.failure })
    const r = reply.success
    if (!Workspace.validateReadResult(payload, r)) return yield* new ReadUnknown({ reason: "invalid_receipt" })
    switch (r.outcome) {
      case "rejected":
        return yield* new ReadRejected({ code: r.error_code! })
      case "unknown":
        return yield* new ReadUnknown({ reason: "runtime_unconfirmed" })
      case "completed": {
        if (request.kind._tag === "Directory") {
          const dir = r.directory!
          return { _tag: "Directory", entries: dir.entries, truncated: dir.truncated } satisfies ReadCompleted
        }
        const data = r.data === undefined ? new Uint8Array(0) : Result.getOrThrow(Transfer.decodeChunkData(r.data))
        return { _tag: "Bytes", data, truncated: r.truncated === true } satisfies ReadCompleted
      }
    }
  })).pipe(Effect.withSpan("WorkspaceRead.read"), Effect.annotateLogs({ operation_id: request.operationId }))
