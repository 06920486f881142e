/**
 * The Runtime side of the wire scenario suite: the real daemon (Daemon.run with its real Connector, HTTP
 * bootstrap and WebSocket transport, the scripted harness, deterministic ids) in-process against the scripted
 * Core over loopback. Time is the test's TestClock; the scripted Core's own waits run on the live clock.
 * Imports the daemon and the conformance kit, never the gateway.
 *
 * Waiting is event-driven: a check re-evaluates only when the daemon's StatusBoard reports a change or the
 * daemon fiber ends, bounded by a live-clock safety deadline that turns into a divergence. The TestClock
 * moves only when the scenario says so, when the daemon is in reconnect backoff (to its next attempt) and,
 * after the scenario, while the daemon confirms its cleanup. No real sleeps.
 */
import { Clock, Context, Duration, Effect, Exit, Fiber, Layer, Option, Redacted, Schedule } from "effect"
import { TestClock } from "effect/testing"
import type { Fact, WireScenario, WorkspaceSetup } from "../../scenarios/WireScenario.js"
import { EnvironmentId, WorkspaceDirectoryBinding } from "../../scenarios/Workspace.js"
import { type Hooks, replay, type StepFailure } from "../../src/conformance/Replay.js"
import type { Verdict } from "../../src/conformance/Report.js"
import * as ScriptedCore from "../../src/conformance/ScriptedCore.js"
import * as WorkspaceFixture from "../../src/conformance/WorkspaceFixture.js"
import { unsafeMake } from "../../src/proto/Ids.js"
import { ProtocolVersion } from "../../src/proto/Version.js"
import * as Daemon from "../../src/runtime/Daemon.js"
import { ScriptedSignals } from "../../src/runtime/harness/scripted/ScriptedSignals.js"
import * as RuntimeProcess from "../../src/runtime/RuntimeProcess.js"
import { RuntimePolicy, type RuntimePolicyShape } from "../../src/runtime/RuntimePolicy.js"
import { StatusBoard, type StatusSnapshot } from "../../src/runtime/StatusBoard.js"
import { Connector } from "../../src/runtime/transport/Connector.js"
import type { WorkspaceFsShape } from "../../src/runtime/workspace/WorkspaceFs.js"

export const DeviceId = "7f0c1a52-3b7e-4d52-9a55-0c2f4c6f9b11"
export const Credential = Redacted.make("awdc_wire-runtime-runner-credential")

/** How long (live) a check waits for the daemon's state to get there before reporting a divergence. */
const SafetyBound = Duration.seconds(5)

type DaemonFiber = Fiber.Fiber<void, Daemon.DaemonRejected>

/**
 * Re-checks `condition` after every board change and when the daemon stops, until it returns None; fails with
 * the last reason after `SafetyBound` (live), or at once when the daemon stopped and the state is final.
 */
const eventually = (board: StatusBoard["Service"], daemon: DaemonFiber) =>
(
  what: string,
  condition: Effect.Effect<Option.Option<string>>
): Effect.Effect<void, StepFailure> =>
  Effect.gen(function* () {
    let last = "not observed"
    const loop: Effect.Effect<boolean> = Effect.gen(function* () {
      while (true) {
        const stopped = daemon.pollUnsafe() !== undefined // before the check: then the check saw the final state
        const changed = yield* board.changes.arm // armed before the check: no change between the two is missed
        const failure = yield* condition
        if (Option.isNone(failure)) return true
        last = failure.value
        if (stopped) return false
        yield* Effect.raceFirst(changed, Fiber.await(daemon))
      }
    })
    const done = yield* TestClock.withLive(
      loop.pipe(Effect.timeoutOrElse({ duration: SafetyBound, orElse: () => Effect.succeed(false) }))
    )
    if (!done) return yield* Effect.fail<StepFailure>({ reason: `${what}: ${last}` })
  })

