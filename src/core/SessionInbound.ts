/**
 * The read side of a device session (the rules are in the header of `DeviceSession.ts`): decode each frame,
 * route it (internal/inboundRoutes.ts), apply the malformed-frame policy to an invalid one
 * (internal/malformedFrames.ts and the invalid-frame budget), and keep the declaration from heartbeats. The
 * read side does no work beyond decode and route; it waits only for room in a full Run subscriber.
 *
 * These are gateway-wide functions of the connection's state record (SessionServices.ts), not a service built
 * per connection (issue 18).
 */
import { Context, Effect, type Fiber, Result, Scheduler } from "effect"
import { Capabilities, Checks, DeltaFrame, Envelope, HeartbeatFrame, Messages, SharedByKey } from "../proto/index.js"
import * as CoreMetrics from "./CoreMetrics.js"
import { type Handlers, routeHandlers } from "./internal/inboundRoutes.js"
import { failNamedObserver } from "./internal/malformedFrames.js"
import type { Declaration, SessionState } from "./SessionServices.js"
import type { TransportEnded } from "./transport/DeviceTransport.js"
import { logVerdict } from "./transport/internal/invalidFrames.js"

/**
 * True when a heartbeat declares exactly what `previous` holds: the same daemon version and the same kinds, each
 * with the same availability, version and capabilities. Only the liveness facts (`ts`, active requests, arrival)
 * may differ. A payload listing a kind twice never matches (it is refused by the codec anyway).
 */
export const sameDeclaration = (
  previous: Declaration,
  payload: Messages.MessageOfType<"heartbeat">["payload"]
): boolean => {
  if (previous.daemonVersion !== payload.daemon_version) return false
  const kinds = payload.supported_agent_kinds ?? []
  if (kinds.length !== previous.kinds.size) return false
  for (const kind of kinds) {
    const before = previous.kinds.get(kind.kind)
    if (before === undefined || before.available !== kind.available || before.version !== kind.version) return false
    for (const name of Capabilities.capabilityNames) {
      if (before.capabilities[name] !== kind.capabilities[name]) return false
    }
  }
  return true
}

/** How many kinds maps the process shares at most, and their keys' total length (UTF-16 units). */
const MaxSharedKinds = 1024
const MaxSharedKindsChars = 4 * 1024 * 1024

/**
 * Kinds maps by their declared content (the descriptors' JSON), shared by every connection that declares the same:
 * an idle connection kept its own map, descriptors and 30-member capabilities objects for as long as it lived
 * (issue 18: about 0.4 KiB and five objects per device, which every major GC marks). Two descriptor lists with the
 * same JSON are the same decoded data, and the maps and descriptors are never written, so a connection sees what its
 * own heartbeat declared. Bounded like `HeartbeatFrame`'s templates (a peer can make it no larger): started over
 * when full; maps in use stay with their connections.
 */
const sharedKinds = SharedByKey.make<ReadonlyMap<string, Capabilities.AgentKindDescriptor>>(MaxSharedKinds, MaxSharedKindsChars)

/** The kinds map of a declaration (a changed one: the first heartbeat of a connection, or a new declaration). */
const declaredKinds = (
  list: ReadonlyArray<Capabilities.AgentKindDescriptor>
): ReadonlyMap<string, Capabilities.AgentKindDescriptor> => {
  const key = JSON.stringify(list)
  return sharedKinds.get(key) ?? sharedKinds.add(key, new Map(list.map((k) => [k.kind, k])))
}

const handlers: Handlers = {
  ...routeHandlers,
  heartbeat: (state, message) => {
    CoreMetrics.heartbeatUnsafe(state.metricContext)
    const payload = message.payload
    const previous = state.declaredBase
    // An unchanged declaration keeps its kinds map and is reported as such, so observers skip re-deriving it
    // (issue 18: a heartbeat that only proves liveness costs no digest, no map and no index update).
    const changed = previous === undefined || !sameDeclaration(previous, payload)
    const next: Declaration = {
      kinds: changed ? declaredKinds(payload.supported_agent_kinds ?? []) : previous.kinds,
      daemonVersion: payload.daemon_version,
      activeRequests: payload.active_requests,
      ts: payload.ts,
      receivedAtMs: state.clock.currentTimeMillisUnsafe()
    }
    state.declare(next, changed)
    return undefined
  }
}

