/**
 * The Runtime side of the wire scenario suite: the real daemon (Daemon.run with its real Connector, HTTP
 * bootstrap and WebSocket transport, the scripted harness, deterministic ids) in-process against the scripted
 * Core over loopback. Time is the test's TestClock; the scripted Core's own waits run on the live clock.
 * Imports the daemon and the conformance kit, never the gateway.
 */
import { Context, Duration, Effect, Exit, Fiber, Layer, Option, Redacted } from "effect"
import { TestClock } from "effect/testing"
import type { Fact, WireScenario } from "../../scenarios/WireScenario.js"
import { type Hooks, replay, type StepFailure } from "../../src/conformance/Replay.js"
import type { Verdict } from "../../src/conformance/Report.js"
import * as ScriptedCore from "../../src/conformance/ScriptedCore.js"
import { unsafeMake } from "../../src/proto/Ids.js"
import { ProtocolVersion } from "../../src/proto/Version.js"
import * as Daemon from "../../src/runtime/Daemon.js"
import { ScriptedSignals } from "../../src/runtime/harness/scripted/ScriptedSignals.js"
import * as RuntimeProcess from "../../src/runtime/RuntimeProcess.js"
import { StatusBoard, type StatusSnapshot } from "../../src/runtime/StatusBoard.js"
import { Connector } from "../../src/runtime/transport/Connector.js"

export const DeviceId = "7f0c1a52-3b7e-4d52-9a55-0c2f4c6f9b11"
export const Credential = Redacted.make("awdc_wire-runtime-runner-credential")

/** Polls a condition on the live clock until it holds (bounded): state changes after a frame are asynchronous. */
const eventually = (
  what: string,
  condition: Effect.Effect<Option.Option<string>>
): Effect.Effect<void, StepFailure> =>
  Effect.gen(function* () {
    let last = "not observed"
    for (let i = 0; i < 400; i++) {
      const failure = yield* condition
      if (Option.isNone(failure)) return
      last = failure.value
      yield* TestClock.withLive(Effect.sleep("5 millis"))
    }
    return yield* Effect.fail<StepFailure>({ reason: `${what}: ${last}` })
  })

const checkFact = (
  fact: Fact,
  board: StatusBoard["Service"],
  daemon: Fiber.Fiber<void, Daemon.DaemonRejected>
): Effect.Effect<void, StepFailure> => {
  const snapshot = board.snapshot
  const when = (what: string, f: (s: StatusSnapshot) => string | undefined) =>
    eventually(what, Effect.map(snapshot, (s) => Option.fromNullishOr(f(s))))
  switch (fact._tag) {
    case "DaemonStopped":
      return eventually(
        `the daemon did not stop with ${fact.reason}`,
        Effect.sync(() => {
          const exit = daemon.pollUnsafe()
          if (exit === undefined) return Option.some("still running")
          if (Exit.isSuccess(exit)) return fact.reason === "shutdown" ? Option.none() : Option.some("stopped after a shutdown")
          const rejected = Exit.findErrorOption(exit)
          if (Option.isNone(rejected)) return Option.some("stopped with a defect or an interruption")
          const reason = rejected.value.reason === "incompatible_version"
            ? "incompatible_version"
            : rejected.value.reason === "runtime_retired"
            ? "runtime_retired"
            : "rejected_credential"
          return reason === fact.reason ? Option.none() : Option.some(`stopped with ${rejected.value.reason}`)
        })
      )
    case "DaemonRunning":
      return when("the daemon is not connected", (s) =>
        daemon.pollUnsafe() !== undefined ? "stopped" : s.connection.state === "connected" ? undefined : s.connection.state)
    case "CleanupUnconfirmed":
      return when(`no ${fact.kind} cleanup unconfirmed after ${fact.atLeastAttempts} attempts`, (s) =>
        s.unconfirmed.some((u) => u.kind === fact.kind && u.attempts >= fact.atLeastAttempts)
          ? undefined
          : JSON.stringify(s.unconfirmed.map((u) => ({ kind: u.kind, attempts: u.attempts }))))
    case "CleanupConfirmed":
      return when("cleanup is not confirmed", (s) =>
        s.unconfirmed.length === 0 && s.executors.every((e) => e.state !== "closing" && e.state !== "cleanup_unconfirmed")
          ? undefined
          : `${s.unconfirmed.length} unconfirmed, executors ${JSON.stringify(s.executors.map((e) => e.state))}`)
    case "RunOwned":
      return when(`the daemon does not own ${fact.run}`, (s) =>
        s.runs.some((r) => r.run_id === fact.run) ? undefined : `runs ${JSON.stringify(s.runs.map((r) => r.run_id))}`)
    case "NoRuns":
      return when("the daemon still owns Runs", (s) =>
        s.runs.length === 0 ? undefined : `runs ${JSON.stringify(s.runs.map((r) => `${r.run_id}:${r.state}`))}`)
    default:
      return Effect.fail({ reason: `the Runtime runner cannot check ${fact._tag} (a Core fact)` })
  }
}