const checkFact = (
  fact: Fact,
  board: StatusBoard["Service"],
  daemon: DaemonFiber
): Effect.Effect<void, StepFailure> => {
  const snapshot = board.snapshot
  const eventually_ = eventually(board, daemon)
  const when = (what: string, f: (s: StatusSnapshot) => string | undefined) =>
    eventually_(what, Effect.map(snapshot, (s) => Option.fromNullishOr(f(s))))
  switch (fact._tag) {
    case "DaemonStopped":
      return eventually_(
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
    case "SuspensionState":
      return when(`the board does not show suspension ${fact.state} ${fact.suspendId ?? ""}`, (s) =>
        s.suspension.state === fact.state && s.suspension.suspend_id === fact.suspendId &&
          (fact.suspendId === undefined || s.suspension.environment_id === EnvironmentId)
          ? undefined
          : JSON.stringify(s.suspension))
    default:
      return Effect.fail({ reason: `the Runtime runner cannot check ${fact._tag} (a Core fact)` })
  }
}

/** The cleanup retry delay after `attempts` failed attempts, from the daemon's policy (its Schedule, stepped). */
const cleanupRetryDelay = (policy: RuntimePolicyShape, attempts: number): Effect.Effect<Duration.Duration> =>
  Effect.gen(function* () {
    const step = yield* Schedule.toStep(policy.cleanupBackoff)
    let delay = Duration.zero
    for (let i = 0; i < Math.max(1, attempts); i++) {
      const next = yield* step(0, undefined).pipe(Effect.option)
      if (Option.isNone(next)) break
      delay = next.value[1]
    }
    return delay
  })

/**
 * How far to move the clock while the daemon closes after the scenario: to the next cleanup retry when a
 * cleanup is unconfirmed; to the end of the attempt bound while a close is in flight; else one second (other
 * bounded waits: a Turn's settlement after a local stop, the transport's close grace).
 */
const cleanupStep = (policy: RuntimePolicyShape, s: StatusSnapshot): Effect.Effect<Duration.Duration> => {
  if (s.unconfirmed.length > 0) {
    return cleanupRetryDelay(policy, Math.min(...s.unconfirmed.map((u) => u.attempts)))
  }
  if (s.executors.some((e) => e.state === "closing")) return Effect.succeed(policy.closeAttemptTimeout)
  return Effect.succeed(Duration.seconds(1))
}

/** The scenario's native faults over the real workspace implementation: a listed file's first close fails. */
const injectFaults = (setup: WorkspaceSetup) => (fs: WorkspaceFsShape): WorkspaceFsShape => {
  const failing = new Set(setup.failFirstClose ?? [])
  return {
    ...fs,
    openFile: (path) =>
      Effect.map(fs.openFile(path), (file) => {
        if (!failing.has(path)) return file
        failing.delete(path)
        let failed = false
        return {
          ...file,
          close: Effect.suspend(() => {
            if (failed) return file.close
            failed = true
            return Effect.fail("io" as const)
          })
        }
      })
  }
}

/** Bound on the test time the daemon may take to confirm its cleanup after a scenario. */
const MaxCleanupTime = Duration.minutes(5)

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
      // A workspace scenario binds the daemon to a fresh copy of the fixture tree, removed with the scope.
      const workspace = setup.workspace === undefined ? undefined : yield* WorkspaceFixture.scoped.pipe(Effect.orDie)
      const context = yield* Layer.build(
        Layer.mergeAll(
          RuntimeProcess.layer({
            ids: "sequential",
            ...(setup.maxActive === undefined ? {} : { maxActive: setup.maxActive }),
            scripted: {
              ...(setup.disabledCapabilities === undefined ? {} : { disabledCapabilities: setup.disabledCapabilities }),
              ...(setup.available === undefined ? {} : { available: setup.available })
            },
            ...(workspace === undefined || setup.workspace === undefined ? {} : {
              environment: { environmentId: EnvironmentId, root: workspace, configured: workspace, networkAccess: "disabled" },
              wrapWorkspaceFs: injectFaults(setup.workspace)
            })
          }),
          StatusBoard.layer({ daemonVersion: "0.0.0-wire", wireVersion: ProtocolVersion, pid: 1, deviceId: DeviceId, coreUrl: core.coreUrl }),
          Connector.layer({ apiBase: core.coreUrl, deviceId, credential: Credential, userAgent: "agentwire/wire-test" })
        )
      )
      const signals = Context.get(context, ScriptedSignals)
      const board = Context.get(context, StatusBoard)
      const policy = Context.get(context, RuntimePolicy)
      const daemon = yield* Daemon.run({ deviceId, coreOrigin: core.coreUrl }).pipe(
        Effect.provide(context),
        Effect.forkScoped
      )

      /**
       * Repeated while the scripted Core waits for a redial: once the board says backoff, jump to the daemon's
       * next attempt; then wait for the next change. Never returns once the daemon stopped (the scripted
       * Core's deadline reports the missing connection).
       */
      const nudge = Effect.gen(function* () {
        const changed = yield* board.changes.arm
        if (daemon.pollUnsafe() !== undefined) return yield* Effect.never
        const s = yield* board.snapshot
        const next = s.connection.next_attempt_ms
        if (s.connection.state === "backoff" && next !== undefined) {
          if ((yield* Clock.currentTimeMillis) < next) yield* TestClock.setTime(next)
          // setTime runs woken fibers until they suspend: still in the same backoff means the daemon started its
          // sleep only after the clock moved (a scheduling race), so that sleep ends one delay later.
          const after = yield* board.snapshot
          if (after.connection.state === "backoff" && after.connection.since_ms === s.connection.since_ms &&
            after.connection.connection_number === s.connection.connection_number) {
            yield* TestClock.adjust(Duration.millis(Math.max(1, next - s.connection.since_ms)))
          }
        }
        yield* Effect.raceFirst(changed, Fiber.await(daemon))
      })

      const hooks: Hooks = {
        adjustClock: (d: Duration.Duration) => TestClock.adjust(d),
        settle: (signal) => signals.fire(signal),
        check: (fact) => checkFact(fact, board, daemon),
        nudge,
        live: TestClock.withLive,
        frameTimeout: Duration.seconds(5),
        mode: "in-process",
        ...(workspace === undefined ? {} : { bindings: new Map([[WorkspaceDirectoryBinding, workspace]]) })
      }
      const verdict = yield* replay(scenario, core.endpoint, hooks)

      // Stop the daemon. Its cleanup (close retries, bounded waits) runs on the TestClock: move the clock by
      // what the board says is pending until the daemon fiber ended. Each move runs the fibers it wakes until
      // they suspend, so no change is waited for in between; the final wait is bounded on the live clock.
      const interrupting = yield* Fiber.interrupt(daemon).pipe(Effect.forkChild)
      let moved = Duration.zero
      while (interrupting.pollUnsafe() === undefined && Duration.isLessThan(moved, MaxCleanupTime)) {
        const step = yield* cleanupStep(policy, yield* board.snapshot)
        yield* TestClock.adjust(step)
        moved = Duration.sum(moved, step)
      }
      const stopped = yield* TestClock.withLive(
        Fiber.await(interrupting).pipe(Effect.as(true), Effect.timeoutOrElse({ duration: SafetyBound, orElse: () => Effect.succeed(false) }))
      )
      if (!stopped) {
        return yield* Effect.die(new Error(`the daemon did not stop within ${Duration.format(moved)} of test time after the scenario`))
      }
      return verdict
    })
  )
