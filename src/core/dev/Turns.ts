/**
 * Turns of the dev Core: start (validate, select the device with the gateway's capability policy, record,
 * deliver with the five-step `Delivery.deliverPrepared`), follow, steer, cancel, answer interactions and
 * function calls, and read the outcome.
 *
 * Each Turn runs in one runner fiber owned by this service's scope. The runner persists every fact the
 * delivery layer reports, in order, as it arrives (Run frames as received, dispatches, preparation statuses,
 * receipts; `TurnJournal`), keeps the interaction and input records in step with them, and writes the
 * outcome the delivery layer's projection settles on (`Outcome.project`, the same rule a restart replays).
 * A `preparation_capacity` refusal leaves the Turn unclaimed: it is queued again and retried with capped
 * backoff (nothing was executed); no other outcome is ever retried or replayed.
 *
 * The dispatch boundary is durable (`durableDispatch`): a Run-carrying request leaves only after its
 * `Dispatching` fact is stored, so a restart can tell "never sent" from "may have been sent".
 *
 * Store writes of the runner are never dropped: a failed write is retried with capped backoff (100 ms
 * doubling to 5 s by default) while later facts wait in the delivery layer's bounded buffer. When one write
 * keeps failing for `journalStallBudget` (30 s), the runner logs an error with the Turn id and ends the
 * Turn's observation (`journal_unavailable`): nothing more is dispatched, and the outcome it settles on is
 * written only after every fact before it is stored (or reconciled from the journal at the next start).
 *
 * Operations that dispatch (steer, cancel, answers) answer with what is proven — accepted / rejected /
 * unknown, cancelled / unconfirmed, applied / rejected / unknown — and fail with an operator error only when
 * nothing was sent. A caller that goes away stops observing only: the dispatched operation keeps its waiter
 * in the Turn's scope (Delivery, Interactions, Functions).
 *
 * Shutdown: the service's finalizer first shuts the gateway down (every connection ends with
 * `gateway_shutdown`, so running Turns settle with that observation reason and are recorded), waits a bounded
 * time for the runners to record, then interrupts what is left (such a Turn is reconciled at the next start).
 */
import { Context, Deferred, Duration, Effect, FiberSet, Layer, Option, Result, Schedule, Schema, Semaphore, Stream } from "effect"
import { type Functions as FunctionsProto, Ids, type Interaction, MessageInput } from "../../proto/index.js"
import { type DeviceCandidate, selectDevice } from "../CapabilityPolicy.js"
import * as Delivery from "../Delivery.js"
import type { DeviceSession } from "../DeviceSession.js"
import { admissionInput, type ExecutionSpec, requestFactsFor } from "../ExecutionRequest.js"
import * as Functions from "../Functions.js"
import { Gateway } from "../Gateway.js"
import * as Interactions from "../Interactions.js"
import type * as Outcome from "../Outcome.js"
import { DevIds } from "./DevIds.js"
import { unavailable } from "./Operator.js"
import { OperatorConflict, OperatorNotFound, OperatorRequestInvalid, type OperatorUnavailable } from "./OperatorErrors.js"
import { executionSpec, type SessionConfiguration } from "./SessionConfig.js"
import { SessionStore } from "./SessionStore.js"
import type { StoreFailed } from "./StoreErrors.js"
import { type JournalItem, TurnJournal, type JournalWriter } from "./TurnJournal.js"
import { type InputRecord, type InteractionKind, type InteractionRecord, isTerminalStatus, type TurnRecord, TurnStore } from "./TurnStore.js"

// ---------------------------------------------------------------------------------------------- views

export interface TurnView {
  readonly turn_id: string
  readonly session_id: string
  readonly run_id: string
  readonly device_id: string | null
  readonly status: TurnRecord["status"]
  readonly attempt: number
  readonly input_cursor: number
  readonly created_at_ms: number
  readonly dispatched_at_ms: number | null
  readonly completed_at_ms: number | null
  /** The projected outcome once terminal (status, error_code, observation, engine_error_code, usage, …). */
  readonly outcome: Outcome.TurnOutcome | null
}

export const turnView = (turn: TurnRecord): TurnView => ({
  turn_id: turn.turnId,
  session_id: turn.sessionId,
  run_id: turn.runId,
  device_id: turn.deviceId ?? null,
  status: turn.status,
  attempt: turn.attempt,
  input_cursor: turn.inputCursor,
  created_at_ms: turn.createdAtMs,
  dispatched_at_ms: turn.dispatchedAtMs ?? null,
  completed_at_ms: turn.completedAtMs ?? null,
  outcome: turn.outcome ?? null
})

const inputView = (i: InputRecord) => ({
  input_id: i.inputId,
  status: i.status,
  error_code: i.errorCode ?? null,
  position: i.position ?? null,
  created_at_ms: i.createdAtMs,
  updated_at_ms: i.updatedAtMs
})

const interactionView = (i: InteractionRecord) => ({
  kind: i.kind,
  interaction_id: i.interactionId,
  status: i.status,
  request: i.request,
  delivery_id: i.deliveryId ?? null,
  outcome: i.outcome ?? null,
  outcome_error_code: i.outcomeErrorCode ?? null,
  created_at_ms: i.createdAtMs,
  answered_at_ms: i.answeredAtMs ?? null
})

export type TurnDetail = TurnView & {
  readonly inputs: ReadonlyArray<ReturnType<typeof inputView>>
  readonly interactions: ReadonlyArray<ReturnType<typeof interactionView>>
}

