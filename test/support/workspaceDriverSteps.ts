/**
 * Steps shared by the tests of Core's transfer drivers (`RuntimePrepare`, and the workspace read / write /
 * export drivers) against the gateway's real DeviceSession over an in-memory socket (`coreFakeSession.ts`):
 * Core's next frame without its trace, a driver forked until its first frame was sent, and the TestClock moved
 * with heartbeats so the connection's liveness bound keeps it open.
 */
import { Effect } from "effect"
import { TestClock } from "effect/testing"
import type { Messages } from "../../src/proto/index.js"
import type { CoreHarness } from "./coreFakeSession.js"
import { heartbeat } from "./coreScriptedRuntime.js"

/** Core's next frame without its diagnostic trace (the caller's span). */
export const receive = (h: CoreHarness) =>
  Effect.map(h.receive, (m) => {
    const { trace: _trace, ...rest } = m as Messages.CoreToRuntime & { trace?: string }
    return rest as Messages.CoreToRuntime
  })

/** Forks `effect` and returns its fiber once Core's first frame of it was sent. */
export const started = <A, E>(h: CoreHarness, effect: Effect.Effect<A, E>) =>
  Effect.gen(function*() {
    const fiber = yield* Effect.forkChild(effect)
    const sent = yield* receive(h)
    return { fiber, sent }
  })

/** Moves the TestClock by `ms`, with a heartbeat every 30 s so the 60 s liveness bound keeps the connection. */
export const advance = (h: CoreHarness, ms: number) =>
  Effect.gen(function*() {
    let left = ms
    while (left > 0) {
      const step = Math.min(left, 30_000)
      yield* TestClock.adjust(step)
      yield* h.emit(heartbeat())
      left -= step
    }
    yield* h.flush
  })
