/**
 * The operator Files API (docs/operator-api.md "Files"): a Session's `self_hosted` workspace, mounted beside
 * the operator routes under the same prefix and the same `Authorization: Bearer <operator token>`.
 *
 * - `GET    /sessions/:session_id/files?path=&max_entries=` one directory level (a non-directory lists empty);
 * - `GET    /sessions/:session_id/files/content?path=&max_bytes=` up to 1 MiB of a file, base64, with `truncated`;
 * - `PUT    /sessions/:session_id/files/content` `{path, data}` creates or replaces a file (≤ 5 MiB decoded,
 *   checked before any Runtime work);
 * - `GET    /sessions/:session_id/files/export` the workspace as a tar archive (`application/x-tar`);
 * - `POST   /sessions/:session_id/files/writes/:write_id/settle` `{status: "completed" | "failed"}` settles a write
 *   left unknown, as the operator found the file (409 `write_not_unknown` for any other write; nothing is sent).
 *
 * Status rule of these routes: 4xx means the workspace is unchanged and nothing more will happen (Core refused
 * before sending, or the Runtime refused definitely: the body's `source` says which); 503 means the outcome is
 * not proven (`read_unknown`, `write_unknown`, `export_unknown`) or the Runtime definitely failed
 * (`write_failed`, `export_failed`); a write left unknown keeps its reservation unsettled, and the Session's
 * next write answers 409 `write_unsettled` naming it (the write id the settle route takes).
 * Bodies never echo a path, file bytes or peer text.
 */
import { ByteSize, type Cause, Deferred, Effect, Exit, Fiber, Layer, Option, Queue, type Redacted, Schema, Stream } from "effect"
import { HttpIncomingMessage, HttpRouter, type HttpServerRequest, HttpServerResponse } from "effect/http"
import { Limits, Transfer } from "../../proto/index.js"
import { markAuthenticated } from "../server/GatewayHttp.js"
import type { ReadOnlyPreparationError } from "../workspace/ReadOnlyPreparation.js"
import type { ExportError, ReadError, WriteError } from "../workspace/WorkspaceErrors.js"
import { Files, type FilesRefusal } from "./Files.js"
import { errorResponse, logUnauthorized, OperatorPrefix } from "./OperatorApi.js"
import { OperatorRequestInvalid } from "./OperatorErrors.js"
import * as OperatorToken from "./OperatorToken.js"

/** A Files write body: base64 of at most 5 MiB decoded is about 7 MiB of JSON. */
export const MaxFilesBodyBytes = 8 * 1024 * 1024

const json = (status: number, body: unknown) => HttpServerResponse.jsonUnsafe(body, { status })
const fail = (status: number, error: string, detail: string, source?: "core" | "runtime") =>
  json(status, { error, detail, ...(source === undefined ? {} : { source }) })

type FilesError = FilesRefusal | ReadError | WriteError | ExportError | ReadOnlyPreparationError

/** The HTTP answer of every Files error. */
export const filesErrorResponse = (e: FilesError): HttpServerResponse.HttpServerResponse => {
  switch (e._tag) {
    case "WorkspaceRefused":
      return e.reason === "invalid_request"
        ? fail(400, "invalid_request", `the ${e.family} request is invalid (${e.detail ?? "request"})`, "core")
        : fail(409, "workspace_busy", e.message, "core")
    case "ReadRejected":
      switch (e.code) {
        case "not_found":
          return fail(404, "file_not_found", "no such file in the workspace", "runtime")
        case "permission_denied":
          return fail(403, "permission_denied", "the Runtime may not read this path", "runtime")
        case "invalid_request":
          return fail(400, "invalid_request", "the Runtime refused the path or limits", "runtime")
        case "read_unsupported":
          return fail(422, "read_unsupported", e.message, "runtime")
        default:
          return fail(409, e.code, e.message, "runtime")
      }
    case "WriteRejected":
      return e.code === "invalid_request" || e.reason === "unsafe_destination"
        ? fail(400, e.reason ?? e.code, e.message, "runtime")
        : e.code === "write_unsupported"
        ? fail(422, e.code, e.message, "runtime")
        : fail(409, e.reason ?? e.code, e.message, "runtime")
    case "ExportRejected":
      return fail(e.code === "read_unsupported" ? 422 : 409, e.code, e.message, "runtime")
    case "PreparationRejected":
    case "PreparationFailed":
      return fail(409, "preparation_refused", e.message, "runtime")
    case "ReadUnknown":
    case "ReadOnlyPreparationUnknown":
      return fail(503, "read_unknown", e.message)
    case "WriteFailed":
      return fail(503, "write_failed", e.message)
    case "WriteUnknown":
      return fail(503, "write_unknown", e.message)
    case "ExportFailed":
      return fail(503, "export_failed", e.message)
    case "ExportUnknown":
      return fail(503, "export_unknown", e.message)
    default:
      return errorResponse(e)
  }
}

