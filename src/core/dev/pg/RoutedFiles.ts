/**
 * The Files API on a node that does not hold the Session's device connection (docs/multi-node.md "Routing"):
 * list, read and write are routed through `NodeRouter` to the node holding the device's live owner lease,
 * which runs its local Files operation (Session lock, write reservation, the Runtime exchange) and returns
 * its typed answer, so the HTTP status and body are those of a single node. Bytes travel base64 in the
 * request and result rows. A device connected here, an unbound Session or no live lease elsewhere → local
 * (its own answer, e.g. `device_offline`). A route claimed but unanswered within the bound is unknown
 * (`ReadUnknown` / `WriteUnknown`, reason `budget_exceeded`; a write's reservation stays with the owning node,
 * which settles it); one no node took answers `device_offline`. The tar export is a stream (`NodeStreams`):
 * the requester asks the owning node to produce it (`files_export`, answered as soon as the export started)
 * and passes each chunk on as it arrives; a refusal before the first byte comes back as the owner's error, a
 * failure after it (the owner's, or the owner gone: `ExportUnknown` `connection_lost`) fails the stream.
 */
import { Clock, Effect, FiberSet, Option, Result, Schema } from "effect"
import { Ids } from "../../../proto/index.js"
import { Gateway } from "../../Gateway.js"
import { ConfigurationRejected, PreparationFailed, PreparationRejected } from "../../TurnErrors.js"
import {
  ExportFailed,
  ExportRejected,
  ExportUnknown,
  ReadOnlyPreparationUnknown,
  ReadRejected,
  ReadUnknown,
  WorkspaceRefused,
  WriteFailed,
  WriteRejected,
  WriteUnknown
} from "../../workspace/WorkspaceErrors.js"
import type { FileBytes, FileListing, FilesExportError, FilesReadError, FilesWriteError, FileWritten } from "../FileViews.js"
import { unavailable } from "../Operator.js"
import { OperatorConflict, OperatorUnavailable } from "../OperatorErrors.js"
import { SessionStore } from "../SessionStore.js"
import { NodeRouter } from "./NodeRouter.js"
import { NodeStreams, StreamLost } from "./NodeStreams.js"
import { StoreFailed } from "../StoreErrors.js"
import { OwnerLeases } from "./OwnerLeases.js"
import { RoutedErrorMembers } from "./RoutedTurns.js"

const FilesError = Schema.Union([
  ...RoutedErrorMembers,
  ConfigurationRejected,
  PreparationRejected,
  PreparationFailed,
  ReadOnlyPreparationUnknown,
  WorkspaceRefused,
  ReadRejected,
  ReadUnknown,
  WriteRejected,
  WriteFailed,
  WriteUnknown,
  ExportRejected,
  ExportFailed,
  ExportUnknown
])
const encodeError = Schema.encodeUnknownSync(FilesError)
/** An export error as stored in the final row; one the schema does not know is sent as unknown (never a failure). */
const encodeExportError = (e: unknown): unknown => {
  try {
    return encodeError(e)
  } catch {
    return encodeError(new ExportUnknown({ reason: "connection_lost", offset: 0 }))
  }
}
const decodeError = Schema.decodeUnknownOption(FilesError)

const answerOf = <A, E>(effect: Effect.Effect<A, E>, encode: (a: A) => unknown = (a) => a): Effect.Effect<unknown> =>
  Effect.match(effect, { onSuccess: (ok) => ({ ok: encode(ok) }), onFailure: (error) => ({ error: encodeError(error) }) })

const toBase64 = (bytes: Uint8Array) => Buffer.from(bytes).toString("base64")
const fromBase64 = (text: unknown) => new Uint8Array(Buffer.from(typeof text === "string" ? text : "", "base64"))

