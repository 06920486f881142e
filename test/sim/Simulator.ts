/**
 * Runs one schedule (docs/simulation.md): builds the world, executes the plan step by step on the TestClock,
 * checks the invariants after every step, then brings the world to quiescence (faults stopped, every Turn
 * cancelled and every interaction answered) and checks liveness and the final ownership state.
 *
 * Everything is a function of the seed: the plan, the link's coin flips and the daemon's reconnect jitter (the
 * Random service is seeded). The trace records every step, every frame that crossed (type, id, a hash of its
 * text) and every operator result, so two runs of a seed can be compared byte for byte.
 */
import { Clock, Context, Effect, Exit, Logger, Option, Random, References, Scheduler, type Scope } from "effect"
import { TestClock } from "effect/testing"
import { TurnStore } from "../../src/core/dev/TurnStore.js"
import { MessageInput } from "../../src/proto/index.js"
import * as Invariants from "./Invariants.js"
import type { FrameEvent } from "./MemoryLink.js"
import { makeWorkspaceLedger, releaseHangs } from "./MemoryWorkspace.js"
import { type Broken, makeLedger, stuckCount } from "./NativeLedger.js"
import { allSignals, budgetsMs, describe, type FaultKind, faultKinds, generate, type Step } from "./Plan.js"
import * as Prng from "./Prng.js"
import * as World from "./World.js"
import * as WorkspaceSteps from "./WorkspaceSteps.js"

export interface SimOptions {
  readonly seed: number
  /** Plan length (default 24 steps). */
  readonly steps?: number
  /** Share of fault steps (default: drawn per schedule from 0.05, 0.1, 0.2, 0.3). */
  readonly faultRate?: number
  readonly broken?: Broken
  /** Runs this plan instead of the generated one (minimization). */
  readonly plan?: ReadonlyArray<Step>
  /** Keeps the frame lines in the trace (default true). */
  readonly traceFrames?: boolean
  /** Frame lines carry the frame's text (without `trace`) instead of its hash (`--frames`). */
  readonly frameText?: boolean
}

export interface SimResult {
  readonly seed: number
  readonly plan: ReadonlyArray<Step>
  readonly trace: ReadonlyArray<string>
  readonly violations: ReadonlyArray<string>
  /** The plan step (1-based) after which the first violation was seen; 0 = at quiescence. */
  readonly failedAtStep: number | undefined
  readonly checks: number
  /** Checks performed per invariant family. */
  readonly checksBy: Readonly<Record<Invariants.Family, number>>
  readonly faults: Readonly<Record<FaultKind, number>>
  /** What the schedule exercised: frames delivered per type (`→core delta`, …) and clock jumps per budget. */
  readonly exercised: Readonly<Record<string, number>>
  readonly turns: number
}

const fnv = (text: string): string => {
  let h = 0x811c9dc5
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193)
  return (h >>> 0).toString(16).padStart(8, "0")
}

/**
 * A frame's text without its W3C `trace` member: span ids come from Effect's tracer (not the seeded Random), so
 * they differ between runs of a seed and carry no protocol meaning; everything else must match byte for byte.
 */
const withoutTrace = (text: string): string => text.replace(/,"trace":"[^"]*"/, "")

/** Random UUIDs (Core's transfer ids) in a frame's text, replaced by their order of first appearance. */
const uuids = (seen: Map<string, string>) => (text: string): string =>
  text.replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, (u) => {
    let n = seen.get(u)
    if (n === undefined) seen.set(u, n = `uuid#${seen.size + 1}`)
    return n
  })

const flush = Effect.repeat(Effect.yieldNow, { times: 10 }).pipe(Effect.asVoid)
const advance = (ms: number) => Effect.andThen(TestClock.adjust(ms), flush)

const errorText = (error: unknown): string => {
  if (error !== null && typeof error === "object") {
    const tag = (error as { _tag?: unknown })._tag
    const message = (error as { message?: unknown }).message
    return `${typeof tag === "string" ? tag : "Error"}: ${typeof message === "string" ? message : ""}`
  }
  return String(error)
}

const short = (value: unknown): string => {
  const text = JSON.stringify(value) ?? "undefined"
  return text.length > 160 ? `${text.slice(0, 160)}…` : text
}

