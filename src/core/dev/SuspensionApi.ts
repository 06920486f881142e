/**
 * The operator suspension routes (docs/operator-api.md "Suspension"), mounted beside the operator routes under
 * the same prefix and the same `Authorization: Bearer <operator token>`:
 *
 * - `POST /devices/:device_id/quiesce` `{environment_id}`: persists a new attempt, sends `environment_quiesce`
 *   on the device's live connection and answers 200 with the attempt (`state` says what the reply proved:
 *   `suspended`, `quiesce_rejected` with its `reason`, or `quiesce_unknown`);
 * - `POST /devices/:device_id/resume` `{rollback?}`: sends `environment_resume` for the device's latest
 *   attempt (with `rollback: true` after an uncertain quiesce) and answers 200 with the attempt (`resumed`,
 *   `resume_rejected`, `resume_unknown`).
 *
 * 400 for a malformed body, 404 for an unknown device, 409 when the device is offline (`device_offline`), has an
 * unsettled suspension (`suspension_unsettled`) or none to resume (`not_suspended`): nothing was sent then.
 */
import { Effect, Layer, Option, type Redacted, Schema } from "effect"
import { HttpRouter, type HttpServerRequest, HttpServerResponse } from "effect/http"
import { markAuthenticated } from "../server/GatewayHttp.js"
import { DeviceStore } from "./DeviceStore.js"
import { deviceIdParam, errorResponse, logUnauthorized, OperatorPrefix, readBody } from "./OperatorApi.js"
import { OperatorNotFound, OperatorUnavailable } from "./OperatorErrors.js"
import type { OperatorConflict, OperatorRequestInvalid } from "./OperatorErrors.js"
import * as OperatorToken from "./OperatorToken.js"
import { Suspensions } from "./Suspensions.js"

const QuiesceBody = Schema.Struct({ environment_id: Schema.String })
const ResumeBody = Schema.Struct({ rollback: Schema.optionalKey(Schema.Boolean) })

type SuspensionApiError = OperatorRequestInvalid | OperatorNotFound | OperatorConflict | OperatorUnavailable

/** The suspension routes, registered on the current `HttpRouter`. */
export const layer = (token: Redacted.Redacted<string>): Layer.Layer<never, never, HttpRouter.HttpRouter | Suspensions | DeviceStore> =>
  HttpRouter.use((router) =>
    Effect.gen(function* () {
      const suspensions = yield* Suspensions
      const devices = yield* DeviceStore
      const authorized = (request: HttpServerRequest.HttpServerRequest): boolean => {
        const header = request.headers["authorization"]
        return header !== undefined && header.startsWith("Bearer ") &&
          OperatorToken.matches(token, header.slice("Bearer ".length).trim())
      }
      const known = (deviceId: string) =>
        devices.get(deviceId).pipe(
          Effect.mapError((e) => new OperatorUnavailable({ operation: e.operation })),
          Effect.flatMap((d) => Option.isNone(d) ? Effect.fail(new OperatorNotFound({ resource: "device", id: deviceId })) : Effect.void)
        )
      const route = <R>(
        handler: (request: HttpServerRequest.HttpServerRequest, deviceId: string) => Effect.Effect<unknown, SuspensionApiError, R>
      ) =>
      (request: HttpServerRequest.HttpServerRequest) =>
        authorized(request)
          ? Effect.gen(function* () {
            markAuthenticated(request)
            return yield* deviceIdParam.pipe(
              Effect.tap(known),
              Effect.flatMap((deviceId) => handler(request, deviceId)),
              Effect.map((body) => HttpServerResponse.jsonUnsafe(body, { status: 200 })),
              Effect.catch((e) => Effect.succeed(errorResponse(e)))
            )
          })
          : Effect.as(
            logUnauthorized(request),
            HttpServerResponse.jsonUnsafe({ error: "unauthorized", detail: "Authorization: Bearer <operator token> required" }, { status: 401 })
          )
      const p = (path: string) => `${OperatorPrefix}/devices/:device_id${path}` as HttpRouter.PathInput
      yield* router.add("POST", p("/quiesce"), route((request, deviceId) =>
        Effect.flatMap(readBody(request, QuiesceBody), (body) => suspensions.quiesce(deviceId, body.environment_id))))
      yield* router.add("POST", p("/resume"), route((request, deviceId) =>
        Effect.flatMap(readBody(request, ResumeBody), (body) => suspensions.resume(deviceId, body))))
    })
  )
