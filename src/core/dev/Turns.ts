/**
 * Turns of the dev Core: start (validate, select the device with the gateway's capability policy, record,
 * hand the Turn to its runner), follow, read, and the operations on a running Turn. The concepts live in
 * their own modules:
 *
 * - `TurnRunner.ts`: one runner fiber per Turn (delivery, durable journal, unclaimed retries, shutdown);
 * - `TurnOperations.ts`: steer, cancel, answers, function results (what each proved);
 * - `TurnViews.ts`: the views and result shapes the operator API answers with;
 * - `Recovery.ts`: start-up reconciliation and the queued Turns a previous process left (resumed here).
 */
import { Context, Deferred, type Duration, Effect, Layer, Option, Result, type Stream } from "effect"
import { fn } from "../TracedFn.js"
import { SqlClient } from "effect/sql"
import { Ids, MessageInput } from "../../proto/index.js"
import { admit, type AdmissionInput, type DeviceCandidate, selectDevice } from "../CapabilityPolicy.js"
import type { DeviceSession } from "../DeviceSession.js"
import { admissionInput, requestFactsFor } from "../ExecutionRequest.js"
import type * as Functions from "../Functions.js"
import { Gateway } from "../Gateway.js"
import type * as Outcome from "../Outcome.js"
import { DevIds } from "./DevIds.js"
import type { FollowerLagging } from "./LiveBuffer.js"
import { McpSecrets, sessionBearers } from "./McpSecrets.js"
import { secretUnavailable, unavailable } from "./Operator.js"
import { OperatorConflict, OperatorNotFound, OperatorRequestInvalid, type OperatorUnavailable } from "./OperatorErrors.js"
import { JournalFeed } from "./pg/JournalFeed.js"
import { NodeRouter } from "./pg/NodeRouter.js"
import { OwnerLeases } from "./pg/OwnerLeases.js"
import * as RoutedTurns from "./pg/RoutedTurns.js"
import { claimTurn } from "./pg/TurnClaims.js"
import { resumableTurns } from "./Recovery.js"
import { pickupReleased } from "./pg/ReleasedTurns.js"
import { SessionInitialization } from "./Initialization.js"
import { executionSpec, sealedBearerIndexes, type SessionConfiguration } from "./SessionConfig.js"
import { makeKeyedLock, SessionLocks } from "./SessionLocks.js"
import { type SessionRecord, SessionStore } from "./SessionStore.js"
import type { StoreFailed } from "./StoreErrors.js"
import { type JournalItem, TurnJournal } from "./TurnJournal.js"
import * as TurnOperations from "./TurnOperations.js"
import * as TurnRunner from "./TurnRunner.js"
import { type TurnRecord, TurnStore } from "./TurnStore.js"
import {
  type AnswerResult,
  type CancelResult,
  inputView,
  interactionView,
  type PermissionAnswerBody,
  type SteerResult,
  type TurnDetail,
  type TurnOperationError,
  type TurnView,
  turnView,
  type UserChoiceAnswerBody
} from "./TurnViews.js"

export * from "./TurnViews.js"
/** Tunables of the Turns service (tests shorten them): the runners' and, on several nodes, the pickup's. */
export interface TurnsOptions extends TurnRunner.TurnsOptions {
  /** Several nodes: how often queued Turns released from a dead node are picked up. Default 5 s. */
  readonly pickupInterval?: Duration.Input
}

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
  /**
   * Fails with `FollowerLagging` when the reader fell too far behind the live Turn (it may follow again);
   * `onLagging` runs at that moment (TurnJournal.follow).
   */
  readonly follow: (
    turnId: string,
    afterSeq: number,
    onLagging?: Effect.Effect<void>
  ) => Stream.Stream<JournalItem, StoreFailed | FollowerLagging>
  /**
   * `follow` for the operator's event stream: `OperatorNotFound` (before any stream) for an unknown Turn; the
   * record read for that check is the stream's first read (issue 18: not read again).
   */
  readonly followChecked: (
    turnId: string,
    afterSeq: number,
    onLagging?: Effect.Effect<void>
  ) => Effect.Effect<Stream.Stream<JournalItem, StoreFailed | FollowerLagging>, OperatorNotFound | OperatorUnavailable>
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


