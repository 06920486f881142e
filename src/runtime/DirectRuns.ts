/**
 * `prompt_request` (reference part 1 §7.1): starts a Run directly, without an admission handle; it is not a
 * fallback after a failed prepared start. Request problems (unknown or unavailable kind, read-only
 * configuration, invalid input or configuration, an inline image outside the public profile, a capability
 * the declaration lacks, no capacity, a failed factory) produce `error` then `done` on the Run id, so Core's
 * stream always terminates. A second
 * `prompt_request` for an active Run id is ignored. The Run's Executor is prepared for it and closed after
 * its Turn (it belongs to no Session).
 */
import { Context, Effect, FiberSet, Layer, Option } from "effect"
import {
  type PromptRequestPayload,
  requiredCapabilities,
  resolvePromptRunId,
  validateConfiguration
} from "../proto/Execution.js"
import type { RunId } from "../proto/Ids.js"
import { unsafeMake } from "../proto/Ids.js"
import { StatusSendBudget } from "../proto/Limits.js"
import { hasImages, validateInlineImages, validateMessageInput } from "../proto/MessageInput.js"
import { configurationFingerprint } from "./Fingerprint.js"
import { Background, Drain, WorkspaceGate } from "./ConnectionServices.js"
import { Executors } from "./Executors.js"
import { missingCapability } from "./harness/Harness.js"
import { HarnessRegistry } from "./harness/HarnessRegistry.js"
import { Outbound, withTrace } from "./Outbound.js"
import { RuntimeIds } from "./RuntimeIds.js"
import type { StartRefusal } from "./RunRecord.js"
import { Runs } from "./Runs.js"
import { bindingRejection, EnvironmentBinding } from "./workspace/EnvironmentBinding.js"

export interface DirectRunsShape {
  readonly request: (envelopeId: RunId | undefined, payload: PromptRequestPayload, trace: string | undefined) => Effect.Effect<void>
  /** `error` then `done` for a prompt_request that did not decode, unless the Run id is active. */
  readonly rejectInvalid: (runId: RunId, trace: string | undefined) => Effect.Effect<void>
}

const makeDirectRuns = Effect.gen(function* () {
  const outbound = yield* Outbound
  const runs = yield* Runs
  const executors = yield* Executors
  const registry = yield* HarnessRegistry
  const ids = yield* RuntimeIds
  const background = yield* Background
  const drain = yield* Drain
  const binding = (yield* EnvironmentBinding).binding
  const gate = yield* WorkspaceGate

  /** error then done on a Run id that has no Run here (each send bounded like a status). */
  const refuse = (runId: RunId, reason: string, trace: string | undefined) =>
    FiberSet.run(
      background,
      Effect.andThen(
        outbound.sendWithin(withTrace({ type: "error", id: runId, payload: { error: reason } }, trace), StatusSendBudget),
        outbound.sendWithin(withTrace({ type: "done", id: runId, payload: { content: "" } }, trace), StatusSendBudget)
      )
    ).pipe(Effect.asVoid)

  const request = (envelopeId: RunId | undefined, payload: PromptRequestPayload, trace: string | undefined) =>
    Effect.gen(function* () {
      const resolved = resolvePromptRunId(envelopeId, payload)
      if (Option.isNone(resolved)) {
        return yield* Effect.logWarning("prompt_request without a Run id dropped").pipe(Effect.annotateLogs({ type: "prompt_request" }))
      }
      const runId = unsafeMake.runId(resolved.value)
      if (Option.isSome(yield* runs.get(runId))) {
        return yield* Effect.logInfo("prompt_request for an active Run ignored").pipe(Effect.annotateLogs({ run_id: runId }))
      }
      if (yield* drain.draining) return yield* refuse(runId, "the runtime is shutting down", trace)
      if (yield* gate.busy) return yield* refuse(runId, "a workspace write or export is in progress", trace)
      const found = yield* registry.get(payload.agent_kind)
      if (Option.isNone(found)) return yield* refuse(runId, "agent kind not available", trace)
      const harness = found.value
      const snapshot = harness.declaration
      if (!snapshot.available) return yield* refuse(runId, "agent kind not available", trace)
      if (payload.workspace_read_only === true) return yield* refuse(runId, "a read-only configuration cannot run", trace)
      const input = payload.input
      if (input === undefined || Option.isSome(validateMessageInput(input))) return yield* refuse(runId, "invalid input", trace)
      if (hasImages(input)) {
        const image = validateInlineImages(input)
        if (Option.isSome(image)) return yield* refuse(runId, `invalid input (${image.value})`, trace)
      }
      if (Option.isSome(validateConfiguration(payload))) return yield* refuse(runId, "invalid configuration", trace)
      const missing = missingCapability(snapshot, requiredCapabilities(payload))
      if (Option.isSome(missing)) return yield* refuse(runId, `unsupported capability: ${missing.value}`, trace)
      const bindingCode = bindingRejection(binding, payload.local_environment)
      if (bindingCode !== undefined) {
        return yield* refuse(runId, bindingCode === "unsupported_configuration"
          ? "this daemon is bound to no Environment"
          : "the Environment is not this daemon's binding", trace)
      }

      const acquire = Effect.gen(function* () {
        const reserved = yield* executors.reserve(yield* ids.executorId, {
          sessionId: undefined,
          kind: payload.agent_kind,
          declaration: snapshot,
          configuration: payload,
          configFingerprint: configurationFingerprint(payload),
          retained: false,
          readOnly: false
        })
        if (reserved._tag === "Failure") {
          return yield* Effect.fail<StartRefusal>({ reason: "runtime at capacity", code: "executor_unavailable" })
        }
        const entry = reserved.success
        // In the Executor's own scope: a Run stopped during preparation closes that scope, and with it whatever
        // the adapter created.
        const prepared = yield* Effect.result(
          executors.prepare(entry, harness, { executorId: entry.id, sessionId: undefined, configuration: payload, declaration: snapshot })
        ).pipe(Effect.onInterrupt(() => executors.closeInBackground(entry)))
        if (prepared._tag === "Failure") {
          yield* executors.closeInBackground(entry)
          return yield* Effect.fail<StartRefusal>({ reason: "preparation failed", code: "executor_unavailable" })
        }
        return entry
      })

      yield* runs.start({
        runId,
        kind: payload.agent_kind,
        prepared: false,
        trace,
        config: payload,
        snapshot,
        input,
        acquire,
        onStarted: Effect.void,
        onStartFailed: () => Effect.void
      })
    })

  return DirectRuns.of({
    request,
    rejectInvalid: (runId, trace) =>
      Effect.gen(function* () {
        if (Option.isSome(yield* runs.get(runId))) return
        yield* refuse(runId, "invalid prompt_request", trace)
      })
  })
})

/** Direct `prompt_request` Runs of one connection. */
export class DirectRuns extends Context.Service<DirectRuns, DirectRunsShape>()("agentwire/runtime/DirectRuns") {
  static readonly layer = Layer.effect(DirectRuns, makeDirectRuns)
}