export interface LocalFiles {
  readonly list: (sessionId: string, path: string, maxEntries: number) => Effect.Effect<FileListing, FilesReadError>
  readonly read: (sessionId: string, path: string, maxBytes: number) => Effect.Effect<FileBytes, FilesReadError>
  readonly write: (sessionId: string, path: string, body: Uint8Array) => Effect.Effect<FileWritten, FilesWriteError>
  readonly exportTar: <E, R>(
    sessionId: string,
    onChunk: (bytes: Uint8Array) => Effect.Effect<void, E, R>
  ) => Effect.Effect<{ readonly size_bytes: number }, FilesExportError | E, R>
}

/** What the owner's export came to (the stream's final row), or a refusal of the request. */
const exportAnswer = (answer: unknown): Result.Result<{ readonly size_bytes: number }, FilesExportError> => {
  const r = answer as { readonly ok?: { readonly size_bytes?: unknown }; readonly error?: unknown } | null
  if (r !== null && typeof r === "object" && r.ok !== undefined) return Result.succeed({ size_bytes: Number(r.ok.size_bytes ?? 0) })
  const error = r !== null && typeof r === "object" ? decodeError(r.error) : Option.none()
  return Result.fail(Option.isSome(error) ? (error.value as FilesExportError) : new ExportUnknown({ reason: "connection_lost", offset: 0 }))
}

