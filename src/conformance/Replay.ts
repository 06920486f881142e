/**
 * The replay engine shared by both scripted peers. It walks a scenario's steps for one implementation under
 * test: frames of the role the scripted peer plays are materialized and sent; frames of the real side are
 * awaited, decoded with that direction's strict decoder and matched against their templates (binding
 * placeholders); settlement, clock movement and side checks go to the runner's hooks; connection steps go to
 * the peer's endpoint (ScriptedCore listens, ScriptedRuntime dials).
 *
 * Waiting is event-driven: a frame arrived, a connection arrived, a ping/pong barrier returned. Frame waits
 * are bounded on the live clock (`hooks.live`), so a missing frame is reported as a divergence instead of a
 * hang even while the implementation runs on a TestClock. A replay stops at the first divergence.
 */
import { Duration, Effect, Option, Result } from "effect"
import {
  type AdvanceStep,
  type ConnectStep,
  type CoreStep,
  type Fact,
  type RuntimeMessage,
  type Side,
  type SilenceStep,
  type Step,
  stepRunsOn,
  type WireScenario
} from "../../scenarios/WireScenario.js"
import type { InvalidFrame } from "../proto/Envelope.js"
import * as Messages from "../proto/Messages.js"
import type { Link } from "./internal/wsLink.js"
import { type Bindings, emptyBindings, matchInterleaved, matchMessage, materialize, render } from "./Match.js"
import { type Divergence, ScenarioDiverged, type Verdict } from "./Report.js"

/** A step failed for a reason the engine turns into a divergence at the current step. */
export interface StepFailure {
  readonly reason: string
  readonly expected?: string
  readonly actual?: string
}

/** What the scripted peer's side of the connection provides. */
export interface Endpoint {
  /** The role the scripted peer plays; the implementation under test plays the other one. */
  readonly role: Side
  /**
   * Establishes the scenario's first connection as the step says. Succeeds with the link when the upgrade
   * completed, with `None` when it was refused exactly as expected; fails when the outcome differs.
   */
  readonly connect: (step: ConnectStep, hooks: Hooks) => Effect.Effect<Option.Option<Link>, StepFailure>
  /** The Runtime connects again after a loss. */
  readonly reconnect: (hooks: Hooks) => Effect.Effect<Link, StepFailure>
  /** A newer connection replaces `current`. */
  readonly replace: (current: Link, hooks: Hooks) => Effect.Effect<Link, StepFailure>
  /** Activity outside frames that breaks a silence (for example a new connection attempt). */
  readonly unexpectedActivity: Effect.Effect<Option.Option<string>>
}

/** What the runner (or the kit) provides. */
export interface Hooks {
  /** Moves the implementation's clock (TestClock in runners; a real wait in the kit). */
  readonly adjustClock: (duration: Duration.Duration) => Effect.Effect<void>
  /** Fires a native settlement signal in the implementation; absent when it cannot be controlled. */
  readonly settle?: (signal: string) => Effect.Effect<void, StepFailure>
  /**
   * Core side: makes the real Core send `message` (materialized from the step with the current bindings).
   * For a step with `refusedByCore`, succeeds only when Core refused it locally and sent nothing.
   */
  readonly drive?: (
    step: CoreStep,
    message: Messages.CoreToRuntime,
    bindings: Bindings,
    position: { readonly scenario: WireScenario; readonly index: number }
  ) => Effect.Effect<void, StepFailure>
  /** Asserts a behaviour the implementation owns; absent when it cannot be observed (the kit). */
  readonly check?: (fact: Fact, bindings: Bindings) => Effect.Effect<void, StepFailure>
  /**
   * Called repeatedly while the scripted Core waits for the Runtime to dial again: moves the Runtime's clock
   * through its reconnect backoff. Absent in the kit (real time passes).
   */
  readonly nudge?: Effect.Effect<void>
  /** Runs an effect on the live clock (frame timeouts never depend on a TestClock). */
  readonly live: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /** How long to wait for an expected frame before reporting it missing. */
  readonly frameTimeout: Duration.Duration
  /** How long the scripted Core waits for the Runtime to (re)connect (default: four frame timeouts). */
  readonly connectTimeout?: Duration.Duration
  /** Which scenarios may run: the kit refuses steps it cannot reproduce (settlement, clock movement). */
  readonly mode: "in-process" | "kit"
  /** Values known before the first step (the `workspace_directory` of the fixture copy the Runtime is bound to). */
  readonly bindings?: Bindings
}

