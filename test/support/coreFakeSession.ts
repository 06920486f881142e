/**
 * Test doubles for Core's delivery, input, interaction and function tests (test-only; never imported by src).
 *
 * - `makeFake()` implements the `DeviceSession` contract in memory, faithfully: a bounded send queue (send
 *   succeeds only when the envelope entered it; full or closed → `NotSent`), the wire codec on every send,
 *   Run subscriptions that end after `done` and fail with `ObservationLost` / `SubscriberOverflow` (never a
 *   fabricated error or done), preparation subscriptions with the per-handle revision rule, one waiter per
 *   reply key (a duplicate pending key is rejected), the interaction id → Run route of `permission_cancel`,
 *   and `ObservationLost` for every observer when the connection closes.
 * - `makeReal()` runs the gateway's real `DeviceSession` over an in-memory socket through the scripted
 *   Runtime of `coreScriptedRuntime.ts`.
 *
 * Both return a `CoreHarness`: the session (wrapped in a recorder that logs the order of calls, so tests can
 * assert "subscribe before send"), the Runtime's side (receive Core's frames, emit frames) and disconnect.
 */
import { Cause, Deferred, Effect, Exit, Layer, Option, Queue, Ref, Result, type Scope, Stream } from "effect"
import type { Capabilities, Ids } from "../../src/proto/index.js"
import { Limits, Messages, Preparation } from "../../src/proto/index.js"
import {
  type Declaration,
  type DeviceSession,
  type ReplyFamilies,
  type ReplyFamily,
  type RunEvent,
  steerAckKey
} from "../../src/core/DeviceSession.js"
import {
  NotSent,
  ObservationLost,
  type ObservationLostReason,
  SubscriberOverflow,
  SubscriptionRejected
} from "../../src/core/Errors.js"
import { Gateway } from "../../src/core/Gateway.js"
import { GatewayConfig, type GatewayConfigOptions } from "../../src/core/GatewayConfig.js"
import { connectMemory, device, heartbeat as heartbeatFrame } from "./coreScriptedRuntime.js"

// ---------------------------------------------------------------------------------------------- harness

/** One session API call, in the order the code under test made it. */
export type Call =
  | { readonly op: "send"; readonly type: string; readonly id: string | undefined }
  | { readonly op: "subscribeDurable"; readonly runId: string }
  | { readonly op: "subscribePreparation"; readonly requestId: string }
  | { readonly op: "expectReplies"; readonly family: string; readonly key: string }

export interface CoreHarness {
  /** The session under test, recording its calls. */
  readonly session: DeviceSession
  readonly calls: Effect.Effect<ReadonlyArray<Call>>
  /** The next envelope Core put in the send queue (waits). */
  readonly receive: Effect.Effect<Messages.CoreToRuntime>
  /** An envelope Core already sent, without waiting. */
  readonly poll: Effect.Effect<Option.Option<Messages.CoreToRuntime>>
  /** The Runtime sends one frame; it is routed before the effect returns (fake) or by the read loop (real). */
  readonly emit: (message: Messages.RuntimeToCore) => Effect.Effect<void>
  /** The connection drops: every observer ends with ObservationLost. */
  readonly disconnect: Effect.Effect<void>
  /** Lets routing and forked fibers run (a few scheduler turns; no clock time passes). */
  readonly flush: Effect.Effect<void>
}

/** Yields to other fibers a number of times, without moving the clock. */
export const yieldTimes = (n = 50): Effect.Effect<void> => Effect.repeat(Effect.yieldNow, { times: n }).pipe(Effect.asVoid)

/** Wraps a session so every call is logged in order. */
export const recording = (inner: DeviceSession, log: Ref.Ref<ReadonlyArray<Call>>): DeviceSession => {
  const add = (call: Call) => Ref.update(log, (calls) => [...calls, call])
  return {
    deviceId: inner.deviceId,
    connectionNumber: inner.connectionNumber,
    declaration: inner.declaration,
    closed: inner.closed,
    close: inner.close,
    send: (message) =>
      Effect.tap(inner.send(message), () => add({ op: "send", type: message.type, id: "id" in message ? message.id : undefined })),
    subscribeDurable: (runId) => Effect.tap(inner.subscribeDurable(runId), () => add({ op: "subscribeDurable", runId })),
    subscribePreparation: (requestId) =>
      Effect.tap(inner.subscribePreparation(requestId), () => add({ op: "subscribePreparation", requestId })),
    expectReplies: (family, key) => Effect.tap(inner.expectReplies(family, key), () => add({ op: "expectReplies", family, key }))
  }
}

