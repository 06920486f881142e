/**
 * The built-in `scripted` harness: a deterministic controlled adapter with no processes, used by the demo,
 * the tests and external conformance checks (README section "scripted-harness"). Its declaration describes
 * the composed daemon + harness (`scriptedCapabilities`): 26 capabilities supported; the four this daemon
 * cannot honour are unsupported (workspace reads and exports, authoring, a local Environment binding). A
 * daemon can narrow it further with `RuntimeProcessOptions.scripted.disabledCapabilities`. A Turn's input text
 * is plain text (echoed back as deltas, then done) or `{"script": [steps]}` (Script.ts). Native settlement is
 * controlled by the script and by `ScriptedSignals`; time only passes on the Effect clock.
 *
 * It proves the transport and dispatcher contract, never native Harness behaviour.
 */
import { Deferred, Effect, Exit, Fiber, Option, Scope } from "effect"
import { type CapabilityName, capabilityNames, type AgentKindCapabilities } from "../../../proto/Capabilities.js"
import type { PromptRequestPayload } from "../../../proto/Execution.js"
import type { ExecutorId, InteractionId, RunId } from "../../../proto/Ids.js"
import { unsafeMake } from "../../../proto/Ids.js"
import type { MessageInput } from "../../../proto/MessageInput.js"
import type { DonePayload, ToolCallPayload, ToolObservation, Usage } from "../../../proto/RunEvents.js"
import {
  CloseFailed,
  type Executor,
  type FunctionResult,
  type Harness,
  type HarnessDeclaration,
  NativeFailed,
  NativeRejected,
  NativeUnknown,
  NotPending,
  OperationUnsupported,
  type PermissionDecision,
  PrepareFailed,
  type PrepareRequest,
  SettlementUnconfirmed,
  StartFailed,
  type SteerError,
  type SteerInput,
  type Turn,
  type TurnSink,
  type UserChoiceAnswer
} from "../Harness.js"
import { decodePrepareOptions, echoFragments, inputText, parseInput, type Step, toDuration } from "./Script.js"
import { ScriptedSignals } from "./ScriptedSignals.js"

export const ScriptedKind = "scripted"
export const ScriptedVersion = "1.0.0"

/** Operations the scripted adapter can be told to answer "unsupported" although declared (a contract violation). */
export type ScriptedOperation = "steer" | "function_result" | "permission" | "user_choice"

export interface ScriptedOptions {
  readonly disabledCapabilities?: ReadonlyArray<CapabilityName> | undefined
  readonly available?: boolean | undefined
  readonly contractViolations?: ReadonlyArray<ScriptedOperation> | undefined
}

/**
 * What the daemon composed with the scripted harness can do, one explicit decision per field (a new field fails
 * to compile here until it is decided). Unsupported, because this daemon refuses the matching operations for
 * certain (docs/runtime.md, "Dispatcher"): `workspace_read_preparation` and `workspace_output_export`
 * (`workspace_read` / `workspace_export` answer `read_unsupported`), `workspace_authoring` (no authoring
 * command) and `local_environment` (no Environment binding or `workspace_directory` check). Core therefore
 * never admits a hosted-Environment Turn, an idle directory read or an output export on this daemon.
 */
export const scriptedCapabilities: AgentKindCapabilities = {
  subagent_observations: true,
  streaming: true,
  permissions: true,
  usage: true,
  resume: true,
  native_session_recovery: true,
  workspace_authoring: false,
  steering: true,
  message_items: true,
  tool_observations: true,
  environment_none: true,
  local_environment: false,
  preparation: true,
  workspace_read_preparation: false,
  workspace_output_export: false,
  programmatic_tool_calling_disable: true,
  web_search_control: true,
  execution_controls: true,
  text_verbosity: true,
  structured_output: true,
  tool_search: true,
  message_images: true,
  function_result_images: true,
  subagent_control: true,
  durable_input_receipts: true,
  durable_turns: true,
  function_tools: true,
  mcp_http_tools: true,
  mcp_http_required: true,
  mcp_http_bearer_auth: true
}

/** The declaration: `scriptedCapabilities`, with the disabled ones also unsupported (narrowing only). */
export const scriptedDeclaration = (options: ScriptedOptions = {}): HarnessDeclaration => {
  const disabled = new Set(options.disabledCapabilities ?? [])
  const capabilities = Object.fromEntries(
    capabilityNames.map((name) => [name, scriptedCapabilities[name] && !disabled.has(name)])
  ) as AgentKindCapabilities
  return { kind: ScriptedKind, available: options.available ?? true, version: ScriptedVersion, capabilities }
}

