/**
 * One scripted Turn: runs the input's script (Script.ts) step by step, answers active input, decisions,
 * function results and cancellation as the script says, and settles through `awaitSettlement`. Time passes
 * only on the Effect clock; named signals (`ScriptedSignals`) control native settlement.
 */
import { describe as describeMcp } from "../McpBindings.js"
import { Deferred, Effect, Exit, Fiber } from "effect"
import type { InteractionId } from "../../../proto/Ids.js"
import { unsafeMake } from "../../../proto/Ids.js"
import {
  type FunctionResult,
  NativeFailed,
  NativeRejected,
  NativeUnknown,
  NotPending,
  OperationUnsupported,
  type PermissionDecision,
  SettlementUnconfirmed,
  type SteerError,
  type SteerInput,
  type Turn,
  type UserChoiceAnswer
} from "../Harness.js"
import { readFile, writeFile } from "./ScriptedFiles.js"
import { inputText, parseInput, type Step, toDuration } from "./Script.js"
import { runScript } from "./ScriptedBody.js"
import {
  type AcceptMode,
  type AwaitingSteer,
  type BufferedInput,
  makeOutput,
  type ScriptedEnv,
  type ScriptedOperation,
  type TurnContext,
  type TurnState
} from "./ScriptedTurnState.js"

export const makeTurn = Effect.fnUntraced(function* (env: ScriptedEnv, ctx: TurnContext) {
  const { signals, violations, nextId } = env
  const settled = yield* Deferred.make<{ readonly outcome: "completed" | "cancelled" }, SettlementUnconfirmed>()
  const state: TurnState = {
    content: [],
    parts: [],
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

  const { snapshot, settled: settledOutput, delta, deltaUnsafe, completeMessage, toolCall } = makeOutput(env, ctx, state)

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

  /** A workspace file step; a refusal is an `error` frame with the finite reason, then the Turn stops. */
  const fileStep = (step: Extract<Step, { write_file: unknown }> | Extract<Step, { read_file: unknown }>) => {
    const root = env.workspaceRoot
    const failed = (what: string, reason: string) =>
      emit({ type: "error", payload: { error: `${what} failed: ${reason}` } }).pipe(Effect.as("stop" as const))
    if ("write_file" in step) {
      if (root === undefined) return failed("write_file", "no workspace is bound")
      return writeFile(root, step.write_file.path, step.write_file.text).pipe(
        Effect.as("continue" as const),
        Effect.catch((reason) => failed("write_file", reason))
      )
    }
    if (root === undefined) return failed("read_file", "no workspace is bound")
    return readFile(root, step.read_file).pipe(
      Effect.flatMap((content) => Effect.as(delta(content), "continue" as const)),
      Effect.catch((reason) => failed("read_file", reason))
    )
  }

  const runStep = (step: Step): Effect.Effect<"continue" | "stop"> => {
    const cont = Effect.as("continue" as const)
    if ("delta" in step) return Effect.repeat(delta(step.delta, step.phase), { times: (step.repeat ?? 1) - 1 }).pipe(cont)
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
    if ("write_file" in step || "read_file" in step) return closeThen(fileStep(step))
    if ("mcp_servers" in step) return delta(JSON.stringify(describeMcp(env.mcpServers ?? []))).pipe(cont)
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

  const body = runScript(parseInput(inputText(ctx.input)), { emit, delta, deltaUnsafe, completeMessage, runStep })

  // Not a generator made per Turn (docs/performance.md, "generators").
  const endTurn = Effect.suspend(() => {
    state.ended = true
    const left = state.buffer.splice(0) // an error only for an input left (it captures a stack)
    return Effect.andThen(
      Effect.forEach(left, (entry) =>
        Deferred.fail(entry.result, new NativeRejected({ operation: "steer", reason: "the turn ended before the input was consumed" })), { discard: true }),
      Effect.sync(() => {
        state.permissions.clear()
        state.asks.clear()
        state.calls.clear()
        ctx.release()
      })
    )
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

  /** A submission to an interaction the script left pending: refused when unsupported or not pending, else settles it. */
  const settleSubmission = Effect.fnUntraced(function* <K, V>(
    support: ScriptedOperation,
    operation: string,
    pending: Map<K, V>,
    key: K,
    settle: (entry: V) => Effect.Effect<boolean>
  ) {
    yield* unsupported(support)
    const entry = pending.get(key)
    if (entry === undefined) return yield* new NotPending({ operation })
    yield* failSubmission(operation)
    pending.delete(key)
    yield* settle(entry)
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
      settleSubmission("function_result", "function_result", state.calls, result.callId, (pending) => Deferred.succeed(pending, result)),
    decidePermission: (id: InteractionId, decision) =>
      settleSubmission("permission", "permission_decision", state.permissions, id, (pending) => Deferred.succeed(pending, decision)),
    answerUserChoice: (id: InteractionId, answer) =>
      settleSubmission("user_choice", "prompt_for_user_choice_decision", state.asks, id, (pending) => Deferred.succeed(pending.answer, answer)),
    awaitSettlement: Effect.map(Deferred.await(settled), ({ outcome }) => ({
      outcome,
      ...settledOutput(),
      reusable: state.reusable
    }))
  }
  return turn
})

