/**
 * `workspace_read` (reference part 2 §7.2–7.3), Runtime side: bytes (≤ 1 MiB, explicit truncation) or one
 * directory level (≤ 1024 entries, symlinks listed, never followed), from a ready preparation handle or an
 * active Run on this connection, with the exact frozen Environment id.
 *
 * - Order of checks: payload rules (`invalid_request`), a duplicate pending id (no reply), capacity (4 per
 *   connection, `read_capacity`), no workspace / no such target / another Environment / an owner whose earlier
 *   read was unconfirmed (`resource_unavailable`).
 * - Ownership: each native handle lives in a child scope of its target's Executor scope; its close is registered
 *   there with `closeUntilConfirmed` (kind `workspace`), so an `execution_release` publishes `released` only after
 *   the read's handle closed. The read tries the close once itself: `completed` (with `close_acknowledged`) only
 *   after a confirmed close; a failed close or read keeps ownership and answers `unknown` / `read_unconfirmed`.
 * - The native work runs in a connection-owned fiber bounded at 12 s: at the bound the reply is `unknown` /
 *   `read_unconfirmed`, the native work keeps running and keeps its capacity slot until its close is confirmed.
 * - An `unknown` stops further reads on that owner (`resource_unavailable`).
 * - Replies have a 5 s send budget; never retried. A safe rejection (nothing opened) carries no bytes.
 */
import { Clock, Deferred, Effect, Exit, Option, Scope } from "effect"
import type { ReadErrorCode } from "../../proto/ErrorCodes.js"
import type { OperationId } from "../../proto/Ids.js"
import { ReadNativeBudget, StatusSendBudget } from "../../proto/Limits.js"
import { encodeChunkData } from "../../proto/Transfer.js"
import { validateReadRequest, type WorkspaceReadPayload, type WorkspaceReadResultPayload } from "../../proto/Workspace.js"
import { Admission } from "../Admission.js"
import { Background } from "../ConnectionServices.js"
import { type ExecutorEntry, Executors } from "../Executors.js"
import { Outbound, withTrace } from "../Outbound.js"
import { closeUntilConfirmed, observed, Ownership } from "../Ownership.js"
import { RuntimePolicy } from "../RuntimePolicy.js"
import { Runs } from "../Runs.js"
import { StatusBoard } from "../StatusBoard.js"
import type { SafeFsReason } from "./internal/safeFs.js"
import { type NativeClose, WorkspaceFs } from "./WorkspaceFs.js"

/** At most 4 reads per connection (reference §7.3). */
export const MaxConcurrentReads = 4

const unconfirmed: WorkspaceReadResultPayload = { outcome: "unknown", error_code: "read_unconfirmed" }

/** A refusal before any handle was opened: definite. */
const rejectionFor = (reason: SafeFsReason, directory: boolean): ReadErrorCode => {
  switch (reason) {
    case "invalid_path":
      return "invalid_request"
    case "not_found":
    case "not_directory":
      return directory ? "not_directory" : "not_found"
    case "io":
      return "resource_unavailable"
    default:
      return "permission_denied"
  }
}

