/**
 * Session initialization (issue #14; docs/dev-core.md "Session initialization"): before the first Turn of a
 * Session with an `initialization` is dispatched, its runner calls `ensure`, which runs the planned steps on the
 * device's current connection with Core's `runtime_prepare` driver (one transfer per step, every receipt waited
 * for; RuntimePrepare.ts) and persists each transition (InitializationStore.ts).
 *
 * What each outcome means for the Session:
 * - every step `completed` → `completed`; its Turns are dispatched (now and from then on, `ensure` is a read);
 * - a refusal that proves nothing started and that may clear (`resource_unavailable`,
 *   `runtime_preparation_capacity` at begin; the connection's transfer slot taken; a send that could not be
 *   queued) → `Retry`: the step stays pending and the runner retries with its backoff, for at most
 *   `retryBudget` (default 11 min: a daemon keeps an idle Executor, which blocks `runtime_prepare`, for 10 min);
 * - any other rejection, a `failed` receipt, or a stop before the commit was sent → `failed` (definite: the
 *   step installed nothing); the first Turn fails with `initialization_failed`, later starts are refused;
 * - a commit sent without proof (no receipt in 195 s, the connection ended, an invalid receipt,
 *   `runtime_preparation_unconfirmed`) → `unknown`: never replayed, on this or a later connection; the first
 *   Turn fails with `initialization_unknown` (nothing was dispatched) and later starts are refused.
 *
 * A step found `running` without a runner of this process (the previous process stopped during it) is
 * reconciled when it is next looked at: `unknown` when its commit may have been sent, else `failed`.
 * Progress (step, bytes, state) is kept live in memory for the operator view and sent to the Turn's followers.
 */
import { Clock, Context, Duration, Effect, Layer, Option } from "effect"
import { randomUUID } from "node:crypto"
import type { LocalEnvironment } from "../../proto/Execution.js"
import { unsafeMake } from "../../proto/Ids.js"
import type { DeviceSession } from "../DeviceSession.js"
import type { PrepareError } from "../prepare/PrepareErrors.js"
import { prepare } from "../prepare/RuntimePrepare.js"
import {
  initialProgress,
  type InitializationRequest,
  type InitializationView,
  plan,
  type StepProgress,
  type StepState
} from "./InitializationSpec.js"
import { type InitRecord, InitializationStore, type InitSummary } from "./InitializationStore.js"
import type { StoreFailed } from "./StoreErrors.js"

/** What the runner does next. */
export type Readiness =
  | { readonly _tag: "Ready" }
  | { readonly _tag: "Retry"; readonly reason: string }
  | { readonly _tag: "Failed"; readonly detail: string }
  | { readonly _tag: "Unknown"; readonly detail: string }

/** A progress notice on the Turn's SSE stream (event `initialization`). */
export interface InitNotice {
  readonly state: StepState
  readonly step: number
  readonly kind: string
  readonly label: string
  readonly step_state: StepState
  readonly bytes_sent: number
  readonly bytes_total: number
}

export interface EnsureInput<E = never> {
  readonly sessionId: string
  readonly session: DeviceSession
  readonly environment: LocalEnvironment
  /**
   * Makes one store write durable (the runner's retried writes: a write is never dropped); `E` is what ends the
   * runner's ownership of the Turn (a lost owner lease with several nodes).
   */
  readonly durable: <A>(operation: string, write: Effect.Effect<A, StoreFailed>) => Effect.Effect<A, E>
  readonly notify: (notice: InitNotice) => Effect.Effect<void>
}

export interface InitializationOptions {
  /** How long begin refusals that may clear are retried before the initialization fails. Default 11 min. */
  readonly retryBudget?: Duration.Input
  /** Core's budget per transfer (default 195 s). */
  readonly transferBudget?: Duration.Input
}

export class SessionInitialization extends Context.Service<SessionInitialization, {
  /** Stores a Session's initialization (checked by the caller with `initializationIssue`). */
  readonly create: (sessionId: string, request: InitializationRequest, networkAccess: string | undefined) => Effect.Effect<void, StoreFailed>
  /** Runs what is left of the Session's initialization on `session`, or says why its Turns cannot run. */
  readonly ensure: <E>(input: EnsureInput<E>) => Effect.Effect<Readiness, E>
  /** `failed` / `unknown` when the Session's Turns can no longer run. */
  readonly blocked: (sessionId: string) => Effect.Effect<Option.Option<"failed" | "unknown">, StoreFailed>
  readonly view: (sessionId: string) => Effect.Effect<Option.Option<InitializationView>, StoreFailed>
}>()("agentwire/core/dev/SessionInitialization") {}

