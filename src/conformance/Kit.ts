/**
 * The conformance kit for other implementations (`agentwire conformance runtime|core`): the same wire
 * scenarios, replayed by a scripted peer against an external Runtime or Core over real sockets, with a report
 * per scenario.
 *
 * An external implementation cannot be driven the way the in-process runners drive ours, so the kit replays
 * only what the wire alone can reproduce (`Replay.kitIneligibility`): no native settlement signals and no
 * clock control on a Runtime, no Core frames (they need a driver) on a Core; behaviour checks (`check` steps)
 * are not observable and are counted as skipped; a silence is a real wait capped at `silenceCap`. Scenarios
 * after which a Runtime stops for good (a refused connection, device_shutdown) run last, and only the first of
 * them: the Runtime under test is gone afterwards.
 *
 * Never logs or reports a credential or a peer payload beyond the redacted, truncated divergence.
 */
import { Duration, Effect, Option, type Redacted, type Scope } from "effect"
import { replays, type WireScenario } from "../../scenarios/WireScenario.js"
import { WorkspaceDirectoryBinding } from "../../scenarios/Workspace.js"
import { type Hooks, kitIneligibility, replay } from "./Replay.js"
import type { Report, ScenarioResult, Verdict } from "./Report.js"
import * as ScriptedCore from "./ScriptedCore.js"
import * as ScriptedRuntime from "./ScriptedRuntime.js"
import * as WorkspaceFixture from "./WorkspaceFixture.js"

export interface KitTiming {
  /** How long to wait for an expected frame. */
  readonly frameTimeout: Duration.Duration
  /** How long to wait for the Runtime to (re)connect (runtime kit). */
  readonly connectTimeout: Duration.Duration
  /** A silence step waits this long at most (real time). */
  readonly silenceCap: Duration.Duration
}

export const defaultTiming: KitTiming = {
  frameTimeout: Duration.seconds(10),
  connectTimeout: Duration.seconds(60),
  silenceCap: Duration.millis(300)
}

const kitHooks = (timing: KitTiming): Hooks => ({
  adjustClock: (d) => Effect.sleep(Duration.min(d, timing.silenceCap)),
  live: (effect) => effect,
  frameTimeout: timing.frameTimeout,
  connectTimeout: timing.connectTimeout,
  mode: "kit"
})

/** Whether the Runtime under test is gone after this scenario (it expects a refusal or a shutdown). */
export const stopsRuntime = (scenario: WireScenario): boolean =>
  scenario.steps.some((s) => s._tag === "Check" && s.side === "runtime" && s.fact._tag === "DaemonStopped") ||
  scenario.steps.some((s) => s._tag === "Connect" && s.expect._tag === "Refused")

export interface RuntimeKitOptions {
  readonly host: string
  readonly port: number
  readonly deviceId: string
  readonly credential: Redacted.Redacted<string>
  readonly scenarios: ReadonlyArray<WireScenario>
  /** The Runtime's bound on active preparations, when the operator set one (scenarios that need a bound run only when it matches). */
  readonly maxActive?: number
  /**
   * The workspace fixture directory the Runtime under test is bound to (`--workspace-fixture`): the workspace
   * scenarios run (the tree is restored before each), every other scenario is skipped; absent, the reverse.
   */
  readonly workspace?: string
  readonly timing?: KitTiming
  /** Called once the scripted Core listens (print where to point the Runtime). */
  readonly onListening: (info: { readonly coreUrl: string; readonly port: number }) => Effect.Effect<void>
  /** Called after each scenario (progress). */
  readonly onResult?: (result: ScenarioResult) => Effect.Effect<void>
}

/** Why the external Runtime cannot replay this scenario as configured, or None. */
const runtimeSetupMismatch = (scenario: WireScenario, maxActive: number | undefined, workspace: string | undefined): Option.Option<string> => {
  const setup = scenario.setup ?? {}
  if (setup.workspace !== undefined && workspace === undefined) {
    return Option.some("needs a Runtime bound to the kit's workspace fixture (--workspace-fixture)")
  }
  if (setup.workspace === undefined && workspace !== undefined) {
    return Option.some("needs a Runtime without an Environment binding (run the kit without --workspace-fixture)")
  }
  if ((setup.workspace?.failFirstClose ?? []).length > 0) {
    return Option.some("needs fault injection in the Runtime's workspace (in-process runner only)")
  }
  if ((setup.disabledCapabilities ?? []).length > 0 || setup.available === false) {
    return Option.some("needs a Runtime whose scripted harness declares a narrowed declaration (in-process runner only)")
  }
  if (setup.maxActive !== undefined && setup.maxActive !== maxActive) {
    return Option.some(`needs a Runtime started with at most ${setup.maxActive} active preparation(s) (--max-active ${setup.maxActive})`)
  }
  return Option.none()
}

