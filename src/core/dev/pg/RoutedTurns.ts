/**
 * Turn operations received on a node that does not run the Turn (docs/multi-node.md "Routing"): steer, cancel,
 * permission / user-choice answers, function results and Turn start are routed through `NodeRouter` to the
 * node holding the live owner lease of the Turn's device, which runs its local operation; its typed answer
 * (the result, or the operator error) comes back, so the operator API answers with the same status and body
 * as on a single node.
 *
 * Which node: the Turn's runner here → local. Otherwise the Turn's device (the attempt's, else the Session's)
 * and its lease: live and held by another node → routed there; no live lease → `device_offline` (nothing was
 * sent); a finished or unknown Turn → local (its 404 / 409).
 *
 * What a route that ends without an answer means: withdrawn (no node claimed it: nothing ran) →
 * `device_offline`; claimed but unanswered within the bound → the operation's unknown variant (steer
 * `unknown`, cancel `unconfirmed`, answers `unknown`), with the ids the requester chose before routing (input
 * id, delivery id) so the operator can reconcile. A Turn start left unknown answers the Turn if its row (the id
 * chosen before routing) exists, else 500 `turn_start_unknown`.
 */
import { Clock, Effect, Option, Schema } from "effect"
import { SqlClient } from "effect/sql"
import type { MessageInput } from "../../../proto/index.js"
import type * as Functions from "../../Functions.js"
import {
  type AdmissionRejection,
  BindingInvalid,
  CapabilitiesUndeclared,
  CapabilityUnsupported,
  HarnessUnavailable
} from "../../TurnErrors.js"
import { DevIds } from "../DevIds.js"
import { unavailable } from "../Operator.js"
import { OperatorConflict, OperatorNotFound, OperatorRequestInvalid, OperatorUnavailable } from "../OperatorErrors.js"
import { SessionStore } from "../SessionStore.js"
import { storeFailed, toStringOrUndefined } from "../StoreErrors.js"
import { TurnRunner } from "../TurnRunner.js"
import { isTerminalStatus, TurnStore } from "../TurnStore.js"
import {
  type AnswerResult,
  type CancelResult,
  type PermissionAnswerBody,
  type SteerResult,
  type TurnOperationError,
  type TurnView,
  turnView,
  type UserChoiceAnswerBody
} from "../TurnViews.js"
import { NodeRouter } from "./NodeRouter.js"
import { OwnerLeases } from "./OwnerLeases.js"

/** The errors every routed operation may answer with (all definite, all encodable); Files adds its own. */
export const RoutedErrorMembers = [
  OperatorRequestInvalid,
  OperatorNotFound,
  OperatorConflict,
  OperatorUnavailable,
  CapabilitiesUndeclared,
  HarnessUnavailable,
  BindingInvalid,
  CapabilityUnsupported
] as const
const RoutedError = Schema.Union(RoutedErrorMembers)
const encodeError = Schema.encodeUnknownSync(RoutedError)
const decodeError = Schema.decodeUnknownOption(RoutedError)

/** What a routed operation came to on its node, as stored in the request row. */
const answerOf = <A, E>(effect: Effect.Effect<A, E>): Effect.Effect<unknown> =>
  Effect.match(effect, {
    onSuccess: (ok) => ({ ok }),
    onFailure: (error) => ({ error: encodeError(error) })
  })

type OpError = TurnOperationError | CapabilityUnsupported

/** The local operations a node runs for itself and for routed requests. */
export interface LocalTurnOperations {
  readonly start: (sessionId: string, input: MessageInput.MessageInput, turnId?: string) => Effect.Effect<TurnView, TurnOperationError | AdmissionRejection>
  readonly steer: (turnId: string, input: MessageInput.MessageInput, inputId?: string) => Effect.Effect<SteerResult, OpError>
  readonly cancel: (turnId: string, deliveryId?: string) => Effect.Effect<CancelResult, TurnOperationError>
  readonly answerPermission: (
    turnId: string,
    requestId: string,
    body: PermissionAnswerBody,
    deliveryId?: string
  ) => Effect.Effect<AnswerResult, OpError>
  readonly answerUserChoice: (
    turnId: string,
    askId: string,
    body: UserChoiceAnswerBody,
    deliveryId?: string
  ) => Effect.Effect<AnswerResult, OpError>
  readonly functionResult: (
    turnId: string,
    callId: string,
    output: Functions.FunctionOutput,
    deliveryId?: string
  ) => Effect.Effect<AnswerResult, OpError>
}

