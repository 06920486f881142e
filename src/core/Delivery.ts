/**
 * Turn delivery (protocol "Preparation and execution order", "Failures, retries and cleanup"): the five-step
 * execution Turn and the direct `prompt_request` path, over one `DeviceSession`.
 *
 *  1. subscribe to the preparation status, then send `execution_prepare` (no Run input);
 *  2. `preparing` / `ready` (Executor id, handle, revision, expiry);
 *  3. subscribe to the Run (`subscribeDurable`), then send `execution_start` with the Executor id, handle,
 *     Run id and ordered input (`started` confirms the transfer; output can race it);
 *  4. consume Run events until `done` or loss of observation;
 *  5. to abandon before start send `execution_release`; after start only `prompt_cancel`.
 *
 * The dispatch boundary is explicit: before an envelope entered the send queue every failure is definite
 * (`NotDispatched` facts, `…Rejected`); after it, a disconnect, overflow or timeout is the family's
 * `…Unknown` unless an application receipt proves otherwise. A definite `preparation_capacity` rejection
 * leaves the Turn unclaimed for retry; nothing else authorizes a replay, and nothing here ever replays.
 * Each request that carries or may start the Run (`execution_prepare`, `execution_start`, `prompt_request`)
 * is preceded by a `Dispatching` fact; with `durableDispatch` the send waits until the consumer of `facts`
 * confirmed that fact journaled, so a journal without a following `Dispatched` / `NotDispatched` means "may
 * have left" (unknown), and one without `Dispatching` means "never left".
 *
 * A delivered Turn is a typed handle: `facts` (every observation and dispatch, in order, for the dev Core to
 * persist; `Outcome.project` replays them after a restart), `settled` / `resolution` / `result`, and the
 * operations that change the outcome while it runs: `steer` (active input) and `cancel` (release before
 * start, `prompt_cancel` after). Those operations run in the Turn's scope: interrupting a caller only stops
 * it observing; the dispatched operation keeps its waiter until its own budget ends.
 *
 * `facts` is bounded: when more than `factBuffer` facts wait for the consumer, the Turn stops observing its Run
 * (`RunObservationEnded{subscriber_overflow}`, as when its own subscriber overflows) instead of buffering
 * without end; what follows is bounded by the Turn's own operations (release, abort, receipts).
 *
 * Never: a synthetic error or done; a status from an engine failure code; replay after loss.
 */
import { Effect, Result, type Scope } from "effect"
import type { MessageInput } from "../proto/index.js"
import { admit, type Admitted } from "./CapabilityPolicy.js"
import { directDriver, type DirectPlan, type Driver, type Phase, preparedDriver, type PreparedPlan } from "./DeliveryDriver.js"
import { type DeliveryOptions, makeTurn, type Turn } from "./DeliveryTurn.js"
import type { DeviceSession } from "./DeviceSession.js"
import * as Request from "./ExecutionRequest.js"
import type * as Outcome from "./Outcome.js"

export type { DirectPlan, PreparedPlan } from "./DeliveryDriver.js"
export { type CancelResult, DefaultFactBuffer, type DeliveryOptions, type Turn } from "./DeliveryTurn.js"

// ---------------------------------------------------------------------------------------------- entry points

/**
 * A delivery's spans (and the `Turn.*` spans below them) capture no stack trace: each has one call site, and a
 * captured trace costs a `new Error()` per span, several per Turn (issue 18).
 */
const deliverySpan = { captureStackTrace: false } as const

/**
 * The final admission check and the request, against the connection's current declaration. A refusal
 * resolves the Turn before anything is sent.
 */
const admitAndBuild = <M>(
  session: DeviceSession,
  spec: Request.ExecutionSpec,
  input: MessageInput.MessageInput,
  build: (admitted: Admitted) => Result.Result<M, Outcome.ConfigurationRejected | Outcome.CapabilityUnsupported>
) =>
  Effect.map(session.declaration, (declaration) =>
    Result.flatMap(
      Result.flatMap(admit(Request.admissionInput(spec, Request.requestFactsFor(input)), declaration), (admitted) =>
        Result.map(Request.validateInput(input), () => admitted)),
      (admitted) => Result.map(build(admitted), (message) => ({ admitted, message }))
    ))

/**
 * The final admission check and the request, then the Turn: its driver runs only when both passed (a refusal
 * resolves the Turn with nothing sent). Shared by the two entry points below.
 */
const admitBuildAndRun = <M>(
  session: DeviceSession,
  plan: DirectPlan,
  initialPhase: Phase,
  options: DeliveryOptions,
  build: (admitted: Admitted) => Result.Result<M, Outcome.ConfigurationRejected | Outcome.CapabilityUnsupported>,
  drive: (d: Driver, message: M) => Effect.Effect<void, never, Scope.Scope>
): Effect.Effect<Turn, never, Scope.Scope> =>
  Effect.flatMap(admitAndBuild(session, plan.spec, plan.input, build), (built) =>
    makeTurn(
      session,
      plan.run_id,
      plan.spec,
      Result.map(built, (b) => b.admitted),
      initialPhase,
      options,
      (d) => Result.isSuccess(built) ? drive(d, built.success.message) : Effect.void
    ))

/**
 * Delivers a prepared Turn (the five steps) on `session`. Returns the Turn handle at once; the Turn runs in
 * the caller's scope. The final admission check runs first: a refusal (unsupported capability, invalid
 * binding, unknown capabilities, unavailable Harness, invalid configuration) resolves the Turn with nothing
 * sent. Capacity (`preparation_capacity`) resolves it `Unclaimed`: retry-safe. Every other outcome is in
 * `result` / `resolution`, and never authorizes a replay.
 */
export const deliverPrepared = (
  session: DeviceSession,
  plan: PreparedPlan,
  options: DeliveryOptions = {}
): Effect.Effect<Turn, never, Scope.Scope> =>
  admitBuildAndRun(
    session, plan, "preparing", options,
    (admitted) => Request.executionPrepare(plan.request_id, plan.spec, admitted),
    (d, message) => preparedDriver(d, plan, message)
  ).pipe(Effect.withSpan("Delivery.deliverPrepared", undefined, deliverySpan))

/**
 * Delivers a Turn directly with `prompt_request` (no admission handle; never a fallback after a failed
 * prepared start): subscribe to the Run, send, consume. Same handle and rules as `deliverPrepared`.
 */
export const deliverDirect = (
  session: DeviceSession,
  plan: DirectPlan,
  options: DeliveryOptions = {}
): Effect.Effect<Turn, never, Scope.Scope> =>
  admitBuildAndRun(
    session, plan, "starting", options,
    (admitted) => Request.promptRequest(plan.run_id, plan.spec, admitted, plan.input),
    (d, message) => directDriver(d, plan, message)
  ).pipe(Effect.withSpan("Delivery.deliverDirect", undefined, deliverySpan))
