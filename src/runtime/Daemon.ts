/**
 * The daemon loop (protocol "Ownership and connection" and "Failures, retries and cleanup"): connect → run one
 * connection → wait until its cleanup is confirmed → classify how it ended → stop or reconnect with backoff.
 *
 * Each physical connection is its own scope: the Transport and ConnectionInfo are provided inside it, and
 * `Connection.run` builds fresh routing, admission handles and transfer state there. The next attempt starts
 * only after `Connection.run` returned, which it does only after every resource of that connection confirmed
 * cleanup, so a reconnect never races owned resources and never inherits or replays anything.
 *
 * Permanent (stop, fail with `DaemonRejected`): a 401/403/426 at bootstrap or upgrade, or close code 4001 from
 * Core. `device_shutdown` ends the loop successfully. Everything else is transient: reconnect after a capped,
 * jittered exponential backoff (Schedule + the Random service: deterministic under TestClock and a fixed Random).
 *
 * Publishes the connection section of the StatusBoard, and the declared kinds from each heartbeat the
 * connection actually wrote. Logs carry `device_id`; never the credential or a payload.
 */
import { Clock, Duration, Effect, LogLevel, Random, Result, Schedule, Schema, Stream } from "effect"
import { supportedNames } from "../proto/Capabilities.js"
import { type DeviceId, printable } from "../proto/Ids.js"
import { CloseRuntimeRetired } from "../proto/Limits.js"
import { frameText, isEncoded, type Outgoing } from "../proto/EncodedFrame.js"
import type { RuntimeToCore } from "../proto/Messages.js"
import { ProtocolVersion } from "../proto/Version.js"
import * as Connection from "./Connection.js"
import { HarnessRegistry, kindStatus } from "./harness/HarnessRegistry.js"
import type { RuntimeProcessServices } from "./RuntimeProcess.js"
import { type ConnectionState, type ConnectionStatus, StatusBoard } from "./StatusBoard.js"
import { SuspensionStore } from "./SuspensionStore.js"
import type { ConnectFailed, ConnectRejected } from "./transport/ConnectError.js"
import { Connector } from "./transport/Connector.js"
import { ConnectionInfo, Transport, type TransportClosed } from "./transport/Transport.js"

// ---------------------------------------------------------------------------------------------- policy

/** Reconnect backoff: delay n (n = 1, 2, …) is `min(initial × factor^(n-1), max)`, then ±`jitter`. */
export interface ReconnectPolicy {
  readonly initialDelay: Duration.Duration
  readonly factor: number
  readonly maxDelay: Duration.Duration
  /** Jitter as a fraction (0.2 = ±20 %), drawn from the Random service. */
  readonly jitter: number
  /** A connection that stayed up at least this long resets the backoff to `initialDelay`. */
  readonly stableAfter: Duration.Duration
}

/** 500 ms × 1.5 per attempt, capped at 30 s, ±20 % jitter; reset after a connection that stayed up 30 s. */
export const defaultReconnectPolicy: ReconnectPolicy = {
  initialDelay: Duration.millis(500),
  factor: 1.5,
  maxDelay: Duration.seconds(30),
  jitter: 0.2,
  stableAfter: Duration.seconds(30)
}

/** The backoff as a Schedule (its output is the delay before the next attempt). */
export const backoffSchedule = (policy: ReconnectPolicy): Schedule.Schedule<Duration.Duration> => {
  const capped = Schedule.min([Schedule.exponential(policy.initialDelay, policy.factor), Schedule.spaced(policy.maxDelay)])
  return policy.jitter <= 0
    ? capped
    : Schedule.modifyDelay(capped, ({ duration }) =>
      Effect.map(
        Random.next,
        (r) => Duration.millis(Math.round(Duration.toMillis(duration) * (1 - policy.jitter + 2 * policy.jitter * r)))
      ))
}

// ---------------------------------------------------------------------------------------------- errors

/** Why the daemon stopped for good. Exit code 3 in src/bin. */
export const RejectionReason = Schema.Literals(["incompatible_version", "unauthorized", "forbidden", "runtime_retired"])
export type RejectionReason = typeof RejectionReason.Type