const noRoute = (detail: string) => new OperatorConflict({ reason: "device_offline", detail: `nothing was sent: ${detail}` })

/**
 * Serves the routed kinds with `local` on this node and returns the routing decisions for requests received
 * here: `remoteOwnerOfTurn` and `remoteOwnerOfDevice` (None: run locally), and `route`.
 */
export const make = (local: LocalTurnOperations) =>
  Effect.gen(function* () {
    const router = yield* NodeRouter
    const leases = yield* OwnerLeases
    const store = yield* TurnStore
    const sessions = yield* SessionStore
    const runner = yield* TurnRunner
    const ids = yield* DevIds
    const sql = yield* SqlClient.SqlClient

    const b = (body: unknown) => (body ?? {}) as Record<string, any>
    yield* router.serve("start", (_t, body) => answerOf(local.start(b(body).session_id, b(body).input, b(body).turn_id)))
    yield* router.serve("steer", (turnId, body) => answerOf(local.steer(turnId ?? "", b(body).input, b(body).input_id)))
    yield* router.serve("cancel", (turnId, body) => answerOf(local.cancel(turnId ?? "", b(body).delivery_id)))
    yield* router.serve("permission", (turnId, body) =>
      answerOf(local.answerPermission(turnId ?? "", b(body).interaction_id, b(body).answer, b(body).delivery_id)))
    yield* router.serve("user_choice", (turnId, body) =>
      answerOf(local.answerUserChoice(turnId ?? "", b(body).interaction_id, b(body).answer, b(body).delivery_id)))
    yield* router.serve("function_result", (turnId, body) =>
      answerOf(local.functionResult(turnId ?? "", b(body).interaction_id, b(body).answer, b(body).delivery_id)))

    /** The other node holding the device's live lease, if any. */
    const liveOwner = (deviceId: string) =>
      Effect.gen(function* () {
        const lease = yield* unavailable(leases.get(deviceId))
        const now = yield* Clock.currentTimeMillis
        return Option.filter(Option.map(lease, (l) => (l.expiresAtMs > now ? l.nodeId : "")), (n) => n !== "")
      })

    /** The node that claimed the Turn (`turns.claimed_by`) while that node is alive (its `core_nodes` row). */
    const liveClaimer = (turnId: string) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const rows = yield* unavailable(
          sql`SELECT t.claimed_by FROM turns t JOIN core_nodes n ON n.node_id = t.claimed_by
            WHERE t.turn_id = ${turnId} AND n.expires_at_ms > ${now}`.pipe(storeFailed("route_claimer"))
        )
        return Option.fromNullishOr(toStringOrUndefined(rows[0]?.claimed_by))
      })

    /**
     * Where an operation on `turnId` runs: None → here (its runner is here, or the Turn is finished or unknown:
     * the local answer applies); Some(node) → that node: a queued Turn's live claimer (its runner waits there,
     * e.g. for its offline device), else the device's live owner; fails `device_offline` when neither exists.
     */
    const ownerOfTurn = (turnId: string) =>
      Effect.gen(function* () {
        if (Option.isSome(runner.active(turnId))) return Option.none<string>()
        const turn = yield* unavailable(store.get(turnId))
        if (Option.isNone(turn) || isTerminalStatus(turn.value.status)) return Option.none<string>()
        // A queued Turn's runner is on the node that claimed it (waiting for its device, or for a retry).
        if (turn.value.status === "queued") {
          const claimer = yield* liveClaimer(turnId)
          if (Option.isSome(claimer)) return claimer.value === router.nodeId ? Option.none<string>() : claimer
        }
        const deviceId = turn.value.deviceId ??
          Option.getOrUndefined(Option.flatMap(yield* unavailable(sessions.get(turn.value.sessionId)), (s) => Option.fromNullishOr(s.deviceId)))
        if (deviceId === undefined) return yield* noRoute(`turn ${turnId} has no device`)
        const owner = yield* liveOwner(deviceId)
        if (Option.isNone(owner)) return yield* noRoute(`device ${deviceId} holds no live owner lease`)
        return owner.value === router.nodeId ? Option.none<string>() : owner
      })

    /** Another node holding a live lease of any device (for a start no device here can take). */
    const anyOtherNode = Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const rows = yield* unavailable(
        sql`SELECT node_id FROM device_leases WHERE expires_at_ms > ${now} AND node_id <> ${router.nodeId}
          ORDER BY claimed_at_ms DESC LIMIT 1`.pipe(storeFailed("route_any_node"))
      )
      return Option.fromNullishOr(toStringOrUndefined(rows[0]?.node_id))
    })

    /** Sends one request and turns its answer into the local operation's result or error. */
    const send = <A, E>(target: string, kind: string, turnId: string | undefined, body: unknown, onUnknown: Effect.Effect<A, E>) =>
      Effect.gen(function* () {
        const outcome = yield* unavailable(router.request(target, kind, turnId, body))
        switch (outcome._tag) {
          case "Withdrawn":
            return yield* noRoute("the owning node did not take the request")
          case "Unknown":
            return yield* onUnknown
          case "Answered": {
            const r = outcome.result as { readonly ok?: unknown; readonly error?: unknown } | null
            if (r !== null && typeof r === "object" && "ok" in r) return r.ok as A
            const error = r !== null && typeof r === "object" ? decodeError(r.error) : Option.none()
            if (Option.isSome(error)) return yield* Effect.fail(error.value as E)
            return yield* onUnknown
          }
        }
      })

    /** `local` when the Turn runs here, else the routed request. */
    const onOwner = <A, E>(turnId: string, localRun: Effect.Effect<A, E>, remote: (node: string) => Effect.Effect<A, E | OperatorConflict | OperatorUnavailable>) =>
      Effect.flatMap(ownerOfTurn(turnId), Option.match({ onNone: () => localRun, onSome: remote }))

    const newDeliveryId = ids.next("delivery")

    const steer = (turnId: string, input: MessageInput.MessageInput, inputId?: string) =>
      onOwner(turnId, local.steer(turnId, input, inputId), (node) =>
        Effect.gen(function* () {
          const id = inputId ?? (yield* ids.next("input"))
          return yield* send<SteerResult, OpError>(node, "steer", turnId, { input, input_id: id }, Effect.succeed<SteerResult>({
            input_id: id,
            status: "unknown",
            reason: "route_unanswered"
          }))
        }))

    const cancel = (turnId: string) =>
      onOwner(turnId, local.cancel(turnId), (node) =>
        Effect.gen(function* () {
          const deliveryId = yield* newDeliveryId
          return yield* send<CancelResult, TurnOperationError>(node, "cancel", turnId, { delivery_id: deliveryId }, Effect.succeed<CancelResult>({
            status: "unconfirmed",
            delivery_id: deliveryId,
            reason: "route_unanswered",
            error_code: null
          }))
        }))

    const answer = <Body>(kind: string, localRun: (turnId: string, id: string, body: Body) => Effect.Effect<AnswerResult, OpError>) =>
    (turnId: string, interactionId: string, body: Body) =>
      onOwner(turnId, localRun(turnId, interactionId, body), (node) =>
        Effect.gen(function* () {
          const deliveryId = yield* newDeliveryId
          return yield* send<AnswerResult, OpError>(
            node,
            kind,
            turnId,
            { interaction_id: interactionId, answer: body, delivery_id: deliveryId },
            Effect.succeed<AnswerResult>({ interaction_id: interactionId, delivery_id: deliveryId, outcome: "unknown", reason: "route_unanswered" })
          )
        }))

    /**
     * A start no device connected here can take: routed to the node holding the Session's device (or, for a
     * Session not bound yet, to another node with a live device). None: no other node; answer locally.
     */
    const routeStart = (sessionId: string, input: MessageInput.MessageInput, deviceId: string | undefined) =>
      Effect.gen(function* () {
        const node = deviceId === undefined ? yield* anyOtherNode : yield* liveOwner(deviceId)
        if (Option.isNone(node) || node.value === router.nodeId) return Option.none<TurnView>()
        const turnId = yield* ids.next("turn")
        const view = yield* send<TurnView, TurnOperationError | AdmissionRejection>(node.value, "start", undefined, { session_id: sessionId, input, turn_id: turnId }, Effect.gen(function* () {
          const stored = yield* unavailable(store.get(turnId))
          if (Option.isNone(stored)) return yield* new OperatorUnavailable({ operation: "turn_start_unknown" })
          return turnView(stored.value)
        }))
        return Option.some(view)
      })

    return {
      steer,
      cancel,
      answerPermission: answer<PermissionAnswerBody>("permission", local.answerPermission),
      answerUserChoice: answer<UserChoiceAnswerBody>("user_choice", local.answerUserChoice),
      functionResult: answer<Functions.FunctionOutput>("function_result", local.functionResult),
      routeStart
    }
  })

/** The routed operations and the start-routing decision of this node. */
export type Routing = Effect.Success<ReturnType<typeof make>>