// ---------------------------------------------------------------------------------------------- fake

export interface FakeOptions {
  readonly sendQueueCapacity?: number
  readonly runBuffer?: number
  readonly replyBuffer?: number
  readonly deviceId?: string
}

type SubError = ObservationLost | SubscriberOverflow

interface Sub<A> {
  readonly push: (item: A) => boolean
  readonly end: () => void
  readonly fail: (error: SubError) => void
  readonly stream: Stream.Stream<A, SubError>
  readonly isOpen: () => boolean
}

const makeSub = <A>(capacity: number): Effect.Effect<Sub<A>> =>
  Effect.map(Queue.dropping<A, SubError | Cause.Done>(capacity), (queue) => {
    const fail = (error: SubError) => void Queue.failCauseUnsafe(queue, Cause.fail(error))
    return {
      push: (item) => {
        if (queue.state._tag !== "Open") return false
        if (Queue.offerUnsafe(queue, item)) return true
        fail(new SubscriberOverflow({ capacity }))
        return false
      },
      end: () => void Queue.endUnsafe(queue),
      fail,
      stream: Stream.fromQueue(queue),
      isOpen: () => queue.state._tag === "Open"
    }
  })

export interface Fake extends CoreHarness {
  /** Declares kinds as a heartbeat would (None before the first one). */
  readonly heartbeat: (kinds: ReadonlyArray<Capabilities.AgentKindDescriptor>) => Effect.Effect<void>
  /** Ends the connection with a given reason. */
  readonly lose: (reason: ObservationLostReason) => Effect.Effect<void>
  /** Envelopes currently waiting in the send queue. */
  readonly queued: Effect.Effect<number>
}

/**
 * The in-memory double. Nothing reads the send queue except `receive`/`poll`, so a test fills it by sending
 * without receiving (capacity 64 by default, as in the gateway).
 */