export const makeReads = Effect.gen(function* () {
  const outbound = yield* Outbound
  const background = yield* Background
  const fs = yield* WorkspaceFs
  // Observed: a failed or confirmed close wakes the status board (`agentwire status` shows it).
  const ownership = observed(yield* Ownership, (yield* StatusBoard).touch)
  const policy = yield* RuntimePolicy
  const admission = yield* Admission
  const executors = yield* Executors
  const runs = yield* Runs
  /** Reads whose native work has not finished (capacity), by operation id. */
  const pending = new Map<OperationId, string>()
  /** Owners (Executor ids) with an unconfirmed read: no further reads. */
  const stopped = new Set<string>()

  const send = (id: OperationId, payload: WorkspaceReadResultPayload, trace: string | undefined) =>
    outbound.sendWithin(withTrace({ type: "workspace_read_result", id, payload }, trace), StatusSendBudget)

  const reject = (id: OperationId, code: ReadErrorCode, trace: string | undefined) =>
    Background.fork(background, send(id, { outcome: "rejected", error_code: code }, trace))

  /** The target's Executor when it is a ready, unexpired admission or a running Run of this Environment. */
  const target = (p: WorkspaceReadPayload) =>
    Effect.gen(function* () {
      let entry: ExecutorEntry | undefined
      if (p.handle !== undefined) {
        const now = yield* Clock.currentTimeMillis
        const record = (yield* admission.view).find((r) => r.handle === p.handle)
        if (record === undefined || record.state !== "ready" || (record.expires_at !== undefined && record.expires_at <= now)) {
          return Option.none<ExecutorEntry>()
        }
        entry = record.executor_id === undefined ? undefined : Option.getOrUndefined(yield* executors.byId(record.executor_id))
      } else if (p.run_id !== undefined) {
        const run = Option.getOrUndefined(yield* runs.get(p.run_id))
        entry = run !== undefined && run.phase === "running" && run.turn !== undefined ? run.executor : undefined
      }
      return entry === undefined || entry.closing || entry.environmentId !== p.environment_id
        ? Option.none<ExecutorEntry>()
        : Option.some(entry)
    })

  /**
   * Registers a native handle in the read's scope: owned until `closeUntilConfirmed` confirms its close. The
   * returned `settle` runs that confirmed close once; the scope's finalizer (run when the read ends, or when its
   * owner is released or closed first) joins the same attempt, so a release waits for the confirmation.
   */
  const own = (scope: Scope.Scope, resource: string, close: NativeClose) =>
    Effect.gen(function* () {
      yield* ownership.acquire(resource, "workspace")
      const confirmed = yield* Deferred.make<void>()
      let started = false
      const settle = Effect.suspend(() => {
        if (started) return Deferred.await(confirmed)
        started = true
        return closeUntilConfirmed(resource, close, (reason) => `workspace close failed: ${reason}`).pipe(
          Effect.provideService(Ownership, ownership),
          Effect.provideService(RuntimePolicy, policy),
          Effect.andThen(Deferred.succeed(confirmed, undefined))
        )
      })
      yield* Scope.addFinalizer(scope, settle)
      return { settle }
    })

  /** The native read in `scope`: a definite rejection, `completed` after a confirmed close, or unconfirmed. */
  const nativeRead = (id: OperationId, p: WorkspaceReadPayload, scope: Scope.Scope, settles: Array<Effect.Effect<void>>) =>
    Effect.gen(function* () {
      const directory = p.operation === "directory"
      const resource = `read:${id}`
      if (directory) {
        const opened = yield* Effect.result(fs.openDirectory(p.path))
        if (opened._tag === "Failure") return { outcome: "rejected", error_code: rejectionFor(opened.failure, true) } as const
        settles.push((yield* own(scope, resource, opened.success.close)).settle)
        const listing = yield* Effect.result(opened.success.list(p.max_entries ?? 0))
        const closed = yield* Effect.result(opened.success.close)
        if (listing._tag === "Failure" || closed._tag === "Failure") return unconfirmed
        const entries = listing.success.entries.map((e) => ({ name: e.name, kind: e.kind, size_bytes: e.size }))
        return {
          outcome: "completed",
          close_acknowledged: true,
          directory: { entries, truncated: listing.success.truncated }
        } satisfies WorkspaceReadResultPayload
      }
      const opened = yield* Effect.result(fs.openFile(p.path))
      if (opened._tag === "Failure") return { outcome: "rejected", error_code: rejectionFor(opened.failure, false) } as const
      settles.push((yield* own(scope, resource, opened.success.close)).settle)
      const content = yield* Effect.result(opened.success.readPrefix(p.max_bytes))
      const closed = yield* Effect.result(opened.success.close)
      if (content._tag === "Failure" || closed._tag === "Failure") return unconfirmed
      const { bytes, more } = content.success
      return {
        outcome: "completed",
        ...(bytes.length === 0 ? {} : { data: encodeChunkData(bytes) }),
        ...(more && bytes.length === p.max_bytes ? { truncated: true } : {}),
        close_acknowledged: true
      } satisfies WorkspaceReadResultPayload
    })

  /** Runs one admitted read: native work in its own fiber, the reply at its result or at the 12 s bound. */
  const perform = (id: OperationId, p: WorkspaceReadPayload, entry: ExecutorEntry, trace: string | undefined) =>
    Effect.gen(function* () {
      const result = yield* Deferred.make<WorkspaceReadResultPayload>()
      const scope = yield* Scope.fork(entry.scope, "sequential")
      const settles: Array<Effect.Effect<void>> = []
      yield* Background.fork(
        background,
        nativeRead(id, p, scope, settles).pipe(
          Effect.catchCause(() => Effect.succeed(unconfirmed)),
          Effect.flatMap((r) => Deferred.succeed(result, r)),
          // Capacity is freed only after every handle of this read confirmed its close (retried until it does).
          Effect.ensuring(
            Effect.suspend(() => Effect.all(settles, { discard: true })).pipe(
              Effect.andThen(Scope.close(scope, Exit.void)),
              Effect.andThen(Effect.sync(() => pending.delete(id)))
            )
          )
        )
      )
      const reply = yield* Deferred.await(result).pipe(
        Effect.timeoutOrElse({ duration: ReadNativeBudget, orElse: () => Effect.succeed(unconfirmed) })
      )
      if (reply.outcome === "unknown") {
        stopped.add(entry.id)
        yield* Effect.logWarning("workspace read unconfirmed; no further reads on this owner").pipe(
          Effect.annotateLogs({ operation_id: id, executor_id: entry.id })
        )
      }
      yield* send(id, reply, trace)
    })

  const read = (id: OperationId, p: WorkspaceReadPayload, trace: string | undefined) =>
    Effect.gen(function* () {
      if (Option.isSome(validateReadRequest(p))) return yield* reject(id, "invalid_request", trace)
      if (pending.has(id)) {
        return yield* Effect.logWarning("duplicate pending workspace_read ignored").pipe(Effect.annotateLogs({ operation_id: id }))
      }
      if (pending.size >= MaxConcurrentReads) return yield* reject(id, "read_capacity", trace)
      if (Option.isNone(fs.root)) return yield* reject(id, "resource_unavailable", trace)
      const found = yield* target(p)
      if (Option.isNone(found) || stopped.has(found.value.id)) return yield* reject(id, "resource_unavailable", trace)
      pending.set(id, found.value.id)
      yield* Background.fork(background, perform(id, p, found.value, trace))
    })

  return {
    read,
    /** Reads whose native work has not finished. */
    active: Effect.sync(() => pending.size)
  }
})

export type Reads = Effect.Success<typeof makeReads>