/** Why a scenario cannot be replayed by a kit against an external implementation, or None. */
export const kitIneligibility = (scenario: WireScenario, side: Side): Option.Option<string> => {
  const replay = scenario.replay[side]
  if ("skip" in replay) return Option.some(replay.skip)
  const steps = scenario.steps.filter((s) => stepRunsOn(s, side))
  if (side === "runtime" && steps.some((s) => s._tag === "Settle")) {
    return Option.some("needs native settlement control (in-process runner only)")
  }
  if (side === "runtime" && steps.some((s) => s._tag === "Advance")) {
    return Option.some("needs clock control (in-process runner only)")
  }
  if (side === "core" && steps.some((s) => s._tag === "Core")) {
    return Option.some("needs a driver that makes the Core send its frames (in-process runner only)")
  }
  return Option.none()
}

interface State {
  link: Link | undefined
  bindings: Bindings
  framesChecked: number
  skippedChecks: number
  /** Role runtime: the last heartbeat the scripted Runtime sent, repeated to keep the connection alive. */
  lastHeartbeat: string | undefined
}

/** The scripted Runtime's keep-alive cadence while the clock moves (Core closes after 60 s without a frame). */
const KeepAliveEvery = Duration.seconds(30)
/** The largest single clock adjustment in-process (well under every liveness and ping interval). */
const ClockChunk = Duration.seconds(5)

/**
 * Replays a scenario against the implementation on the other end of `endpoint`. Never fails: the verdict says
 * pass, fail (with the first divergence) or skip.
 */
