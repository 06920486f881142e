/**
 * Core's `workspace_write` driver (protocol "Workspace operations"; reference §7.4): one complete body sent as
 * begin/ready, 64 KiB chunk/received, commit/completed under the durable mutation id (the envelope id is not a
 * retry key: a write is never replayed).
 *
 * - One write per connection (a second is refused locally with `capacity`); every frame is validated with
 *   the proto validator and the body bounded at 50 MiB before anything is sent.
 * - Core allows 195 s from the begin send for the whole transfer; a receipt that raced the deadline wins.
 * - Each receipt must be the exact answer of its step (`ready` to begin, `received` with the new total to a
 *   chunk, `completed` with the full size to commit); anything else stops the transfer as invalid.
 * - What a stop proves depends on whether the commit was sent: before it, the installer never runs
 *   (`WriteFailed`, definite: the file is unchanged); after it, only an exact receipt settles the write
 *   (`WriteUnknown` otherwise; the caller keeps the mutation owner reserved).
 */
import { Duration, Effect, Option, Result } from "effect"
import { createHash } from "node:crypto"
import { EncodedFrame, type Ids, Limits, Trace, Transfer, Workspace } from "../../proto/index.js"
import type { DeviceSession } from "../DeviceSession.js"
import { acquireSlot, expect, sendOrRefuse } from "./internal/replies.js"
import {
  type UnknownReason,
  type WriteError,
  WriteFailed,
  WriteRejected,
  type WriteStage,
  WriteUnknown,
  WorkspaceRefused
} from "./WorkspaceErrors.js"

export interface WriteRequest {
  /** The durable Core mutation id (a canonical UUID), reserved before this call. */
  readonly operationId: Ids.OperationId
  /** Canonical UUIDs of the bound Environment and the Session. */
  readonly environmentId: string
  readonly sessionId: string
  /** Workspace-relative destination file. */
  readonly path: string
  readonly body: Uint8Array
}

export interface WriteCompleted {
  readonly size_bytes: number
  readonly sha256: string
}

export interface WriteOptions {
  /** Core's overall budget (default 195 s). */
  readonly budget?: Duration.Input
  /**
   * Called before the commit is sent (the durable boundary: once it returned, a restart must treat the write
   * as possibly installed). If it fails, the commit is not sent and the write fails definitely.
   */
  readonly beforeCommit?: Effect.Effect<void, unknown>
}

/** The lower-case hex SHA-256 of a body. */
export const sha256Hex = (body: Uint8Array): string => createHash("sha256").update(body).digest("hex")

type Receipt = Workspace.WorkspaceWriteResultPayload

/**
 * Sends one chunk, built directly without re-escaping its base64 text (`encodeChunkFrame`); never refused for a
 * chunk of a valid write (then the codec refuses it again through `send`, as before).
 *
 * The frame (its base64 text, its bytes and the message that carries the text) is built inside this effect and
 * referenced only until it is handed to the socket: the driver's generator never holds it while it waits for
 * the receipt. Held there, every chunk's 87 KiB of text and bytes were still alive when the next chunk was built,
 * so each young-generation collection copied them, V8 grew the young generation to its maximum, and the chunk
 * buffers then piled up between collections until their external memory started full mark-compact collections
 * (about one per 32 MiB write, with their background marking): measured in `docs/performance.md` "Workspace".
 */
const sendChunk = (
  session: DeviceSession,
  id: Ids.OperationId,
  trace: string | undefined,
  offset: number,
  chunk: Uint8Array
): Effect.Effect<void, WriteFailed> =>
  Effect.suspend(() => {
    const message = { type: "workspace_write" as const, id, payload: { step: "chunk" as const, offset }, ...(trace === undefined ? {} : { trace }) }
    const frame = EncodedFrame.encodeChunkFrame(message, chunk)
    return session.send(Result.isSuccess(frame) ? frame.success : { ...message, payload: { ...message.payload, data: Transfer.encodeChunkData(chunk) } })
  }).pipe(Effect.mapError(() => new WriteFailed({ stage: "chunk", reason: "connection_lost" })))

