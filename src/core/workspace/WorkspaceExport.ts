/**
 * Core's `workspace_export` driver (protocol "Workspace operations"; reference §7.5): a pull-based tar stream
 * of a ready read-only preparation's workspace. Core asks for each next chunk only after its consumer took
 * the previous one, so memory does not grow with the workspace.
 *
 * - One export per connection (a second is refused locally with `capacity`).
 * - Each reply must start at exactly the offset Core counted; a chunk carries 1..64 KiB and the stream stays
 *   within 528 MiB; `completed` carries no data and is required before the export counts as finished.
 * - 180 s for the whole export from the begin send; a reply that raced the deadline wins.
 * - Whenever Core stops before `completed` (its consumer failed or was interrupted, a budget, an invalid
 *   reply), it sends `cancel` (no reply expected). Never retried or replayed after a reconnect.
 */
import { Duration, Effect, Exit, Result } from "effect"
import { type Ids, Limits, Trace, Transfer } from "../../proto/index.js"
import type { DeviceSession } from "../DeviceSession.js"
import type { WorkspaceExportResultPayload } from "../../proto/Workspace.js"
import { acquireSlot, expect, sendOrRefuse, type WaitEnd } from "./internal/replies.js"
import { type ExportError, ExportFailed, ExportRejected, ExportUnknown } from "./WorkspaceErrors.js"

export interface ExportRequest {
  /** A fresh id per export. */
  readonly operationId: Ids.OperationId
  /** The ready read-only preparation handle on this connection. */
  readonly handle: Ids.AdmissionHandle
  readonly environmentId: string
}

export interface ExportOptions {
  /** Core's budget for the whole export (default 180 s). */
  readonly budget?: Duration.Input
}

/**
 * Streams the export into `onChunk`, one chunk at a time in order (the next is requested only after
 * `onChunk` returned). Success proves the Runtime sent `completed` at exactly the total received (the archive
 * is complete). Errors: `WorkspaceRefused` (nothing sent), `ExportRejected`, `ExportFailed` (the Runtime
 * ended it), `ExportUnknown` (Core stopped without a final reply), or the consumer's own error.
 */
export const exportTo = <E, R>(
  session: DeviceSession,
  request: ExportRequest,
  onChunk: (bytes: Uint8Array) => Effect.Effect<void, E, R>,
  options: ExportOptions = {}
): Effect.Effect<{ readonly size_bytes: number }, ExportError | E, R> =>
  Effect.scoped(Effect.gen(function*() {
    yield* acquireSlot(session, "export")
    const waiter = yield* expect(session, "workspace_export_result", "export", request.operationId)
    const id = request.operationId
    let finished = false
    let received = 0
    // Stopping before `completed` for any reason (including interruption): tell the Runtime (no reply).
    yield* Effect.addFinalizer(() =>
      finished ? Effect.void : Effect.ignore(session.send({ type: "workspace_export", id, payload: { step: "cancel" } }))
    )
    yield* sendOrRefuse(session, "export", {
      type: "workspace_export",
      id,
      payload: { step: "begin", handle: request.handle, environment_id: request.environmentId }
    })
    yield* waiter.startBudget(options.budget ?? Limits.ExportBudget)
    // Every `next` carries the export's trace (what `send` adds to a message without one), taken once.
    const trace = yield* Trace.currentTraceparent
    // Built only when a reply is invalid: an error captures a stack trace, too dear for every chunk.
    const invalid = () => Effect.fail(new ExportUnknown({ reason: "invalid_receipt", offset: received }))

    /**
     * Handles one reply: the final size once `completed`, undefined to wait for the next reply. A plain effect
     * (it runs once per 64 KiB chunk): the reply's text and the chunk's bytes are referenced only until the chunk
     * was consumed and the next one asked for, never while the loop below waits for the next reply.
     */
    const reply = (next: Result.Result<WorkspaceExportResultPayload, WaitEnd>): Effect.Effect<number | undefined, ExportError | E, R> => {
      if (Result.isFailure(next)) return Effect.fail(new ExportUnknown({ reason: next.failure, offset: received }))
      const r = next.success
      // `rejected` and `failed` end the stream whatever offset they name; data must start where Core counted.
      if ((r.outcome === "chunk" || r.outcome === "completed") && r.offset !== received) return invalid()
      switch (r.outcome) {
        case "rejected":
          if (r.error_code === undefined || r.data !== undefined) return invalid()
          finished = true // the Runtime holds nothing for this id
          return Effect.fail(new ExportRejected({ code: r.error_code }))
        case "failed":
          if (r.error_code === undefined || r.data !== undefined) return invalid()
          finished = true
          return Effect.fail(new ExportFailed({ code: r.error_code, offset: received }))
        case "completed":
          if (r.data !== undefined || r.error_code !== undefined) return invalid()
          finished = true
          return Effect.succeed(received)
        case "chunk": {
          if (r.data === undefined || r.error_code !== undefined) return invalid()
          const bytes = Transfer.decodeChunkData(r.data)
          if (Result.isFailure(bytes)) return invalid()
          const checked = Transfer.checkChunk(
            { received, declaredSize: Limits.MaxExportBytes, maxTotal: Limits.MaxExportBytes },
            { offset: r.offset, length: bytes.success.length }
          )
          if (Result.isFailure(checked)) return invalid()
          return Effect.andThen(onChunk(bytes.success), Effect.suspend(() => {
            received = checked.success
            return Effect.exit(
              session.send({ type: "workspace_export", id, payload: { step: "next", offset: received }, ...(trace === undefined ? {} : { trace }) })
            ).pipe(Effect.flatMap((asked) =>
              Exit.isFailure(asked) ? Effect.fail(new ExportUnknown({ reason: "connection_lost", offset: received })) : Effect.succeed(undefined)
            ))
          }))
        }
      }
      return invalid() // no other outcome decodes
    }

    while (true) {
      const size = yield* Effect.flatMap(waiter.next, reply)
      if (size !== undefined) return { size_bytes: size }
    }
  })).pipe(Effect.withSpan("WorkspaceExport.exportTo"), Effect.annotateLogs({ operation_id: request.operationId }))