export const makeFake = (options: FakeOptions = {}): Effect.Effect<Fake, never, Scope.Scope> =>
  Effect.gen(function*() {
    const capacity = options.sendQueueCapacity ?? Limits.CoreSendQueueCapacity
    const runBuffer = options.runBuffer ?? 256
    const replyBuffer = options.replyBuffer ?? 16
    const outbound = yield* Queue.bounded<Messages.CoreToRuntime>(capacity)
    const log = yield* Ref.make<ReadonlyArray<Call>>([])
    const runs = new Map<string, Sub<RunEvent>>()
    const interactionRuns = new Map<string, string>()
    const preparations = new Map<string, { sub: Sub<Preparation.PreparationStatusPayload>; cursor: Preparation.RevisionCursor | undefined }>()
    const replies = new Map<string, Sub<unknown>>()
    let declaration: Option.Option<Declaration> = Option.none()
    let ended: ObservationLost | undefined
    const closedSignal = yield* Deferred.make<ObservationLost>()

    const lose = (reason: ObservationLostReason) =>
      Effect.sync(() => {
        if (ended !== undefined) return
        const lost = new ObservationLost({ reason })
        ended = lost
        declaration = Option.none()
        for (const sub of runs.values()) sub.fail(lost)
        for (const { sub } of preparations.values()) sub.fail(lost)
        for (const sub of replies.values()) sub.fail(lost)
        runs.clear()
        preparations.clear()
        replies.clear()
        interactionRuns.clear()
        Deferred.doneUnsafe(closedSignal, Exit.succeed(lost))
      })

    const register = <A>(map: Map<string, Sub<A>>, key: string, size: number) =>
      Effect.gen(function*() {
        if (ended !== undefined) return yield* new SubscriptionRejected({ reason: "connection_closed" })
        const existing = map.get(key)
        if (existing !== undefined && existing.isOpen()) return yield* new SubscriptionRejected({ reason: "duplicate" })
        const sub = yield* makeSub<A>(size)
        map.set(key, sub)
        yield* Effect.addFinalizer(() => Effect.sync(() => void (map.get(key) === sub && map.delete(key))))
        return sub.stream
      })

    const inner: DeviceSession = {
      deviceId: (options.deviceId ?? "device-1") as Ids.DeviceId,
      connectionNumber: 1,
      send: (sent) =>
        Effect.suspend(() => {
          // A frame encoded earlier is checked against its message: the double keeps messages.
          const message = "encoded" in sent ? sent.message : sent
          if ("encoded" in sent) {
            const again = Messages.encodeMessage(message)
            if (Result.isFailure(again) || again.success !== sent.encoded) {
              return Effect.die(new Error("encoded frame differs from the codec's encoding of its message"))
            }
          }
          if (ended !== undefined) return Effect.fail(new NotSent({ type: message.type, reason: "connection_closed" }))
          const encoded = Messages.encodeMessage(message)
          if (Result.isFailure(encoded)) return Effect.fail(new NotSent({ type: message.type, reason: encoded.failure.reason }))
          return Queue.offerUnsafe(outbound, message)
            ? Effect.void
            : Effect.fail(new NotSent({ type: message.type, reason: "queue_full" }))
        }),
      declaration: Effect.sync(() => declaration),
      subscribeDurable: (runId) => register(runs, runId, runBuffer),
      subscribePreparation: (requestId) =>
        Effect.gen(function*() {
          if (ended !== undefined) return yield* new SubscriptionRejected({ reason: "connection_closed" })
          if (preparations.has(requestId)) return yield* new SubscriptionRejected({ reason: "duplicate" })
          const sub = yield* makeSub<Preparation.PreparationStatusPayload>(Limits.PreparationSubscriptionBuffer)
          const entry = { sub, cursor: undefined as Preparation.RevisionCursor | undefined }
          preparations.set(requestId, entry)
          yield* Effect.addFinalizer(() => Effect.sync(() => void (preparations.get(requestId) === entry && preparations.delete(requestId))))
          return sub.stream
        }),
      expectReplies: <F extends ReplyFamily>(family: F, key: string) =>
        register(replies, `${family}\u0000${key}`, replyBuffer) as unknown as Effect.Effect<
          Stream.Stream<ReplyFamilies[F], SubError>,
          SubscriptionRejected,
          Scope.Scope
        >,
      closed: Deferred.await(closedSignal),
      close: (_code, reason) => lose(reason)
    }

    const routeRun = (event: RunEvent) => {
      let runId: string | undefined = event.id
      if (event.type === "permission_request") interactionRuns.set(event.payload.request_id, event.id)
      if (event.type === "prompt_for_user_choice") interactionRuns.set(event.payload.ask_id, event.id)
      if (event.type === "permission_cancel") {
        runId = interactionRuns.get(event.id)
        interactionRuns.delete(event.id)
      }
      if (runId === undefined) return
      const sub = runs.get(runId)
      if (sub === undefined) return
      sub.push(event)
      if (event.type === "done") {
        sub.end()
        runs.delete(runId)
      }
    }

    const emit = (message: Messages.RuntimeToCore): Effect.Effect<void> =>
      Effect.sync(() => {
        if (ended !== undefined) return
        // Frames travel through the codec, as on the wire.
        const encoded = Messages.encodeMessage(message)
        if (Result.isFailure(encoded)) throw new Error(`fake runtime: invalid ${message.type}`)
        const decoded = Messages.decodeRuntimeToCore(encoded.success)
        if (Result.isFailure(decoded)) throw new Error(`fake runtime: ${message.type} does not decode`)
        const m = decoded.success
        switch (m.type) {
          case "heartbeat":
            declaration = Option.some({
              kinds: new Map((m.payload.supported_agent_kinds ?? []).map((k) => [k.kind, k])),
              daemonVersion: m.payload.daemon_version,
              activeRequests: m.payload.active_requests,
              ts: m.payload.ts,
              receivedAtMs: 0
            })
            return
          case "preparation_status": {
            const entry = preparations.get(m.id)
            if (entry === undefined) return
            if (Option.isSome(Preparation.validateStatus(m.payload))) {
              entry.sub.fail(new ObservationLost({ reason: "invalid_frame" }))
              preparations.delete(m.id)
              return
            }
            const applied = Preparation.applyRevision(entry.cursor, m.payload)
            if (!applied.apply) return
            entry.cursor = applied.cursor
            entry.sub.push(m.payload)
            if (Preparation.isTerminalState(m.payload.state)) {
              entry.sub.end()
              preparations.delete(m.id)
            }
            return
          }
          case "interaction_decision_ack": {
            replies.get(`interaction_decision_ack\u0000${m.payload.delivery_id}`)?.push(m)
            return
          }
          case "prompt_steer_ack": {
            if (m.payload.input_id === "") return
            replies.get(`prompt_steer_ack\u0000${steerAckKey(m.id, m.payload.input_id)}`)?.push(m)
            return
          }
          case "runtime_prepare_result":
          case "workspace_read_result":
          case "workspace_write_result":
          case "workspace_export_result":
          case "environment_quiesced":
          case "environment_resumed":
            replies.get(`${m.type}\u0000${m.id}`)?.push(m)
            return
          default:
            routeRun(m)
        }
      })

    const fake: Fake = {
      session: recording(inner, log),
      calls: Ref.get(log),
      receive: Queue.take(outbound),
      poll: Queue.poll(outbound),
      emit,
      disconnect: lose("disconnected"),
      flush: yieldTimes(),
      heartbeat: (kinds) => emit(heartbeatFrame(kinds)),
      lose,
      queued: Queue.size(outbound)
    }
    yield* Effect.addFinalizer(() => lose("gateway_shutdown"))
    return fake
  })