/** What a steer proved. */
export type SteerResult =
  | { readonly input_id: string; readonly status: "accepted"; readonly position: number }
  | { readonly input_id: string; readonly status: "rejected"; readonly error_code: string; readonly retryable: boolean }
  | { readonly input_id: string; readonly status: "unknown"; readonly reason: string }

/** What a cancellation proved. */
export type CancelResult =
  | { readonly status: "cancelled"; readonly delivery_id: string | null; readonly abandoned: boolean }
  | { readonly status: "rejected"; readonly delivery_id: string; readonly error_code: string }
  | { readonly status: "unconfirmed"; readonly delivery_id: string; readonly reason: string; readonly error_code: string | null }

/** What an answer (decision or function result) proved. */
export type AnswerResult =
  | { readonly interaction_id: string; readonly delivery_id: string; readonly outcome: "applied" }
  | { readonly interaction_id: string; readonly delivery_id: string; readonly outcome: "rejected"; readonly error_code: string; readonly retryable: boolean }
  | { readonly interaction_id: string; readonly delivery_id: string; readonly outcome: "unknown"; readonly reason: string }

export interface PermissionAnswerBody {
  readonly approved: boolean
  readonly message?: string
  readonly updated_input?: { readonly [x: string]: Schema.Json }
}

export interface UserChoiceAnswerBody {
  readonly question_answers?: ReadonlyArray<{ readonly question_id: string; readonly answers: ReadonlyArray<string> }>
  readonly cancelled?: boolean
  readonly reason?: string
}

export type TurnOperationError = OperatorRequestInvalid | OperatorNotFound | OperatorConflict | OperatorUnavailable

// ---------------------------------------------------------------------------------------------- service

export class Turns extends Context.Service<Turns, {
  /**
   * Validates the input, selects the Session's device (its bound device, or the first online device whose
   * live declaration admits the Session) with the gateway's capability policy, records the Turn and starts
   * delivering it. Admission refusals are definite and nothing is recorded or sent.
   */
  readonly start: (
    sessionId: string,
    input: MessageInput.MessageInput
  ) => Effect.Effect<TurnView, TurnOperationError | Outcome.AdmissionRejection>
  readonly get: (turnId: string) => Effect.Effect<TurnDetail, OperatorNotFound | OperatorUnavailable>
  readonly listBySession: (sessionId: string) => Effect.Effect<ReadonlyArray<TurnView>, OperatorUnavailable>
  /** Stored journal entries after `afterSeq`, then live ones, ending with the outcome. */
  readonly follow: (turnId: string, afterSeq: number) => Stream.Stream<JournalItem, StoreFailed>
  /** Waits until the Turn is terminal; succeeds with its record. */
  readonly awaitOutcome: (turnId: string) => Effect.Effect<TurnRecord, OperatorNotFound | OperatorUnavailable>
  /** Delivers one active input (persisted first); the cursor advances only on `accepted`. */
  readonly steer: (
    turnId: string,
    input: MessageInput.MessageInput,
    inputId?: string
  ) => Effect.Effect<SteerResult, TurnOperationError | Outcome.CapabilityUnsupported>
  /** Cancels the Turn (abandon before start, `prompt_cancel` after; the receipt owns the outcome). */
  readonly cancel: (turnId: string) => Effect.Effect<CancelResult, TurnOperationError>
  readonly answerPermission: (
    turnId: string,
    requestId: string,
    body: PermissionAnswerBody
  ) => Effect.Effect<AnswerResult, TurnOperationError | Outcome.CapabilityUnsupported>
  readonly answerUserChoice: (
    turnId: string,
    askId: string,
    body: UserChoiceAnswerBody
  ) => Effect.Effect<AnswerResult, TurnOperationError | Outcome.CapabilityUnsupported>
  readonly functionResult: (
    turnId: string,
    callId: string,
    output: Functions.FunctionOutput
  ) => Effect.Effect<AnswerResult, TurnOperationError | Outcome.CapabilityUnsupported>
  /**
   * Ends every Runtime connection (`gateway_shutdown`) so running Turns settle and record, waits for that
   * (bounded by `shutdownGrace`), then interrupts the runners left (their Turns are reconciled at the next
   * start). Idempotent; also runs when the service's scope closes.
   */
  readonly shutdown: Effect.Effect<void>
}>()("agentwire/core/dev/Turns") {}

/** Tunables (tests shorten them). */
export interface TurnsOptions {
  /** First wait before another attempt of an unclaimed Turn; doubles up to `maxRetryDelay`. Default 1 s. */
  readonly retryDelay?: Duration.Input
  readonly maxRetryDelay?: Duration.Input
  /** How long shutdown waits for running Turns to record their outcome. Default 20 s (a cancellation may hold 15 s). */
  readonly shutdownGrace?: Duration.Input
  /** First wait before a failed store write of a Turn is retried; doubles up to `maxStoreRetryDelay`. Default 100 ms. */
  readonly storeRetryDelay?: Duration.Input
  /** Default 5 s. */
  readonly maxStoreRetryDelay?: Duration.Input
  /**
   * How long one store write of a Turn may keep failing before the Turn's observation ends with
   * `journal_unavailable` (the write keeps being retried). Default 30 s.
   */
  readonly journalStallBudget?: Duration.Input
  /** Delivery tunables; `durableDispatch` is always on in the dev Core. */
  readonly delivery?: Delivery.DeliveryOptions
}