/** The liveness numbers of the heartbeat being read (read side only, synchronous: one for every connection). */
const liveness: HeartbeatFrame.Liveness = { ts: 0, active_requests: 0 }

/**
 * The connection's repeated heartbeat (HeartbeatFrame.ts): the text of the heartbeat that set the declaration
 * with other liveness numbers decodes to exactly what the generic decoder gives, and declares exactly the same
 * (so `changed: false`), without parsing, validating or comparing again. False when `frame` is not one.
 */
const repeatedHeartbeat = (state: SessionState, frame: string): boolean => {
  const template = state.heartbeatTemplate
  if (template === undefined || state.declaredBase === undefined || !HeartbeatFrame.matches(template, frame, liveness)) {
    return false
  }
  const bytes = HeartbeatFrame.matchedBytes(template, frame)
  CoreMetrics.inboundUnsafe(state.inbound, bytes)
  if (state.tapQueue !== undefined) {
    state.tapFrame({ direction: "runtime→core", type: "heartbeat", bytes, message: HeartbeatFrame.messageOf(template, liveness) })
  }
  CoreMetrics.heartbeatUnsafe(state.metricContext)
  state.redeclare(liveness.active_requests, liveness.ts, state.clock.currentTimeMillisUnsafe())
  return true
}

const onInvalid = (state: SessionState, error: Envelope.InvalidFrame): Effect.Effect<void> => {
  CoreMetrics.decodeFailureUnsafe(state.metricContext, error.code)
  if (state.tapQueue !== undefined) {
    state.tapFrame({
      direction: "runtime→core",
      type: error.type ?? "invalid",
      ...(error.id === undefined ? {} : { id: error.id }),
      bytes: error.bytes,
      invalid: error.code
    })
  }
  const annotations = { code: error.code, type: error.type ?? "", id: error.id ?? "", bytes: error.bytes }
  if (error.type === "heartbeat") {
    state.terminate("invalid_heartbeat")
    return Effect.logWarning("invalid heartbeat: declaration cleared, connection closed").pipe(
      Effect.annotateLogs(annotations)
    )
  }
  const observerFailed = failNamedObserver(state, error)
  // Bounded logging, and a close past the threshold (transport/internal/invalidFrames.ts).
  const verdict = state.invalidFrameBudget.admit(error.code, state.clock.currentTimeMillisUnsafe())
  const logged = logVerdict(
    verdict,
    Effect.logWarning(
      observerFailed ? "invalid frame: its observer failed with invalid_frame" : "invalid frame dropped"
    ).pipe(Effect.annotateLogs(annotations))
  )
  // Logged before the close, which ends the read side.
  return verdict.close ? Effect.andThen(logged, Effect.sync(() => void state.terminate("invalid_frame", 1008))) : logged
}

/**
 * A delta read by `DeltaFrame.match` (the generic decoder's result for that text, see DeltaFrame.ts): counted,
 * tapped and routed exactly as `handleFrame` does after the generic decode.
 */
const routeDelta = (state: SessionState, message: DeltaFrame.Delta, bytes: number): Effect.Effect<void> | undefined => {
  CoreMetrics.inboundUnsafe(state.inbound, bytes)
  if (state.tapQueue !== undefined) {
    state.tapFrame({ direction: "runtime→core", type: message.type, id: message.id, bytes, message })
  }
  return handlers.delta(state, message, bytes)
}

