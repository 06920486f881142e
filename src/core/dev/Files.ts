/**
 * The dev Core's Files operations on a Session's `self_hosted` workspace (protocol "Workspace operations";
 * docs/dev-core.md "Files"). Every operation resolves the Session, its Environment binding and its device's
 * live connection first; any refusal there is definite and nothing is sent.
 *
 * - list / read: during an unfinished Turn whose Run was dispatched, the read targets that exact Run. On an
 *   idle Session it takes the Session's scheduling reservation (SessionLocks), prepares the read-only profile,
 *   reads, releases the preparation, then the reservation. A Turn start meanwhile is refused (`session_busy`).
 * - write: the body (≤ 5 MiB decoded, checked by the API before this call) is reserved durably under the
 *   Session lock (WriteReservations) before any Runtime work; the reservation settles only on an exact
 *   receipt; a successor write waits for the lock and is refused while an earlier one is unsettled. Never
 *   replayed.
 * - export: on an idle Session, under the reservation and a read-only preparation, streams the tar archive
 *   into the caller's consumer, one chunk at a time.
 * - settle: an operator's settlement of a write left `unknown` (write_unconfirmed, a lost connection after the
 *   commit, a Core restart), under the Session lock: `completed` or `failed`, as the operator found the file.
 *   Only an `unknown` write is settled this way; nothing is sent to the Runtime.
 */
import { Cause, Context, Effect, Layer, Option, Result } from "effect"
import { Ids, Limits } from "../../proto/index.js"
import { admit } from "../CapabilityPolicy.js"
import type { DeviceSession } from "../DeviceSession.js"
import { admissionInput } from "../ExecutionRequest.js"
import { Gateway } from "../Gateway.js"
import { CapabilityUnsupported } from "../Outcome.js"
import * as ReadOnlyPreparation from "../workspace/ReadOnlyPreparation.js"
import * as WorkspaceExport from "../workspace/WorkspaceExport.js"
import * as WorkspaceRead from "../workspace/WorkspaceRead.js"
import * as WorkspaceWrite from "../workspace/WorkspaceWrite.js"
import { DevIds } from "./DevIds.js"
import { unavailable } from "./Operator.js"
import { OperatorConflict, OperatorNotFound, OperatorRequestInvalid } from "./OperatorErrors.js"
import { executionSpec, type SelfHostedEnvironment, type SessionConfiguration } from "./SessionConfig.js"
import { NodeRouter } from "./pg/NodeRouter.js"
import { NodeStreams } from "./pg/NodeStreams.js"
import { OwnerLeases } from "./pg/OwnerLeases.js"
import * as RoutedFiles from "./pg/RoutedFiles.js"
import { SessionLocks } from "./SessionLocks.js"
import { type SessionRecord, SessionStore } from "./SessionStore.js"
import { TurnStore } from "./TurnStore.js"
import { WriteReservations } from "./WriteReservations.js"

export type {
  FileBytes,
  FileListing,
  FilesExportError,
  FilesReadError,
  FilesRefusal,
  FilesWriteError,
  FileWritten,
  WriteSettled
} from "./FileViews.js"
import type { FileBytes, FileListing, FilesExportError, FilesReadError, FilesRefusal, FilesWriteError, FileWritten, WriteSettled } from "./FileViews.js"

export class Files extends Context.Service<Files, {
  /** One directory level (`""` = the root). A path that is not a directory lists as empty. */
  readonly list: (sessionId: string, path: string, maxEntries: number) => Effect.Effect<FileListing, FilesReadError>
  /** Up to `maxBytes` (≤ 1 MiB) of a file, with explicit truncation. */
  readonly read: (sessionId: string, path: string, maxBytes: number) => Effect.Effect<FileBytes, FilesReadError>
  /** Creates or replaces a file with `body`. */
  readonly write: (sessionId: string, path: string, body: Uint8Array) => Effect.Effect<FileWritten, FilesWriteError>
  /** Settles a write of the Session left `unknown`, as the operator found the file (nothing is sent). */
  readonly settle: (sessionId: string, writeId: string, status: "completed" | "failed") => Effect.Effect<WriteSettled, FilesRefusal>
  /** Streams the workspace as a tar archive into `onChunk`; succeeds with its size once `completed` arrived. */
  readonly exportTar: <E, R>(
    sessionId: string,
    onChunk: (bytes: Uint8Array) => Effect.Effect<void, E, R>
  ) => Effect.Effect<{ readonly size_bytes: number }, FilesExportError | E, R>
}>()("agentwire/core/dev/Files") {}

interface Resolved {
  readonly session: SessionRecord
  readonly environment: SelfHostedEnvironment
  readonly device: DeviceSession
}

