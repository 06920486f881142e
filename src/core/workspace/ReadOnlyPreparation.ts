/**
 * The read-only preparation profile of an idle workspace read or export (protocol "Workspace operations";
 * reference §7.1): `execution_prepare` with `workspace_read_only` and exactly the bound Environment, awaited
 * to `ready`, held for the caller's scope, then released with `execution_release`.
 *
 * Ownership: the handle belongs to the caller's scope. Closing it sends `execution_release` and waits (10 s)
 * for `released`; a missing or failed release is logged (`cleanup_unconfirmed` stays the Runtime's: it keeps
 * ownership and capacity) and never reported as success. The handle cannot be started (the Runtime rejects
 * `execution_start` on it), so nothing here ever sends one.
 */
import { Clock, Duration, Effect, Option, Queue, Result, type Scope, Stream } from "effect"
import { type Ids } from "../../proto/index.js"
import type { Admitted } from "../CapabilityPolicy.js"
import type { DeviceSession } from "../DeviceSession.js"
import { executionRelease, type ExecutionSpec, readOnlyPrepare } from "../ExecutionRequest.js"
import { type CapabilityUnsupported, type ConfigurationRejected, PreparationFailed, PreparationRejected } from "../Outcome.js"
import { ReadOnlyPreparationUnknown, WorkspaceRefused } from "./WorkspaceErrors.js"

/** How long Core waits for `ready` (and, on release, for `released`). */
export const ReadyBudget = Duration.seconds(30)
export const ReleaseBudget = Duration.seconds(10)

export interface ReadOnlyHandle {
  readonly handle: Ids.AdmissionHandle
  readonly executorId: Ids.ExecutorId
}

export type ReadOnlyPreparationError =
  | ConfigurationRejected
  | CapabilityUnsupported
  | WorkspaceRefused
  | PreparationRejected
  | PreparationFailed
  | ReadOnlyPreparationUnknown

/**
 * Prepares and holds a read-only admission for the caller's scope. Success proves the Runtime granted a
 * `ready` read-only handle on this connection. Errors: `ConfigurationRejected` / `CapabilityUnsupported` /
 * `WorkspaceRefused` (nothing sent), `PreparationRejected` / `PreparationFailed` (the Runtime's definite
 * answer), `ReadOnlyPreparationUnknown` (sent without proof; released on a best-effort basis).
 */
export const acquire = (
  session: DeviceSession,
  requestId: Ids.PreparationRequestId,
  spec: ExecutionSpec,
  admitted: Admitted
): Effect.Effect<ReadOnlyHandle, ReadOnlyPreparationError, Scope.Scope> =>
  Effect.gen(function*() {
    const built = readOnlyPrepare(requestId, spec, admitted)
    if (Result.isFailure(built)) return yield* built.failure
    const statuses = yield* session.subscribePreparation(requestId).pipe(
      Effect.mapError((e) => new WorkspaceRefused({ family: "read", reason: "waiter_rejected", detail: e.reason }))
    )
    const queue = yield* Stream.toQueue(statuses, { capacity: "unbounded" })
    yield* session.send(built.success).pipe(
      Effect.mapError((e) => new WorkspaceRefused({ family: "read", reason: "not_sent", detail: e.reason }))
    )
    const deadline = (yield* Clock.currentTimeMillis) + Duration.toMillis(ReadyBudget)
    let handle: Ids.AdmissionHandle | undefined
    // From here on the Runtime may hold an admission: release whatever handle we learn, on every exit.
    yield* Effect.addFinalizer(() => handle === undefined ? Effect.void : release(session, requestId, handle, queue))
    while (true) {
      const now = yield* Clock.currentTimeMillis
      const next = yield* Queue.take(queue).pipe(
        Effect.map(Option.some),
        Effect.mapError(() => new ReadOnlyPreparationUnknown({ reason: "connection_lost" })),
        Effect.timeoutOrElse({ duration: Math.max(0, deadline - now), orElse: () => Effect.succeed(Option.none()) })
      )
      if (Option.isNone(next)) return yield* new ReadOnlyPreparationUnknown({ reason: "budget_exceeded" })
      const status = next.value
      if (status.handle !== undefined) handle = status.handle
      switch (status.state) {
        case "preparing":
          continue
        case "ready":
          if (status.handle === undefined || status.executor_id === undefined) {
            return yield* new ReadOnlyPreparationUnknown({ reason: "invalid_status" })
          }
          return { handle: status.handle, executorId: status.executor_id }
        case "rejected":
          return yield* new PreparationRejected({ operation: "execution_prepare", code: status.error_code ?? "invalid_request" })
        case "failed":
        case "expired":
        case "released":
          handle = undefined // terminal: nothing left to release
          return yield* new PreparationFailed({ state: status.state, ...(status.error_code === undefined ? {} : { code: status.error_code }) })
        default:
          return yield* new ReadOnlyPreparationUnknown({ reason: "invalid_status" })
      }
    }
  }).pipe(Effect.withSpan("ReadOnlyPreparation.acquire"), Effect.annotateLogs({ request_id: requestId }))

/** Sends `execution_release` and waits for `released`; anything else is logged as unconfirmed cleanup. */
const release = (
  session: DeviceSession,
  requestId: Ids.PreparationRequestId,
  handle: Ids.AdmissionHandle,
  queue: Queue.Dequeue<{ readonly state: string; readonly error_code?: string }, unknown>
): Effect.Effect<void> =>
  Effect.gen(function*() {
    const message = executionRelease(requestId, handle)
    if (Result.isFailure(message)) return
    const sent = yield* Effect.exit(session.send(message.success))
    if (sent._tag === "Failure") {
      return yield* Effect.logWarning("read-only preparation release not sent; the Runtime keeps the admission until it expires")
    }
    const confirmed = yield* Queue.take(queue).pipe(
      Effect.repeat({ until: (s) => s.state === "released" || s.state === "failed" || s.state === "expired" || s.state === "rejected" }),
      Effect.map((s) => s.state === "released" || s.state === "expired"),
      Effect.orElseSucceed(() => false),
      Effect.timeoutOrElse({ duration: ReleaseBudget, orElse: () => Effect.succeed(false) }),
      // Runs as a finalizer: the bounded wait must stay interruptible by its own timeout.
      Effect.interruptible
    )
    if (!confirmed) yield* Effect.logWarning("read-only preparation release unconfirmed (the Runtime keeps ownership)")
  })