/**
 * Core refused this daemon permanently: reconnecting cannot help until an operator fixes the credential, the
 * device or the deployed versions. The message is written for that operator and never contains the credential.
 */
export class DaemonRejected extends Schema.TaggedError<DaemonRejected>()("DaemonRejected", {
  reason: RejectionReason,
  device_id: Schema.String,
  status: Schema.optionalKey(Schema.Int),
  code: Schema.optionalKey(Schema.String),
  core_version: Schema.optionalKey(Schema.String)
}) {
  override get message() {
    switch (this.reason) {
      case "incompatible_version":
        return `incompatible_version: this daemon speaks wire ${ProtocolVersion}, Core ${
          this.core_version === undefined ? "speaks another version" : `speaks ${this.core_version}`
        } (HTTP 426) — deploy matching versions of the daemon and Core; not reconnecting`
      case "unauthorized":
        return `unauthorized (${this.code ?? `HTTP ${this.status ?? 401}`}): Core rejected the credential for device ${this.device_id} — check the credential (--credential-file, AGENTWIRE_CREDENTIAL_FILE or AGENTWIRE_CREDENTIAL) and --device-id; not reconnecting`
      case "forbidden":
        return `forbidden (${this.code ?? `HTTP ${this.status ?? 403}`}): Core refused device ${this.device_id} — check that --device-id names an agent-daemon runtime this credential belongs to; not reconnecting`
      case "runtime_retired":
        return `runtime_retired: Core closed the connection with code ${CloseRuntimeRetired} (device ${this.device_id} was deleted or retired) — register the device again; not reconnecting`
    }
  }
}

const rejectedFrom = (error: ConnectRejected, deviceId: string): DaemonRejected =>
  new DaemonRejected({
    reason: error.status === 426 ? "incompatible_version" : error.status === 401 ? "unauthorized" : "forbidden",
    device_id: deviceId,
    status: error.status,
    ...(error.code === undefined ? {} : { code: error.code }),
    ...(error.core_version === undefined ? {} : { core_version: error.core_version })
  })

// ---------------------------------------------------------------------------------------------- loop

export interface DaemonOptions {
  readonly deviceId: DeviceId
  /** The Core origin, for the status board (never with credentials). */
  readonly coreOrigin: string
  readonly reconnect?: Partial<ReconnectPolicy>
  /** The per-connection logic; `Connection.run` unless a test substitutes a scripted one. */
  readonly runConnection?: Effect.Effect<
    Connection.ConnectionEnd,
    never,
    Transport | ConnectionInfo | StatusBoard | RuntimeProcessServices
  >
}

type Attempt =
  | { readonly _tag: "ConnectError"; readonly error: ConnectRejected | ConnectFailed }
  | { readonly _tag: "Ended"; readonly end: Connection.ConnectionEnd; readonly upFor: Duration.Duration }

const endText = (error: TransportClosed) => error.message

/**
 * Runs the daemon until Core asks it to shut down (succeeds: exit 0) or refuses it permanently (fails with
 * `DaemonRejected`: exit 3). Interrupting it (a signal) closes the current connection scope, which waits for
 * confirmed cleanup, and then stops.
 */
