/**
 * The read side of a device session (the rules are in the header of `DeviceSession.ts`): decode each frame,
 * route it (internal/inboundRoutes.ts), apply the malformed-frame policy to an invalid one
 * (internal/malformedFrames.ts and the invalid-frame budget), and keep the declaration from heartbeats. The
 * read loop does no work beyond decode and route; it waits only for room in a full Run subscriber.
 */
import { Clock, Context, Effect, Layer, Result } from "effect"
import { Envelope, Messages } from "../proto/index.js"
import * as CoreMetrics from "./CoreMetrics.js"
import { type Handlers, routeHandlers } from "./internal/inboundRoutes.js"
import { failNamedObserver } from "./internal/malformedFrames.js"
import {
  type Declaration,
  SessionDeclaration,
  SessionEnd,
  SessionInfo,
  SessionLiveness,
  SessionRoutes,
  SessionTap
} from "./SessionServices.js"
import type { TransportEnded } from "./transport/DeviceTransport.js"
import { logVerdict, makeInvalidFrameBudget } from "./transport/internal/invalidFrames.js"

/** Frames routed between two yields of the read loop. */
const routeSlice = 16

export class SessionInbound extends Context.Service<SessionInbound, {
  /** Decodes and routes one frame; returns the work it must wait for (a log line, a full subscriber), if any. */
  readonly handleFrame: (frame: string | Uint8Array) => Effect.Effect<void> | undefined
  /**
   * Reads and routes frames until the connection has ended. Fails with `TransportEnded` when the transport
   * ends first; the caller ends the connection then.
   */
  readonly readLoop: Effect.Effect<void, TransportEnded>
}>()("agentwire/core/SessionInbound") {
  static readonly layer = Layer.effect(
    SessionInbound,
    Effect.gen(function*() {
      const { transport } = yield* SessionInfo
      const routes = yield* SessionRoutes
      const declaration = yield* SessionDeclaration
      const end = yield* SessionEnd
      const tap = yield* SessionTap
      const liveness = yield* SessionLiveness
      const clock = yield* Clock.Clock
      const invalidFrameBudget = makeInvalidFrameBudget()
      const metricContext = yield* Effect.context<never>()

      const handlers: Handlers = {
        ...routeHandlers(routes),
        heartbeat: (message) => {
          CoreMetrics.heartbeatUnsafe(metricContext)
          const payload = message.payload
          const next: Declaration = {
            kinds: new Map((payload.supported_agent_kinds ?? []).map((k) => [k.kind, k])),
            daemonVersion: payload.daemon_version,
            activeRequests: payload.active_requests,
            ts: payload.ts,
            receivedAtMs: clock.currentTimeMillisUnsafe()
          }
          declaration.declare(next)
          return undefined
        }
      }

      const onInvalid = (error: Envelope.InvalidFrame): Effect.Effect<void> => {
        CoreMetrics.invalidFrameUnsafe(metricContext, error.bytes, error.code)
        if (tap.enabled) {
          tap.frame({
            direction: "runtime→core",
            type: error.type ?? "invalid",
            ...(error.id === undefined ? {} : { id: error.id }),
            bytes: error.bytes,
            invalid: error.code
          })
        }
        const annotations = { code: error.code, type: error.type ?? "", id: error.id ?? "", bytes: error.bytes }
        if (error.type === "heartbeat") {
          end.terminate("invalid_heartbeat")
          return Effect.logWarning("invalid heartbeat: declaration cleared, connection closed").pipe(
            Effect.annotateLogs(annotations)
          )
        }
        const observerFailed = failNamedObserver(routes, error)
        // Bounded logging, and a close past the threshold (transport/internal/invalidFrames.ts).
        const verdict = invalidFrameBudget.admit(error.code, clock.currentTimeMillisUnsafe())
        const logged = logVerdict(
          verdict,
          Effect.logWarning(
            observerFailed ? "invalid frame: its observer failed with invalid_frame" : "invalid frame dropped"
          ).pipe(Effect.annotateLogs(annotations))
        )
        // Logged before the close, which ends this read loop.
        return verdict.close ? Effect.andThen(logged, Effect.sync(() => void end.terminate("invalid_frame", 1008))) : logged
      }

      const handleFrame = (frame: string | Uint8Array): Effect.Effect<void> | undefined => {
        // One envelope per text frame: a binary frame is refused as the daemon refuses it.
        const raw = typeof frame === "string" ? Envelope.decodeEnvelope(frame) : Envelope.refuseBinaryFrame(frame)
        if (Result.isFailure(raw)) return onInvalid(raw.failure)
        CoreMetrics.frameUnsafe(metricContext, "in", raw.success.bytes)
        const decoded = Messages.decodeRuntimeToCoreEnvelope(raw.success)
        if (Result.isFailure(decoded)) return onInvalid(decoded.failure)
        const message = decoded.success
        if (tap.enabled) {
          const id = "id" in message ? message.id : undefined
          tap.frame({
            direction: "runtime→core",
            type: message.type,
            ...(id === undefined ? {} : { id }),
            bytes: raw.success.bytes,
            message
          })
        }
        const handler = handlers[message.type] as (m: Messages.RuntimeToCore, bytes: number) => Effect.Effect<void> | undefined
        return handler(message, raw.success.bytes)
      }

      const readLoop = Effect.gen(function*() {
        while (end.ended() === undefined) {
          const frames = yield* transport.pull
          liveness.received()
          for (let i = 0; i < frames.length && end.ended() === undefined; i++) {
            const effect = handleFrame(frames[i]!)
            if (effect !== undefined) {
              liveness.holding(true)
              yield* effect
              liveness.holding(false)
              liveness.received()
            }
            // One socket read can hold hundreds of small frames: let subscribers drain their bounded buffers
            // between slices instead of routing the whole burst first. The loop still never waits on a subscriber.
            if ((i + 1) % routeSlice === 0) yield* Effect.yieldNow
          }
        }
      })

      return SessionInbound.of({ handleFrame, readLoop })
    })
  )
}