const retryable = (e: PrepareError): boolean =>
  (e._tag === "PrepareRejected" && e.stage === "begin" &&
    (e.code === "resource_unavailable" || e.code === "runtime_preparation_capacity")) ||
  (e._tag === "PrepareRefused" && e.reason !== "invalid_request")

const codeOf = (e: PrepareError): string => {
  switch (e._tag) {
    case "PrepareRejected":
      return e.code
    case "PrepareFailed":
      return e.reason === "runtime_failed" ? "runtime_preparation_failed" : e.reason
    case "PrepareUnknown":
      return e.reason === "runtime_unconfirmed" ? "runtime_preparation_unconfirmed" : e.reason
    case "PrepareRefused":
      return e.reason
  }
}

const describe = (p: StepProgress): string =>
  `${p.kind}${p.kind === "configure" || p.kind === "setup" ? "" : ` ${p.label}`}: ${p.error_code ?? "interrupted"}${
    p.exit_code === undefined ? "" : ` (exit ${p.exit_code})`
  }`

const make = (options: InitializationOptions) =>
  Effect.gen(function* () {
    const store = yield* InitializationStore
    const retryBudget = Duration.toMillis(Duration.fromInputUnsafe(options.retryBudget ?? Duration.minutes(11)))
    /** Sessions whose initialization a runner of this process is running, with the live bytes of its step. */
    const live = new Map<string, { step: number; bytes: number }>()
    /** When a Session's first retryable refusal happened (cleared by any progress). */
    const firstRefusal = new Map<string, number>()

    const create = (sessionId: string, request: InitializationRequest, networkAccess: string | undefined) => {
      const summary: InitSummary = {
        env_names: Object.keys(request.env ?? {}).sort(),
        setup: request.setup === undefined ? null : { command: request.setup.command, cwd: request.setup.cwd ?? "/workspace" }
      }
      return store.create(sessionId, request, summary, initialProgress(plan(request, networkAccess)))
    }

    const view = (sessionId: string) =>
      Effect.map(store.get(sessionId), Option.map((r): InitializationView => {
        const l = live.get(sessionId)
        const steps = r.steps.map((s, i) => (l !== undefined && l.step === i && s.state === "running" ? { ...s, bytes_sent: l.bytes } : s))
        return {
          state: r.state,
          current_step: r.currentStep ?? null,
          bytes_sent: steps.reduce((n, s) => n + s.bytes_sent, 0),
          bytes_total: steps.reduce((n, s) => n + s.bytes_total, 0),
          steps,
          detail: r.detail ?? null,
          env_names: r.summary.env_names,
          setup: r.summary.setup
        }
      }))

    const blocked = (sessionId: string) =>
      Effect.map(store.get(sessionId), (r) =>
        Option.isSome(r) && (r.value.state === "failed" || r.value.state === "unknown") ? Option.some(r.value.state) : Option.none())

    const ended = (r: InitRecord): Readiness =>
      r.state === "failed"
        ? { _tag: "Failed", detail: r.detail ?? "failed" }
        : { _tag: "Unknown", detail: r.detail ?? "unknown" }

    const ensure = <E>(input: EnsureInput<E>): Effect.Effect<Readiness, E> =>
      Effect.gen(function* () {
        const { durable, sessionId } = input
        const found = yield* durable("initialization_get", store.get(sessionId))
        if (Option.isNone(found)) return { _tag: "Ready" } as const
        const record = found.value
        if (record.state === "completed") return { _tag: "Ready" } as const
        if (record.state === "failed" || record.state === "unknown") return ended(record)
        const steps = [...record.steps]
        const save = (state: StepState, current: number | undefined, committing: boolean, detail?: string) =>
          durable("initialization_update", store.update(sessionId, {
            state,
            currentStep: current,
            steps,
            committing,
            detail,
            clearRequest: state === "completed" || state === "failed" || state === "unknown"
          }))
        if (record.state === "running" && !live.has(sessionId)) {
          // The previous process stopped during this step: never replayed.
          const i = record.currentStep ?? 0
          const state: StepState = record.committing ? "unknown" : "failed"
          steps[i] = { ...steps[i]!, state, error_code: "core_restarted" }
          yield* save(state, i, false, describe(steps[i]!))
          yield* Effect.logWarning("session initialization interrupted by a restart").pipe(
            Effect.annotateLogs({ session_id: sessionId, step: i, state })
          )
          return ended({ ...record, state, detail: describe(steps[i]!) })
        }
        if (Option.isNone(record.request)) return { _tag: "Failed", detail: "the initialization's content is gone" } as const
        const planned = plan(record.request.value, input.environment.network_access)
        let start = steps.findIndex((s) => s.state !== "completed")
        if (start < 0) start = steps.length
        // `configure` lives on the connection: send it again with the setup command that needs it.
        if (start < planned.length && planned[start]!.kind === "setup" && start > 0 && planned[start - 1]!.kind === "configure") start--
        const notify = (i: number, state: StepState) =>
          input.notify({
            state,
            step: i,
            kind: steps[i]!.kind,
            label: steps[i]!.label,
            step_state: steps[i]!.state,
            bytes_sent: steps[i]!.bytes_sent,
            bytes_total: steps[i]!.bytes_total
          })

        live.set(sessionId, { step: start, bytes: 0 })
        return yield* Effect.gen(function* () {
          for (let i = start; i < planned.length; i++) {
            const step = planned[i]!
            steps[i] = { kind: steps[i]!.kind, label: steps[i]!.label, state: "running", bytes_sent: 0, bytes_total: step.bytesTotal }
            live.set(sessionId, { step: i, bytes: 0 })
            yield* save("running", i, false)
            yield* notify(i, "running")
            const result = yield* Effect.result(prepare(input.session, {
              transferId: unsafeMake.transferId(randomUUID()),
              environmentId: input.environment.id,
              sessionId,
              step: step.action
            }, {
              ...(options.transferBudget === undefined ? {} : { budget: options.transferBudget }),
              onProgress: (bytes) =>
                Effect.suspend(() => {
                  live.set(sessionId, { step: i, bytes })
                  steps[i] = { ...steps[i]!, bytes_sent: bytes }
                  return notify(i, "running")
                }),
              // A lost ownership here stops the step before its commit is sent (a defect of this runner).
              beforeCommit: Effect.orDie(save("running", i, true))
            }))
            if (result._tag === "Success") {
              firstRefusal.delete(sessionId)
              steps[i] = { ...steps[i]!, state: "completed", bytes_sent: step.bytesTotal }
              yield* save(i + 1 === planned.length ? "completed" : "running", i, false)
              yield* notify(i, i + 1 === planned.length ? "completed" : "running")
              continue
            }
            const error = result.failure
            const now = yield* Clock.currentTimeMillis
            const since = firstRefusal.get(sessionId) ?? now
            if (retryable(error) && now - since < retryBudget) {
              firstRefusal.set(sessionId, since)
              steps[i] = { ...steps[i]!, state: "pending", bytes_sent: 0, error_code: codeOf(error) }
              yield* save("pending", i, false)
              yield* notify(i, "pending")
              return { _tag: "Retry", reason: codeOf(error) } as const
            }
            firstRefusal.delete(sessionId)
            const state: StepState = error._tag === "PrepareUnknown" ? "unknown" : "failed"
            steps[i] = {
              ...steps[i]!,
              state,
              error_code: codeOf(error),
              ...(error._tag === "PrepareFailed" && error.exit_code !== undefined ? { exit_code: error.exit_code } : {})
            }
            const detail = describe(steps[i]!)
            yield* save(state, i, false, detail)
            yield* notify(i, state)
            yield* Effect.logWarning("session initialization ended without completing").pipe(
              Effect.annotateLogs({ session_id: sessionId, step: i, kind: step.kind, state, code: codeOf(error) })
            )
            return state === "unknown" ? { _tag: "Unknown", detail } as const : { _tag: "Failed", detail } as const
          }
          if (planned.length === 0) yield* save("completed", undefined, false)
          yield* Effect.logInfo("session initialization completed").pipe(Effect.annotateLogs({ session_id: sessionId, steps: planned.length }))
          return { _tag: "Ready" } as const
        }).pipe(Effect.ensuring(Effect.sync(() => live.delete(sessionId))))
      }).pipe(Effect.withSpan("SessionInitialization.ensure"))

    return SessionInitialization.of({ create, ensure, blocked, view })
  })

export const layer = (options: InitializationOptions = {}) => Layer.effect(SessionInitialization, make(options))