/** Serves the Files kinds with `local` on this node; returns list, read, write and export that route when needed. */
export const make = (local: LocalFiles) =>
  Effect.gen(function* () {
    const router = yield* NodeRouter
    const streams = yield* NodeStreams
    const leases = yield* OwnerLeases
    const sessions = yield* SessionStore
    const gateway = yield* Gateway
    const b = (body: unknown) => (body ?? {}) as Record<string, any>

    yield* router.serve("files_list", (_t, body) => answerOf(local.list(b(body).session_id, b(body).path, b(body).max_entries)))
    yield* router.serve("files_read", (_t, body) =>
      answerOf(local.read(b(body).session_id, b(body).path, b(body).max_bytes), (r) => ({ data: toBase64(r.data), truncated: r.truncated })))
    yield* router.serve("files_write", (_t, body) => answerOf(local.write(b(body).session_id, b(body).path, fromBase64(b(body).data))))
    // The export is produced by a fiber of its own; the request is answered as soon as it started.
    const producers = yield* FiberSet.make()
    yield* router.serve("files_export", (_t, body) =>
      Effect.as(
        FiberSet.run(
          producers,
          streams.produce(String(b(body).stream_id), String(b(body).consumer_node), (write) =>
            Effect.matchEffect(local.exportTar(String(b(body).session_id), write), {
              onSuccess: (ok) => Effect.succeed({ ok }),
              onFailure: (e) =>
                e._tag === "StreamAbandoned"
                  ? Effect.fail(e)
                  : Effect.succeed({ error: encodeExportError(e) })
            })).pipe(
              Effect.catchCause((cause) =>
                Effect.logInfo("routed export ended without its final row").pipe(Effect.annotateLogs({ cause: String(cause).slice(0, 300) }))
              )
            )
        ),
        { started: true }
      ))

    /** The other node holding the Session's device, when the device is not connected here. */
    const ownerOf = (sessionId: string) =>
      Effect.gen(function* () {
        const session = yield* unavailable(sessions.get(sessionId))
        const deviceId = Option.getOrUndefined(Option.flatMap(session, (s) => Option.fromNullishOr(s.deviceId)))
        if (deviceId === undefined) return Option.none<string>()
        if (Option.isSome(yield* gateway.session(Ids.unsafeMake.deviceId(deviceId)))) return Option.none<string>()
        const lease = yield* unavailable(leases.get(deviceId))
        const now = yield* Clock.currentTimeMillis
        return Option.filter(Option.map(lease, (l) => (l.expiresAtMs > now ? l.nodeId : router.nodeId)), (n) => n !== router.nodeId)
      })

    const routed = <A, E>(
      sessionId: string,
      localRun: Effect.Effect<A, E>,
      kind: string,
      body: unknown,
      decode: (ok: any) => A,
      onUnknown: E
    ): Effect.Effect<A, E | OperatorConflict | OperatorUnavailable> =>
      Effect.flatMap(ownerOf(sessionId), (node) =>
        Option.isNone(node) ? localRun : Effect.gen(function* () {
          const outcome = yield* unavailable(router.request(node.value, kind, undefined, body))
          switch (outcome._tag) {
            case "Withdrawn":
              return yield* new OperatorConflict({ reason: "device_offline", detail: "nothing was sent: the owning node did not take the request" })
            case "Unknown":
              return yield* Effect.fail(onUnknown)
            case "Answered": {
              const r = outcome.result as { readonly ok?: unknown; readonly error?: unknown } | null
              if (r !== null && typeof r === "object" && "ok" in r) return decode(r.ok)
              const error = r !== null && typeof r === "object" ? decodeError(r.error) : Option.none()
              return yield* Effect.fail(Option.isSome(error) ? (error.value as E) : onUnknown)
            }
          }
        }))

    const exportTar = <E, R>(
      sessionId: string,
      onChunk: (bytes: Uint8Array) => Effect.Effect<void, E, R>
    ): Effect.Effect<{ readonly size_bytes: number }, FilesExportError | E, R> =>
      Effect.flatMap(ownerOf(sessionId), (node) => {
        if (Option.isNone(node)) return local.exportTar(sessionId, onChunk)
        let received = 0
        const start = (streamId: string) =>
          Effect.flatMap(
            unavailable(router.request(node.value, "files_export", undefined, { session_id: sessionId, stream_id: streamId, consumer_node: router.nodeId })),
            (outcome): Effect.Effect<void, FilesExportError> =>
              outcome._tag === "Withdrawn"
                ? Effect.fail(new OperatorConflict({ reason: "device_offline", detail: "nothing was sent: the owning node did not take the request" }))
                : outcome._tag === "Unknown"
                ? Effect.fail(new ExportUnknown({ reason: "budget_exceeded", offset: 0 }))
                : Effect.void
          )
        return streams.consume(node.value, start, (bytes) => {
          received += bytes.length
          return onChunk(bytes)
        }).pipe(
          // The owning node stopped beating before the final row (it died, or lost the database), or this node
          // lost the database: the stream is cut, never completed short.
          Effect.mapError((e): FilesExportError | E =>
            e instanceof StreamLost || e instanceof StoreFailed
              ? new ExportUnknown({ reason: "connection_lost", offset: received })
              : e
          ),
          Effect.flatMap(({ final }) => Result.match(exportAnswer(final), { onSuccess: Effect.succeed, onFailure: Effect.fail }))
        )
      })

    return {
      exportTar,
      list: (sessionId: string, path: string, maxEntries: number) =>
        routed<FileListing, FilesReadError>(
          sessionId,
          local.list(sessionId, path, maxEntries),
          "files_list",
          { session_id: sessionId, path, max_entries: maxEntries },
          (ok) => ok as FileListing,
          new ReadUnknown({ reason: "budget_exceeded" })
        ),
      read: (sessionId: string, path: string, maxBytes: number) =>
        routed<FileBytes, FilesReadError>(
          sessionId,
          local.read(sessionId, path, maxBytes),
          "files_read",
          { session_id: sessionId, path, max_bytes: maxBytes },
          (ok) => ({ data: fromBase64(ok?.data), truncated: ok?.truncated === true }),
          new ReadUnknown({ reason: "budget_exceeded" })
        ),
      write: (sessionId: string, path: string, body: Uint8Array) =>
        routed<FileWritten, FilesWriteError>(
          sessionId,
          local.write(sessionId, path, body),
          "files_write",
          { session_id: sessionId, path, data: toBase64(body) },
          (ok) => ok as FileWritten,
          new WriteUnknown({ reason: "budget_exceeded" })
        )
    }
  })