/**
 * Serves a scripted Core and replays every selected scenario the Runtime side can replay, one connection
 * after another, as the Runtime under test connects. Returns the report; the listener closes with the scope.
 */
export const runRuntimeKit = (options: RuntimeKitOptions): Effect.Effect<Report, ScriptedCore.ListenFailed, Scope.Scope> =>
  Effect.gen(function* () {
    const timing = options.timing ?? defaultTiming
    const core = yield* ScriptedCore.make({
      host: options.host,
      port: options.port,
      deviceId: options.deviceId,
      credential: options.credential
    })
    yield* options.onListening({ coreUrl: core.coreUrl, port: core.port })
    const ordered = [...options.scenarios.filter((s) => !stopsRuntime(s)), ...options.scenarios.filter(stopsRuntime)]
    const results: Array<ScenarioResult> = []
    let stoppedBy: string | undefined
    for (const scenario of ordered) {
      const skip = (reason: string): Verdict => ({ _tag: "Skip", reason })
      const verdict: Verdict = yield* Effect.suspend((): Effect.Effect<Verdict> => {
        const plan = scenario.replay.runtime
        if ("skip" in plan) return Effect.succeed(skip(plan.skip))
        const ineligible = Option.orElse(kitIneligibility(scenario, "runtime"), () => runtimeSetupMismatch(scenario, options.maxActive, options.workspace))
        if (Option.isSome(ineligible)) return Effect.succeed(skip(ineligible.value))
        if (stoppedBy !== undefined) {
          return Effect.succeed(skip(`the Runtime stopped for good in ${stoppedBy}; run it alone with --scenario ${scenario.name}`))
        }
        const workspace = options.workspace
        if (workspace === undefined) return replay(scenario, core.endpoint, kitHooks(timing))
        // A write scenario changes the tree: every workspace scenario starts from the exact fixture.
        return WorkspaceFixture.restore(workspace).pipe(
          Effect.matchEffect({
            onFailure: (e) => Effect.succeed<Verdict>(skip(e.message)),
            onSuccess: () => replay(scenario, core.endpoint, { ...kitHooks(timing), bindings: new Map([[WorkspaceDirectoryBinding, workspace]]) })
          })
        )
      })
      if (verdict._tag !== "Skip" && stopsRuntime(scenario)) stoppedBy = scenario.name
      const result: ScenarioResult = { scenario: scenario.name, side: "runtime", verdict }
      results.push(result)
      if (options.onResult !== undefined) yield* options.onResult(result)
    }
    // Report in the scenarios' own order.
    const order = new Map(options.scenarios.map((s, i) => [s.name, i]))
    results.sort((a, b) => (order.get(a.scenario) ?? 0) - (order.get(b.scenario) ?? 0))
    return { side: "runtime", results }
  })

export interface CoreKitOptions {
  /** The Core's machine API base (`…/api/v1`) or origin. */
  readonly coreUrl: string
  readonly deviceId: string
  readonly credential: Redacted.Redacted<string>
  readonly scenarios: ReadonlyArray<WireScenario>
  readonly timing?: KitTiming
  readonly onResult?: (result: ScenarioResult) => Effect.Effect<void>
}

/**
 * Acts as a scripted Runtime against a Core: replays every selected scenario Core can be checked on from
 * the wire alone (connection rules, heartbeats and declarations, invalid and stray frames, replacement).
 */
export const runCoreKit = (options: CoreKitOptions): Effect.Effect<Report> =>
  Effect.gen(function* () {
    const timing = options.timing ?? defaultTiming
    const peer = ScriptedRuntime.make({ coreUrl: options.coreUrl, deviceId: options.deviceId, credential: options.credential })
    const results: Array<ScenarioResult> = []
    for (const scenario of options.scenarios) {
      const verdict: Verdict = !replays(scenario, "core")
        ? { _tag: "Skip", reason: "skip" in scenario.replay.core ? scenario.replay.core.skip : "not replayed on Core" }
        : yield* Option.match(kitIneligibility(scenario, "core"), {
          onSome: (reason): Effect.Effect<Verdict> => Effect.succeed({ _tag: "Skip", reason }),
          onNone: () => replay(scenario, peer.endpoint, kitHooks(timing))
        })
      const result: ScenarioResult = { scenario: scenario.name, side: "core", verdict }
      results.push(result)
      if (options.onResult !== undefined) yield* options.onResult(result)
    }
    return { side: "core", results }
  })