const WriteBody = Schema.Struct({ path: Schema.String, data: Schema.String })
const SettleBody = Schema.Struct({ status: Schema.Literals(["completed", "failed"]) })

/** Reads a settle body (a few bytes of JSON). */
const readSettle = (request: HttpServerRequest.HttpServerRequest) =>
  request.text.pipe(
    Effect.provideService(HttpIncomingMessage.MaxBodySize, ByteSize.bytes(4096)),
    Effect.mapError(() => new OperatorRequestInvalid({ detail: "the body could not be read (at most 4 KiB)" })),
    Effect.flatMap((text) =>
      Effect.try({ try: () => JSON.parse(text) as unknown, catch: () => new OperatorRequestInvalid({ detail: "the body is not JSON" }) })
    ),
    Effect.flatMap((body) =>
      Schema.decodeUnknownEffect(SettleBody)(body, { onExcessProperty: "error" }).pipe(
        Effect.mapError(() => new OperatorRequestInvalid({ detail: "the body must be {status: \"completed\" | \"failed\"}" }))
      )
    )
  )

const intParam = (url: URL, name: string, fallback: number, max: number) =>
  Effect.suspend(() => {
    const raw = url.searchParams.get(name)
    if (raw === null) return Effect.succeed(fallback)
    const n = Number(raw)
    return /^\d+$/.test(raw) && n >= 1 && n <= max
      ? Effect.succeed(n)
      : Effect.fail(new OperatorRequestInvalid({ detail: `${name} must be an integer in 1..${max}` }))
  })

/** Reads the write body (at most 8 MiB), decodes the base64 and checks the 5 MiB bound before any Runtime work. */
const readWrite = (request: HttpServerRequest.HttpServerRequest) =>
  request.text.pipe(
    Effect.provideService(HttpIncomingMessage.MaxBodySize, ByteSize.bytes(MaxFilesBodyBytes)),
    Effect.mapError(() => new OperatorRequestInvalid({ detail: "the body could not be read (at most 8 MiB)" })),
    Effect.flatMap((text) =>
      Effect.try({ try: () => JSON.parse(text) as unknown, catch: () => new OperatorRequestInvalid({ detail: "the body is not JSON" }) })
    ),
    Effect.flatMap((body) =>
      Schema.decodeUnknownEffect(WriteBody)(body, { onExcessProperty: "error" }).pipe(
        Effect.mapError(() => new OperatorRequestInvalid({ detail: "the body must be {path: string, data: base64 string}" }))
      )
    ),
    Effect.flatMap((body) => {
      const bytes = Transfer.decodeChunkData(body.data)
      if (bytes._tag === "Failure") return Effect.fail(new OperatorRequestInvalid({ detail: "data is not standard padded base64" }))
      if (bytes.success.length > Limits.MaxPublicInlineWriteBytes) {
        return Effect.fail(new OperatorRequestInvalid({ detail: `the decoded file is larger than ${Limits.MaxPublicInlineWriteBytes} bytes` }))
      }
      return Effect.succeed({ path: body.path, bytes: bytes.success })
    })
  )