// ---------------------------------------------------------------------------------------------- turn state

type AcceptMode = "ok" | "never" | "reject" | "unknown"

interface BufferedInput {
  readonly input: SteerInput
  readonly result: Deferred.Deferred<void, SteerError>
}

interface AwaitingSteer {
  remaining: number
  readonly write: "ok" | "hang" | "reject"
  readonly writeReturnsOn: string | undefined
  readonly accept: AcceptMode
  readonly done: Deferred.Deferred<void>
}

interface PendingAsk {
  readonly questionIds: ReadonlyArray<string>
  readonly answer: Deferred.Deferred<UserChoiceAnswer>
}

interface TurnState {
  content: string
  usage: Usage | undefined
  openMessage: { readonly id: string; text: string; readonly phase: string | undefined } | undefined
  cancel: { readonly _tag: "Normal" } | { readonly _tag: "Ignored" } | { readonly _tag: "SettlesOn"; readonly signal: string }
  cancelFails: boolean
  cancelRequested: boolean
  failSubmissions: number
  reusable: boolean
  ended: boolean
  awaiting: AwaitingSteer | undefined
  readonly buffer: Array<BufferedInput>
  readonly permissions: Map<string, Deferred.Deferred<PermissionDecision>>
  readonly asks: Map<string, PendingAsk>
  readonly calls: Map<string, Deferred.Deferred<FunctionResult>>
}

/**
 * Builds the scripted harness. Interaction, call, message and tool ids come from process-wide counters
 * (`perm_1`, `ask_1`, `call_1`, `msg_1`, `tool_1`, …), so they are unique per connection and deterministic.
 */