/** Decodes and routes one frame; returns the work it must wait for (a log line, a full subscriber), if any. */
export const handleFrame = (
  state: SessionState,
  frame: string | Uint8Array,
  bytes?: number
): Effect.Effect<void> | undefined => {
  if (typeof frame === "string") {
    if (repeatedHeartbeat(state, frame)) return undefined
    const delta = state.deltaLayout === undefined ? undefined : DeltaFrame.match(state.deltaLayout, frame)
    if (delta !== undefined) return routeDelta(state, delta, bytes ?? Checks.utf8ByteLength(frame))
  }
  // One envelope per text frame: a binary frame is refused as the daemon refuses it. `bytes`, when the transport
  // knows the frame's size, spares counting the text's UTF-8 length again.
  const raw = typeof frame === "string" ? Envelope.decodeEnvelope(frame, bytes) : Envelope.refuseBinaryFrame(frame)
  // Every frame read is counted once here; one that fails to decode also counts as a decode failure.
  CoreMetrics.inboundUnsafe(state.inbound, Result.isFailure(raw) ? raw.failure.bytes : raw.success.bytes)
  if (Result.isFailure(raw)) return onInvalid(state, raw.failure)
  const decoded = Messages.decodeRuntimeToCoreEnvelope(raw.success)
  if (Result.isFailure(decoded)) return onInvalid(state, decoded.failure)
  const message = decoded.success
  if (message.type === "delta" && (state.deltaLayout?.id !== message.id || state.deltaLayout.trace !== message.trace)) {
    state.deltaLayout = DeltaFrame.layout(message.id, message.trace)
  }
  if (state.tapQueue !== undefined) {
    const id = "id" in message ? message.id : undefined
    state.tapFrame({
      direction: "runtime→core",
      type: message.type,
      ...(id === undefined ? {} : { id }),
      bytes: raw.success.bytes,
      message
    })
  }
  const handler = handlers[message.type] as (
    state: SessionState,
    m: Messages.RuntimeToCore,
    bytes: number
  ) => Effect.Effect<void> | undefined
  const effect = handler(state, message, raw.success.bytes)
  if (message.type === "heartbeat" && typeof frame === "string") {
    state.heartbeatTemplate = HeartbeatFrame.template(frame, message)
  }
  return effect
}

/** Why the transport ended, for the log line (never peer text). */
const describeEnd = (error: TransportEnded): string => error.code === undefined ? error.reason : `${error.reason} ${error.code}`

/**
 * Routes frames in order until the read side must wait (`effect`), or nothing is pending. While it waits, the
 * socket is paused and later frames are kept in `pending`. Iterative, never recursive on peer data: an effect
 * that completes at once does not re-enter this function.
 */
const drain = (state: SessionState, first: Effect.Effect<void> | undefined): void => {
  let effect = first
  while (true) {
    if (effect !== undefined) {
      state.pending ??= []
      if (!state.holding) {
        state.holding = true
        state.transport.pause()
      }
      if (effect === Effect.yieldNow) {
        // A yield (a backlogged subscriber gets a turn before the next frame): what a fiber running it does, one
        // task on the scheduler of the connection's context, without a fiber, its dispatcher and its observer.
        state.yieldTask ??= () => drain(state, undefined)
        state.dispatcher ??= Context.get(state.metricContext, Scheduler.Scheduler).makeDispatcher()
        state.dispatcher.scheduleTask(state.yieldTask, 0)
        return
      }
      const fiber = state.fork!(effect)
      effect = undefined
      if (fiber.pollUnsafe() === undefined) {
        state.holdFiber = fiber
        fiber.addObserver(() => {
          state.holdFiber = undefined
          drain(state, undefined)
        })
        return
      }
    }
    const pending = state.pending
    if (pending === undefined) return
    if (state.ended !== undefined || state.pendingAt === pending.length) {
      state.pending = undefined
      state.pendingBytes = []
      state.pendingAt = 0
      state.holding = false
      state.received()
      if (state.ended === undefined) state.transport.resume()
      return
    }
    const at = state.pendingAt++
    const frame = pending[at]!
    effect = typeof frame === "string" || frame instanceof Uint8Array
      ? handleFrame(state, frame, state.pendingBytes[at])
      : routeDelta(state, frame, state.pendingBytes[at]!)
  }
}

