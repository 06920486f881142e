/**
 * Core's `runtime_prepare` driver (protocol "Preparation and execution order"; reference part 2 §6): one action
 * per transfer — a file, a skill or plugin archive, an initialization step or `finalize` — sent as begin/ready,
 * 64 KiB chunk/received at the exact offset, commit/completed, under a fresh transfer id (a canonical UUID).
 *
 * - One transfer per connection (a second is refused locally with `capacity`); the header is validated with the
 *   proto validator (`validateRequest`) and the body bounded at 50 MiB before anything is sent.
 * - Core waits for every receipt before it sends the next frame, and checks each with `validateResult` against the
 *   step it answers. An invalid receipt makes the transfer unknown (`PrepareUnknown`), whatever the step.
 * - 195 s from the begin send for the whole transfer; a receipt that raced the deadline wins.
 * - Before the commit is sent, a stop proves nothing was installed (`PrepareFailed`); after it, only an exact
 *   receipt settles the step (`PrepareUnknown` otherwise). The waiter lives on this connection only: nothing is
 *   replayed after a reconnect.
 */
import { type Duration, Effect, Option, Result } from "effect"
import { createHash } from "node:crypto"
import type { CapabilitySources, SourceMetadata } from "../../proto/Execution.js"
import type { TransferId } from "../../proto/Ids.js"
import { CoreTransferBudget, MaxChunkBytes, MaxTransferBytes } from "../../proto/Limits.js"
import {
  type ExpectedReceipt,
  type Initialization,
  type RuntimePreparePayload,
  validateRequest,
  validateResult
} from "../../proto/RuntimePrepare.js"
import { encodeChunkFrame } from "../../proto/EncodedFrame.js"
import { currentTraceparent } from "../../proto/Trace.js"
import { encodeChunkData } from "../../proto/Transfer.js"
import type { DeviceSession } from "../DeviceSession.js"
import { waiterOver } from "../workspace/internal/replies.js"
import { type PrepareError, PrepareFailed, PrepareRefused, PrepareRejected, type PrepareStage, PrepareUnknown } from "./PrepareErrors.js"

/** One action of a transfer. */
export type PrepareAction =
  | { readonly action: "file"; readonly path: string; readonly body: Uint8Array }
  | { readonly action: "skill"; readonly metadata: SourceMetadata; readonly body: Uint8Array }
  | { readonly action: "plugin"; readonly slot: number; readonly metadata: SourceMetadata; readonly body: Uint8Array }
  | { readonly action: "initialize"; readonly initialization: Initialization }
  | { readonly action: "finalize"; readonly sources: CapabilitySources }

export interface PrepareRequest {
  /** A fresh canonical UUID for this transfer (never reused: a transfer is never replayed). */
  readonly transferId: TransferId
  readonly environmentId: string
  readonly sessionId: string
  readonly step: PrepareAction
}

export interface PrepareOptions {
  /** Core's overall budget (default 195 s). */
  readonly budget?: Duration.Input
  /** Called after each `received` receipt with the bytes the Runtime confirmed so far. */
  readonly onProgress?: (bytes: number) => Effect.Effect<void>
  /**
   * Runs right before the commit is queued, after every chunk was received (a caller persists "the commit may
   * be sent" here, so a restart knows the step's outcome may be unknown).
   */
  readonly beforeCommit?: Effect.Effect<void>
}

export interface PrepareCompleted {
  readonly size_bytes: number
}

const sha256Hex = (body: Uint8Array): string => createHash("sha256").update(body).digest("hex")

const bodyOf = (step: PrepareAction): Uint8Array | undefined => ("body" in step ? step.body : undefined)

/** The begin payload of a request. */
export const beginPayload = (request: PrepareRequest): RuntimePreparePayload => {
  const base = { step: "begin" as const, environment_id: request.environmentId, session_id: request.sessionId }
  const s = request.step
  const bytes = (body: Uint8Array) => ({ size_bytes: body.length, sha256: sha256Hex(body) })
  switch (s.action) {
    case "file":
      return { ...base, action: "file", file: { path: s.path }, ...bytes(s.body) }
    case "skill":
      return { ...base, action: "skill", skill: s.metadata, ...bytes(s.body) }
    case "plugin":
      return { ...base, action: "plugin", ...(s.slot === 0 ? {} : { slot: s.slot }), plugin: s.metadata, ...bytes(s.body) }
    case "initialize":
      return { ...base, action: "initialize", initialization: s.initialization }
    case "finalize":
      return { ...base, action: "finalize", sources: s.sources }
  }
}

const busy = new WeakSet<DeviceSession>()

