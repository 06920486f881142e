/**
 * The Core side of the wire scenario suite: the real gateway (GatewayServer: its HTTP machine routes, the
 * WebSocket upgrade, device sessions) in-process against the scripted Runtime over loopback. Core's frames
 * are produced by Core's own APIs — Delivery (prepared and direct Turns, which send prepare, start and
 * prompt_request themselves), Turn.steer / Turn.cancel, Interactions, Functions — and, where Core's caller
 * holds a preparation without starting it or sends device_shutdown, by the session's subscription and send
 * API. Imports the gateway and the conformance kit, never the daemon. Time is the test's TestClock.
 */
import { Context, Duration, Effect, Exit, Fiber, Layer, Option, Redacted, Scope, Stream } from "effect"
import { TestClock } from "effect/testing"
import type { CoreStep, Fact, WireScenario } from "../../scenarios/WireScenario.js"
import { type Hooks, replay, type StepFailure } from "../../src/conformance/Replay.js"
import type { Verdict } from "../../src/conformance/Report.js"
import * as ScriptedRuntime from "../../src/conformance/ScriptedRuntime.js"
import { type EngineProfile, publicFeatures } from "../../src/core/CapabilityPolicy.js"
import * as Delivery from "../../src/core/Delivery.js"
import { DeviceCredentials } from "../../src/core/DeviceCredentials.js"
import type { DeviceSession } from "../../src/core/DeviceSession.js"
import type { ExecutionSpec } from "../../src/core/ExecutionRequest.js"
import * as Functions from "../../src/core/Functions.js"
import { Gateway, type GatewayEvent } from "../../src/core/Gateway.js"
import * as Interactions from "../../src/core/Interactions.js"
import type * as Outcome from "../../src/core/Outcome.js"
import { GatewayServer } from "../../src/core/server/GatewayServer.js"
import { canonicalEquals } from "../../src/proto/Canonical.js"
import type { PromptRequestPayload } from "../../src/proto/Execution.js"
import { type DeviceId, unsafeMake } from "../../src/proto/Ids.js"
import type { UserChoicePayload } from "../../src/proto/Interaction.js"
import type { MessageInput } from "../../src/proto/MessageInput.js"
import type * as Messages from "../../src/proto/Messages.js"
import type { PreparationStatusPayload } from "../../src/proto/Preparation.js"
import { decodeChunkData } from "../../src/proto/Transfer.js"
import * as WorkspaceExport from "../../src/core/workspace/WorkspaceExport.js"
import * as WorkspaceRead from "../../src/core/workspace/WorkspaceRead.js"
import * as WorkspaceWrite from "../../src/core/workspace/WorkspaceWrite.js"
import * as RuntimePrepare from "../../src/core/prepare/RuntimePrepare.js"
import * as SuspensionDriver from "../../src/core/SuspensionDriver.js"

export const DeviceIdValue = "7f0c1a52-3b7e-4d52-9a55-0c2f4c6f9b11"
export const Credential = Redacted.make("awdc_wire-core-runner-credential")

/** An engine profile that qualifies every public feature and control (the scenarios choose what they use). */
const engine: EngineProfile = { controls: { web_search: true, text_verbosity: true }, qualifies: new Set(publicFeatures) }

/** The Session and Agent facts that make Core build exactly `config` (Core's configuration builder, inverted). */
const specFrom = (sessionId: string, config: PromptRequestPayload): ExecutionSpec => {
  const controls = config.execution_controls
  return {
    session_id: unsafeMake.sessionId(sessionId),
    agent_kind: config.agent_kind,
    ...(config.agent_options === undefined ? {} : { agent_options: config.agent_options }),
    engine,
    agent: {
      multi_agent: config.observe_subagent_identities === true
        ? { enabled: true, ...(config.max_concurrent_subagents === undefined ? {} : { max_concurrent_subagents: config.max_concurrent_subagents }) }
        : { enabled: false },
      ...(controls?.output_format === undefined ? {} : { output_format: controls.output_format }),
      tool_search: config.tool_search === true,
      function_tools: config.function_tools ?? [],
      disable_programmatic_tool_calling: controls?.disable_programmatic_tool_calling === true,
      mcp_http_servers: (config.mcp_http_servers ?? []).map((s) => ({
        server_label: s.server_label,
        server_url: s.server_url,
        allowed_tools: s.allowed_tools,
        required: s.required === true,
        connection_origin: s.connection_origin,
        ...(s.bearer_token === undefined ? {} : { vault_credential: Redacted.make(s.bearer_token) })
      })),
      ...(controls === undefined || controls.text_verbosity === "medium" ? {} : { text_verbosity: controls.text_verbosity })
    },
    environment: config.local_environment === undefined ? { type: "none" } : { type: "self_hosted", binding: config.local_environment },
    session: { has_started_turn: config.agent_session_id !== undefined, native_session_id: config.agent_session_id }
  }
}