/**
 * Writes once. Success proves the Runtime verified the digest and installed the file (`completed` with the
 * full size). Errors: `WorkspaceRefused` (nothing sent), `WriteRejected` (the Runtime's exact refusal at a
 * step; nothing installed), `WriteFailed` (stopped before commit; nothing installed), `WriteUnknown`
 * (commit sent without an exact receipt; never replayed).
 */
export const write = (
  session: DeviceSession,
  request: WriteRequest,
  options: WriteOptions = {}
): Effect.Effect<WriteCompleted, WriteError> =>
  Effect.scoped(Effect.gen(function*() {
    const body = request.body
    const sha256 = sha256Hex(body)
    const begin: Workspace.WorkspaceWritePayload = {
      step: "begin",
      environment_id: request.environmentId,
      session_id: request.sessionId,
      path: request.path,
      size_bytes: body.length,
      sha256
    }
    const issue = Workspace.validateWriteRequest(begin)
    if (Option.isSome(issue)) return yield* new WorkspaceRefused({ family: "write", reason: "invalid_request", detail: issue.value })
    yield* acquireSlot(session, "write")
    const waiter = yield* expect(session, "workspace_write_result", "write", request.operationId)
    const id = request.operationId
    yield* sendOrRefuse(session, "write", { type: "workspace_write", id, payload: begin })
    yield* waiter.startBudget(options.budget ?? Limits.CoreTransferBudget)

    const stopped = (stage: WriteStage, reason: UnknownReason) =>
      stage === "commit" ? new WriteUnknown({ reason }) : new WriteFailed({ stage, reason })

    /** The receipt of `stage`, checked by `expected` (a plain effect: it runs once per 64 KiB chunk). */
    const receipt = (stage: WriteStage, expected: (r: Receipt) => boolean): Effect.Effect<void, WriteError> =>
      Effect.flatMap(waiter.next, (next): Effect.Effect<void, WriteError> => {
        if (Result.isFailure(next)) return Effect.fail(stopped(stage, next.failure))
        const r = next.success
        if (r.outcome === "rejected") {
          if (r.error_code === undefined || r.error_code === "write_unconfirmed") return Effect.fail(stopped(stage, "invalid_receipt"))
          return Effect.fail(new WriteRejected({ code: r.error_code, stage, ...(r.reason === undefined ? {} : { reason: r.reason }) }))
        }
        if (r.outcome === "unknown") return Effect.fail(stopped(stage, "runtime_unconfirmed"))
        if (!expected(r) || r.error_code !== undefined) return Effect.fail(stopped(stage, "invalid_receipt"))
        return Effect.void
      })

    yield* receipt("begin", (r) => r.outcome === "ready")
    // Every chunk carries the write's trace (what `send` adds to a message without one), taken once.
    const trace = yield* Trace.currentTraceparent
    let offset = 0
    while (offset < body.length) {
      const end = Math.min(body.length, offset + Limits.MaxChunkBytes)
      // A failed send mid-transfer leaves the Runtime's transfer incomplete: it never reaches the installer.
      yield* sendChunk(session, id, trace, offset, body.subarray(offset, end))
      yield* receipt("chunk", (r) => r.outcome === "received" && r.offset === end)
      offset = end
    }
    if (options.beforeCommit !== undefined) {
      yield* options.beforeCommit.pipe(Effect.mapError(() => new WriteFailed({ stage: "chunk", reason: "commit_not_sent" })))
    }
    const committed = yield* Effect.exit(session.send({ type: "workspace_write", id, payload: { step: "commit" } }))
    // The commit did not enter the send queue: nothing will be installed.
    if (committed._tag === "Failure") return yield* new WriteFailed({ stage: "chunk", reason: "commit_not_sent" })
    yield* receipt("commit", (r) => r.outcome === "completed" && r.size_bytes === body.length)
    return { size_bytes: body.length, sha256 }
  })).pipe(Effect.withSpan("WorkspaceWrite.write"), Effect.annotateLogs({ operation_id: request.operationId }))