// ---------------------------------------------------------------------------------------------- active Turns

interface Active {
  readonly turnId: string
  readonly sessionId: string
  readonly runId: Ids.RunId
  readonly deviceId: string
  readonly spec: ExecutionSpec
  readonly input: MessageInput.MessageInput
  /** Set while an attempt is delivering. */
  current: {
    readonly session: DeviceSession
    readonly delivery: Delivery.Turn
    readonly writer: JournalWriter
    readonly functions: Functions.Functions | undefined
  } | undefined
  /** Pending permission requests and user-choice asks (from the Run's events). */
  pending: ReadonlyMap<string, Interactions.PendingInteraction>
  /** Function calls of the Run, by call id. */
  readonly calls: Map<string, FunctionsProto.FunctionCallPayload>
  /** Cancel requested while no attempt was delivering (queued, waiting for a device or a retry). */
  readonly cancelQueued: Deferred.Deferred<void>
  readonly finished: Deferred.Deferred<void>
}

const notRunning = (turnId: string) => new OperatorConflict({ reason: "turn_not_running", detail: `turn ${turnId} is not running` })
const notSent = (detail: string) => new OperatorConflict({ reason: "device_offline", detail: `nothing was sent: ${detail}` })

const make = (options: TurnsOptions) =>
  Effect.gen(function* () {
    const gateway = yield* Gateway
    const store = yield* TurnStore
    const sessions = yield* SessionStore
    const journal = yield* TurnJournal
    const ids = yield* DevIds
    const runners = yield* FiberSet.make()
    /** Serializes starts, so two concurrent starts on one Session cannot both pass the one-unfinished-Turn check. */
    const starting = yield* Semaphore.make(1)
    const active = new Map<string, Active>()
    /** Completed when shutdown begins: queued runners stop waiting and leave their Turn queued for the next start. */
    const stopping = yield* Deferred.make<void>()
    const retryDelay = Duration.fromInputUnsafe(options.retryDelay ?? Duration.seconds(1))
    const maxRetryDelay = Duration.fromInputUnsafe(options.maxRetryDelay ?? Duration.seconds(10))

    const storeRetry = Schedule.min([
      Schedule.exponential(Duration.fromInputUnsafe(options.storeRetryDelay ?? Duration.millis(100)), 2),
      Schedule.spaced(Duration.fromInputUnsafe(options.maxStoreRetryDelay ?? Duration.seconds(5)))
    ])
    const stallBudget = Duration.fromInputUnsafe(options.journalStallBudget ?? Duration.seconds(30))

    /**
     * A store write of a Turn's runner, retried with capped backoff until it succeeds (never dropped; only
     * shutdown interrupts it). When it keeps failing for the stall budget, the Turn's observation ends with
     * `journal_unavailable` and an error is logged with the Turn id; the retries go on.
     */
    const durable = <A>(a: Active, operation: string, effect: Effect.Effect<A, StoreFailed>): Effect.Effect<A> =>
      Effect.catch(effect, (first) =>
        Effect.scoped(Effect.gen(function* () {
          yield* Effect.logWarning("turn record not persisted yet; retrying").pipe(
            Effect.annotateLogs({ turn_id: a.turnId, operation, store_operation: first.operation })
          )
          yield* Effect.forkScoped(Effect.sleep(stallBudget).pipe(Effect.andThen(stalled(a, operation))))
          // The failed first attempt counts: the next one runs after the schedule's first delay.
          let pending = true
          const again = Effect.suspend(() => (pending ? ((pending = false), Effect.fail(first)) : effect))
          const result = yield* Effect.retry(again, storeRetry).pipe(Effect.orDie) // the schedule never ends
          yield* Effect.logInfo("turn record persisted after retrying").pipe(Effect.annotateLogs({ turn_id: a.turnId, operation }))
          return result
        })))

    /** A write of this Turn kept failing for the stall budget: make it visible and stop observing the Turn. */
    const stalled = (a: Active, operation: string) =>
      Effect.gen(function* () {
        yield* Effect.logError("turn record not persisted: the store stays unavailable; observation of the turn ends").pipe(
          Effect.annotateLogs({ turn_id: a.turnId, run_id: a.runId, operation, observation: "journal_unavailable" })
        )
        if (a.current !== undefined) yield* a.current.delivery.endObservation("journal_unavailable")
      })

    // -------------------------------------------------------------------------------------- facts

    const onFact = (a: Active, writer: JournalWriter, fact: Outcome.TurnFact) =>
      Effect.gen(function* () {
        yield* durable(a, "journal", writer.record(fact))
        switch (fact._tag) {
          case "Dispatched":
            if (fact.type === "execution_start" || fact.type === "prompt_request") yield* durable(a, "dispatch", store.markDispatched(a.turnId))
            return
          case "NotDispatched":
            if (fact.type === "prompt_steer" && fact.input_id !== undefined) {
              yield* inputStatus(a, writer, fact.input_id, "not_sent", fact.reason)
            }
            return
          case "InputWritten":
            return yield* inputStatus(a, writer, fact.input_id, "written")
          case "InputAccepted": {
            const position = yield* durable(a, "input", store.acceptInput(a.turnId, fact.input_id))
            return yield* writer.notify("input", { input_id: fact.input_id, status: "accepted", position })
          }
          case "InputRejected":
            return yield* inputStatus(a, writer, fact.input_id, "rejected", fact.code)
          case "InputUnknown":
            return yield* inputStatus(a, writer, fact.input_id, "unknown", fact.reason)
          case "RunEvent":
            return yield* onRunEvent(a, writer, fact.event)
          default:
            return
        }
      })

    const inputStatus = (
      a: Active,
      writer: JournalWriter,
      inputId: string,
      status: "written" | "not_sent" | "rejected" | "unknown",
      code?: string
    ) =>
      Effect.gen(function* () {
        yield* durable(a, "input", store.setInputStatus(a.turnId, inputId, status, code))
        yield* writer.notify("input", { input_id: inputId, status, ...(code === undefined ? {} : { detail: code }) })
      })

    const onRunEvent = (a: Active, writer: JournalWriter, event: Extract<Outcome.TurnFact, { _tag: "RunEvent" }>["event"]) =>
      Effect.gen(function* () {
        a.pending = Interactions.trackInteractions(a.pending, event)
        const record = (kind: InteractionKind, id: string, request: unknown) =>
          Effect.gen(function* () {
            yield* durable(a, "interaction", store.recordInteraction(a.turnId, kind, id, request))
            yield* writer.notify("interaction", { kind, interaction_id: id, status: "pending" })
          })
        switch (event.type) {
          case "permission_request":
            return yield* record("permission", event.payload.request_id, event.payload)
          case "prompt_for_user_choice":
            return yield* record("user_choice", event.payload.ask_id, event.payload)
          case "function_call":
            a.calls.set(event.payload.call_id, event.payload)
            return yield* record("function_call", event.payload.call_id, event.payload)
          case "permission_cancel":
            yield* durable(a, "interaction", store.withdrawInteraction(a.turnId, "permission", event.id))
            return yield* writer.notify("interaction", { kind: "permission", interaction_id: event.id, status: "withdrawn" })
          default:
            return
        }
      })

    // -------------------------------------------------------------------------------------- runner

    const finish = (a: Active, outcome: Outcome.TurnOutcome, writer: JournalWriter | undefined) =>
      Effect.gen(function* () {
        yield* durable(a, "complete", store.complete(a.turnId, outcome))
        if (outcome.native_session_id !== undefined && outcome.native_session_id !== "") {
          yield* durable(a, "native_session", sessions.setNativeSessionId(a.sessionId, outcome.native_session_id))
        }
        const w = writer ?? (yield* durable(a, "journal_open", journal.open(a.turnId, 0)))
        yield* durable(a, "finish", w.finish)
        active.delete(a.turnId)
        yield* Deferred.succeed(a.finished, undefined)
        yield* Effect.logInfo("turn finished").pipe(
          Effect.annotateLogs({ turn_id: a.turnId, run_id: a.runId, status: outcome.status, error_code: outcome.error_code ?? "" })
        )
      })

    /** Waits `delay` unless the Turn is cancelled or shutdown begins first. */
    const pause = (a: Active, delay: Duration.Duration) =>
      Effect.raceFirst(
        Effect.raceFirst(
          Effect.as(Deferred.await(a.cancelQueued), "cancelled" as const),
          Effect.as(Deferred.await(stopping), "stopping" as const)
        ),
        Effect.as(Effect.sleep(delay), "retry" as const)
      )

    /** The device's current connection, waiting for it while it is offline (or until a cancel or shutdown). */
    const connection = (a: Active) =>
      Effect.gen(function* () {
        while (true) {
          if (Option.isSome(yield* Deferred.poll(stopping))) return "stopping" as const
          const session = yield* gateway.session(Ids.unsafeMake.deviceId(a.deviceId))
          if (Option.isSome(session)) return session.value
          const wait = yield* pause(a, retryDelay)
          if (wait !== "retry") return wait
        }
      })

    const abandonQueued = (a: Active) =>
      Effect.gen(function* () {
        const attempt = Option.match(yield* durable(a, "get", store.get(a.turnId)), { onNone: () => 0, onSome: (t) => t.attempt })
        const writer = yield* durable(a, "journal_open", journal.open(a.turnId, attempt))
        yield* durable(a, "journal", writer.record({ _tag: "Abandoned" }))
        yield* finish(a, { status: "cancelled" }, writer)
      })

    /** Shutdown while queued: the Turn stays queued in the store; the next start runs it again. */
    const leaveQueued = (a: Active) =>
      Effect.sync(() => {
        active.delete(a.turnId)
      }).pipe(Effect.andThen(Deferred.succeed(a.finished, undefined)))

    const runTurn = (a: Active) =>
      Effect.gen(function* () {
        let delay = retryDelay
        while (true) {
          if (Option.isSome(yield* Deferred.poll(a.cancelQueued))) return yield* abandonQueued(a)
          const found = yield* connection(a)
          if (found === "cancelled") return yield* abandonQueued(a)
          if (found === "stopping") return yield* leaveQueued(a)
          const attempt = yield* durable(a, "begin_attempt", store.beginAttempt(a.turnId, a.deviceId))
          const writer = yield* durable(a, "journal_open", journal.open(a.turnId, attempt))
          const requestId = Ids.unsafeMake.preparationRequestId(yield* ids.next("preparation"))
          const resolution = yield* Effect.scoped(Effect.gen(function* () {
            const delivery = yield* Delivery.deliverPrepared(
              found,
              { request_id: requestId, run_id: a.runId, spec: a.spec, input: a.input },
              { ...options.delivery, durableDispatch: true }
            )
            const functions = Option.isSome(delivery.admitted)
              ? yield* Functions.make(found, a.runId, { admitted: delivery.admitted.value, engine: a.spec.engine })
              : undefined
            a.current = { session: found, delivery, writer, functions }
            yield* Effect.logInfo("turn delivery started").pipe(
              Effect.annotateLogs({ turn_id: a.turnId, run_id: a.runId, device_id: a.deviceId, attempt })
            )
            // One fact at a time: stored (and its records updated), then confirmed to the delivery layer,
            // which holds each Run-carrying send until its `Dispatching` fact is confirmed here.
            yield* Stream.runForEach(delivery.facts, (fact) => Effect.andThen(onFact(a, writer, fact), delivery.journaled))
            return yield* delivery.resolution
          }))
          a.current = undefined
          switch (resolution._tag) {
            case "Settled":
              return yield* finish(a, resolution.outcome, writer)
            case "Pending":
              // The Turn's scope closed before it resolved (shutdown): the next start reconciles it.
              return
            case "Unclaimed": {
              // Nothing was executed: queue it again and retry with capped backoff.
              yield* durable(a, "requeue", store.requeue(a.turnId))
              yield* Effect.logInfo("turn unclaimed; queued for another attempt").pipe(
                Effect.annotateLogs({ turn_id: a.turnId, reason: resolution.reason, retry_in_ms: Duration.toMillis(delay) })
              )
              const wait = yield* pause(a, delay)
              if (wait === "cancelled") return yield* abandonQueued(a)
              if (wait === "stopping") return yield* leaveQueued(a)
              delay = Duration.min(Duration.times(delay, 2), maxRetryDelay)
              continue
            }
          }
        }
      }).pipe(Effect.annotateLogs({ turn_id: a.turnId }))

    const launch = (a: Active) =>
      Effect.gen(function* () {
        active.set(a.turnId, a)
        yield* FiberSet.run(runners, runTurn(a))
      })

    // -------------------------------------------------------------------------------------- start

    const candidatesFor = (deviceId: string | undefined) =>
      Effect.gen(function* () {
        const all = deviceId === undefined
          ? yield* gateway.sessions
          : Option.toArray(yield* gateway.session(Ids.unsafeMake.deviceId(deviceId)))
        const out: Array<DeviceCandidate<DeviceSession>> = []
        for (const s of all) out.push({ device: s, declaration: yield* s.declaration })
        return out
      })

    const start = (sessionId: string, input: MessageInput.MessageInput) => starting.withPermit(startOne(sessionId, input))

    const startOne = Effect.fn("Turns.start")(function* (sessionId: string, input: MessageInput.MessageInput) {
      const inputIssue = MessageInput.validateMessageInput(input)
      if (Option.isSome(inputIssue)) return yield* new OperatorRequestInvalid({ detail: `input: ${inputIssue.value}` })
      const imageIssue = MessageInput.validateInlineImages(input)
      if (Option.isSome(imageIssue)) return yield* new OperatorRequestInvalid({ detail: `input: ${imageIssue.value}` })
      const session = yield* unavailable(sessions.get(sessionId))
      if (Option.isNone(session)) return yield* new OperatorNotFound({ resource: "session", id: sessionId })
      const previous = yield* unavailable(store.listBySession(sessionId))
      if (previous.some((t) => !isTerminalStatus(t.status))) {
        return yield* new OperatorConflict({ reason: "turn_active", detail: "the Session already has an unfinished Turn" })
      }
      const spec = executionSpec({
        sessionId,
        agentKind: session.value.agentKind,
        configuration: session.value.configuration as SessionConfiguration,
        hasStartedTurn: previous.some((t) => t.dispatchedAtMs !== undefined),
        nativeSessionId: session.value.nativeSessionId
      })
      const candidates = yield* candidatesFor(session.value.deviceId)
      if (session.value.deviceId !== undefined && candidates.length === 0) {
        return yield* new OperatorConflict({ reason: "device_offline", detail: `device ${session.value.deviceId} is not connected` })
      }
      const selected = selectDevice(admissionInput(spec, requestFactsFor(input)), candidates)
      if (Result.isFailure(selected)) return yield* selected.failure
      const deviceId = selected.success.device.deviceId
      const bound = yield* unavailable(sessions.bindDevice(sessionId, deviceId))
      if (bound !== deviceId) {
        return yield* new OperatorConflict({ reason: "device_mismatch", detail: "the Session is bound to another device" })
      }
      const turnId = yield* ids.next("turn")
      const runId = Ids.unsafeMake.runId(yield* ids.next("run"))
      const turn = yield* unavailable(store.create({ turnId, sessionId, runId, input }))
      yield* launch({
        turnId,
        sessionId,
        runId,
        deviceId,
        spec,
        input,
        current: undefined,
        pending: new Map(),
        calls: new Map(),
        cancelQueued: yield* Deferred.make<void>(),
        finished: yield* Deferred.make<void>()
      })
      yield* Effect.logInfo("turn accepted").pipe(Effect.annotateLogs({ turn_id: turnId, run_id: runId, device_id: deviceId }))
      return turnView({ ...turn, deviceId })
    })

    // -------------------------------------------------------------------------------------- reads

    const getRecord = (turnId: string) =>
      Effect.flatMap(unavailable(store.get(turnId)), (t) =>
        Option.isNone(t) ? Effect.fail(new OperatorNotFound({ resource: "turn", id: turnId })) : Effect.succeed(t.value))

    const get = Effect.fn("Turns.get")(function* (turnId: string) {
      const turn = yield* getRecord(turnId)
      const inputs = yield* unavailable(store.inputs(turnId))
      const interactions = yield* unavailable(store.interactions(turnId))
      return { ...turnView(turn), inputs: inputs.map(inputView), interactions: interactions.map(interactionView) } satisfies TurnDetail
    })

    const awaitOutcome = Effect.fn("Turns.awaitOutcome")(function* (turnId: string) {
      const a = active.get(turnId)
      if (a !== undefined) yield* Deferred.await(a.finished)
      return yield* getRecord(turnId)
    })

    const running = (turnId: string) =>
      Effect.gen(function* () {
        const a = active.get(turnId)
        if (a === undefined) {
          yield* getRecord(turnId) // 404 for an unknown Turn
          return yield* notRunning(turnId)
        }
        return a
      })

    // -------------------------------------------------------------------------------------- steer

    const steer = Effect.fn("Turns.steer")(function* (turnId: string, input: MessageInput.MessageInput, requestedId?: string) {
      const issue = MessageInput.validateMessageInput(input)
      if (Option.isSome(issue)) return yield* new OperatorRequestInvalid({ detail: `input: ${issue.value}` })
      const imageIssue = MessageInput.validateInlineImages(input)
      if (Option.isSome(imageIssue)) return yield* new OperatorRequestInvalid({ detail: `input: ${imageIssue.value}` })
      if (requestedId !== undefined && !Schema.is(Ids.InputId)(requestedId)) {
        return yield* new OperatorRequestInvalid({ detail: "input_id must be non-blank and at most 256 bytes" })
      }
      const a = yield* running(turnId)
      const current = a.current
      if (current === undefined) return yield* notRunning(turnId)
      const inputId = Ids.unsafeMake.inputId(requestedId ?? (yield* ids.next("input")))
      const existing = yield* unavailable(store.inputs(turnId))
      if (existing.some((i) => i.inputId === inputId)) {
        return yield* new OperatorRequestInvalid({ detail: "input_id already used in this Turn" })
      }
      yield* unavailable(store.insertInput(turnId, inputId, input))
      const result = yield* Effect.result(current.delivery.steer(inputId, input))
      if (Result.isSuccess(result)) {
        const position = yield* unavailable(store.acceptInput(turnId, inputId))
        return { input_id: inputId, status: "accepted", position } satisfies SteerResult
      }
      const error = result.failure
      switch (error._tag) {
        case "InputRejected":
          return { input_id: inputId, status: "rejected", error_code: error.code, retryable: error.isRetryable } satisfies SteerResult
        case "InputOutcomeUnknown":
          return { input_id: inputId, status: "unknown", reason: error.reason } satisfies SteerResult
        case "CapabilityUnsupported":
          yield* unavailable(store.setInputStatus(turnId, inputId, "not_sent", "capability_unsupported"))
          return yield* error
        case "InputInvalid":
          yield* unavailable(store.setInputStatus(turnId, inputId, "not_sent", error.issue))
          return yield* new OperatorRequestInvalid({ detail: `input: ${error.issue}` })
        case "TurnNotActive":
          yield* unavailable(store.setInputStatus(turnId, inputId, "not_sent", "turn_not_active"))
          return yield* notRunning(turnId)
        case "NotSent":
          yield* unavailable(store.setInputStatus(turnId, inputId, "not_sent", error.reason))
          return yield* notSent(error.reason)
        case "SubscriptionRejected":
          yield* unavailable(store.setInputStatus(turnId, inputId, "not_sent", error.reason))
          return yield* notSent(error.reason)
      }
    })

    // -------------------------------------------------------------------------------------- cancel

    const cancel = Effect.fn("Turns.cancel")(function* (turnId: string) {
      const a = yield* running(turnId)
      const current = a.current
      if (current === undefined) {
        // Queued (waiting for a device or a retry): nothing of this Turn runs; abandon it.
        yield* Deferred.succeed(a.cancelQueued, undefined)
        yield* Deferred.await(a.finished)
        return { status: "cancelled", delivery_id: null, abandoned: true } satisfies CancelResult
      }
      const deliveryId = Ids.unsafeMake.deliveryId(yield* ids.next("delivery"))
      const result = yield* Effect.result(current.delivery.cancel(deliveryId))
      if (Result.isSuccess(result)) {
        return result.success._tag === "Abandoned"
          ? { status: "cancelled", delivery_id: null, abandoned: true } satisfies CancelResult
          : { status: "cancelled", delivery_id: deliveryId, abandoned: false } satisfies CancelResult
      }
      const error = result.failure
      switch (error._tag) {
        case "CancelRejected":
        case "CancelFailed":
          return { status: "rejected", delivery_id: deliveryId, error_code: error.code } satisfies CancelResult
        case "CancelUnconfirmed":
          return { status: "unconfirmed", delivery_id: deliveryId, reason: error.reason, error_code: error.code ?? null } satisfies CancelResult
        case "TurnNotActive":
          return yield* notRunning(turnId)
        case "NotSent":
          return yield* notSent(error.reason)
        case "SubscriptionRejected":
          return yield* notSent(error.reason)
      }
    })

    // -------------------------------------------------------------------------------------- answers

    /**
     * Claims a pending interaction, runs the send, records the outcome. The claim (`pending` → `answering`)
     * makes a second concurrent answer a conflict; a definite not-sent result returns it to pending.
     */
    const answer = <E>(
      a: Active,
      kind: InteractionKind,
      interactionId: string,
      answerBody: unknown,
      send: (deliveryId: Ids.DeliveryId) => Effect.Effect<unknown, E>,
      classify: (error: E) =>
        | { readonly _tag: "rejected"; readonly code: string; readonly retryable: boolean }
        | { readonly _tag: "unknown"; readonly reason: string }
        | { readonly _tag: "not_sent"; readonly error: TurnOperationError | Outcome.CapabilityUnsupported }
    ) =>
      Effect.gen(function* () {
        const deliveryId = Ids.unsafeMake.deliveryId(yield* ids.next("delivery"))
        const claimed = yield* unavailable(store.beginAnswer(a.turnId, kind, interactionId, deliveryId, answerBody))
        if (!claimed) {
          return yield* new OperatorConflict({ reason: "interaction_not_pending", detail: `${kind} ${interactionId} is not pending` })
        }
        const notify = (outcome: string, extra: Record<string, unknown> = {}) =>
          a.current === undefined
            ? Effect.void
            : a.current.writer.notify("interaction", { kind, interaction_id: interactionId, delivery_id: deliveryId, outcome, ...extra })
        const result = yield* Effect.result(send(deliveryId))
        if (Result.isSuccess(result)) {
          yield* unavailable(store.finishAnswer(a.turnId, kind, interactionId, "applied"))
          if (kind !== "function_call") {
            const next = new Map(a.pending)
            next.delete(interactionId)
            a.pending = next
          }
          yield* notify("applied")
          return { interaction_id: interactionId, delivery_id: deliveryId, outcome: "applied" } satisfies AnswerResult
        }
        const c = classify(result.failure)
        switch (c._tag) {
          case "rejected":
            yield* unavailable(store.finishAnswer(a.turnId, kind, interactionId, "rejected", c.code))
            yield* notify("rejected", { error_code: c.code })
            return {
              interaction_id: interactionId,
              delivery_id: deliveryId,
              outcome: "rejected",
              error_code: c.code,
              retryable: c.retryable
            } satisfies AnswerResult
          case "unknown":
            yield* unavailable(store.finishAnswer(a.turnId, kind, interactionId, "unknown", c.reason))
            yield* notify("unknown", { reason: c.reason })
            return { interaction_id: interactionId, delivery_id: deliveryId, outcome: "unknown", reason: c.reason } satisfies AnswerResult
          case "not_sent":
            yield* unavailable(store.finishAnswer(a.turnId, kind, interactionId, "not_sent"))
            return yield* c.error
        }
      })

    type Classified =
      | { readonly _tag: "rejected"; readonly code: string; readonly retryable: boolean }
      | { readonly _tag: "unknown"; readonly reason: string }
      | { readonly _tag: "not_sent"; readonly error: TurnOperationError | Outcome.CapabilityUnsupported }

    const decisionClassify = (e: Interactions.DecisionError): Classified => {
      switch (e._tag) {
        case "InteractionRejected":
          return { _tag: "rejected", code: e.code, retryable: e.isRetryable } as const
        case "InteractionAckUnknown":
          return { _tag: "unknown", reason: e.reason } as const
        case "NotSent":
          return { _tag: "not_sent", error: notSent(e.reason) } as const
        case "SubscriptionRejected":
          return { _tag: "not_sent", error: notSent(e.reason) } as const
      }
    }

    const pendingOf = (a: Active, interactionId: string) =>
      Effect.gen(function* () {
        const pending = a.pending.get(interactionId)
        if (pending !== undefined) return pending
        const stored = yield* unavailable(store.getInteraction(a.turnId, "permission", interactionId))
        const storedAsk = yield* unavailable(store.getInteraction(a.turnId, "user_choice", interactionId))
        if (Option.isNone(stored) && Option.isNone(storedAsk)) {
          return yield* new OperatorNotFound({ resource: "interaction", id: interactionId })
        }
        return yield* new OperatorConflict({ reason: "interaction_not_pending", detail: `interaction ${interactionId} is not pending` })
      })

    const answerPermission = Effect.fn("Turns.answerPermission")(function* (
      turnId: string,
      requestId: string,
      body: PermissionAnswerBody
    ) {
      const a = yield* running(turnId)
      const pending = yield* pendingOf(a, requestId)
      const session = a.current?.session
      if (pending._tag !== "Permission") {
        return yield* new OperatorRequestInvalid({ detail: `${requestId} is a user-choice ask, not a permission request` })
      }
      if (session === undefined) return yield* notRunning(turnId)
      return yield* answer(a, "permission", requestId, body, (deliveryId) =>
        Interactions.answerPermission(session, {
          interaction_id: pending.request.request_id,
          delivery_id: deliveryId,
          approved: body.approved,
          ...(body.message === undefined ? {} : { message: body.message }),
          ...(body.updated_input === undefined ? {} : { updated_input: body.updated_input })
        }), decisionClassify)
    })

    const answerUserChoice = Effect.fn("Turns.answerUserChoice")(function* (
      turnId: string,
      askId: string,
      body: UserChoiceAnswerBody
    ) {
      const a = yield* running(turnId)
      const pending = yield* pendingOf(a, askId)
      const session = a.current?.session
      if (pending._tag !== "UserChoice") {
        return yield* new OperatorRequestInvalid({ detail: `${askId} is a permission request, not a user-choice ask` })
      }
      if (session === undefined) return yield* notRunning(turnId)
      // Validate against the emitted questions before claiming: an invalid shape sends nothing.
      const probe: Interaction.UserChoiceDecisionPayload = { delivery_id: Ids.unsafeMake.deliveryId("probe"), ...body }
      const valid = Interactions.validateDecision(pending.ask, probe)
      if (Result.isFailure(valid)) return yield* new OperatorRequestInvalid({ detail: `decision: ${valid.failure.issue}` })
      return yield* answer(a, "user_choice", askId, body, (deliveryId) =>
        Interactions.answerUserChoice(session, pending.ask, { ...body, delivery_id: deliveryId }), (e) =>
        e._tag === "DecisionInvalid"
          ? { _tag: "not_sent", error: new OperatorRequestInvalid({ detail: `decision: ${e.issue}` }) }
          : decisionClassify(e))
    })

    const functionResult = Effect.fn("Turns.functionResult")(function* (
      turnId: string,
      callId: string,
      output: Functions.FunctionOutput
    ) {
      const a = yield* running(turnId)
      const functions = a.current?.functions
      if (!a.calls.has(callId)) {
        const stored = yield* unavailable(store.getInteraction(turnId, "function_call", callId))
        if (Option.isNone(stored)) return yield* new OperatorNotFound({ resource: "interaction", id: callId })
        return yield* new OperatorConflict({ reason: "interaction_not_pending", detail: `function call ${callId} is not pending` })
      }
      if (functions === undefined) return yield* notRunning(turnId)
      return yield* answer(a, "function_call", callId, output, (deliveryId) =>
        functions.answer(Ids.unsafeMake.callId(callId), output, { deliveryId }), (e: Functions.FunctionResultError): Classified => {
        switch (e._tag) {
          case "FunctionResultRejected":
            return { _tag: "rejected", code: e.code, retryable: e.isRetryable } as const
          case "FunctionResultUnknown":
            return { _tag: "unknown", reason: e.reason } as const
          case "FunctionResultInvalid":
            return { _tag: "not_sent", error: new OperatorRequestInvalid({ detail: `function result: ${e.issue}` }) } as const
          case "FunctionResultOutstanding":
            return {
              _tag: "not_sent",
              error: new OperatorConflict({ reason: "answer_outstanding", detail: "another function result of this Turn awaits its receipt" })
            } as const
          case "CapabilityUnsupported":
            return { _tag: "not_sent", error: new OperatorRequestInvalid({ detail: e.message }) } as const
          case "NotSent":
            return { _tag: "not_sent", error: notSent(e.reason) } as const
          case "SubscriptionRejected":
            return { _tag: "not_sent", error: notSent(e.reason) } as const
        }
      })
    })

    // -------------------------------------------------------------------------------------- queued Turns of a previous process

    const queued = yield* Effect.orElseSucceed(store.listUnfinished, () => [] as ReadonlyArray<TurnRecord>)
    for (const turn of queued) {
      if (turn.status !== "queued" || turn.deviceId === undefined) continue
      const session = yield* Effect.option(sessions.get(turn.sessionId)).pipe(Effect.map(Option.flatten))
      if (Option.isNone(session)) continue
      const previous = yield* Effect.orElseSucceed(store.listBySession(turn.sessionId), () => [] as ReadonlyArray<TurnRecord>)
      yield* launch({
        turnId: turn.turnId,
        sessionId: turn.sessionId,
        runId: Ids.unsafeMake.runId(turn.runId),
        deviceId: turn.deviceId,
        spec: executionSpec({
          sessionId: turn.sessionId,
          agentKind: session.value.agentKind,
          configuration: session.value.configuration as SessionConfiguration,
          hasStartedTurn: previous.some((t) => t.turnId !== turn.turnId && t.dispatchedAtMs !== undefined),
          nativeSessionId: session.value.nativeSessionId
        }),
        input: turn.input,
        current: undefined,
        pending: new Map(),
        calls: new Map(),
        cancelQueued: yield* Deferred.make<void>(),
        finished: yield* Deferred.make<void>()
      })
    }

    // Shutdown: end the connections first so running Turns settle (gateway_shutdown) and get recorded.
    const grace = Duration.fromInputUnsafe(options.shutdownGrace ?? Duration.seconds(20))
    const shutdown = Effect.gen(function* () {
      yield* Deferred.succeed(stopping, undefined)
      yield* gateway.shutdown
      yield* FiberSet.awaitEmpty(runners).pipe(Effect.timeoutOrElse({ duration: grace, orElse: () => Effect.void }))
      // What did not record within the grace is interrupted now (a second call then returns at once); the
      // next start reconciles such a Turn from its journal.
      yield* FiberSet.clear(runners)
    })
    yield* Effect.addFinalizer(() => shutdown)

    return Turns.of({
      start,
      get,
      listBySession: (sessionId) => Effect.map(unavailable(store.listBySession(sessionId)), (list) => list.map(turnView)),
      follow: journal.follow,
      awaitOutcome,
      steer,
      cancel,
      answerPermission,
      answerUserChoice,
      functionResult,
      shutdown
    })
  })

export const layer = (options: TurnsOptions = {}) => Layer.effect(Turns, make(options))