const sessionOf = (config: PromptRequestPayload): string => (config.agent_state_key ?? "").replace(/^agents-api-/, "")

/** A Turn Core delivers, with the facts it recorded so far. */
interface TrackedTurn {
  readonly turn: Delivery.Turn
  readonly facts: Array<Outcome.TurnFact>
}

/** A preparation Core's caller holds without starting (session API): its statuses as the session filtered them. */
interface HeldPreparation {
  readonly statuses: Array<PreparationStatusPayload>
}

type Tracked<A, E> = Fiber.Fiber<A, E>

const fail = (reason: string): Effect.Effect<never, StepFailure> => Effect.fail({ reason })

/**
 * Change notifications: every Turn fact, gateway event and finished operation signals; a check re-evaluates
 * only then (no polling, no sleeps), bounded by a live deadline.
 */
const makeChanges = () => {
  let waiters: Array<() => void> = []
  return {
    notify: () => {
      const current = waiters
      waiters = []
      for (const w of current) w()
    },
    /** Registers interest now; the returned effect completes at the first change after this call. */
    arm: Effect.sync(() => {
      let fired = false
      let wake: (() => void) | undefined
      const waiter = () => {
        fired = true
        wake?.()
      }
      waiters.push(waiter)
      return Effect.callback<void>((resume) => {
        if (fired) return resume(Effect.void)
        wake = () => resume(Effect.void)
        return Effect.sync(() => {
          wake = undefined
          waiters = waiters.filter((w) => w !== waiter)
        })
      })
    })
  }
}
type Changes = ReturnType<typeof makeChanges>

/** Re-checks `condition` after every change until it returns None; fails after 5 s (live) with the last reason. */
const eventually = (changes: Changes) => (what: string, condition: Effect.Effect<Option.Option<string>>): Effect.Effect<void, StepFailure> =>
  Effect.gen(function* () {
    let last = "not observed"
    const loop: Effect.Effect<void> = Effect.gen(function* () {
      while (true) {
        const changed = yield* changes.arm // armed before the check: no change between the two is missed
        const failure = yield* condition
        if (Option.isNone(failure)) return
        last = failure.value
        yield* changed
      }
    })
    const done = yield* TestClock.withLive(
      loop.pipe(Effect.as(true), Effect.timeoutOrElse({ duration: "5 seconds", orElse: () => Effect.succeed(false) }))
    )
    if (!done) return yield* fail(`${what}: ${last}`)
  })

const exitOf = <A, E>(fiber: Fiber.Fiber<A, E> | undefined): Exit.Exit<A, E> | undefined => fiber?.pollUnsafe()

/**
 * What a request tracked by the runner has come to, as a scenario's outcome names it: `none` (never sent),
 * `refused:<reason>` (Core refused it before sending), `pending`, the success label, `defect`, or its error's label.
 */
const trackedLabel = <A, E>(
  tracked: Fiber.Fiber<A, E> | { readonly refused: string } | undefined,
  success: string,
  failure: (e: E) => string
): string =>
  tracked === undefined
    ? "none"
    : "refused" in tracked
    ? `refused:${tracked.refused}`
    : Option.match(Option.fromNullishOr(exitOf(tracked)), {
      onNone: () => "pending",
      onSome: (exit) => Exit.isSuccess(exit) ? success : Option.match(Exit.findErrorOption(exit), { onNone: () => "defect", onSome: failure })
    })

/** `None` when the label is the outcome a scenario expects (`"x"`, `{rejected}` or `{refused}`), else the label. */
const compareOutcome = (actual: string, o: string | { readonly rejected: string } | { readonly refused: string }) => {
  const expected = typeof o === "string" ? o : "rejected" in o ? `rejected:${o.rejected}` : `refused:${o.refused}`
  return actual === expected ? Option.none() : Option.some(actual)
}