// ---------------------------------------------------------------------------------------------- real session

/** The gateway's layers for in-memory tests. */
export const RealLayer = Gateway.layer.pipe(Layer.provideMerge(GatewayConfig.layer({ publicUrl: "http://core.test" })))
/** The same with gateway settings overridden. */
export const RealLayerWith = (overrides: Partial<GatewayConfigOptions>) =>
  Gateway.layer.pipe(Layer.provideMerge(GatewayConfig.layer({ publicUrl: "http://core.test", ...overrides })))

/**
 * The real DeviceSession over an in-memory socket, with a scripted Runtime. Declares `kinds` with a first
 * heartbeat when given.
 */
export const makeReal = (
  kinds?: ReadonlyArray<Capabilities.AgentKindDescriptor>
): Effect.Effect<
  CoreHarness & {
    readonly emitAll: (messages: ReadonlyArray<Messages.RuntimeToCore>) => Effect.Effect<void>
    /** Sends the frames and closes the socket at once, before the read loop runs (a reply then the close). */
    readonly emitThenClose: (messages: ReadonlyArray<Messages.RuntimeToCore>, code: number) => Effect.Effect<void>
  },
  never,
  Scope.Scope | Gateway | GatewayConfig
> =>
  Effect.gen(function*() {
    const connection = yield* connectMemory(device("device-1"))
    const log = yield* Ref.make<ReadonlyArray<Call>>([])
    const flush = yieldTimes(200)
    const harness = {
      /** Sends every frame before letting the read loop run (one burst, as one socket read can hold). */
      emitAll: (messages: ReadonlyArray<Messages.RuntimeToCore>) =>
        Effect.andThen(Effect.forEach(messages, connection.runtime.send, { discard: true }), flush),
      emitThenClose: (messages: ReadonlyArray<Messages.RuntimeToCore>, code: number) =>
        Effect.forEach(messages, connection.runtime.send, { discard: true }).pipe(
          Effect.andThen(connection.runtime.close(code, "closing")),
          Effect.andThen(flush)
        ),
      session: recording(connection.session, log),
      calls: Ref.get(log),
      receive: connection.runtime.receive,
      poll: Effect.andThen(flush, connection.runtime.poll),
      emit: (message: Messages.RuntimeToCore) => Effect.andThen(connection.runtime.send(message), flush),
      disconnect: Effect.andThen(connection.runtime.close(1006, "dropped"), flush),
      flush
    }
    if (kinds !== undefined) yield* harness.emit(heartbeatFrame(kinds))
    return harness
  })