/** The Files routes, registered on the current `HttpRouter` (same token rule as the operator API). */
export const layer = (token: Redacted.Redacted<string>): Layer.Layer<never, never, HttpRouter.HttpRouter | Files> =>
  HttpRouter.use((router) =>
    Effect.gen(function* () {
      const files = yield* Files
      const authorized = (request: HttpServerRequest.HttpServerRequest): boolean => {
        const header = request.headers["authorization"]
        return header !== undefined && header.startsWith("Bearer ") &&
          OperatorToken.matches(token, header.slice("Bearer ".length).trim())
      }
      const route = <R>(handler: (request: HttpServerRequest.HttpServerRequest, url: URL, sessionId: string) => Effect.Effect<HttpServerResponse.HttpServerResponse, FilesError, R>) =>
      (request: HttpServerRequest.HttpServerRequest) =>
        authorized(request)
          ? Effect.gen(function* () {
            markAuthenticated(request)
            const params = yield* HttpRouter.params
            const url = new URL(request.url, "http://operator.invalid")
            return yield* Effect.catch(handler(request, url, params["session_id"] ?? ""), (e) => Effect.succeed(filesErrorResponse(e)))
          })
          : Effect.as(logUnauthorized(request), fail(401, "unauthorized", "Authorization: Bearer <operator token> required"))
      const p = (path: string) => `${OperatorPrefix}/sessions/:session_id/files${path}` as HttpRouter.PathInput
      const allowed = new Map<string, ReadonlyArray<string>>([
        ["", ["GET"]],
        ["/content", ["GET", "PUT"]],
        ["/export", ["GET"]],
        ["/writes/:write_id/settle", ["POST"]]
      ])

      yield* router.add("GET", p(""), route((_, url, sessionId) =>
        Effect.gen(function* () {
          const maxEntries = yield* intParam(url, "max_entries", Limits.MaxDirectoryEntries, Limits.MaxDirectoryEntries)
          const listing = yield* files.list(sessionId, url.searchParams.get("path") ?? "", maxEntries)
          return json(200, listing)
        })))
      yield* router.add("GET", p("/content"), route((_, url, sessionId) =>
        Effect.gen(function* () {
          const maxBytes = yield* intParam(url, "max_bytes", Limits.MaxReadResultBytes, Limits.MaxReadResultBytes)
          const read = yield* files.read(sessionId, url.searchParams.get("path") ?? "", maxBytes)
          return json(200, { data: Transfer.encodeChunkData(read.data), size_bytes: read.data.length, truncated: read.truncated })
        })))
      yield* router.add("PUT", p("/content"), route((request, _, sessionId) =>
        Effect.gen(function* () {
          const body = yield* readWrite(request)
          return json(200, yield* files.write(sessionId, body.path, body.bytes))
        })))
      yield* router.add("POST", p("/writes/:write_id/settle"), route((request, _, sessionId) =>
        Effect.gen(function* () {
          const body = yield* readSettle(request)
          const writeId = (yield* HttpRouter.params)["write_id"] ?? ""
          return json(200, yield* files.settle(sessionId, writeId, body.status))
        })))
      yield* router.add("GET", p("/export"), route((_, __, sessionId) =>
        Effect.gen(function* () {
          // One chunk ahead at most: the Runtime is asked for the next chunk only after the client took this one.
          const chunks = yield* Queue.bounded<Uint8Array, FilesError | Cause.Done>(1)
          // Completes at the first chunk (undefined) or with the error that ended the export before it.
          const first = yield* Deferred.make<FilesError | undefined>()
          const producer = yield* files.exportTar(sessionId, (bytes) =>
            Effect.andThen(Queue.offer(chunks, bytes), Deferred.succeed(first, undefined))).pipe(
              Effect.exit,
              Effect.flatMap((exit) =>
                Exit.isSuccess(exit)
                  ? Effect.andThen(Queue.end(chunks), Deferred.succeed(first, undefined))
                  : Effect.andThen(
                    Queue.failCause(chunks, exit.cause),
                    Deferred.succeed(first, Option.getOrUndefined(Exit.findErrorOption(exit)))
                  )),
              Effect.forkDetach
            )
          const early = yield* Deferred.await(first).pipe(Effect.onInterrupt(() => Fiber.interrupt(producer)))
          // The export ended with an error before any byte: answer it with its status.
          if (early !== undefined) return filesErrorResponse(early)
          const body = Stream.fromQueue(chunks).pipe(Stream.ensuring(Fiber.interrupt(producer)))
          return HttpServerResponse.stream(body, {
            contentType: "application/x-tar",
            headers: { "content-disposition": `attachment; filename="workspace-${sessionId.replace(/[^A-Za-z0-9-]/g, "")}.tar"` }
          })
        })))
      for (const [suffix, methods] of allowed) {
        for (const method of ["GET", "POST", "PUT", "PATCH", "DELETE"] as const) {
          if (methods.includes(method)) continue
          yield* router.add(method, p(suffix), (request) =>
            Effect.succeed(
              authorized(request)
                ? HttpServerResponse.jsonUnsafe(
                  { error: "method_not_allowed", detail: `allowed: ${methods.join(", ")}` },
                  { status: 405, headers: { allow: methods.join(", ") } }
                )
                : fail(401, "unauthorized", "Authorization: Bearer <operator token> required")
            ))
        }
      }
    })
  )