/** Replays one scenario against the real gateway. */
export const runCoreScenario = (scenario: WireScenario): Effect.Effect<Verdict, unknown> =>
  Effect.scoped(
    Effect.gen(function* () {
      const setup = scenario.setup ?? {}
      const context = yield* Layer.build(
        GatewayServer.layer({ host: "127.0.0.1", port: 0, heartbeatSeconds: setup.heartbeatSeconds ?? 15 }).pipe(
          Layer.provide(DeviceCredentials.layerMemory({
            devices: [{ deviceId: DeviceIdValue, workspaceId: "workspace-1", runtimeType: "agent-daemon", credential: Redacted.value(Credential) }]
          }))
        )
      )
      const server = Context.get(context, GatewayServer)
      const gateway = Context.get(context, Gateway)
      const scope = yield* Effect.scope
      const deviceId: DeviceId = unsafeMake.deviceId(DeviceIdValue)

      const changes = makeChanges()
      const eventually_ = eventually(changes)
      const events: Array<GatewayEvent> = []
      const stream = yield* gateway.events
      yield* Stream.runForEach(stream, (e) => Effect.sync(() => {
        events.push(e)
        changes.notify()
      })).pipe(Effect.forkScoped)

      const turns = new Map<string, TrackedTurn>() // by run id
      const turnsByRequest = new Map<string, TrackedTurn>()
      const held = new Map<string, HeldPreparation>()
      const cancels = new Map<string, Tracked<Delivery.CancelResult, unknown>>()
      const steers = new Map<string, Tracked<unknown, unknown>>()
      const decisions = new Map<string, Tracked<unknown, unknown> | { readonly refused: string }>()
      const functionResults = new Map<string, Tracked<unknown, unknown>>()
      const functionChannels = new Map<string, Functions.Functions>()
      const workspace = new Map<string, Tracked<unknown, unknown> | { readonly refused: string }>()
      const suspensions = new Map<string, Tracked<void, SuspensionDriver.SuspensionError> | { readonly refused: string }>()

      /** Runs one workspace operation: a refusal Core's validator must make now, or a tracked fiber. */
      const runWorkspace = (step: CoreStep, id: string, effect: Effect.Effect<unknown, unknown>) =>
        Effect.gen(function* () {
          if (step.refusedByCore === undefined) {
            workspace.set(id, yield* fork(effect))
            return
          }
          const exit = yield* Effect.exit(effect)
          const error = Exit.findErrorOption(exit)
          const refusal = Option.getOrUndefined(error) as { _tag?: string; reason?: string; detail?: string } | undefined
          if ((refusal?._tag === "WorkspaceRefused" || refusal?._tag === "PrepareRefused") && refusal.reason === "invalid_request" && refusal.detail === step.refusedByCore) {
            workspace.set(id, { refused: step.refusedByCore })
            return
          }
          return yield* fail(`Core did not refuse ${id} with ${step.refusedByCore}: ${refusal?._tag ?? "success"}`)
        })

      /** A Turn Core's final admission check refused with `issue` (nothing sent). */
      const refusedLocally = (tracked: TrackedTurn, id: string, issue: string) =>
        eventually_(`Core did not refuse ${id} with ${issue}`, Effect.sync(() => {
          const refusal = tracked.facts.find((f) => f._tag === "AdmissionRejected")
          if (refusal === undefined) return Option.some(tracked.facts.map((f) => f._tag).join(",") || "no fact")
          return refusal._tag === "AdmissionRejected" && refusal.detail === issue ? Option.none() : Option.some(JSON.stringify({ detail: refusal.detail }))
        }))

      /** The body of a write: the decoded data of its chunk steps, in scenario order. */
      const writeBody = (s: WireScenario, id: string): Uint8Array => {
        const parts: Array<Uint8Array> = []
        for (const step of s.steps) {
          if (step._tag !== "Core" || (step.sides !== undefined && !step.sides.includes("core"))) continue
          const m = step.message as { type?: string; id?: string; payload?: { step?: string; data?: string } }
          if ((m.type !== "workspace_write" && m.type !== "runtime_prepare") || m.id !== id || m.payload?.step !== "chunk" || typeof m.payload.data !== "string") continue
          const decoded = decodeChunkData(m.payload.data)
          if (decoded._tag === "Success") parts.push(decoded.success)
        }
        return Buffer.concat(parts)
      }

      /** The current session once its declaration is known (Core admits nothing before the first heartbeat). */
      const declaredSession: Effect.Effect<DeviceSession, StepFailure> = Effect.gen(function* () {
        let found: DeviceSession | undefined
        yield* eventually_("no declared session", Effect.gen(function* () {
          const session = yield* gateway.session(deviceId)
          if (Option.isNone(session)) return Option.some("no session")
          if (Option.isNone(yield* session.value.declaration)) return Option.some("no declaration yet")
          found = session.value
          return Option.none()
        }))
        return found!
      })

      const track = (turn: Delivery.Turn): Effect.Effect<TrackedTurn> =>
        Effect.gen(function* () {
          const tracked: TrackedTurn = { turn, facts: [] }
          yield* Stream.runForEach(turn.facts, (f) => Effect.sync(() => {
            tracked.facts.push(f)
            changes.notify()
          })).pipe(Effect.forkIn(scope))
          return tracked
        })

      /** Runs an operation in the scenario's scope; its end is a change once its exit is observable. */
      const fork = <A, E>(effect: Effect.Effect<A, E>): Effect.Effect<Fiber.Fiber<A, E>> =>
        Effect.gen(function* () {
          const fiber = yield* Effect.forkIn(effect, scope)
          yield* Fiber.await(fiber).pipe(Effect.andThen(Effect.sync(changes.notify)), Effect.forkIn(scope))
          return fiber
        })

      /** The execution_start of a request later in the scenario (Core sends it itself once ready arrives). */
      const startOf = (s: WireScenario, request: string): Option.Option<{ readonly run_id: string; readonly input: MessageInput }> => {
        for (const step of s.steps) {
          if (step._tag !== "Core" || (step.sides !== undefined && !step.sides.includes("core"))) continue
          const m = step.message as { type?: string; id?: string; payload?: { run_id?: string; input?: MessageInput } }
          if (m.type === "execution_start" && m.id === request && typeof m.payload?.run_id === "string" && m.payload.input !== undefined) {
            return Option.some({ run_id: m.payload.run_id, input: m.payload.input })
          }
        }
        return Option.none()
      }
      /** Whether the scenario expects this request to become ready (then Delivery would start it at once). */
      const becomesReady = (s: WireScenario, request: string): boolean =>
        s.steps.some((step) => {
          const messages = step._tag === "Runtime" ? [step.message] : step._tag === "Interleave" ? step.streams.flat() : []
          return messages.some((m) => {
            const msg = m as { type?: string; id?: string; payload?: { state?: string } }
            return msg.type === "preparation_status" && msg.id === request && msg.payload?.state === "ready"
          })
        })

      const askOf = (interaction: string): UserChoicePayload | undefined => {
        for (const tracked of turns.values()) {
          for (const fact of tracked.facts) {
            if (fact._tag === "RunEvent" && fact.event.type === "prompt_for_user_choice" && fact.event.payload.ask_id === interaction) {
              return fact.event.payload
            }
          }
        }
        return undefined
      }

      const drive = (
        step: CoreStep,
        message: Messages.CoreToRuntime,
        _bindings: unknown,
        position: { readonly scenario: WireScenario }
      ): Effect.Effect<void, StepFailure> =>
        Effect.gen(function* () {
          switch (message.type) {
            case "execution_prepare": {
              const session = yield* declaredSession
              const request = message.id
              const start = startOf(position.scenario, request)
              if (Option.isNone(start) && becomesReady(position.scenario, request)) {
                // Core's caller holds the admission (Delivery would start it at once): session API.
                const preparation: HeldPreparation = { statuses: [] }
                held.set(request, preparation)
                const statuses = yield* session.subscribePreparation(request).pipe(
                  Scope.provide(scope),
                  Effect.mapError((e) => ({ reason: `subscribePreparation: ${e.message}` }))
                )
                yield* Stream.runForEach(statuses, (s) => Effect.sync(() => {
                  preparation.statuses.push(s)
                  changes.notify()
                })).pipe(
                  Effect.ignore,
                  Effect.forkIn(scope)
                )
                return yield* session.send(message).pipe(Effect.mapError((e) => ({ reason: e.message })))
              }
              const plan = Option.match(start, {
                onNone: () => ({ run_id: `${request}.unstarted`, input: [{ content: [{ type: "input_text" as const, text: "unused" }] }] }),
                onSome: (s) => s
              })
              const turn = yield* Delivery.deliverPrepared(session, {
                request_id: request,
                run_id: unsafeMake.runId(plan.run_id),
                spec: specFrom(message.payload.session_id, message.payload.configuration),
                input: plan.input
              }).pipe(Scope.provide(scope))
              const tracked = yield* track(turn)
              turns.set(plan.run_id, tracked)
              turnsByRequest.set(request, tracked)
              if (step.refusedByCore !== undefined) return yield* refusedLocally(tracked, request, step.refusedByCore)
              return
            }
            case "execution_start":
              // Delivery sends it itself once `ready` arrived; a held preparation starts through the session.
              if (held.has(message.id)) {
                const session = yield* declaredSession
                return yield* session.send(message).pipe(Effect.mapError((e) => ({ reason: e.message })))
              }
              return
            case "execution_release": {
              const tracked = turnsByRequest.get(message.id)
              if (tracked !== undefined) {
                yield* fork(tracked.turn.cancel(unsafeMake.deliveryId(`release-${message.id}`)))
                return
              }
              const session = yield* declaredSession
              return yield* session.send(message).pipe(Effect.mapError((e) => ({ reason: e.message })))
            }
            case "prompt_request": {
              const session = yield* declaredSession
              const config = message.payload
              const runId = message.id ?? unsafeMake.runId(config.run_id)
              const turn = yield* Delivery.deliverDirect(session, {
                run_id: runId,
                spec: specFrom(sessionOf(config), config),
                input: config.input ?? []
              }).pipe(Scope.provide(scope))
              turns.set(runId, yield* track(turn))
              return
            }
            case "prompt_cancel": {
              const tracked = turns.get(message.id)
              if (tracked === undefined) return yield* fail(`no Turn ${message.id} to cancel`)
              const delivery = message.payload.delivery_id ?? unsafeMake.deliveryId("cancel")
              cancels.set(message.id, yield* fork(tracked.turn.cancel(delivery)))
              return
            }
            case "prompt_steer": {
              const tracked = turns.get(message.id)
              if (tracked === undefined) return yield* fail(`no Turn ${message.id} to steer`)
              steers.set(`${message.id}/${message.payload.input_id}`, yield* fork(tracked.turn.steer(message.payload.input_id, message.payload.input)))
              return
            }
            case "permission_decision": {
              const session = yield* declaredSession
              decisions.set(message.id, yield* fork(Interactions.answerPermission(session, {
                interaction_id: message.id,
                delivery_id: message.payload.delivery_id,
                approved: message.payload.approved,
                ...(message.payload.message === undefined ? {} : { message: message.payload.message }),
                ...(message.payload.updated_input === undefined ? {} : { updated_input: message.payload.updated_input })
              })))
              return
            }
            case "prompt_for_user_choice_decision": {
              const session = yield* declaredSession
              let ask: UserChoicePayload | undefined
              yield* eventually_(`Core has seen no ask ${message.id}`, Effect.sync(() => {
                ask = askOf(message.id)
                return ask === undefined ? Option.some("not yet") : Option.none()
              }))
              if (ask === undefined) return yield* fail(`Core has seen no ask ${message.id}`)
              const answering = Interactions.answerUserChoice(session, ask, message.payload)
              if (step.refusedByCore !== undefined) {
                const exit = yield* Effect.exit(answering)
                const refusal = Exit.findErrorOption(exit)
                if (Option.isSome(refusal) && refusal.value._tag === "DecisionInvalid" && refusal.value.issue === step.refusedByCore) {
                  decisions.set(message.id, { refused: refusal.value.issue })
                  return
                }
                return yield* fail(`Core did not refuse the decision with ${step.refusedByCore}: ${Exit.isSuccess(exit) ? "sent" : String(Option.getOrUndefined(refusal)?._tag)}`)
              }
              decisions.set(message.id, yield* fork(answering))
              return
            }
            case "function_result": {
              const tracked = turns.get(message.id)
              if (tracked === undefined) return yield* fail(`no Turn ${message.id}`)
              if (Option.isNone(tracked.turn.admitted)) return yield* fail(`Turn ${message.id} was not admitted`)
              const session = yield* declaredSession
              let channel = functionChannels.get(message.id)
              if (channel === undefined) {
                channel = yield* Functions.make(session, message.id, { admitted: tracked.turn.admitted.value, engine })
                functionChannels.set(message.id, channel)
              }
              const p = message.payload
              const last = p.content[p.content.length - 1]
              const output: Functions.FunctionOutput = p.success
                ? { output: p.content }
                : last !== undefined && last.type === "input_text"
                ? { ...(p.content.length > 1 ? { output: p.content.slice(0, -1) } : {}), error: last.text }
                : { output: p.content, error: "" }
              functionResults.set(p.call_id, yield* fork(channel.answer(p.call_id, output, { deliveryId: p.delivery_id })))
              return
            }
            case "workspace_read": {
              const session = yield* declaredSession
              const p = message.payload
              const target: WorkspaceRead.ReadTarget = p.handle !== undefined ? { handle: p.handle } : { run_id: p.run_id! }
              const kind: WorkspaceRead.ReadKind = p.operation === "directory"
                ? { _tag: "Directory", maxEntries: p.max_entries ?? 0 }
                : { _tag: "Bytes", maxBytes: p.max_bytes }
              return yield* runWorkspace(step, message.id, WorkspaceRead.read(session, {
                operationId: message.id,
                target,
                environmentId: p.environment_id,
                path: p.path,
                kind
              }))
            }
            case "workspace_write": {
              // Core's driver sends the chunks and the commit itself as the receipts arrive.
              if (message.payload.step !== "begin") return
              const session = yield* declaredSession
              const p = message.payload
              return yield* runWorkspace(step, message.id, WorkspaceWrite.write(session, {
                operationId: message.id,
                environmentId: p.environment_id ?? "",
                sessionId: p.session_id ?? "",
                path: p.path ?? "",
                body: writeBody(position.scenario, message.id)
              }))
            }
            case "runtime_prepare": {
              // Core's driver sends the chunks and the commit itself as the receipts arrive.
              if (message.payload.step !== "begin") return
              const session = yield* declaredSession
              const p = message.payload
              const body = writeBody(position.scenario, message.id)
              const action: RuntimePrepare.PrepareAction = p.action === "initialize"
                ? { action: "initialize", initialization: p.initialization! }
                : p.action === "finalize"
                ? { action: "finalize", sources: p.sources ?? {} }
                : p.action === "skill"
                ? { action: "skill", metadata: p.skill!, body }
                : p.action === "plugin"
                ? { action: "plugin", slot: p.slot ?? 0, metadata: p.plugin!, body }
                : { action: "file", path: p.file?.path ?? "", body }
              return yield* runWorkspace(step, message.id, RuntimePrepare.prepare(session, {
                transferId: message.id,
                environmentId: p.environment_id ?? "",
                sessionId: p.session_id ?? "",
                step: action
              }))
            }
            case "workspace_export": {
              // next and cancel are the driver's own (after each consumed chunk; on a stop before completed).
              if (message.payload.step !== "begin") return
              const session = yield* declaredSession
              const p = message.payload
              return yield* runWorkspace(step, message.id, WorkspaceExport.exportTo(session, {
                operationId: message.id,
                handle: p.handle!,
                environmentId: p.environment_id ?? ""
              }, () => Effect.void))
            }
            case "environment_quiesce":
            case "environment_resume": {
              const session = yield* declaredSession
              const p = message.payload
              const requesting = SuspensionDriver.request(session, {
                operation: message.type === "environment_quiesce" ? "quiesce" : "resume",
                requestId: message.id,
                environmentId: p.environment_id,
                suspendId: p.suspend_id,
                ...(p.rollback === undefined ? {} : { rollback: p.rollback })
              })
              if (step.refusedByCore === undefined) {
                // The scenario's earlier replies may still be in flight to Core when it asks for the next request
                // (the Runtime's frames and this step are not ordered): wait until Core has taken them and a
                // suspension slot is free, as a caller issuing requests one after another would.
                yield* eventually_(`no free suspension slot for ${message.id}`, Effect.sync(() => {
                  let outstanding = 0
                  for (const tracked of suspensions.values()) {
                    if (!("refused" in tracked) && tracked.pollUnsafe() === undefined) outstanding++
                  }
                  return outstanding < SuspensionDriver.MaxOutstandingSuspensions
                    ? Option.none()
                    : Option.some(`${outstanding} suspension requests outstanding`)
                }))
                suspensions.set(message.id, yield* fork(requesting))
                return
              }
              const exit = yield* Effect.exit(requesting)
              const refusal = Option.getOrUndefined(Exit.findErrorOption(exit))
              if (refusal?._tag === "SuspensionRefused" && refusal.reason === step.refusedByCore) {
                suspensions.set(message.id, { refused: refusal.reason })
                return
              }
              return yield* fail(`Core did not refuse ${message.id} with ${step.refusedByCore}: ${refusal?._tag ?? "success"}`)
            }
            case "device_shutdown": {
              const session = yield* declaredSession
              return yield* session.send(message).pipe(Effect.mapError((e) => ({ reason: e.message })))
            }
            default:
              return yield* fail(`the Core runner has no driver for ${(message as { type: string }).type}`)
          }
        })

      const runEventTypes = (tracked: TrackedTurn) =>
        tracked.facts.flatMap((f) => (f._tag === "RunEvent" ? [f.event.type] : []))

      const check = (fact: Fact): Effect.Effect<void, StepFailure> => {
        const turnFor = (run: string) =>
          Effect.suspend(() => {
            const tracked = turns.get(run)
            return tracked === undefined ? fail(`no Turn ${run}`) : Effect.succeed(tracked)
          })
        switch (fact._tag) {
          case "NoSession":
            return eventually_("a session is registered", Effect.map(gateway.session(deviceId), (s) =>
              Option.isSome(s) ? Option.some("registered") : Option.none()))
          case "DeclarationUnknown":
            return eventually_("the declaration is not unknown", Effect.gen(function* () {
              const s = yield* gateway.session(deviceId)
              if (Option.isNone(s)) return Option.some("no session")
              return Option.isNone(yield* s.value.declaration) ? Option.none() : Option.some("known")
            }))
          case "DeclarationKnown":
            return eventually_("the declaration differs", Effect.gen(function* () {
              const s = yield* gateway.session(deviceId)
              if (Option.isNone(s)) return Option.some("no session")
              const d = yield* s.value.declaration
              if (Option.isNone(d)) return Option.some("unknown")
              const kinds = [...d.value.kinds.values()].map((k) => ({
                kind: k.kind,
                available: k.available,
                supported: Object.entries(k.capabilities).filter(([, v]) => v).map(([n]) => n).sort()
              }))
              const expected = fact.kinds.map((k) => ({ ...k, supported: [...k.supported].sort() }))
              return canonicalEquals(kinds, expected) ? Option.none() : Option.some(JSON.stringify(kinds).slice(0, 300))
            }))
          case "RunCompleted":
            return Effect.flatMap(turnFor(fact.run), (tracked) =>
              eventually_(`${fact.run} did not complete with ${fact.events.join(",")}`, Effect.sync(() => {
                const types = runEventTypes(tracked)
                if (tracked.facts.some((f) => f._tag === "RunObservationEnded")) return Option.some("observation ended")
                return canonicalEquals(types, fact.events) ? Option.none() : Option.some(types.join(","))
              })))
          case "RunObservationLost":
            return Effect.flatMap(turnFor(fact.run), (tracked) =>
              eventually_(`${fact.run} did not lose observation (${fact.reason})`, Effect.sync(() => {
                const ended = tracked.facts.find((f) => f._tag === "RunObservationEnded")
                const types = runEventTypes(tracked)
                if (ended === undefined) return Option.some(`events ${types.join(",")}, not ended`)
                if (ended.reason !== fact.reason) return Option.some(`ended ${ended.reason}`)
                return canonicalEquals(types, fact.events) ? Option.none() : Option.some(`events ${types.join(",")}`)
              })))
          case "PreparationObserved":
            return eventually_(`${fact.request} statuses differ`, Effect.sync(() => {
              const tracked = turnsByRequest.get(fact.request)
              const states = tracked !== undefined
                ? tracked.facts.flatMap((f) => (f._tag === "PreparationStatus" ? [f.status.state] : []))
                : (held.get(fact.request)?.statuses ?? []).map((s) => s.state)
              return canonicalEquals(states, fact.states) ? Option.none() : Option.some(states.join(","))
            }))
          case "PreparationRejected":
            return eventually_(`${fact.request} was not rejected with ${fact.code}`, Effect.gen(function* () {
              const tracked = turnsByRequest.get(fact.request)
              if (tracked === undefined) return Option.some("no Turn")
              const snapshot = yield* tracked.turn.snapshot
              const resolution = snapshot.resolution
              if (resolution._tag === "Unclaimed") {
                return resolution.reason === fact.code && fact.retrySafe ? Option.none() : Option.some(`unclaimed ${resolution.reason}`)
              }
              if (resolution._tag === "Settled") {
                const o = resolution.outcome
                return o.error_code === "preparation_rejected" && o.preparation_error_code === fact.code && !fact.retrySafe
                  ? Option.none()
                  : Option.some(`settled ${o.error_code ?? o.status} ${o.preparation_error_code ?? ""}`)
              }
              return Option.some("pending")
            }))
          case "CancelOutcome":
            return eventually_(`cancellation of ${fact.run}`, Effect.sync(() => {
              const exit = exitOf(cancels.get(fact.run))
              const actual = exit === undefined
                ? "pending"
                : Exit.isSuccess(exit)
                ? (exit.value._tag === "Confirmed" ? "confirmed" : "abandoned")
                : Option.match(Exit.findErrorOption(exit), {
                  onNone: () => "defect",
                  onSome: (e) => {
                    const tag = (e as { _tag?: string })._tag
                    return tag === "CancelUnconfirmed" ? "unconfirmed" : tag === "CancelRejected" ? `rejected:${(e as { code: string }).code}` : String(tag)
                  }
                })
              const expected = typeof fact.outcome === "string" ? fact.outcome : `rejected:${fact.outcome.rejected}`
              return actual === expected ? Option.none() : Option.some(actual)
            }))
          case "InputOutcome":
            return eventually_(`input ${fact.input} of ${fact.run}`, Effect.sync(() => {
              const exit = exitOf(steers.get(`${fact.run}/${fact.input}`))
              const actual = exit === undefined
                ? "pending"
                : Exit.isSuccess(exit)
                ? "accepted"
                : Option.match(Exit.findErrorOption(exit), {
                  onNone: () => "defect",
                  onSome: (e) => {
                    const tag = (e as { _tag?: string })._tag
                    return tag === "InputOutcomeUnknown" ? "unknown" : tag === "InputRejected" ? `error:${(e as { code: string }).code}` : String(tag)
                  }
                })
              const expected = typeof fact.outcome === "string" ? fact.outcome : `error:${fact.outcome.error}`
              return actual === expected ? Option.none() : Option.some(actual)
            }))
          case "DecisionOutcome":
            return eventually_(`decision for ${fact.interaction}`, Effect.sync(() =>
              compareOutcome(
                trackedLabel(decisions.get(fact.interaction), "applied", (e) => {
                  const tag = (e as { _tag?: string })._tag
                  return tag === "InteractionAckUnknown" ? "unknown" : tag === "InteractionRejected" ? `rejected:${(e as { code: string }).code}` : String(tag)
                }),
                fact.outcome
              )))
          case "FunctionResultOutcome":
            return eventually_(`function result for ${fact.call}`, Effect.sync(() => {
              const exit = exitOf(functionResults.get(fact.call))
              const actual = exit === undefined
                ? "pending"
                : Exit.isSuccess(exit)
                ? "applied"
                : Option.match(Exit.findErrorOption(exit), {
                  onNone: () => "defect",
                  onSome: (e) => {
                    const tag = (e as { _tag?: string })._tag
                    return tag === "FunctionResultUnknown" ? "unknown" : tag === "FunctionResultRejected" ? `rejected:${(e as { code: string }).code}` : String(tag)
                  }
                })
              const o = fact.outcome
              const expected = typeof o === "string" ? o : `rejected:${o.rejected}`
              return actual === expected ? Option.none() : Option.some(actual)
            }))
          case "TurnResolved":
            return Effect.flatMap(turnFor(fact.run), (tracked) =>
              eventually_(`Turn ${fact.run} did not resolve ${fact.status} ${fact.errorCode ?? ""}`, Effect.map(tracked.turn.snapshot, (s) => {
                const r = s.resolution
                if (r._tag !== "Settled") return Option.some(r._tag)
                return r.outcome.status === fact.status && r.outcome.error_code === fact.errorCode
                  ? Option.none()
                  : Option.some(`${r.outcome.status} ${r.outcome.error_code ?? ""}`)
              })))
          case "LatestUsage":
            return Effect.flatMap(turnFor(fact.run), (tracked) =>
              eventually_(`usage of ${fact.run}`, Effect.map(tracked.turn.snapshot, (s) =>
                canonicalEquals(s.usage, fact.usage) ? Option.none() : Option.some(JSON.stringify(s.usage ?? null)))))
          case "SessionClosed":
            return eventually_(`no connection closed with ${fact.reason}`, Effect.sync(() =>
              events.some((e) => e._tag === "Disconnected" && e.reason === fact.reason)
                ? Option.none()
                : Option.some(events.filter((e) => e._tag === "Disconnected").map((e) => (e as { reason: string }).reason).join(",") || "none")))
          case "WorkspaceOutcome":
            return eventually_(`workspace operation ${fact.operation}`, Effect.sync(() =>
              compareOutcome(
                trackedLabel(workspace.get(fact.operation), "completed", (e) => {
                  const error = e as { _tag?: string; code?: string }
                  switch (error._tag) {
                    case "ReadRejected":
                    case "WriteRejected":
                    case "ExportRejected":
                    case "PrepareRejected":
                      return `rejected:${error.code}`
                    case "WriteFailed":
                    case "ExportFailed":
                    case "PrepareFailed":
                      return "failed"
                    case "ReadUnknown":
                    case "WriteUnknown":
                    case "ExportUnknown":
                    case "PrepareUnknown":
                      return "unknown"
                    default:
                      return String(error._tag)
                  }
                }),
                fact.outcome
              )))
          case "SuspensionOutcome":
            return eventually_(`suspension request ${fact.request}`, Effect.sync(() =>
              compareOutcome(
                trackedLabel(suspensions.get(fact.request), "accepted", (e) =>
                  e._tag === "SuspensionRejected" ? `rejected:${e.code}` : e._tag === "SuspensionUnknown" ? "unknown" : `refused:${e.reason}`),
                fact.outcome
              )))
          default:
            return fail(`the Core runner cannot check ${fact._tag} (a Runtime fact)`)
        }
      }

      const peer = ScriptedRuntime.make({ coreUrl: server.baseUrl, deviceId: DeviceIdValue, credential: Credential })
      const hooks: Hooks = {
        adjustClock: (d: Duration.Duration) => TestClock.adjust(d),
        drive: (step, message, bindings, position) => drive(step, message, bindings, position),
        check,
        live: TestClock.withLive,
        frameTimeout: Duration.seconds(5),
        mode: "in-process"
      }
      return yield* replay(scenario, peer.endpoint, hooks)
    })
  )
