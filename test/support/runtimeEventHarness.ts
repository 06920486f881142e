/**
 * A test Harness whose Turns emit a fixed list of events, exactly as given (no validation), and then settle
 * `completed` with a fixed `done` payload. It plays an adapter that misbehaves: a mis-classified error, an event
 * the wire does not allow, a `done` that does not encode. Register it next to `scripted` with
 * `processLayer({ harnesses: [eventHarness(…)] })` and send a `prompt_request` for its kind.
 *
 * Its declaration supports what a direct `prompt_request` from the test helpers needs (the always-required
 * capabilities plus `environment_none`) and the test's `extra` capabilities, nothing more.
 */
import { Deferred, Effect, Option } from "effect"
import type { DonePayload } from "../../src/proto/RunEvents.js"
import type { Harness, Settlement, Turn, TurnEvent } from "../../src/runtime/harness/Harness.js"
import { alwaysRequiredOnly, type Overrides } from "./capabilities.js"

export const eventHarness = (
  kind: string,
  events: ReadonlyArray<TurnEvent>,
  done: DonePayload,
  /** Further capabilities the test needs declared (e.g. `subagent_observations`). */
  extra: Overrides = {}
): Harness => ({
  declaration: { kind, available: true, version: "0.0.1", capabilities: alwaysRequiredOnly({ environment_none: true, ...extra }) },
  prepare: () =>
    Effect.succeed({
      nativeSessionId: Effect.succeed(Option.none()),
      close: Effect.void,
      startTurn: (_runId, _input, sink) =>
        Effect.gen(function* () {
          const settled = yield* Deferred.make<Settlement>()
          // Emitted after startTurn returned, like a native stream; the Run's forwarder is already running.
          yield* Effect.forEach(events, sink.emit, { discard: true }).pipe(
            Effect.andThen(Deferred.succeed(settled, { outcome: "completed", done, reusable: false })),
            Effect.forkDetach
          )
          const turn: Turn = {
            cancel: Effect.void,
            cancellationOutcome: Effect.succeed(done),
            steerWithReceipt: () => Effect.never,
            submitFunctionResult: () => Effect.never,
            decidePermission: () => Effect.never,
            answerUserChoice: () => Effect.never,
            awaitSettlement: Deferred.await(settled)
          }
          return turn
        })
    })
})