const make = (options: TurnsOptions) => Effect.gen(function* () {
  const gateway = yield* Gateway
  const store = yield* TurnStore
  const sessions = yield* SessionStore
  const journal = yield* TurnJournal
  const ids = yield* DevIds
  const runner = yield* TurnRunner.TurnRunner
  const operations = yield* TurnOperations.make
  /**
   * Serializes starts per Session, so two concurrent starts on one Session cannot both pass the
   * one-unfinished-Turn check; starts on different Sessions run concurrently.
   */
  const starting = makeKeyedLock()

  /**
   * The devices a Turn may go to: the bound device, or for a Session without one only the connected devices
   * whose declaration advertises the Session's kind (the gateway's index), walked until one admits the Turn
   * (issue 18: never every device). `others` counts the connected devices left out, for the refusal.
   */
  const candidatesFor = Effect.fnUntraced(function* (deviceId: string | undefined, input: AdmissionInput) {
    const out: Array<DeviceCandidate<DeviceSession>> = []
    if (deviceId !== undefined) {
      for (const s of Option.toArray(yield* gateway.session(Ids.unsafeMake.deviceId(deviceId)))) {
        out.push({ device: s, declaration: yield* s.declaration })
      }
      return { candidates: out, others: { declared: 0, undeclared: 0 } }
    }
    const counts = yield* gateway.counts
    for (const s of yield* gateway.advertising(input.agent_kind)) {
      const candidate = { device: s, declaration: yield* s.declaration }
      out.push(candidate)
      if (Result.isSuccess(admit(input, candidate.declaration))) break
    }
    const others = { declared: Math.max(0, counts.declared - out.length), undeclared: counts.connected - counts.declared }
    return { candidates: out, others }
  })
  /** How many devices connected here could take a Turn of the Session: its bound device, or any device. */
  const connectedFor = (deviceId: string | undefined) =>
    deviceId !== undefined
      ? Effect.map(gateway.session(Ids.unsafeMake.deviceId(deviceId)), (s) => (Option.isSome(s) ? 1 : 0))
      : Effect.map(gateway.counts, (c) => c.connected)

  // A Files operation holding the Session's scheduling reservation (SessionLocks.ts) refuses a start at once.
  const locks = yield* Effect.serviceOption(SessionLocks)
  const initialization = yield* Effect.serviceOption(SessionInitialization)
  const secrets = yield* Effect.serviceOption(McpSecrets)
  /**
   * The start's critical section (the one-unfinished-Turn check, the binding, the Turn row, the dispatch) under
   * the per-Session start lock and the Session lock — on several nodes a database lock
   * (pg/DatabaseSessionLocks.ts), taken only here, on the node that dispatches, never across a routed hop.
   */
  const locked = <A, E>(sessionId: string, effect: Effect.Effect<A, E>) =>
    Option.isSome(locks) ? locks.value.forStart(sessionId, effect) : starting(sessionId, effect)
  /** `routed`: a start another node routed here (it is never routed on); `presetTurnId`: the id that node chose. */
  const startWith = (routed: boolean) => (
    sessionId: string,
    input: MessageInput.MessageInput,
    presetTurnId?: string
  ): Effect.Effect<TurnView, TurnOperationError | Outcome.AdmissionRejection> =>
    startOne(sessionId, input, routed, presetTurnId)
  const start = startWith(false)

  // Several Core nodes on PostgreSQL (docs/multi-node.md "Routing"): operations on a Turn another node runs,
  // and starts no device connected here can take, are routed to the node holding the device's owner lease.
  const router = yield* Effect.serviceOption(NodeRouter)
  const feed = yield* Effect.serviceOption(JournalFeed)
  const leases = yield* Effect.serviceOption(OwnerLeases)
  const routing: Option.Option<RoutedTurns.Routing> = Option.isSome(router) && Option.isSome(leases)
    ? Option.some(yield* RoutedTurns.make({ ...operations, start: startWith(true) }).pipe(
      Effect.provideService(NodeRouter, router.value),
      Effect.provideService(OwnerLeases, leases.value),
      Effect.provideService(TurnRunner.TurnRunner, runner)
    ))
    : Option.none()
  /** With routing, the dispatching node claims the Turn in the database first (pg/TurnClaims.ts). */
  const sql = yield* SqlClient.SqlClient
  const claim = (turnId: string, resume = false) =>
    Option.isSome(router)
      ? unavailable(claimTurn(router.value.nodeId, turnId, resume).pipe(Effect.provideService(SqlClient.SqlClient, sql)))
      : Effect.succeed(true)
  /**
   * One node on the embedded SQLite store (the data directory's lock keeps every other process out): a start may take
   * its checks from what this process knows for certain (TurnStartChecks.ts `StartCache`), with no store read.
   */
  const startCache = Option.isNone(routing) && sql.onDialectOrElse({ sqlite: () => true, orElse: () => false })
    ? runner.startCache
    : undefined

  const startOne = fn("Turns.start")(function* (
    sessionId: string,
    input: MessageInput.MessageInput,
    routed: boolean,
    presetTurnId: string | undefined
  ) {
    const inputIssue = MessageInput.validateMessageInput(input)
    if (Option.isSome(inputIssue)) return yield* new OperatorRequestInvalid({ detail: `input: ${inputIssue.value}` })
    const imageIssue = MessageInput.validateInlineImages(input)
    if (Option.isSome(imageIssue)) return yield* new OperatorRequestInvalid({ detail: `input: ${imageIssue.value}` })
    // One node: the Session is read once, under the locks (`startChecks`, issue 18: one Session read per start,
    // not two; none when `startCache` knows it); the checks keep their order there. Several nodes: read here first, to route before any lock.
    if (Option.isNone(routing)) return yield* locked(sessionId, dispatchOne(sessionId, input, presetTurnId, false))
    const session = yield* unavailable(sessions.get(sessionId))
    if (Option.isNone(session)) return yield* new OperatorNotFound({ resource: "session", id: sessionId })
    yield* initializationBlocked(sessionId, session.value)
    // No device connected here can take it: routed to the owning node before any lock is taken.
    if (!routed && (yield* connectedFor(session.value.deviceId)) === 0) {
      const remote = yield* routing.value.routeStart(sessionId, input, session.value.deviceId)
      if (Option.isSome(remote)) return remote.value
    }
    return yield* locked(sessionId, dispatchOne(sessionId, input, presetTurnId, true))
  })

  /** A Session whose initialization failed or is unknown takes no Turn (`OperatorConflict`). */
  const initializationBlocked = Effect.fnUntraced(function* (sessionId: string, session: SessionRecord) {
    // Only a self_hosted Session can have an initialization (Operator.ts creates one for no other): no read.
    if (Option.isNone(initialization) || session.environment.type !== "self_hosted") return
    const blocked = yield* unavailable(initialization.value.blocked(sessionId))
    if (Option.isSome(blocked)) {
      return yield* new OperatorConflict({
        reason: `initialization_${blocked.value}`,
        detail: `the Session's initialization is ${blocked.value}; create a new Session`
      })
    }
  })

  /**
   * Under the locks: admits, records and dispatches the Turn on a device connected here. `initializationChecked`:
   * the caller read the Session and checked its initialization before the locks (several nodes).
   */
  const dispatchOne = Effect.fnUntraced(function* (
    sessionId: string,
    input: MessageInput.MessageInput,
    presetTurnId: string | undefined,
    initializationChecked: boolean
  ) {
    // The Session as the lock holder sees it (a start elsewhere may have bound it meanwhile), with two index
    // probes, in one statement however many Turns the Session has (issue 18: Turn start is O(1) in earlier Turns).
    const checks = startCache?.take(sessionId) ?? (yield* unavailable(store.startChecks(sessionId)))
    const session = checks.session
    if (Option.isNone(session)) return yield* new OperatorNotFound({ resource: "session", id: sessionId })
    if (!initializationChecked) yield* initializationBlocked(sessionId, session.value)
    if (checks.unfinished) {
      return yield* new OperatorConflict({ reason: "turn_active", detail: "the Session already has an unfinished Turn" })
    }
    const hasStartedTurn = checks.dispatched
    const configuration = session.value.configuration as SessionConfiguration
    // Decrypted only here, into Redacted values the request builder sends as bearer_token (McpSecrets.ts).
    const mcpBearers = yield* sessionBearers(secrets, sessionId, sealedBearerIndexes(configuration)).pipe(
      Effect.catchTag("McpSecretUnavailable", secretUnavailable)
    )
    const spec = executionSpec({
      sessionId,
      agentKind: session.value.agentKind,
      configuration,
      hasStartedTurn,
      nativeSessionId: session.value.nativeSessionId,
      environment: session.value.environment,
      mcpBearers
    })
    const admission = admissionInput(spec, requestFactsFor(input))
    const { candidates, others } = yield* candidatesFor(session.value.deviceId, admission)
    if (session.value.deviceId !== undefined && candidates.length === 0) {
      return yield* new OperatorConflict({ reason: "device_offline", detail: `device ${session.value.deviceId} is not connected` })
    }
    const selected = selectDevice(admission, candidates, others)
    if (Result.isFailure(selected)) return yield* selected.failure
    const deviceId = selected.success.device.deviceId
    // Bound at its first Turn; a Session already bound to the selected device needs no write.
    const bound = session.value.deviceId === deviceId ? deviceId : yield* unavailable(sessions.bindDevice(sessionId, deviceId))
    if (bound !== deviceId) {
      return yield* new OperatorConflict({ reason: "device_mismatch", detail: "the Session is bound to another device" })
    }
    const turnId = presetTurnId ?? (yield* ids.next("turn"))
    const runId = Ids.unsafeMake.runId(yield* ids.next("run"))
    const plan = { turnId, sessionId, runId, deviceId, spec, input, fresh: true }
    const boundSession = session.value.deviceId === deviceId ? session.value : { ...session.value, deviceId }
    let turn: TurnRecord
    if (startCache !== undefined && !TurnRunner.initializes(initialization, spec)) {
      // One node, nothing to initialize first: the row is queued, then the runner launched before it commits, so its
      // first append (the prepare's `Dispatching`, which begins attempt 1) rides the row's transaction or a later one
      // (docs/store.md "The create rides the first dispatch"). A failed create withdraws the runner: nothing of it can
      // commit (its journal rows reference the row) or be sent (a send waits for its `Dispatching` to be stored). The
      // wait is not interrupted with its caller, so a failed create always withdraws its runner (a commit always settles).
      const queued = yield* store.queueCreate({ turnId, sessionId, runId, input })
      startCache.started(boundSession, hasStartedTurn, turnId)
      yield* runner.launch(plan)
      yield* unavailable(Effect.uninterruptible(Effect.tapError(queued.committed, () => runner.withdraw(turnId))))
      turn = queued.record
    } else {
      turn = yield* unavailable(store.create({ turnId, sessionId, runId, input }))
      startCache?.started(boundSession, hasStartedTurn, turnId)
      // Claimed meanwhile by another node (it picked the unclaimed row up): that node dispatches it.
      if (yield* claim(turnId)) yield* runner.launch(plan)
    }
    yield* Effect.logInfo("turn accepted").pipe(Effect.annotateLogs({ turn_id: turnId, run_id: runId, device_id: deviceId }))
    return turnView({ ...turn, deviceId })
  })

  // -------------------------------------------------------------------------------------- reads

  const getRecord = (turnId: string) =>
    Effect.flatMap(unavailable(store.get(turnId)), (t) =>
      Option.isNone(t) ? Effect.fail(new OperatorNotFound({ resource: "turn", id: turnId })) : Effect.succeed(t.value))

  const get = fn("Turns.get")(function* (turnId: string) {
    const turn = yield* getRecord(turnId)
    const inputs = yield* unavailable(store.inputs(turnId))
    const interactions = yield* unavailable(store.interactions(turnId))
    return { ...turnView(turn), inputs: inputs.map(inputView), interactions: interactions.map(interactionView) } satisfies TurnDetail
  })

  const awaitOutcome = fn("Turns.awaitOutcome")(function* (turnId: string) {
    const a = runner.active(turnId)
    if (Option.isSome(a)) yield* Deferred.await(a.value.finished)
    return yield* getRecord(turnId)
  })

  // Queued Turns a previous process left: their runners start again (with routing, only those this node claims).
  for (const plan of yield* resumableTurns) {
    if (yield* claim(plan.turnId, true).pipe(Effect.orElseSucceed(() => false))) yield* runner.launch(plan)
  }
  // Several nodes: queued Turns released from a dead node (pg/LeaseSweeper.ts) are claimed and dispatched by
  // the node their device is connected to, checked every `pickupInterval`.
  if (Option.isSome(router)) {
    const pickup = pickupReleased((turnId) => claim(turnId)).pipe(
      Effect.catchTag("StoreFailed", (e) =>
        Effect.logWarning("picking up released Turns failed; retrying").pipe(Effect.annotateLogs({ store_operation: e.operation }))),
      Effect.provideService(SqlClient.SqlClient, sql),
      Effect.provideService(TurnStore, store),
      Effect.provideService(SessionStore, sessions),
      Effect.provideService(Gateway, gateway),
      Effect.provideService(TurnRunner.TurnRunner, runner)
    )
    yield* Effect.sleep(options.pickupInterval ?? "5 seconds").pipe(Effect.andThen(pickup), Effect.forever, Effect.forkScoped)
  }

  return Turns.of({
  start,
  get,
  listBySession: (sessionId) => Effect.map(unavailable(store.listBySession(sessionId)), (list) => list.map(turnView)),
  // A Turn whose runner is on another node is followed from the database (pg/JournalFeed.ts).
  follow: (turnId, afterSeq, onLagging) =>
    Option.isSome(feed) && Option.isNone(runner.active(turnId))
      ? feed.value.follow(turnId, afterSeq)
      : journal.follow(turnId, afterSeq, onLagging),
  followChecked: (turnId, afterSeq, onLagging) =>
    Effect.suspend(() => {
      // Its runner here, not settling: the Turn exists and has no outcome yet; no read (issue 18). Should it settle
      // meanwhile, the follower gets the outcome published or reads the finished Turn (TurnJournal.follow).
      const running = runner.active(turnId)
      if (Option.isSome(running) && running.value.settling !== true) {
        return Effect.succeed(journal.follow(turnId, afterSeq, onLagging, "running"))
      }
      return Effect.map(getRecord(turnId), (turn) =>
        Option.isSome(feed) && Option.isNone(runner.active(turnId))
          ? feed.value.follow(turnId, afterSeq)
          : journal.follow(turnId, afterSeq, onLagging, turn))
    }),
  awaitOutcome,
  ...operations,
  ...(Option.isSome(routing) ? routing.value : {}),
  shutdown: runner.shutdown
  })
})

/** The Turns service with its runners (their scope is the layer's). */
export const layer = (options: TurnsOptions = {}) =>
  Layer.effect(Turns, make(options)).pipe(Layer.provide(TurnRunner.layer(options)))