/** Takes the connection's one transfer slot for the caller's scope. */
const acquireSlot = (session: DeviceSession) =>
  Effect.acquireRelease(
    Effect.suspend(() => {
      if (busy.has(session)) return Effect.fail(new PrepareRefused({ reason: "capacity" }))
      busy.add(session)
      return Effect.void
    }),
    () => Effect.sync(() => busy.delete(session))
  )

/**
 * Runs one transfer. Success proves the Runtime completed that step (`completed` with the body size); it does
 * not prove a later Turn ran. Errors: see PrepareErrors.ts.
 */
export const prepare = (
  session: DeviceSession,
  request: PrepareRequest,
  options: PrepareOptions = {}
): Effect.Effect<PrepareCompleted, PrepareError> =>
  Effect.scoped(Effect.gen(function*() {
    const begin = beginPayload(request)
    const body = bodyOf(request.step) ?? new Uint8Array(0)
    if (body.length > MaxTransferBytes) return yield* new PrepareRefused({ reason: "invalid_request", detail: "size" })
    const issue = validateRequest(begin)
    if (Option.isSome(issue)) return yield* new PrepareRefused({ reason: "invalid_request", detail: issue.value })
    if (Buffer.byteLength(JSON.stringify(begin)) > 1024 * 1024) return yield* new PrepareRefused({ reason: "invalid_request", detail: "frame" })
    yield* acquireSlot(session)
    const id = request.transferId
    const replies = yield* session.expectReplies("runtime_prepare_result", id).pipe(
      Effect.mapError((e) => new PrepareRefused({ reason: "waiter_rejected", detail: e.reason }))
    )
    const waiter = yield* waiterOver(replies, (m) => m.payload)
    yield* session.send({ type: "runtime_prepare", id, payload: begin }).pipe(
      Effect.mapError((e) => new PrepareRefused({ reason: "not_sent", detail: e.reason }))
    )
    yield* waiter.startBudget(options.budget ?? CoreTransferBudget)
    let committed = false

    /** The receipt answering `expected`; anything but the exact success is a typed error. */
    const receipt = (stage: PrepareStage, expected: ExpectedReceipt) =>
      Effect.gen(function*() {
        const got = yield* waiter.next
        if (Result.isFailure(got)) {
          return yield* committed
            ? new PrepareUnknown({ stage, reason: got.failure })
            : new PrepareFailed({ stage, reason: got.failure })
        }
        const r = got.success
        if (!validateResult(expected, r)) return yield* new PrepareUnknown({ stage, reason: "invalid_receipt" })
        switch (r.outcome) {
          case "rejected":
            return yield* new PrepareRejected({ code: r.error_code!, stage })
          case "failed":
            return yield* new PrepareFailed({ stage, reason: "runtime_failed", ...(r.exit_code === undefined ? {} : { exit_code: r.exit_code }) })
          case "unknown":
            return yield* new PrepareUnknown({ stage, reason: "runtime_unconfirmed" })
          default:
            return r
        }
      })

    yield* receipt("begin", { step: "begin" })
    // Every chunk carries the transfer's trace (what `send` adds to a message without one), taken once.
    const trace = yield* currentTraceparent
    let offset = 0
    while (offset < body.length) {
      const chunk = body.subarray(offset, Math.min(body.length, offset + MaxChunkBytes))
      const payload: RuntimePreparePayload = { step: "chunk", ...(offset === 0 ? {} : { offset }) }
      const message = { type: "runtime_prepare" as const, id, payload, ...(trace === undefined ? {} : { trace }) }
      // Built directly, without re-escaping the chunk's base64 text (`encodeChunkFrame`); never refused for a chunk
      // of a valid transfer (then the codec refuses it again through `send`, as before).
      const frame = encodeChunkFrame(message, chunk)
      // A failed send mid-transfer leaves the Runtime's transfer incomplete: it never reaches the installer.
      yield* session.send(Result.isSuccess(frame) ? frame.success : { ...message, payload: { ...payload, data: encodeChunkData(chunk) } }).pipe(
        Effect.mapError(() => new PrepareFailed({ stage: "chunk", reason: "connection_lost" }))
      )
      const total = offset + chunk.length
      yield* receipt("chunk", { step: "chunk", offset: total })
      offset = total
      if (options.onProgress !== undefined) yield* options.onProgress(total)
    }
    if (options.beforeCommit !== undefined) yield* options.beforeCommit
    const sent = yield* Effect.exit(session.send({ type: "runtime_prepare", id, payload: { step: "commit" } }))
    // The commit did not enter the send queue: nothing will be installed.
    if (sent._tag === "Failure") return yield* new PrepareFailed({ stage: "commit", reason: "commit_not_sent" })
    committed = true
    yield* receipt("commit", { step: "commit", sizeBytes: body.length })
    return { size_bytes: body.length }
  })).pipe(Effect.withSpan("RuntimePrepare.prepare"), Effect.annotateLogs({ transfer_id: request.transferId }))