/** One frame from the transport (a `ws` message event: no fiber of the connection runs for it). */
const onFrame = (state: SessionState, frame: string | Uint8Array, bytes: number | undefined): void => {
  if (state.ended !== undefined) return
  if (state.pending !== undefined) {
    state.pendingBytes[state.pending.length] = bytes
    state.pending.push(frame)
    return
  }
  // The liveness deadline restarts at the first frame of each job: a socket read's frames arrive together, so the
  // clock is read once per read, not per frame (issue 18: 0.05–0.1 µs a delta). `inbound.frames` stays 0 until
  // this job counts a frame of the connection (every frame is counted, and the count is flushed at the job's end).
  if (state.inbound.frames === 0) state.received()
  const effect = handleFrame(state, frame, bytes)
  if (effect !== undefined) drain(state, effect)
}

/**
 * A delta's text from the frame's bytes (`DeltaFrame.matchBytes`; the transport's bytes are a `Buffer`): Node's
 * `utf8Slice`, what `Buffer#toString("utf8", start, end)` calls after checking its arguments and looking up the
 * encoding (issue 18: about 40 ns a relayed delta; `matchBytes` gives bounds within the frame). `toString` where a
 * `Buffer` has no `utf8Slice`.
 */
const utf8Slice = (Buffer.prototype as unknown as { readonly utf8Slice?: unknown }).utf8Slice
const utf8Text: DeltaFrame.Utf8Text = typeof utf8Slice === "function"
  ? (bytes, start, end) => (bytes as unknown as { readonly utf8Slice: (start: number, end: number) => string }).utf8Slice(start, end)
  : (bytes, start, end) => (bytes as Buffer).toString("utf8", start, end)

/**
 * A text frame as its bytes (`InboundHandlers.onTextBytes`): a Run's delta of the connection's layout is read and
 * routed from them, exactly as `onFrame` would from its text; anything else (and any frame after the end) is left
 * to `onFrame` (false). While the read side holds, the delta read is kept in order with the held frames (`pending`)
 * and routed when its turn comes, as its text would be.
 */
const onTextBytes = (state: SessionState, frame: Buffer): boolean => {
  if (state.ended !== undefined || state.deltaLayout === undefined) return false
  const delta = DeltaFrame.matchBytes(state.deltaLayout, frame, utf8Text)
  if (delta === undefined) return false
  const pending = state.pending
  if (pending !== undefined) {
    state.pendingBytes[pending.length] = frame.length
    pending.push(delta)
    return true
  }
  // As in `onFrame`: the first frame of a job restarts the liveness deadline.
  if (state.inbound.frames === 0) state.received()
  const effect = routeDelta(state, delta, frame.length)
  if (effect !== undefined) drain(state, effect)
  return true
}

/**
 * Starts reading: every frame is decoded and routed synchronously as the transport delivers it. When a frame
 * needs work the read side must wait for (a log line, room in a full Run subscriber), that work runs on a fiber
 * (`fork`, in the connection's context; a yield that gives a backlogged subscriber a turn is one task on the
 * context's scheduler instead) and the socket is paused until it is done: frames stay in order. When the
 * transport ends first, the connection ends with `disconnected`.
 */
export const listen = (state: SessionState, fork: (effect: Effect.Effect<void>) => Fiber.Fiber<void>): void => {
  state.fork = fork
  state.transport.listen({
    onFrame: (frame, bytes) => onFrame(state, frame, bytes),
    onTextBytes: (frame) => onTextBytes(state, frame),
    onEnd: (error) => {
      // A frame over 4 MiB is refused by the transport, unread: it still counts as a decode failure.
      if (error.reason === "frame_too_large") CoreMetrics.decodeFailureUnsafe(state.metricContext, "frame_too_large")
      if (state.terminate("disconnected")) {
        fork(Effect.logInfo("connection ended").pipe(Effect.annotateLogs({ cause: describeEnd(error) })))
      }
    }
  })
}