/**
 * Replays one scenario against the real daemon. The daemon and the scripted Core live in the caller's scope.
 */
export const runRuntimeScenario = (scenario: WireScenario): Effect.Effect<Verdict, ScriptedCore.ListenFailed> =>
  Effect.scoped(
    Effect.gen(function* () {
      const setup = scenario.setup ?? {}
      const core = yield* ScriptedCore.make({ deviceId: DeviceId, credential: Credential })
      yield* core.configure({ heartbeatSeconds: setup.heartbeatSeconds ?? 15 })
      const first = scenario.steps[0]
      if (first?._tag === "Connect") yield* core.prepareFor(first)

      const deviceId = unsafeMake.deviceId(DeviceId)
      const context = yield* Layer.build(
        Layer.mergeAll(
          RuntimeProcess.layer({
            ids: "sequential",
            ...(setup.maxActive === undefined ? {} : { maxActive: setup.maxActive }),
            scripted: {
              ...(setup.disabledCapabilities === undefined ? {} : { disabledCapabilities: setup.disabledCapabilities }),
              ...(setup.available === undefined ? {} : { available: setup.available })
            }
          }),
          StatusBoard.layer({ daemonVersion: "0.0.0-wire", wireVersion: ProtocolVersion, pid: 1, deviceId: DeviceId, coreUrl: core.coreUrl }),
          Connector.layer({ apiBase: core.coreUrl, deviceId, credential: Credential, userAgent: "agentwire/wire-test" })
        )
      )
      const signals = Context.get(context, ScriptedSignals)
      const board = Context.get(context, StatusBoard)
      const daemon = yield* Daemon.run({ deviceId, coreOrigin: core.coreUrl }).pipe(
        Effect.provide(context),
        Effect.forkScoped
      )

      /** While the scripted Core waits for a redial: once the daemon is in backoff, jump to its next attempt. */
      const nudge = Effect.gen(function* () {
        const s = yield* board.snapshot
        if (s.connection.state === "backoff" && s.connection.next_attempt_ms !== undefined) {
          yield* TestClock.setTime(s.connection.next_attempt_ms)
        }
        yield* TestClock.withLive(Effect.sleep("2 millis"))
      })

      const hooks: Hooks = {
        adjustClock: (d: Duration.Duration) => TestClock.adjust(d),
        settle: (signal) => signals.fire(signal),
        check: (fact) => checkFact(fact, board, daemon),
        nudge,
        live: TestClock.withLive,
        frameTimeout: Duration.seconds(5),
        mode: "in-process"
      }
      const verdict = yield* replay(scenario, core.endpoint, hooks)
      yield* Fiber.interrupt(daemon).pipe(
        Effect.timeoutOrElse({ duration: Duration.seconds(60), orElse: () => Effect.void }),
        Effect.forkChild,
        Effect.flatMap((interrupting) =>
          Effect.gen(function* () {
            // Cleanup retries run on the TestClock: move it until the daemon confirmed its cleanup and stopped.
            for (let i = 0; i < 120 && interrupting.pollUnsafe() === undefined; i++) {
              yield* TestClock.adjust("1 second")
              yield* TestClock.withLive(Effect.sleep("1 millis"))
            }
            yield* Fiber.join(interrupting)
          })
        )
      )
      return verdict
    })
  )
