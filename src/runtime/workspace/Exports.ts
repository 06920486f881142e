/**
 * `workspace_export` (reference part 2 §7.5), Runtime side: a pull-based tar stream of the bound workspace
 * (`internal/exportStream.ts`; output rules in docs/runtime.md), from a ready read-only preparation handle of the
 * exact Environment. One export per connection.
 *
 * - A malformed frame gets no reply (one log line). `begin`: a duplicate of the active id gets no reply; another
 *   export, a write in progress, device shutdown, or a handle that is not a ready, unexpired
 *   read-only preparation of this Environment is `rejected` / `resource_unavailable`; a Harness that does not
 *   declare `workspace_output_export`, or an unbound daemon (which declares it false), is `rejected` /
 *   `read_unsupported`. Otherwise the first chunk (offset 0).
 * - `next` must name exactly the bytes sent so far: the next chunk (1..64 KiB) at that offset, or `completed`
 *   (no data) at the total after the end-of-archive marker. Another offset ends the export with `failed` /
 *   `invalid_request`; a read error, the 500 MiB file allowance or the 528 MiB archive bound with `failed` /
 *   `export_failed`. `next` for an unknown id is `rejected` / `resource_unavailable`.
 * - `cancel` ends the export without a reply (an unknown id is ignored).
 * - 180 s from `begin`: at the budget the export ends with `failed` / `export_failed` at the current offset.
 *
 * Ownership: the stream's open handle lives in a child scope of the preparation's Executor scope (resource
 * `export:<id>`, kind `workspace`), closed through `closeUntilConfirmed`, so the handle's `released` is published
 * only after the export's local close is confirmed; a close failure keeps ownership (`cleanup_unconfirmed`).
 * The export keeps its capacity until that close is confirmed. A chunk is posted (handed to the transport without
 * waiting for its write; a write that fails or misses the transport's 10 s deadline ends the connection); the other
 * replies have a 5 s send budget. Nothing is replayed.
 */
import { Clock, Deferred, Duration, Effect, Exit, Fiber, Option, Result, Scope } from "effect"
import type { ExportErrorCode } from "../../proto/ErrorCodes.js"
import type { OperationId } from "../../proto/Ids.js"
import { ExportBudget, MaxChunkBytes, MaxExportBytes, StatusSendBudget } from "../../proto/Limits.js"
import { encodeChunkFrame } from "../../proto/EncodedFrame.js"
import { echo } from "../../proto/Trace.js"
import { encodeChunkData } from "../../proto/Transfer.js"
import { validateExportRequest, type WorkspaceExportPayload, type WorkspaceExportResultPayload } from "../../proto/Workspace.js"
import { Admission } from "../Admission.js"
import { Background, Drain } from "../ConnectionServices.js"
import { type ExecutorEntry, Executors } from "../Executors.js"
import { Outbound, withTrace } from "../Outbound.js"
import { closeUntilConfirmed, observed, Ownership } from "../Ownership.js"
import { RuntimePolicy } from "../RuntimePolicy.js"
import { StatusBoard } from "../StatusBoard.js"
import * as SerialWorker from "./internal/serialWorker.js"
import { type NativeExport, WorkspaceFs } from "./WorkspaceFs.js"

/** How long an export's end waits for its handle's close before replying anyway. */
const CloseWait = Duration.seconds(1)

interface ActiveExport {
  readonly id: OperationId
  readonly trace: string | undefined
  readonly scope: Scope.Closeable
  readonly stream: NativeExport
  sent: number
  ended: boolean
  timer: Fiber.Fiber<void> | undefined
  settle: Effect.Effect<void>
}

