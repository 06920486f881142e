/**
 * The heartbeat (protocol "Ownership and connection" step 4, reference part 1 §4): sent at once when the
 * connection starts, then every `ConnectionInfo.heartbeatInterval`, from a fiber in the connection scope.
 * It declares `supported_agent_kinds` from the harness registry (complete declarations, encoded with the
 * proto codec, so an incomplete one is never sent), the Runs currently active and the daemon build version.
 * A heartbeat proves liveness only; it is never a receipt and never carries progress.
 */
import { Clock, type Duration, Effect, Schedule } from "effect"
import type { HeartbeatPayload } from "../proto/Capabilities.js"
import { FrameWriteDeadline } from "../proto/Limits.js"
import type { Messages } from "../proto/index.js"
import type { HarnessRegistry } from "./harness/HarnessRegistry.js"
import type { OutboundShape } from "./Outbound.js"
import * as RuntimeMetrics from "./RuntimeMetrics.js"

export interface HeartbeatDeps {
  readonly outbound: OutboundShape
  readonly registry: HarnessRegistry["Service"]
  readonly activeRequests: Effect.Effect<number>
  /** The Runtime build version (not the wire version); omitted when empty. */
  readonly daemonVersion: string
  readonly interval: Duration.Duration
}

/** One heartbeat: `ts` in Unix seconds from the Clock. */
export const message = (deps: Omit<HeartbeatDeps, "outbound" | "interval">) =>
  Effect.gen(function* () {
    const ts = Math.floor((yield* Clock.currentTimeMillis) / 1000)
    const kinds = yield* deps.registry.descriptors
    const payload: HeartbeatPayload = {
      ts,
      active_requests: yield* deps.activeRequests,
      ...(deps.daemonVersion === "" ? {} : { daemon_version: deps.daemonVersion }),
      ...(kinds.length === 0 ? {} : { supported_agent_kinds: kinds })
    }
    return { type: "heartbeat", payload } satisfies Messages.RuntimeToCore
  })

/** Sends a heartbeat now and then on the interval, forever (fork it in the connection scope). */
export const run = (deps: HeartbeatDeps): Effect.Effect<never> =>
  Effect.flatMap(message(deps), (heartbeat) => deps.outbound.sendWithin(heartbeat, FrameWriteDeadline)).pipe(
    Effect.tap((outcome) => (outcome._tag === "Sent" ? RuntimeMetrics.heartbeat : Effect.void)),
    Effect.repeat(Schedule.spaced(deps.interval)),
    Effect.andThen(Effect.never)
  )
