/**
 * Client-executed functions, Runtime side (reference part 2 §4): a Turn's `function_call` registers a
 * pending call on its Run; Core's `function_result` is validated, checked against the admitted snapshot
 * (`function_tools`, and `function_result_images` for image content), its images against the public inline
 * image profile, and delivered natively; the
 * `interaction_decision_ack` goes under the Run id with the result's delivery id, `applied: true` only after
 * the native side confirmed it applied the result.
 *
 * Codes: `invalid_result` (also for a result whose payload did not decode when its call and delivery ids could
 * be read: `Envelope.InvalidFrame` carries them), `not_ready`, `unsupported`, `contract_violation`, `not_pending` (unknown call or
 * Run), `runtime_error`, `decision_conflict`. Replay identity is (Run id, call id) with the fingerprint of
 * the payload without `delivery_id`; call ids, delivery ids and input ids are distinct branded types.
 */
import { Context, Effect, FiberSet, Layer, Option } from "effect"
import type { FunctionResultErrorCode } from "../proto/ErrorCodes.js"
import type { FunctionResultPayload } from "../proto/Functions.js"
import { functionResultFingerprint } from "../proto/Functions.js"
import type { CallId, DeliveryId, RunId } from "../proto/Ids.js"
import { unsafeMake } from "../proto/Ids.js"
import { contentHasImages, validateContentParts, validateInlineImage } from "../proto/MessageInput.js"
import { AppliedDecisions, makeKeyedLock, sendAck, submitErrorCode } from "./Applied.js"
import { Background } from "./ConnectionServices.js"
import { guarded } from "./harness/Harness.js"
import { Outbound } from "./Outbound.js"
import { RunLifecycle } from "./RunLifecycle.js"
import type { RunRecord } from "./RunRecord.js"
import { Runs } from "./Runs.js"

export interface FunctionsShape {
  /** Handles one decoded function_result; never waits on native work. */
  readonly result: (runId: RunId, payload: FunctionResultPayload, trace: string | undefined) => Effect.Effect<void>
  /**
   * A function_result whose payload did not decode but whose call and delivery ids are known: `invalid_result`
   * (nothing was submitted natively; the call stays pending, so a corrected result can still be applied).
   */
  readonly rejectInvalid: (runId: RunId, deliveryId: DeliveryId, callId: CallId) => Effect.Effect<void>
}

const makeFunctions = Effect.gen(function* () {
  const outbound = yield* Outbound
  const runs = yield* Runs
  const applied = yield* AppliedDecisions
  const background = yield* Background
  const lifecycle = yield* RunLifecycle
  const withLock = makeKeyedLock()
  /** This family's per-Run state: function calls emitted and not yet answered. */
  const pendingCalls = new Map<RunRecord, Set<CallId>>()
  const callsOf = (run: RunRecord) => pendingCalls.get(run) ?? new Set<CallId>()

  const apply = (runId: RunId, payload: FunctionResultPayload, trace: string | undefined) => {
    const key = `${runId}\u0000function_result\u0000${payload.call_id}`
    const fingerprint = functionResultFingerprint(payload)
    const ack = (code: FunctionResultErrorCode | undefined) =>
      sendAck(outbound, unsafeMake.ackSubjectId(runId), payload.delivery_id, trace, code)
    return withLock(key, Effect.gen(function* () {
      const remembered = applied.lookup(key)
      if (Option.isSome(remembered)) return yield* ack(remembered.value === fingerprint ? undefined : "decision_conflict")
      if (Option.isSome(validateContentParts(payload.content))) return yield* ack("invalid_result")
      const found = yield* runs.get(runId)
      if (Option.isNone(found) || found.value.phase === "settling" || found.value.phase === "finished") {
        return yield* ack("not_pending")
      }
      const run = found.value
      if (!run.snapshot.capabilities.function_tools) return yield* ack("unsupported")
      if (contentHasImages(payload.content)) {
        if (!run.snapshot.capabilities.function_result_images) return yield* ack("unsupported")
        // Every image part must meet the public inline image profile; checked before any native call.
        if (payload.content.some((part) => part.type === "input_image" && Option.isSome(validateInlineImage(part.image_url)))) {
          return yield* ack("invalid_result")
        }
      }
      const turn = run.turn
      if (turn === undefined) return yield* ack("not_ready")
      if (!callsOf(run).has(payload.call_id)) return yield* ack("not_pending")
      const outcome = yield* Effect.result(
        guarded(
          run.snapshot,
          "function_tools",
          turn.submitFunctionResult({ callId: payload.call_id, success: payload.success, content: payload.content })
        )
      )
      if (outcome._tag === "Failure") {
        const code = submitErrorCode(outcome.failure)
        if (code === "not_pending") pendingCalls.get(run)?.delete(payload.call_id)
        return yield* ack(code)
      }
      yield* applied.remember(key, fingerprint)
      pendingCalls.get(run)?.delete(payload.call_id)
      return yield* ack(undefined)
    }))
  }

  yield* lifecycle.subscribe((event) =>
    Effect.sync(() => {
      if (event._tag === "Emitted" && event.event.type === "function_call") {
        const calls = pendingCalls.get(event.run) ?? new Set<CallId>()
        calls.add(event.event.payload.call_id)
        pendingCalls.set(event.run, calls)
      } else if (event._tag === "Stopped") {
        pendingCalls.delete(event.run)
      }
    })
  )

  return Functions.of({
    result: (runId, payload, trace) => FiberSet.run(background, apply(runId, payload, trace)).pipe(Effect.asVoid),
    rejectInvalid: (runId, deliveryId, callId) =>
      Effect.andThen(
        Effect.logInfo("function_result content did not decode; answered invalid_result").pipe(
          Effect.annotateLogs({ run_id: runId, call_id: callId })
        ),
        FiberSet.run(background, sendAck(outbound, unsafeMake.ackSubjectId(runId), deliveryId, undefined, "invalid_result"))
      ).pipe(Effect.asVoid)
  })
})

/** Client-executed function results of one connection. */
export class Functions extends Context.Service<Functions, FunctionsShape>()("agentwire/runtime/Functions") {
  static readonly layer = Layer.effect(Functions, makeFunctions)
}