export const makeExports = (writeActive: Effect.Effect<boolean>) =>
  Effect.gen(function* () {
    const outbound = yield* Outbound
    const background = yield* Background
    const drain = yield* Drain
    const fs = yield* WorkspaceFs
    const admission = yield* Admission
    const executors = yield* Executors
    const ownership = observed(yield* Ownership, (yield* StatusBoard).touch)
    const policy = yield* RuntimePolicy
    const parent = yield* Effect.scope
    const worker = yield* SerialWorker.make("workspace_export")
    let current: ActiveExport | undefined

    const send = (id: OperationId, payload: WorkspaceExportResultPayload, trace: string | undefined) =>
      outbound.sendWithin(withTrace({ type: "workspace_export_result", id, payload }, trace), StatusSendBudget)
    const reject = (id: OperationId, code: ExportErrorCode, offset: number, trace: string | undefined) =>
      Background.fork(background, send(id, { outcome: "rejected", offset, error_code: code }, trace))

    /** The handle's Executor when it is a ready, unexpired read-only preparation of this Environment. */
    const target = (handle: string, environmentId: string) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const record = (yield* admission.view).find((r) => r.handle === handle)
        if (record === undefined || record.state !== "ready" || (record.expires_at !== undefined && record.expires_at <= now)) {
          return Option.none<ExecutorEntry>()
        }
        const entry = record.executor_id === undefined ? undefined : Option.getOrUndefined(yield* executors.byId(record.executor_id))
        return entry === undefined || entry.closing || !entry.readOnly || entry.environmentId !== environmentId
          ? Option.none<ExecutorEntry>()
          : Option.some(entry)
      })

    /**
     * Ends the export: its handle is closed (confirmed) before the reply when that takes at most 1 s; a close
     * still unconfirmed does not hold the reply back, and the export keeps its capacity until it is confirmed.
     */
    const finish = (e: ActiveExport, payload: WorkspaceExportResultPayload | undefined, fromTimer = false) =>
      Effect.gen(function* () {
        if (e.ended) return
        e.ended = true
        if (e.timer !== undefined && !fromTimer) yield* Fiber.interrupt(e.timer)
        const releasing = yield* Effect.forkIn(Effect.andThen(e.settle, Scope.close(e.scope, Exit.void)), parent)
        yield* Fiber.await(releasing).pipe(Effect.timeoutOrElse({ duration: CloseWait, orElse: () => Effect.void }))
        if (payload !== undefined) yield* send(e.id, payload, e.trace)
      })

    const failed = (e: ActiveExport, code: ExportErrorCode, fromTimer = false) =>
      finish(e, { outcome: "failed", offset: e.sent, error_code: code }, fromTimer)

    /**
     * Sends the chunk `bytes` at `e.sent`. The frame is built directly (no JSON.stringify of its base64 text); a
     * refused one (never for a valid chunk) goes the codec's way, which refuses and logs it as any other frame.
     * `e.trace` was echoed (validated) once at `begin`. Posted: handed to the transport in order without waiting
     * for its write. Nothing here acts on the write's outcome (Core asks for the next chunk only after it received
     * this one), and a write that fails or misses the transport's 10 s deadline ends the connection, which ends
     * the export. The frame is referenced only until it is handed over.
     */
    const sendChunk = (e: ActiveExport, bytes: Uint8Array): Effect.Effect<void> => {
      const payload = { outcome: "chunk" as const, offset: e.sent }
      e.sent += bytes.length
      const message = e.trace === undefined
        ? { type: "workspace_export_result" as const, id: e.id, payload }
        : { type: "workspace_export_result" as const, id: e.id, payload, trace: e.trace }
      const frame = encodeChunkFrame(message, bytes)
      return outbound.post(Result.isSuccess(frame) ? frame.success : { ...message, payload: { ...payload, data: encodeChunkData(bytes) } })
    }

    /**
     * Produces the reply at `e.sent`: the next chunk, `completed`, or `failed`. Run on the service's worker, once
     * per 64 KiB chunk: plain effects (no generator holding the chunk while it waits).
     */
    const produce = (e: ActiveExport): Effect.Effect<void> =>
      e.ended
        ? Effect.void
        : Effect.matchEffect(e.stream.read(MaxChunkBytes), {
          onFailure: (reason) =>
            e.ended
              ? Effect.void
              : Effect.andThen(
                Effect.logWarning("workspace export failed").pipe(Effect.annotateLogs({ operation_id: e.id, reason })),
                failed(e, "export_failed")
              ),
          onSuccess: (bytes) =>
            e.ended
              ? Effect.void
              : bytes === null
              ? finish(e, { outcome: "completed", offset: e.sent })
              : e.sent + bytes.length > MaxExportBytes
              ? failed(e, "export_failed")
              : sendChunk(e, bytes)
        })

    const begin = (id: OperationId, p: WorkspaceExportPayload, trace: string | undefined) =>
      Effect.gen(function* () {
        if (current !== undefined) {
          if (current.id === id) return yield* Effect.logWarning("duplicate workspace_export begin ignored").pipe(Effect.annotateLogs({ operation_id: id }))
          return yield* reject(id, "resource_unavailable", 0, trace)
        }
        // Unbound: the capability is declared false, so the family is unsupported here (a definite refusal).
        if (Option.isNone(fs.root)) return yield* reject(id, "read_unsupported", 0, trace)
        if ((yield* drain.draining) || (yield* writeActive)) return yield* reject(id, "resource_unavailable", 0, trace)
        const found = yield* target(p.handle ?? "", p.environment_id ?? "")
        if (Option.isNone(found)) return yield* reject(id, "resource_unavailable", 0, trace)
        if (!found.value.declaration.capabilities.workspace_output_export) return yield* reject(id, "read_unsupported", 0, trace)
        const opened = yield* Effect.result(fs.openExport)
        if (opened._tag === "Failure") return yield* reject(id, "resource_unavailable", 0, trace)
        const stream = opened.success
        const scope = yield* Scope.fork(found.value.scope, "sequential")
        // The request's trace as every reply echoes it (`withTrace`), validated once rather than per chunk.
        const e: ActiveExport = { id, trace: echo(trace), scope, stream, sent: 0, ended: false, timer: undefined, settle: Effect.void }
        // Runs last, after the confirmed close: the capacity is free. Also when the handle's release closes it first.
        yield* Scope.addFinalizer(scope, Effect.suspend(() => {
          if (current === e) current = undefined
          if (e.ended) return Effect.void // `finish` closed it and owns the timer
          e.ended = true
          return e.timer === undefined ? Effect.void : Fiber.interrupt(e.timer)
        }))
        const resource = `export:${id}`
        yield* ownership.acquire(resource, "workspace")
        // One confirmed close, joined by every closer (the export's end, or the handle's release closing its parent).
        const confirmed = yield* Deferred.make<void>()
        let started = false
        const settle = Effect.suspend(() => {
          if (started) return Deferred.await(confirmed)
          started = true
          return closeUntilConfirmed(resource, stream.close, (r) => `export close failed: ${r}`).pipe(
            Effect.provideService(Ownership, ownership),
            Effect.provideService(RuntimePolicy, policy),
            Effect.andThen(Deferred.succeed(confirmed, undefined))
          )
        })
        e.settle = settle
        yield* Scope.addFinalizer(scope, settle)
        current = e
        e.timer = yield* Effect.sleep(ExportBudget).pipe(
          // Not on the worker: a read in progress cannot hold the budget back (it sees `ended` and stays silent).
          Effect.andThen(Effect.suspend(() => failed(e, "export_failed", true))),
          Effect.forkIn(parent)
        )
        yield* worker.submit(produce(e))
      })

    // A plain effect (it runs for every `next`, once per 64 KiB chunk).
    const handle = (id: OperationId, p: WorkspaceExportPayload, trace: string | undefined): Effect.Effect<void> =>
      Effect.suspend(() => {
        if (Option.isSome(validateExportRequest(p))) {
          // A malformed workspace_export gets no reply at all (reference §7.5).
          return Effect.logWarning("malformed workspace_export ignored").pipe(Effect.annotateLogs({ operation_id: id, step: p.step }))
        }
        if (p.step === "begin") return begin(id, p, trace)
        const e = current !== undefined && current.id === id && !current.ended ? current : undefined
        if (p.step === "cancel") return e === undefined ? Effect.void : Effect.asVoid(Background.fork(background, finish(e, undefined)))
        if (e === undefined) return reject(id, "resource_unavailable", p.offset ?? 0, trace)
        const offset = p.offset ?? 0
        return worker.submit(Effect.suspend(() => (offset === e.sent ? produce(e) : failed(e, "invalid_request"))))
      })

    return {
      handle,
      /** True while an export streams or its handle's close is unconfirmed. */
      active: Effect.sync(() => current !== undefined)
    }
  })