const make = Effect.gen(function* () {
  const sessions = yield* SessionStore
  const turns = yield* TurnStore
  const gateway = yield* Gateway
  const ids = yield* DevIds
  const locks = yield* SessionLocks
  const reservations = yield* WriteReservations

  /** The Session and its self_hosted Environment (no device yet). */
  const resolveSession = Effect.fn("Files.resolveSession")(function* (sessionId: string) {
    const session = yield* unavailable(sessions.get(sessionId))
    if (Option.isNone(session)) return yield* new OperatorNotFound({ resource: "session", id: sessionId })
    const environment = session.value.environment
    if (environment.type !== "self_hosted") {
      return yield* new OperatorConflict({ reason: "no_workspace", detail: "the Session's Environment is type none" })
    }
    return { session: session.value, environment }
  })

  /** The Session, its Environment and its device's live connection. */
  const resolve = Effect.fn("Files.resolve")(function* (sessionId: string) {
    const { environment, session } = yield* resolveSession(sessionId)
    const deviceId = session.deviceId
    if (deviceId === undefined) return yield* new OperatorConflict({ reason: "device_offline", detail: "the Session has no device" })
    const device = yield* gateway.session(Ids.unsafeMake.deviceId(deviceId))
    if (Option.isNone(device)) return yield* new OperatorConflict({ reason: "device_offline", detail: `device ${deviceId} is not connected` })
    return { session, environment, device: device.value } satisfies Resolved
  })

  const specOf = (r: Resolved) =>
    executionSpec({
      sessionId: r.session.sessionId,
      agentKind: r.session.agentKind,
      configuration: r.session.configuration as SessionConfiguration,
      hasStartedTurn: false,
      nativeSessionId: undefined,
      environment: r.environment
    })

  /** The Session's unfinished Turn, if any. */
  const unfinishedTurn = (sessionId: string) =>
    Effect.map(unavailable(turns.unfinishedOf(sessionId)), Option.getOrUndefined)

  /** Runs `use` with a ready read-only preparation on an idle Session, under its scheduling reservation. */
  const onIdle = <A, E>(
    r: Resolved,
    use: (handle: ReadOnlyPreparation.ReadOnlyHandle) => Effect.Effect<A, E>,
    also: "workspace_output_export" | undefined
  ) =>
    locks.withLock(r.session.sessionId, Effect.scoped(Effect.gen(function* () {
      if ((yield* unfinishedTurn(r.session.sessionId)) !== undefined) {
        return yield* new OperatorConflict({ reason: "turn_active", detail: "the Session has an unfinished Turn" })
      }
      const spec = specOf(r)
      const admitted = admit(admissionInput(spec, { message_images: false, function_result_images: false }, "idle_directory_read"), yield* r.device.declaration)
      if (Result.isFailure(admitted)) return yield* admitted.failure
      if (also !== undefined && !admitted.success.capabilities[also]) {
        return yield* new CapabilityUnsupported({ kind: spec.agent_kind, capability: also, source: "declaration" })
      }
      const requestId = Ids.unsafeMake.preparationRequestId(yield* ids.next("preparation"))
      const handle = yield* ReadOnlyPreparation.acquire(r.device, requestId, spec, admitted.success)
      return yield* use(handle)
    })))

  const readWith = (sessionId: string, path: string, kind: WorkspaceRead.ReadKind) =>
    Effect.gen(function* () {
      const r = yield* resolve(sessionId)
      const operationId = Ids.unsafeMake.operationId(yield* ids.next("operation"))
      const request = (target: WorkspaceRead.ReadTarget) =>
        WorkspaceRead.read(r.device, { operationId, target, environmentId: r.environment.id, path, kind })
      const turn = yield* unfinishedTurn(sessionId)
      if (turn !== undefined) {
        // During execution: the exact Run, on the connection the Turn runs on.
        if (turn.status !== "running" || turn.dispatchedAtMs === undefined || turn.deviceId !== r.device.deviceId) {
          return yield* new OperatorConflict({ reason: "turn_starting", detail: "the Session's Turn has no Run to read from yet" })
        }
        return yield* request({ run_id: Ids.unsafeMake.runId(turn.runId) })
      }
      return yield* onIdle(r, (h) => request({ handle: h.handle }), undefined)
    })

  const list = Effect.fn("Files.list")(function* (sessionId: string, path: string, maxEntries: number) {
    const done = yield* readWith(sessionId, path, { _tag: "Directory", maxEntries }).pipe(
      // The Files contract: a path that is missing, a file or a symlink lists as an empty page.
      Effect.catchIf(
        (e): e is Extract<typeof e, { _tag: "ReadRejected" }> => e._tag === "ReadRejected" && e.code === "not_directory",
        () => Effect.succeed({ _tag: "Directory" as const, entries: [], truncated: false })
      )
    )
    return done._tag === "Directory" ? { entries: done.entries, truncated: done.truncated } : { entries: [], truncated: false }
  })

  const read = Effect.fn("Files.read")(function* (sessionId: string, path: string, maxBytes: number) {
    const done = yield* readWith(sessionId, path, { _tag: "Bytes", maxBytes })
    return done._tag === "Bytes" ? { data: done.data, truncated: done.truncated } : { data: new Uint8Array(0), truncated: false }
  })

  const write = Effect.fn("Files.write")(function* (sessionId: string, path: string, body: Uint8Array) {
    if (body.length > Limits.MaxPublicInlineWriteBytes) {
      return yield* new OperatorRequestInvalid({ detail: `the file is larger than ${Limits.MaxPublicInlineWriteBytes} bytes` })
    }
    yield* resolveSession(sessionId)
    return yield* locks.withLock(sessionId, Effect.gen(function* () {
      if ((yield* unfinishedTurn(sessionId)) !== undefined) {
        return yield* new OperatorConflict({ reason: "turn_active", detail: "the Session has an unfinished Turn" })
      }
      const earlier = yield* unavailable(reservations.unsettled(sessionId))
      if (Option.isSome(earlier)) {
        return yield* new OperatorConflict({
          reason: "write_unsettled",
          detail: `write ${earlier.value.reservationId} has no exact settlement (${earlier.value.status})`
        })
      }
      const r = yield* resolve(sessionId)
      const writeId = yield* ids.next("operation")
      const sha256 = WorkspaceWrite.sha256Hex(body)
      yield* unavailable(reservations.reserve({ reservationId: writeId, sessionId, sha256, sizeBytes: body.length }))
      // From here on the reservation is durable; every exit below settles it exactly or leaves it unsettled.
      const settle = (status: "dispatched" | "committing" | "completed" | "rejected" | "failed" | "unknown") =>
        unavailable(reservations.mark(writeId, status))
      yield* settle("dispatched")
      // Once reserved, the caller going away (an HTTP disconnect) does not stop the transfer: only an exact
      // receipt or the driver's own budget ends it, so the reservation is settled by what is known.
      const result = yield* Effect.exit(Effect.uninterruptible(WorkspaceWrite.write(r.device, {
        operationId: Ids.unsafeMake.operationId(writeId),
        environmentId: r.environment.id,
        sessionId,
        path,
        body
      }, { beforeCommit: settle("committing") })))
      if (result._tag === "Success") {
        yield* Effect.ignore(settle("completed"))
        return { ...result.value, write_id: writeId }
      }
      const error = Option.getOrUndefined(Cause.findErrorOption(result.cause))
      const status = error === undefined
        ? "unknown"
        : error._tag === "WriteRejected"
        ? "rejected"
        : error._tag === "WriteFailed" || error._tag === "WorkspaceRefused"
        ? "failed"
        : "unknown"
      yield* Effect.ignore(settle(status))
      return yield* Effect.failCause(result.cause)
    }))
  })

  const settle = Effect.fn("Files.settle")(function* (sessionId: string, writeId: string, status: "completed" | "failed") {
    yield* resolveSession(sessionId)
    return yield* locks.withLock(sessionId, Effect.gen(function* () {
      const row = yield* unavailable(reservations.get(writeId))
      if (Option.isNone(row) || row.value.sessionId !== sessionId) return yield* new OperatorNotFound({ resource: "write", id: writeId })
      const refused = new OperatorConflict({
        reason: "write_not_unknown",
        detail: `write ${writeId} is ${row.value.status}: only a write left unknown is settled by an operator`
      })
      if (row.value.status !== "unknown") return yield* refused
      if (!(yield* unavailable(reservations.settleUnknown(writeId, status)))) return yield* refused
      yield* Effect.logWarning("write reservation settled by an operator").pipe(Effect.annotateLogs({ write_id: writeId, status }))
      return { write_id: writeId, status } satisfies WriteSettled
    }))
  })

  const exportTar = <E, R>(sessionId: string, onChunk: (bytes: Uint8Array) => Effect.Effect<void, E, R>) =>
    Effect.gen(function* () {
      const r = yield* resolve(sessionId)
      const operationId = Ids.unsafeMake.operationId(yield* ids.next("operation"))
      const context = yield* Effect.context<R>()
      return yield* onIdle(
        r,
        (h) =>
          WorkspaceExport.exportTo(r.device, { operationId, handle: h.handle, environmentId: r.environment.id }, (bytes) =>
            Effect.provideContext(onChunk(bytes), context)),
        "workspace_output_export"
      )
    }).pipe(Effect.withSpan("Files.exportTar"))

  // Several Core nodes (PostgreSQL): list, read, write and export on a Session whose device another node holds
  // are routed there (pg/RoutedFiles.ts, the export through pg/NodeStreams.ts); absent on a single node.
  const router = yield* Effect.serviceOption(NodeRouter)
  const leases = yield* Effect.serviceOption(OwnerLeases)
  const streams = yield* Effect.serviceOption(NodeStreams)
  const routed = Option.isSome(router) && Option.isSome(leases) && Option.isSome(streams)
    ? Option.some(yield* RoutedFiles.make({ list, read, write, exportTar }).pipe(
      Effect.provideService(NodeRouter, router.value),
      Effect.provideService(OwnerLeases, leases.value),
      Effect.provideService(NodeStreams, streams.value)
    ))
    : Option.none()

  return Files.of({ list, read, write, exportTar, ...(Option.isSome(routed) ? routed.value : {}), settle })
})

export const layer: Layer.Layer<Files, never, SessionStore | TurnStore | Gateway | DevIds | SessionLocks | WriteReservations> =
  Layer.effect(Files, make)