export const replay = (scenario: WireScenario, endpoint: Endpoint, hooks: Hooks): Effect.Effect<Verdict> => {
  const side: Side = endpoint.role === "core" ? "runtime" : "core"
  const replayPlan = scenario.replay[side]
  if ("skip" in replayPlan) return Effect.succeed({ _tag: "Skip", reason: replayPlan.skip })
  const why = hooks.mode === "kit" ? kitIneligibility(scenario, side) : Option.none<string>()
  if (Option.isSome(why)) return Effect.succeed({ _tag: "Skip", reason: why.value })
  let currentIndex = 0
  const state: State = { link: undefined, bindings: hooks.bindings ?? emptyBindings, framesChecked: 0, skippedChecks: 0, lastHeartbeat: undefined }
  const decode: (text: string) => Result.Result<Messages.Message, InvalidFrame> = endpoint.role === "core"
    ? Messages.decodeRuntimeToCore
    : Messages.decodeCoreToRuntime
  const realName = side === "core" ? "Core" : "the Runtime"

  const run = Effect.gen(function* () {
    for (let i = 0; i < scenario.steps.length; i++) {
      const step = scenario.steps[i]!
      if (!stepRunsOn(step, side)) continue
      currentIndex = i
      const fail = (f: Failure) => new ScenarioDiverged({ divergence: { step: i + 1, stepKind: step._tag, ...f } as Divergence })
      yield* runStep(step).pipe(Effect.mapError((f) => (f instanceof ScenarioDiverged ? f : fail(f))))
    }
    return { _tag: "Pass", framesChecked: state.framesChecked, skippedChecks: state.skippedChecks } as Verdict
  })

  type Failure = StepFailure & { readonly frame?: Divergence["frame"] }

  const requireLink: Effect.Effect<Link, Failure> = Effect.suspend(() =>
    state.link === undefined ? Effect.fail({ reason: "scenario error: no open connection at this step" }) : Effect.succeed(state.link)
  )

  const sendTemplate = (template: unknown): Effect.Effect<void, Failure> =>
    Effect.gen(function* () {
      const link = yield* requireLink
      const built = materialize(template, state.bindings)
      if (Result.isFailure(built)) {
        return yield* Effect.fail({ reason: `scenario error: free value without a sample at ${built.failure.path}` })
      }
      const encoded = Messages.encodeMessage(built.success.value as Messages.Message)
      if (Result.isFailure(encoded)) {
        return yield* Effect.fail({ reason: `scenario error: template is not a valid message (${encoded.failure.reason})`, expected: render(template) })
      }
      state.bindings = built.success.bindings
      if ((built.success.value as { type?: string }).type === "heartbeat") state.lastHeartbeat = encoded.success
      yield* link.send(encoded.success).pipe(
        Effect.mapError((e) => ({ reason: `could not send: ${e.message}` }))
      )
    })

  /** The next thing the real side's link yields within the frame timeout (live time); `onTimeout` says what is missing. */
  const nextIncoming = (link: Link, onTimeout: string) =>
    hooks.live(
      link.take.pipe(
        Effect.timeoutOrElse({ duration: hooks.frameTimeout, orElse: () => Effect.fail<Failure>({ reason: onTimeout }) })
      )
    )

  /** The next frame from the real side, decoded; unexpected heartbeats are validated and skipped. */
  const nextMessage = (skipHeartbeats: boolean): Effect.Effect<Messages.Message, Failure> =>
    Effect.gen(function* () {
      const link = yield* requireLink
      while (true) {
        const incoming = yield* nextIncoming(link, `no frame from ${realName} within ${Duration.format(hooks.frameTimeout)}`)
        if (incoming._tag === "Closed") {
          return yield* Effect.fail<Failure>({ reason: `connection closed by ${realName} (code ${incoming.code})` })
        }
        if (incoming._tag === "Binary") {
          return yield* Effect.fail<Failure>({ reason: "binary frame (every frame of this wire is text)", frame: { bytes: incoming.bytes } })
        }
        const decoded = decode(incoming.text)
        if (Result.isFailure(decoded)) {
          const e = decoded.failure
          return yield* Effect.fail<Failure>({
            reason: `frame failed the strict decoder (${e.code})`,
            frame: { ...(e.type === undefined ? {} : { type: e.type }), ...(e.id === undefined ? {} : { id: e.id }), bytes: e.bytes }
          })
        }
        if (skipHeartbeats && decoded.success.type === "heartbeat") continue
        return decoded.success
      }
    })

  const frameOf = (message: Messages.Message, text?: string): Divergence["frame"] => {
    const id = (message as { id?: string }).id
    return { type: message.type, ...(id === undefined ? {} : { id }), ...(text === undefined ? {} : { bytes: text.length }) }
  }

  const expectMessage = (template: unknown): Effect.Effect<void, Failure> =>
    Effect.gen(function* () {
      const expectedType = (template as { type?: string }).type
      const message = yield* nextMessage(expectedType !== "heartbeat")
      const matched = matchMessage(template, message, state.bindings)
      if (Result.isFailure(matched)) {
        const m = matched.failure
        return yield* Effect.fail<Failure>({
          reason: `frame differs at ${m.path}`,
          expected: m.expected,
          actual: m.actual,
          frame: frameOf(message)
        })
      }
      state.bindings = matched.success
      state.framesChecked++
    })

  const expectInterleaved = (streams: ReadonlyArray<ReadonlyArray<RuntimeMessage>>): Effect.Effect<void, Failure> =>
    Effect.gen(function* () {
      const total = streams.reduce((n, s) => n + s.length, 0)
      const onlyHeartbeats = streams.every((s) => s.every((m) => (m as { type?: string }).type === "heartbeat"))
      const received: Array<Messages.Message> = []
      while (received.length < total) received.push(yield* nextMessage(!onlyHeartbeats))
      const matched = matchInterleaved(streams, received, state.bindings)
      if (Result.isFailure(matched)) {
        const m = matched.failure
        return yield* Effect.fail<Failure>({
          reason: `frames are not an ordered interleaving of the expected streams (first mismatch at frame ${m.index + 1}, ${m.path})`,
          expected: m.expected,
          actual: m.actual,
          frame: frameOf(received[m.index]!)
        })
      }
      state.bindings = matched.success
      state.framesChecked += total
    })

  /**
   * Moves the clock in small chunks with a barrier after each, so timers that need the peer's answers in
   * between (ws-level pings and pongs, liveness) see them, as they would in real time. The scripted Runtime
   * also keeps its connection alive with its last heartbeat meanwhile (Core closes after 60 s without a frame).
   */
  const moveClock = (input: Duration.Input): Effect.Effect<void, Failure> =>
    Effect.gen(function* () {
      let remaining = Duration.fromInputUnsafe(input)
      let sinceKeepAlive = Duration.zero
      if (hooks.mode === "kit") return yield* hooks.adjustClock(remaining)
      // Frames just sent must reach the implementation before its clock moves: a timer it starts on receipt
      // (a receipt wait, a write bound) has to be registered first. Two round trips let it read and dispatch them.
      if (state.link !== undefined && (yield* state.link.isOpen)) {
        yield* state.link.barrier.pipe(Effect.andThen(state.link.barrier), Effect.ignore)
      }
      while (Duration.isGreaterThan(remaining, Duration.zero)) {
        const chunk = Duration.min(remaining, ClockChunk)
        yield* hooks.adjustClock(chunk)
        remaining = Duration.subtract(remaining, chunk)
        sinceKeepAlive = Duration.sum(sinceKeepAlive, chunk)
        const link = state.link
        if (link === undefined || !(yield* link.isOpen)) continue
        if (endpoint.role === "runtime" && state.lastHeartbeat !== undefined && Duration.isGreaterThanOrEqualTo(sinceKeepAlive, KeepAliveEvery)) {
          sinceKeepAlive = Duration.zero
          yield* link.send(state.lastHeartbeat).pipe(Effect.ignore)
        }
        yield* link.barrier.pipe(Effect.ignore)
      }
    })

  const expectSilence = (step: SilenceStep | AdvanceStep): Effect.Effect<void, Failure> =>
    Effect.gen(function* () {
      yield* moveClock(step.duration)
      if (step._tag === "Advance") return
      const link = state.link
      if (link !== undefined && (yield* link.isOpen)) {
        // Two round trips: frames the implementation produced while handling the first ping are flushed too.
        yield* link.barrier.pipe(Effect.andThen(link.barrier), Effect.ignore)
        while (true) {
          const next = yield* link.poll
          if (Option.isNone(next)) break
          const incoming = next.value
          if (incoming._tag === "Closed") {
            return yield* Effect.fail<Failure>({ reason: `connection closed by ${realName} during a silence (code ${incoming.code})` })
          }
          if (incoming._tag === "Binary") return yield* Effect.fail<Failure>({ reason: "binary frame during a silence" })
          const decoded = decode(incoming.text)
          if (Result.isSuccess(decoded) && decoded.success.type === "heartbeat" && step.heartbeats !== "forbidden") continue
          return yield* Effect.fail<Failure>({
            reason: `${realName} sent a frame during a silence of ${Duration.format(Duration.fromInputUnsafe(step.duration))}`,
            actual: Result.isSuccess(decoded) ? render(decoded.success) : "<undecodable frame>",
            ...(Result.isSuccess(decoded) ? { frame: frameOf(decoded.success, incoming.text) } : {})
          })
        }
      }
      const activity = yield* endpoint.unexpectedActivity
      if (Option.isSome(activity)) return yield* Effect.fail<Failure>({ reason: `during a silence: ${activity.value}` })
    })

  const runStep = (step: Step): Effect.Effect<void, Failure | ScenarioDiverged> => {
    switch (step._tag) {
      case "Connect":
        return endpoint.connect(step, hooks).pipe(
          Effect.tap((link) => Effect.sync(() => {
            state.link = Option.getOrUndefined(link)
            state.lastHeartbeat = undefined
          })),
          Effect.asVoid
        )
      case "Core": {
        if (endpoint.role === "core") return sendTemplate(step.message)
        return Effect.gen(function* () {
          if (hooks.drive === undefined) return yield* Effect.fail<Failure>({ reason: "no driver to make Core send this frame" })
          const built = materialize(step.message, state.bindings)
          if (Result.isFailure(built)) {
            return yield* Effect.fail<Failure>({ reason: `scenario error: free value without a sample at ${built.failure.path}` })
          }
          yield* hooks.drive(step, built.success.value as Messages.CoreToRuntime, state.bindings, { scenario, index: currentIndex })
          if (step.refusedByCore !== undefined) {
            return yield* expectSilence({ _tag: "Silence", duration: Duration.zero })
          }
          return yield* expectMessage(step.message)
        })
      }
      case "Runtime":
        return endpoint.role === "runtime" ? sendTemplate(step.message) : expectMessage(step.message)
      case "Interleave":
        return endpoint.role === "runtime"
          ? Effect.forEach(step.streams.flat(), sendTemplate, { discard: true })
          : expectInterleaved(step.streams)
      case "Raw":
        return requireLink.pipe(
          Effect.flatMap((link) => link.send(step.text)),
          Effect.mapError((e) => ("reason" in e ? e : { reason: `could not send: ${e.message}` }))
        )
      case "Settle":
        if (endpoint.role === "runtime") return Effect.void
        return hooks.settle === undefined
          ? Effect.fail({ reason: "no control over native settlement here" })
          : hooks.settle(step.signal)
      case "Silence":
      case "Advance":
        return expectSilence(step)
      case "Disconnect":
        return Effect.gen(function* () {
          const link = yield* requireLink
          yield* link.drop
        })
      case "Reconnect":
        return endpoint.reconnect(hooks).pipe(Effect.tap((link) => Effect.sync(() => {
          state.link = link
        })), Effect.asVoid)
      case "Replace":
        return requireLink.pipe(
          Effect.flatMap((current) => endpoint.replace(current, hooks)),
          Effect.tap((link) => Effect.sync(() => {
            state.link = link
          })),
          Effect.asVoid
        )
      case "Closed":
        return Effect.gen(function* () {
          const link = yield* requireLink
          while (true) {
            const incoming = yield* nextIncoming(link, `${realName} did not close the connection`)
            if (incoming._tag === "Closed") return
            if (incoming._tag === "Frame") {
              const decoded = decode(incoming.text)
              if (Result.isSuccess(decoded) && decoded.success.type === "heartbeat") continue
              return yield* Effect.fail<Failure>({
                reason: `${realName} sent a frame instead of closing`,
                actual: Result.isSuccess(decoded) ? render(decoded.success) : "<undecodable frame>"
              })
            }
          }
        })
      case "Check":
        if (hooks.check === undefined) {
          return Effect.sync(() => {
            state.skippedChecks++
          })
        }
        return hooks.check(step.fact, state.bindings)
    }
  }

  return run.pipe(
    Effect.catchTag("ScenarioDiverged", (e) => Effect.succeed<Verdict>({ _tag: "Fail", divergence: e.divergence })),
    Effect.ensuring(Effect.suspend(() => (state.link === undefined ? Effect.void : state.link.drop)))
  )
}