export const makeScriptedHarness = (options: ScriptedOptions = {}) =>
  Effect.gen(function* () {
    const signals = yield* ScriptedSignals
    const declaration = scriptedDeclaration(options)
    const violations = new Set(options.contractViolations ?? [])
    const counters = new Map<string, number>()
    const nextId = (prefix: string) => {
      const n = (counters.get(prefix) ?? 0) + 1
      counters.set(prefix, n)
      return `${prefix}_${n}`
    }

    const prepare = (request: PrepareRequest) =>
      Effect.gen(function* () {
        const raw = request.configuration.agent_options?.["scripted"]
        const decoded = raw === undefined ? undefined : decodePrepareOptions(raw)
        if (decoded !== undefined && decoded._tag === "Failure") {
          return yield* new PrepareFailed({ reason: "invalid agent_options.scripted" })
        }
        const opts = decoded?._tag === "Success" ? decoded.success : {}
        if (opts.prepare_sleep !== undefined) yield* Effect.sleep(toDuration(opts.prepare_sleep))
        if (opts.prepare_wait !== undefined) yield* signals.await(opts.prepare_wait)
        // The native state is owned by the Executor's scope from the moment it exists: the release is the
        // last-resort stop (a no-op after a confirmed close), so an interrupted or failed preparation leaks nothing.
        const { executor } = yield* Effect.acquireRelease(
          makeExecutor(request, opts.close_fails ?? 0, opts.close_hangs ?? 0),
          ({ kill }) => kill
        )
        if (opts.prepare === "fail") {
          yield* executor.close.pipe(Effect.ignore)
          return yield* new PrepareFailed({ reason: "scripted preparation failure" })
        }
        if (opts.prepare === "fail_with_residue") {
          return yield* new PrepareFailed({ reason: "scripted preparation failure", residue: { close: executor.close } })
        }
        return executor as Executor
      })

    const makeExecutor = (request: PrepareRequest, initialCloseFails: number, initialCloseHangs: number) =>
      Effect.gen(function* () {
        const scope = yield* Scope.make()
        const config = request.configuration
        const nativeSession = config.agent_session_id !== undefined && config.agent_session_id !== ""
          ? config.agent_session_id
          : `scripted-${request.executorId}`
        const executorState = { closeFails: initialCloseFails, closeHangs: initialCloseHangs, closed: false, busy: false }

        const close: Effect.Effect<void, CloseFailed> = Effect.suspend(() => {
          if (executorState.closed) return Effect.void
          if (executorState.closeHangs > 0) {
            executorState.closeHangs--
            return Effect.never
          }
          if (executorState.closeFails > 0) {
            executorState.closeFails--
            return Effect.fail(new CloseFailed({ reason: "scripted close failure" }))
          }
          executorState.closed = true
          return Scope.close(scope, Exit.void)
        })

        const startTurn = (runId: RunId, input: MessageInput, sink: TurnSink) =>
          Effect.gen(function* () {
            if (executorState.closed) return yield* new StartFailed({ reason: "executor closed" })
            if (executorState.busy) return yield* new StartFailed({ reason: "executor busy" })
            executorState.busy = true
            return yield* makeTurn({
              runId,
              input,
              sink,
              config,
              nativeSession,
              scope,
              executorId: request.executorId,
              setCloseFails: (n) => {
                executorState.closeFails = n
              },
              setCloseHangs: (n) => {
                executorState.closeHangs = n
              },
              release: () => {
                executorState.busy = false
              }
            })
          })

        const executor = {
          startTurn,
          nativeSessionId: Effect.succeed(Option.some(nativeSession)),
          close
        } satisfies Executor
        /** Stops the native state without the scripted close faults; idempotent. */
        const kill = Effect.suspend(() => {
          executorState.closed = true
          return Scope.close(scope, Exit.void)
        })
        return { executor, kill }
      })

    interface TurnContext {
      readonly runId: RunId
      readonly input: MessageInput
      readonly sink: TurnSink
      readonly config: PromptRequestPayload
      readonly nativeSession: string
      readonly scope: Scope.Scope
      readonly executorId: ExecutorId
      readonly setCloseFails: (n: number) => void
      readonly setCloseHangs: (n: number) => void
      readonly release: () => void
    }

    const makeTurn = (ctx: TurnContext) =>
      Effect.gen(function* () {
        const observeMessages = ctx.config.observe_messages === true
        const observeTools = ctx.config.observe_tool_observations === true
        const settled = yield* Deferred.make<{ readonly outcome: "completed" | "cancelled" }, SettlementUnconfirmed>()
        const state: TurnState = {
          content: "",
          usage: undefined,
          openMessage: undefined,
          cancel: { _tag: "Normal" },
          cancelFails: false,
          cancelRequested: false,
          failSubmissions: 0,
          reusable: true,
          ended: false,
          awaiting: undefined,
          buffer: [],
          permissions: new Map(),
          asks: new Map(),
          calls: new Map()
        }
        const emit = ctx.sink.emit

        const snapshot = (): DonePayload => ({
          content: state.content,
          ...(state.usage === undefined ? {} : { usage: state.usage }),
          metadata: { agent_session_id: ctx.nativeSession, agent_session_type: "scripted" }
        })

        /** One delta (opening an output message first when messages are observed). The per-delta path: no generator. */
        const delta = (text: string, phase?: string): Effect.Effect<void> =>
          Effect.suspend(() => {
            if (observeMessages && state.openMessage === undefined) {
              const id = nextId("msg")
              state.openMessage = { id, text: "", phase }
              return Effect.andThen(
                emit({
                  type: "output_message",
                  payload: phase === undefined ? { id, status: "in_progress" } : { id, status: "in_progress", phase }
                }),
                emitDelta(text)
              )
            }
            return emitDelta(text)
          })
        const emitDelta = (text: string): Effect.Effect<void> =>
          Effect.suspend(() => {
            const open = state.openMessage
            state.content += text
            if (open !== undefined) open.text += text
            return emit(open === undefined ? { type: "delta", delta: text } : { type: "delta", delta: text, item_id: open.id })
          })

        const completeMessage = Effect.suspend(() => {
          const open = state.openMessage
          if (open === undefined) return Effect.void
          state.openMessage = undefined
          return emit({
            type: "output_message",
            payload: open.phase === undefined
              ? { id: open.id, status: "completed", text: open.text }
              : { id: open.id, status: "completed", phase: open.phase, text: open.text }
          })
        })

        const toolCall = (step: Extract<Step, { tool_call: unknown }>["tool_call"]) =>
          Effect.gen(function* () {
            const id = step.id ?? nextId("tool")
            const observation: ToolObservation | undefined = observeTools ? step.observation : undefined
            const base = (stage: "before" | "after", obs: ToolObservation | undefined): ToolCallPayload => ({
              id,
              name: step.name,
              stage,
              ...(step.args === undefined ? {} : { args: step.args }),
              ...(stage === "after" && step.result !== undefined ? { result: step.result } : {}),
              ...(obs === undefined ? {} : { observation: obs })
            })
            const stage = step.stage ?? "both"
            if (stage === "before" || stage === "both") {
              const before = observation === undefined || stage === "before"
                ? observation
                : { ...observation, status: "in_progress" as const }
              yield* emit({ type: "tool_call", payload: base("before", before) })
            }
            if (stage === "after" || stage === "both") yield* emit({ type: "tool_call", payload: base("after", observation) })
          })

        /** Applies an accept mode to a written input and reports the native receipt. */
        const consume = (entry: BufferedInput, accept: AcceptMode) =>
          Effect.gen(function* () {
            switch (accept) {
              case "ok":
                yield* delta(inputText(entry.input.input))
                yield* Deferred.succeed(entry.result, undefined)
                return
              case "reject":
                yield* Deferred.fail(entry.result, new NativeRejected({ operation: "steer", reason: "scripted rejection" }))
                return
              case "unknown":
                yield* Deferred.fail(entry.result, new NativeUnknown({ operation: "steer", reason: "scripted unknown outcome" }))
                return
              case "never":
                return
            }
          })

        const awaitSteer = (step: Extract<Step, { await_steer: unknown }>) =>
          Effect.gen(function* () {
            yield* completeMessage
            const awaiting: AwaitingSteer = {
              remaining: step.await_steer,
              write: step.write ?? "ok",
              writeReturnsOn: step.write_returns_on,
              accept: step.accept ?? "ok",
              done: yield* Deferred.make<void>()
            }
            while (awaiting.remaining > 0) {
              const entry = state.buffer.shift()
              if (entry === undefined) {
                state.awaiting = awaiting // same synchronous segment as the empty check above
                yield* Deferred.await(awaiting.done)
                break
              }
              awaiting.remaining--
              yield* consume(entry, awaiting.accept)
            }
            state.awaiting = undefined
          })

        const permission = (step: Extract<Step, { permission: unknown }>["permission"]) =>
          Effect.gen(function* () {
            yield* completeMessage
            const id = step.request_id ?? nextId("perm")
            const decision = yield* Deferred.make<PermissionDecision>()
            state.permissions.set(id, decision)
            yield* emit({
              type: "permission_request",
              payload: {
                request_id: unsafeMake.interactionId(id),
                tool: step.tool,
                title: step.title,
                ...(step.detail === undefined ? {} : { detail: step.detail }),
                ...(step.payload === undefined ? {} : { payload: step.payload })
              }
            })
            const withdrawal = step.withdraw_on !== undefined
              ? signals.await(step.withdraw_on)
              : step.withdraw_after !== undefined
              ? Effect.sleep(toDuration(step.withdraw_after))
              : Effect.never
            const first = yield* Effect.raceFirst(
              Deferred.await(decision).pipe(Effect.as("decided" as const)),
              withdrawal.pipe(Effect.as("withdrawn" as const))
            )
            if (first === "withdrawn" && state.permissions.delete(id)) {
              yield* emit({ type: "permission_cancel", interactionId: unsafeMake.interactionId(id) })
              return
            }
            const decided = yield* Deferred.await(decision)
            yield* delta(`permission ${id}: ${decided.approved ? "approved" : "denied"}`)
          })

        const ask = (step: Extract<Step, { ask: unknown }>["ask"]) =>
          Effect.gen(function* () {
            yield* completeMessage
            const id = step.ask_id ?? nextId("ask")
            const answer = yield* Deferred.make<UserChoiceAnswer>()
            state.asks.set(id, { questionIds: step.questions.map((q) => q.id), answer })
            yield* emit({
              type: "prompt_for_user_choice",
              payload: {
                ask_id: unsafeMake.interactionId(id),
                questions: step.questions,
                ...(step.tool_use_id === undefined ? {} : { tool_use_id: step.tool_use_id }),
                ...(step.auto_resolution_ms === undefined ? {} : { auto_resolution_ms: step.auto_resolution_ms })
              }
            })
            const got = yield* Deferred.await(answer)
            yield* delta(
              got.cancelled
                ? `answer ${id}: cancelled`
                : `answer ${id}: ${got.questionAnswers.map((a) => `${a.question_id}=${a.answers.join(",")}`).join("; ")}`
            )
          })

        const functionCall = (step: Extract<Step, { function_call: unknown }>["function_call"]) =>
          Effect.gen(function* () {
            yield* completeMessage
            const id = step.call_id ?? nextId("call")
            const result = yield* Deferred.make<FunctionResult>()
            state.calls.set(id, result)
            yield* emit({
              type: "function_call",
              payload: { call_id: unsafeMake.callId(id), name: step.name, arguments: step.arguments }
            })
            const got = yield* Deferred.await(result)
            const texts = got.content.map((part) => (part.type === "input_text" ? part.text : "[image]")).join("")
            yield* delta(`result ${id} ${got.success ? "ok" : "failed"}: ${texts}`)
          })

        const runStep = (step: Step): Effect.Effect<"continue" | "stop"> => {
          const cont = Effect.as("continue" as const)
          if ("delta" in step) return delta(step.delta, step.phase).pipe(cont)
          const closeThen = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.andThen(completeMessage, effect)
          if ("thinking" in step) return closeThen(emit({ type: "thinking", text: step.thinking })).pipe(cont)
          if ("tool_call" in step) return closeThen(toolCall(step.tool_call)).pipe(cont)
          if ("usage" in step) {
            return closeThen(Effect.andThen(Effect.sync(() => {
              state.usage = step.usage
            }), emit({ type: "usage", payload: step.usage }))).pipe(cont)
          }
          if ("sleep" in step) return Effect.sleep(toDuration(step.sleep)).pipe(cont)
          if ("error" in step) {
            const e = step.error
            return emit({
              type: "error",
              payload: {
                error: e.message,
                ...(e.code === undefined ? {} : { code: e.code }),
                ...(e.http_status === undefined ? {} : { http_status: e.http_status })
              }
            }).pipe(Effect.as("stop" as const))
          }
          if ("hang" in step) return closeThen(Effect.never)
          if ("await_steer" in step) return awaitSteer(step).pipe(cont)
          if ("permission" in step) return permission(step.permission).pipe(cont)
          if ("ask" in step) return ask(step.ask).pipe(cont)
          if ("function_call" in step) return functionCall(step.function_call).pipe(cont)
          if ("wait" in step) return signals.await(step.wait).pipe(cont)
          return Effect.sync(() => {
            if ("close_fails" in step) ctx.setCloseFails(step.close_fails)
            else if ("close_hangs" in step) ctx.setCloseHangs(step.close_hangs)
            else if ("cancel_ignored" in step) state.cancel = { _tag: "Ignored" }
            else if ("cancel_settles_on" in step) state.cancel = { _tag: "SettlesOn", signal: step.cancel_settles_on }
            else if ("cancel_fails" in step) state.cancelFails = true
            else if ("fail_submissions" in step) state.failSubmissions = step.fail_submissions
            else if ("reusable" in step) state.reusable = false
            return "continue" as const
          })
        }

        const parsed = parseInput(inputText(ctx.input))
        const body: Effect.Effect<void> = Effect.gen(function* () {
          switch (parsed._tag) {
            case "Echo":
              for (const fragment of echoFragments(parsed.text)) yield* delta(fragment)
              yield* completeMessage
              return
            case "InvalidScript":
              yield* emit({
                type: "error",
                payload: { error: parsed.index === undefined ? "invalid script" : `invalid script (step ${parsed.index})` }
              })
              return
            case "Script":
              for (const step of parsed.steps) {
                // The common step without the step dispatcher (the relay's hot loop).
                if ("delta" in step) yield* delta(step.delta, step.phase)
                else if ((yield* runStep(step)) === "stop") return
              }
              yield* completeMessage
              return
          }
        })

        const endTurn = Effect.gen(function* () {
          state.ended = true
          const rejected = new NativeRejected({ operation: "steer", reason: "the turn ended before the input was consumed" })
          for (const entry of state.buffer.splice(0)) yield* Deferred.fail(entry.result, rejected)
          state.permissions.clear()
          state.asks.clear()
          state.calls.clear()
          ctx.release()
        })

        const fiber = yield* body.pipe(
          Effect.onExit((exit) =>
            Effect.andThen(
              endTurn,
              Exit.isSuccess(exit)
                ? Deferred.succeed(settled, { outcome: "completed" as const })
                : state.cancelRequested
                ? Deferred.succeed(settled, { outcome: "cancelled" as const })
                : Deferred.fail(settled, new SettlementUnconfirmed({ reason: "the executor closed under the turn" }))
            )
          ),
          Effect.forkIn(ctx.scope)
        )

        const unsupported = (operation: ScriptedOperation) =>
          violations.has(operation) ? Effect.fail(new OperationUnsupported({ operation })) : Effect.void

        const failSubmission = (operation: string) =>
          Effect.suspend(() => {
            if (state.failSubmissions <= 0) return Effect.void
            state.failSubmissions--
            return Effect.fail(new NativeFailed({ operation, reason: "scripted submission failure" }))
          })

        const steerWithReceipt = (input: SteerInput, written: Effect.Effect<void>): Effect.Effect<void, SteerError> =>
          Effect.gen(function* () {
            yield* unsupported("steer")
            if (state.ended) {
              return yield* new NativeRejected({ operation: "steer", reason: "no active turn" })
            }
            const awaiting = state.awaiting
            if (awaiting === undefined) {
              yield* written
              const result = yield* Deferred.make<void, SteerError>()
              state.buffer.push({ input, result })
              return yield* Deferred.await(result)
            }
            const arrived = Effect.suspend(() => {
              awaiting.remaining--
              if (awaiting.remaining > 0) return Effect.void
              state.awaiting = undefined
              return Deferred.succeed(awaiting.done, undefined)
            })
            if (awaiting.write === "hang") {
              yield* arrived
              if (awaiting.writeReturnsOn === undefined) return yield* Effect.never
              yield* signals.await(awaiting.writeReturnsOn)
              return yield* new NativeUnknown({ operation: "steer", reason: "scripted late write" })
            }
            if (awaiting.write === "reject") {
              yield* arrived
              return yield* new NativeRejected({ operation: "steer", reason: "scripted write rejection" })
            }
            yield* written
            const result = yield* Deferred.make<void, SteerError>()
            yield* consume({ input, result }, awaiting.accept)
            yield* arrived
            return yield* Deferred.await(result)
          })

        const cancel = Effect.suspend(() => {
          if (state.cancelFails) return Effect.fail(new NativeFailed({ operation: "cancel", reason: "scripted cancel failure" }))
          if (state.ended) return Effect.void
          state.cancelRequested = true
          const mode = state.cancel
          switch (mode._tag) {
            case "Ignored":
              return Effect.void
            case "SettlesOn":
              return Effect.asVoid(Effect.forkIn(Effect.andThen(signals.await(mode.signal), Fiber.interrupt(fiber)), ctx.scope))
            case "Normal":
              return Effect.asVoid(Effect.forkIn(Fiber.interrupt(fiber), ctx.scope))
          }
        })

        const turn: Turn = {
          cancel,
          cancellationOutcome: Effect.sync(snapshot),
          steerWithReceipt,
          submitFunctionResult: (result) =>
            Effect.gen(function* () {
              yield* unsupported("function_result")
              const pending = state.calls.get(result.callId)
              if (pending === undefined) return yield* new NotPending({ operation: "function_result" })
              yield* failSubmission("function_result")
              state.calls.delete(result.callId)
              yield* Deferred.succeed(pending, result)
            }),
          decidePermission: (id: InteractionId, decision) =>
            Effect.gen(function* () {
              yield* unsupported("permission")
              const pending = state.permissions.get(id)
              if (pending === undefined) return yield* new NotPending({ operation: "permission_decision" })
              yield* failSubmission("permission_decision")
              state.permissions.delete(id)
              yield* Deferred.succeed(pending, decision)
            }),
          answerUserChoice: (id: InteractionId, answer) =>
            Effect.gen(function* () {
              yield* unsupported("user_choice")
              const pending = state.asks.get(id)
              if (pending === undefined) return yield* new NotPending({ operation: "prompt_for_user_choice_decision" })
              yield* failSubmission("prompt_for_user_choice_decision")
              state.asks.delete(id)
              yield* Deferred.succeed(pending.answer, answer)
            }),
          awaitSettlement: Effect.map(Deferred.await(settled), ({ outcome }) => ({
            outcome,
            done: snapshot(),
            reusable: state.reusable
          }))
        }
        return turn
      })

    const harness: Harness = { declaration, prepare }
    return harness
  })