export const runSchedule = (options: SimOptions): Effect.Effect<SimResult> => {
  const rng = Prng.make(options.seed)
  const planRng = rng.fork()
  const linkRng = rng.fork()
  const generated = options.plan === undefined
    ? generate(planRng, { steps: options.steps ?? 24, ...(options.faultRate === undefined ? {} : { faultRate: options.faultRate }) })
    : undefined
  const plan = options.plan ?? generated!.steps
  const trace: Array<string> = []
  const ledger = makeLedger()
  const agentSecret = `sk-sim-${options.seed}-agent-secret`
  const secrets: { everywhere: Array<string>; framesOnly: Array<string> } = { everywhere: [], framesOnly: [agentSecret] }
  const ws = makeWorkspaceLedger()
  const faults = Object.fromEntries(faultKinds.map((k) => [k, 0])) as Record<FaultKind, number>
  for (const f of generated?.harnessFaults ?? []) faults[f]++
  const traceFrames = options.traceFrames ?? true
  const exercised: Record<string, number> = {}
  const exercise = (key: string) => {
    exercised[key] = (exercised[key] ?? 0) + 1
  }
  const checker = Invariants.make(ledger, secrets, ws, exercise)
  const normalize = uuids(new Map())

  const logger = Logger.make((o) => {
    const annotations = o.fiber.getRef(References.CurrentLogAnnotations)
    let line = Array.isArray(o.message) ? o.message.map(String).join(" ") : String(o.message)
    for (const key in annotations) line += ` ${key}=${String(annotations[key])}`
    if (o.cause !== undefined && o.cause.reasons.length > 0) line += ` ${String(o.cause)}`
    checker.logLine(line)
  })

  const program = Effect.gen(function* () {
    const hooks: World.WorldHooks = {
      trace: (line) => void trace.push(`  ${line}`),
      frame: (event: FrameEvent, proc: number) => {
        checker.frame(event, proc)
        const m = /"type":"([a-z_]+)"/.exec(event.text)
        if (event.delivered) exercise(`${event.direction === "toCore" ? "→core" : "→runtime"} ${m?.[1] ?? "?"}`)
        if (!traceFrames) return
        const id = /"id":"([^"]{0,60})"/.exec(event.text)
        trace.push(
          `  c${event.connection} ${event.direction === "toCore" ? "→core" : "→runtime"} ${m?.[1] ?? "?"} ${normalize(id?.[1] ?? "")} ${options.frameText === true ? normalize(withoutTrace(event.text)) : fnv(normalize(withoutTrace(event.text)))}${event.delivered ? "" : " LOST"}`
        )
      },
      processExited: (proc, alive) => {
        checker.counted("ownership")
        if (alive.length > 0) checker.violations.push(`ownership: process ${proc} exited with native Executors not confirmed closed: ${alive.join(", ")}`)
      }
    }
    const world = yield* World.make({ ledger, workspace: ws, broken: options.broken ?? "none", rng: linkRng, hooks, advance })
    secrets.everywhere.push(world.credential)
    const turnStore = Context.get(world.storeContext, TurnStore)
    const sessions: Array<string> = []
    const turnIds: Array<string | undefined> = []
    const operatorScope = () => world.core()?.operators
    const hosted: Array<string> = []

    /** Runs an operator action in the background, in Core's scope (a restart interrupts it), tracing its result. */
    const operate = <A, E>(label: string, action: Effect.Effect<A, E>) =>
      Effect.gen(function* () {
        const scope = operatorScope()
        if (scope === undefined) {
          trace.push(`  ${label}: core down`)
          return
        }
        yield* Effect.forkIn(
          action.pipe(
            Effect.onExit((exit) =>
              Effect.sync(() => {
                if (Exit.isSuccess(exit)) trace.push(`  ${label} → ${short(exit.value)}`)
                else if (Exit.hasInterrupts(exit)) trace.push(`  ${label} → interrupted`)
                else {
                  const error = Exit.findErrorOption(exit)
                  const text = Option.isSome(error) ? errorText(error.value) : "defect"
                  checker.errorText(text)
                  trace.push(`  ${label} → ${text.slice(0, 160)}`)
                }
              })
            )
          ),
          scope as Scope.Scope
        )
      })

    const turnAt = (i: number) => turnIds[i]

    /** The first Session from `preferred` on without an unfinished Turn (a Session runs one Turn at a time). */
    const freeSession = (preferred: number) =>
      Effect.gen(function* () {
        for (let i = 0; i < sessions.length; i++) {
          const session = sessions[(preferred + i) % sessions.length]!
          const turns = yield* turnStore.listBySession(session).pipe(Effect.orElseSucceed(() => []))
          if (turns.every((t) => t.status === "completed" || t.status === "failed" || t.status === "cancelled")) return session
        }
        return sessions[preferred % sessions.length]!
      })

    const execute = (step: Step): Effect.Effect<void, never, Scope.Scope> =>
      Effect.gen(function* () {
        const core = world.core()
        switch (step.k) {
          case "session": {
            // A self_hosted Session's id is a canonical UUID (Core's workspace write validator requires one).
            const id = step.workspace === undefined ? `s${sessions.length + 1}` : World.hostedSessionId(sessions.length + 1)
            sessions.push(id)
            const configuration = { agent_options: { scripted: step.options, api_key: agentSecret } }
            if (step.workspace !== undefined) return yield* WorkspaceSteps.createHosted(ctx, id, configuration, step.workspace.init)
            yield* Effect.flatMap(Effect.service(SessionStoreTag), (store) =>
              store.create({
                sessionId: id,
                agentKind: "scripted",
                environmentType: "none",
                configuration,
                deviceId: undefined
              })).pipe(Effect.provideContext(world.storeContext), Effect.orDie)
            return
          }
          case "turn": {
            if (core === undefined) return trace.push("  core down")
            const index = turnIds.length
            turnIds.push(undefined)
            const session = yield* freeSession(step.session)
            return yield* operate(`turn#${index}`, Effect.tap(core.turns.start(session, MessageInput.text(JSON.stringify({ script: step.script }))), (view) =>
              Effect.sync(() => {
                turnIds[index] = view.turn_id
              })))
          }
          case "steer": {
            const turn = turnAt(step.turn)
            if (core === undefined || turn === undefined) return
            return yield* operate(`steer ${turn}`, core.turns.steer(turn, MessageInput.text("steer")))
          }
          case "cancel": {
            const turn = turnAt(step.turn)
            if (core === undefined || turn === undefined) return
            checker.cancelAsked(turn)
            return yield* operate(`cancel ${turn}`, core.turns.cancel(turn))
          }
          case "answer": {
            const turn = turnAt(step.turn)
            if (core === undefined || turn === undefined) return
            return yield* answerFirst(core, turn, step.approve)
          }
          case "signal": {
            const d = world.daemon()
            if (d !== undefined) yield* d.signals.fire(step.name)
            return
          }
          case "advance":
            if (step.ms >= 5_000) faults.clock_jump++
            for (const budget of budgetsMs) if (Math.abs(step.ms - budget) <= 1) exercise(`clock jump across ${budget / 1000} s`)
            return yield* TestClock.adjust(step.ms)
          case "drop":
            faults.drop++
            return world.link()?.drop()
          case "drop_at_frame":
            faults.drop_at_frame++
            return world.link()?.dropAtFrame(step.n, step.deliver)
          case "delay": {
            const link = world.link()
            if (link === undefined) return
            faults.delay++
            link.hold(step.direction)
            yield* Effect.forkIn(Effect.andThen(Effect.sleep(step.ms), Effect.sync(() => link.release(step.direction))), yield* Effect.scope)
            return
          }
          case "reconnect_storm":
            faults.reconnect_storm++
            return world.storm(step.drops)
          case "core_restart":
            faults.core_restart++
            yield* WorkspaceSteps.check(ctx, hosted)
            checker.workspace.coreRestarting()
            yield* world.stopCore
            return yield* world.startCore
          case "runtime_sigterm":
            faults.runtime_sigterm++
            yield* world.stopDaemon
            return yield* world.startDaemon
          case "write":
          case "read":
          case "settle":
            return yield* WorkspaceSteps.execute(ctx, step)
          case "device_shutdown": {
            const link = world.link()
            if (link === undefined) return
            faults.device_shutdown++
            return link.inject(JSON.stringify({ type: "device_shutdown", payload: { reason: "sim" } }))
          }
        }
      }).pipe(Effect.asVoid)

    const answerFirst = (core: NonNullable<ReturnType<typeof world.core>>, turn: string, approve: boolean) =>
      Effect.gen(function* () {
        const interactions = yield* turnStore.interactions(turn).pipe(Effect.orElseSucceed(() => []))
        const pending = interactions.find((i) => i.status === "pending")
        if (pending === undefined) return
        const id = pending.interactionId
        if (pending.kind === "permission") return yield* operate(`permission ${turn}/${id}`, core.turns.answerPermission(turn, id, { approved: approve }))
        if (pending.kind === "user_choice") {
          return yield* operate(`answer ${turn}/${id}`, core.turns.answerUserChoice(turn, id, approve ? { question_answers: [{ question_id: "q1", answers: ["a"] }] } : { cancelled: true }))
        }
        return yield* operate(`function ${turn}/${id}`, core.turns.functionResult(turn, id, approve ? { output: "result" } : { error: "failed" }))
      })

    const ctx: WorkspaceSteps.WorkspaceContext = { world, ws, checker, hosted, trace: (line) => void trace.push(line), operate }
    const check = Effect.gen(function* () {
      yield* checker.store(turnIds.filter((t): t is string => t !== undefined), turnStore)
      yield* WorkspaceSteps.check(ctx, hosted)
      const d = world.daemon()
      if (d !== undefined) checker.capacity(d.proc, World.MaxActive)
      else for (const v of ledger.violations.splice(0)) checker.violations.push(v)
    })

    yield* world.startCore
    yield* world.startDaemon
    yield* flush
    let failedAtStep: number | undefined
    for (let i = 0; i < plan.length; i++) {
      const step = plan[i]!
      if (yield* world.reapDaemon) yield* world.startDaemon
      trace.push(`#${i + 1} @${yield* Clock.currentTimeMillis} ${describe(step)}`)
      yield* execute(step)
      yield* flush
      yield* check
      if (checker.violations.length > 0) {
        failedAtStep = i + 1
        break
      }
    }

    if (failedAtStep === undefined) {
      // Quiescence: faults stop, the operator cancels every Turn and answers everything; all must settle.
      trace.push(`quiescence @${yield* Clock.currentTimeMillis}`)
      releaseHangs(ws)
      world.link()?.release("toCore")
      world.link()?.release("toRuntime")
      if (yield* world.reapDaemon) yield* world.startDaemon
      if (world.core() === undefined) yield* world.startCore
      if (world.daemon() === undefined) yield* world.startDaemon
      yield* advance(1_000)
      const d = world.daemon()
      if (d !== undefined) for (const name of allSignals) yield* d.signals.fire(name)
      // Pending interactions are answered before the Turns are cancelled (decisions reach live Runs).
      for (let round = 0; round < 2; round++) {
        const core = world.core()
        for (const turn of turnIds) if (turn !== undefined && core !== undefined) yield* answerFirst(core, turn, true)
        yield* advance(1_000)
      }
      for (const turn of turnIds) {
        if (turn === undefined) continue
        checker.cancelAsked(turn)
        yield* execute({ k: "cancel", turn: turnIds.indexOf(turn) })
      }
      // 1 s … 5 min: about 9 minutes in all, across every budget (10/30/5/15 s, the 5-minute expiry).
      for (const ms of [1_000, 2_000, 5_000, 10_000, 15_000, 30_000, 60_000, 120_000, 300_000]) {
        yield* advance(ms)
        const core = world.core()
        for (const turn of turnIds) if (turn !== undefined && core !== undefined) yield* answerFirst(core, turn, true)
        yield* check
      }
      yield* check
      for (const turn of turnIds) {
        if (turn === undefined) continue
        checker.counted("liveness")
        const record = yield* turnStore.get(turn).pipe(Effect.orElseSucceed(() => Option.none()))
        if (Option.isSome(record) && (record.value.status === "queued" || record.value.status === "running")) {
          checker.violations.push(`liveness: ${turn} still ${record.value.status} 9 minutes after faults stopped`)
        }
      }
      checker.workspace.quiescence()
      const daemon = world.daemon()
      checker.counted("liveness")
      if (daemon !== undefined && stuckCount(ledger, daemon.proc) > 0) {
        checker.violations.push(`liveness: ${stuckCount(ledger, daemon.proc)} Executors still preparing, running or closing natively at quiescence`)
      }
      yield* world.stopDaemon
      yield* world.stopCore
      yield* check
      if (checker.violations.length > 0) failedAtStep = 0
    }
    trace.push(`end: ${checker.violations.length === 0 ? "ok" : checker.violations[0]}`)
    return {
      seed: options.seed,
      plan,
      trace,
      violations: [...checker.violations],
      failedAtStep,
      checks: checker.checks() + ledger.counts.turns,
      checksBy: { ...checker.checksBy(), ownership: checker.checksBy().ownership + ledger.counts.turns },
      faults,
      exercised,
      turns: turnIds.filter((t) => t !== undefined).length
    } satisfies SimResult
  })

  return Effect.scoped(program).pipe(
    Effect.provide(TestClock.layer()),
    // Fibers hop through microtasks instead of event-loop turns: same order, no real I/O to starve.
    Effect.provideService(Scheduler.Scheduler, new Scheduler.MixedScheduler("sync")),
    Effect.provide(Logger.layer([logger])),
    Effect.provideService(References.MinimumLogLevel, "All"),
    Random.withSeed(options.seed)
  )
}

import { SessionStore as SessionStoreTag } from "../../src/core/dev/SessionStore.js"