export const run = (
  options: DaemonOptions
): Effect.Effect<void, DaemonRejected, Connector | StatusBoard | RuntimeProcessServices> =>
  Effect.gen(function* () {
    const connector = yield* Connector
    const board = yield* StatusBoard
    // A suspension persisted by an earlier process is visible before the first connection (agentwire status).
    const persisted = (yield* (yield* SuspensionStore).current).suspended
    if (persisted !== null) yield* board.setSuspension({ state: "suspended", ...persisted })
    const policy: ReconnectPolicy = { ...defaultReconnectPolicy, ...options.reconnect }
    const schedule = backoffSchedule(policy)
    let nextDelay = yield* Schedule.toStep(schedule)
    // Why a kind is unavailable is local knowledge (never on the wire): kept next to what each heartbeat declared.
    const registry = yield* HarnessRegistry
    const reasons = new Map<string, string>()
    for (const declaration of yield* registry.declarations) {
      const reason = kindStatus(declaration).unavailable_reason
      if (reason !== undefined) reasons.set(declaration.kind, reason)
    }
    yield* board.setKinds((yield* registry.declarations).map(kindStatus))
    let connectionNumber = 0
    let lastError: string | undefined

    const publish = (state: ConnectionState, extra: { readonly next_attempt_ms?: number } = {}) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        board.setConnection({
          state,
          device_id: options.deviceId,
          core_url: options.coreOrigin,
          connection_number: connectionNumber,
          since_ms: now,
          ...(lastError === undefined ? {} : { last_error: lastError }),
          ...extra
        } satisfies ConnectionStatus))

    /** An info line whenever the declared kinds (and their availability) change, on the first heartbeat too. */
    let declared = ""
    const logDeclared = (kinds: ReadonlyArray<{ readonly kind: string; readonly available: boolean }>) =>
      Effect.suspend(() => {
        const text = kinds.map((k) => `${k.kind}${k.available ? "" : " (unavailable)"}`).join(", ")
        if (text === declared) return Effect.void
        declared = text
        return Effect.logInfo("declared kinds").pipe(Effect.annotateLogs({ kinds: text === "" ? "none" : text }))
      })

    /** The real transport, observed: frames at debug; a heartbeat that was written updates the declared kinds. */
    const observed = (transport: Transport["Service"]): Transport["Service"] =>
      Transport.of({
        ...transport,
        // Frames at debug: type, id and size; never a payload.
        // The level is checked first: a debug line per relayed frame cost about 3 µs even when nothing was logged.
        inbound: Stream.tap(transport.inbound, (item) =>
          item._tag === "Message"
            ? whenDebug(() =>
              Effect.logDebug("frame received").pipe(
                Effect.annotateLogs({ type: item.message.type, id: frameId(item.message), bytes: item.bytes })
              ))
            : Effect.void),
        // The level first, then the send alone (issue 18, relay: the `tap` and the level check after each batch were
        // about 6 B per relayed delta of the daemon's allocations).
        sendAll: (frames: ReadonlyArray<Outgoing>) =>
          Effect.flatMap(debugEnabled, (enabled) =>
            enabled
              ? Effect.tap(transport.sendAll(frames), () => Effect.forEach(frames, frameSent, { discard: true }))
              : transport.sendAll(frames)),
        send: (message: RuntimeToCore) => Effect.tap(transport.send(message), () => written(message)),
        // A late frame's write is not known: nothing is observed for it (as for a send whose wait ended).
        sendWithin: (frame: Outgoing, budget: Duration.Duration) =>
          Effect.tap(transport.sendWithin(frame, budget), (outcome) => (outcome === "written" ? written(frame) : Effect.void)),
        post: (frame: Outgoing, unconfirmed: () => void) =>
          Effect.tap(transport.post(frame, unconfirmed), () => whenDebug(() => frameSent(frame)))
      })

    const debugEnabled = LogLevel.isEnabled("Debug")
    const whenDebug = (log: () => Effect.Effect<void>): Effect.Effect<void> =>
      Effect.flatMap(debugEnabled, (enabled) => (enabled ? log() : Effect.void))

    // Its size is the encoded text's, encoded again here: only at debug, so the send path never pays for it.
    const frameSent = (message: Outgoing) =>
      Effect.suspend(() => {
        const text = frameText(message)
        return Effect.logDebug("frame sent").pipe(Effect.annotateLogs({
          type: message.type,
          id: frameId(message),
          ...(Result.isSuccess(text) ? { bytes: Buffer.byteLength(text.success, "utf8") } : {})
        }))
      })

    /** A frame's correlation id, bounded for a log line ("" when the type has none). */
    const frameId = (message: { readonly type: string }): string => {
      const id = (message as { readonly id?: unknown }).id
      return typeof id === "string" ? printable(id) : ""
    }

    /** After a frame's write completed: a heartbeat updates the declared kinds; every frame at debug. */
    const written = (frame: Outgoing): Effect.Effect<void> => {
      if (isEncoded(frame) || frame.type !== "heartbeat") return whenDebug(() => frameSent(frame))
      const kinds = frame.payload.supported_agent_kinds ?? []
      return logDeclared(kinds).pipe(
        Effect.andThen(board.setKinds(kinds.map((k) => {
          const reason = k.available ? undefined : reasons.get(k.kind)
          return {
            kind: k.kind,
            available: k.available,
            ...(k.version === undefined ? {} : { version: k.version }),
            ...(reason === undefined ? {} : { unavailable_reason: reason }),
            supported: [...supportedNames(k.capabilities)]
          }
        }))),
        Effect.andThen(whenDebug(() => frameSent(frame)))
      )
    }

    /** One physical connection in its own scope; returns after Connection.run returned (cleanup confirmed). */
    const attempt = () =>
      Effect.scoped(
        Effect.gen(function* () {
          const connected = yield* connector.connect
          // Core logs the same connection_id (the X-Agentwire-Connection-Id header; docs/wire-decisions.md).
          const byId = Effect.annotateLogs(connected.connectionId === undefined ? {} : { connection_id: connected.connectionId })
          const connectedAt = yield* Clock.currentTimeMillis
          yield* publish("connected")
          yield* Effect.logInfo("connected to Core").pipe(
            Effect.annotateLogs({ heartbeat_interval_ms: Duration.toMillis(connected.heartbeatInterval) }),
            byId
          )
          const end = yield* (options.runConnection ?? Connection.run).pipe(
            byId,
            Effect.provideService(Transport, observed(connected.transport)),
            Effect.provideService(ConnectionInfo, {
              deviceId: options.deviceId,
              connectionNumber,
              heartbeatInterval: connected.heartbeatInterval
            })
          )
          const upFor = Duration.millis((yield* Clock.currentTimeMillis) - connectedAt)
          return { _tag: "Ended", end, upFor } satisfies Attempt
        }).pipe(Effect.annotateLogs({ connection_number: connectionNumber }))
      ).pipe(Effect.catch((error) => Effect.succeed<Attempt>({ _tag: "ConnectError", error })))

    while (true) {
      connectionNumber += 1
      yield* publish("connecting")
      const outcome: Attempt = yield* attempt()
      if (outcome._tag === "ConnectError") {
        const error = outcome.error
        lastError = error.message
        if (error._tag === "ConnectRejected") {
          const rejected = rejectedFrom(error, options.deviceId)
          lastError = rejected.message
          yield* publish("stopped")
          yield* Effect.logError(rejected.message)
          return yield* rejected
        }
        yield* Effect.logWarning("connecting to Core failed").pipe(Effect.annotateLogs({ error: error.message }))
      } else if (outcome.end._tag === "ShutdownRequested") {
        lastError = undefined
        yield* publish("stopped")
        yield* Effect.logInfo("Core requested shutdown; cleanup confirmed, stopping")
        return
      } else {
        const closed = outcome.end.error
        lastError = endText(closed)
        if (closed.code === CloseRuntimeRetired) {
          const rejected = new DaemonRejected({ reason: "runtime_retired", device_id: options.deviceId, code: "4001" })
          lastError = rejected.message
          yield* publish("stopped")
          yield* Effect.logError(rejected.message)
          return yield* rejected
        }
        yield* Effect.logWarning("connection to Core ended").pipe(
          Effect.annotateLogs({ reason: closed.reason, ...(closed.code === undefined ? {} : { close_code: closed.code }) })
        )
        if (Duration.isGreaterThanOrEqualTo(outcome.upFor, policy.stableAfter)) {
          nextDelay = yield* Schedule.toStep(schedule)
        }
      }
      const now = yield* Clock.currentTimeMillis
      const [, delay] = yield* nextDelay(now, undefined).pipe(
        Effect.catch(() => Effect.succeed([policy.maxDelay, policy.maxDelay] as const))
      )
      yield* publish("backoff", { next_attempt_ms: now + Duration.toMillis(delay) })
      yield* Effect.logInfo("reconnecting after backoff").pipe(
        Effect.annotateLogs({ attempt: connectionNumber + 1, delay_ms: Duration.toMillis(delay) })
      )
      yield* Effect.sleep(delay)
    }
  }).pipe(
    Effect.onInterrupt(() =>
      Effect.gen(function* () {
        const board = yield* StatusBoard
        const current = yield* board.snapshot
        const now = yield* Clock.currentTimeMillis
        yield* board.setConnection({ ...current.connection, state: "stopped", since_ms: now })
      })
    ),
    Effect.annotateLogs({ device_id: options.deviceId })
  )
