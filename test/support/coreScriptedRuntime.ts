/**
 * A scripted Runtime peer for Core gateway tests: it plays the daemon's side of one connection frame by
 * frame, with nothing of src/runtime behind it.
 *
 * - `connectMemory(device)` runs the real gateway connection (`Gateway.accept` over the real socket
 *   transport, `transport/internal/socket.ts`) against an in-memory `effect/socket` Socket. Fully
 *   deterministic under TestClock. Writes can be made to fail or hang (`writes`).
 * - `dial(...)` opens a real loopback WebSocket (the `ws` client) to a running `GatewayServer`, with the
 *   Bearer header; a refused upgrade returns its HTTP status and JSON body instead.
 *
 * Both return a `ScriptedRuntime`: send typed or raw frames, receive Core's frames decoded with the wire
 * codec, close, and observe Core's close. Test-only: never imported by src.
 */
import { Cause, Deferred, Effect, Exit, Fiber, Option, Queue, Result, type Scope, Stream } from "effect"
import { Socket } from "effect/socket"
import WebSocket from "ws"
import type { DeviceRecord } from "../../src/core/DeviceCredentials.js"
import type { DeviceSession } from "../../src/core/DeviceSession.js"
import type { ObservationLost } from "../../src/core/Errors.js"
import { Gateway } from "../../src/core/Gateway.js"
import { GatewayConfig } from "../../src/core/GatewayConfig.js"
import { fromSocket } from "../../src/core/transport/internal/socket.js"
import { type Capabilities, Ids, Limits, Messages, Version } from "../../src/proto/index.js"
import { allSupported } from "./capabilities.js"

/** Core's close of the connection, as the peer saw it. */
export interface CoreClose {
  readonly code: number
  readonly reason: string
}

export interface ScriptedRuntime {
  /** Encodes (validating it) and sends one frame. */
  readonly send: (message: Messages.RuntimeToCore) => Effect.Effect<void>
  /** Sends one raw text frame as is (invalid frames, unknown types). */
  readonly sendRaw: (frame: string) => Effect.Effect<void>
  /** Sends one binary frame (the protocol carries envelopes in text frames only). */
  readonly sendBinary: (frame: Uint8Array) => Effect.Effect<void>
  /** The next frame Core sent, decoded as a Core → Runtime message (dies if Core sent an invalid frame). */
  readonly receive: Effect.Effect<Messages.CoreToRuntime>
  /** A frame Core already sent, if any, without waiting. */
  readonly poll: Effect.Effect<Option.Option<Messages.CoreToRuntime>>
  /** The peer closes the connection. */
  readonly close: (code?: number, reason?: string) => Effect.Effect<void>
  /** Completes when Core closed the connection. */
  readonly closedByCore: Effect.Effect<CoreClose>
}

const decodeCore = (frame: string): Messages.CoreToRuntime => {
  const decoded = Messages.decodeCoreToRuntime(frame)
  if (Result.isFailure(decoded)) throw new Error(`Core sent an invalid frame (${decoded.failure.code})`)
  return decoded.success
}

const encode = (message: Messages.RuntimeToCore): string => {
  const encoded = Messages.encodeMessage(message)
  if (Result.isFailure(encoded)) throw new Error(`scripted runtime: invalid message ${message.type}`)
  return encoded.success
}

// ---------------------------------------------------------------------------------------------- frames

/** A kind descriptor (every capability supported unless overridden). */
export const kind = (
  name: string,
  options: { readonly available?: boolean; readonly capabilities?: Capabilities.AgentKindCapabilities } = {}
): Capabilities.AgentKindDescriptor => ({
  kind: name,
  available: options.available ?? true,
  capabilities: options.capabilities ?? allSupported()
})

/** A heartbeat declaring the given kinds. */
export const heartbeat = (
  kinds: ReadonlyArray<Capabilities.AgentKindDescriptor> = [kind("codex")],
  options: { readonly ts?: number; readonly activeRequests?: number; readonly daemonVersion?: string } = {}
): Messages.MessageOfType<"heartbeat"> => ({
  type: "heartbeat",
  payload: {
    ts: options.ts ?? 1_760_000_000,
    active_requests: options.activeRequests ?? 0,
    ...(options.daemonVersion === undefined ? {} : { daemon_version: options.daemonVersion }),
    ...(kinds.length === 0 ? {} : { supported_agent_kinds: kinds })
  }
})

export const runId = Ids.unsafeMake.runId
export const requestId = Ids.unsafeMake.preparationRequestId
export const deviceId = Ids.unsafeMake.deviceId

type Msg<T extends Messages.RuntimeToCoreType> = Messages.MessageOfType<T>

/** Typed Runtime → Core frames for scripts. */
export const frames = {
  delta: (run: string, delta: string, sequence: number): Msg<"delta"> => ({
    type: "delta",
    id: runId(run),
    payload: { delta, sequence }
  }),
  error: (run: string, error: string): Msg<"error"> => ({ type: "error", id: runId(run), payload: { error } }),
  done: (run: string, content = ""): Msg<"done"> => ({ type: "done", id: runId(run), payload: { content } }),
  permissionRequest: (run: string, interaction: string): Msg<"permission_request"> => ({
    type: "permission_request",
    id: runId(run),
    payload: { request_id: Ids.unsafeMake.interactionId(interaction), tool: "shell", title: "run a command" }
  }),
  permissionCancel: (interaction: string): Msg<"permission_cancel"> => ({
    type: "permission_cancel",
    id: Ids.unsafeMake.interactionId(interaction)
  }),
  status: (
    request: string,
    payload: Messages.MessageOfType<"preparation_status">["payload"]
  ): Msg<"preparation_status"> => ({ type: "preparation_status", id: requestId(request), payload }),
  decisionAck: (subject: string, delivery: string, applied = true): Msg<"interaction_decision_ack"> => ({
    type: "interaction_decision_ack",
    id: Ids.unsafeMake.ackSubjectId(subject),
    payload: { delivery_id: Ids.unsafeMake.deliveryId(delivery), applied }
  }),
  steerAck: (
    run: string,
    input: string,
    phase: "written" | "accepted"
  ): Msg<"prompt_steer_ack"> => ({
    type: "prompt_steer_ack",
    id: runId(run),
    payload: phase === "written" ? { input_id: input, accepted: false, written: true } : { input_id: input, accepted: true }
  }),
  quiesced: (operation: string): Msg<"environment_quiesced"> => ({
    type: "environment_quiesced",
    id: Ids.unsafeMake.operationId(operation),
    payload: { environment_id: "env-1", suspend_id: "suspend-1", accepted: true }
  })
} as const

// ---------------------------------------------------------------------------------------------- in memory

export type WriteBehaviour = "ok" | "fail" | "hang"

export interface MemoryConnection {
  readonly runtime: ScriptedRuntime
  /** The session the gateway registered for this connection. */
  readonly session: DeviceSession
  /** The fiber running `Gateway.accept`; its result is the reason the connection ended. */
  readonly accepted: Fiber.Fiber<ObservationLost>
  /** Changes how Core's socket writes behave from now on. */
  readonly setWrites: (behaviour: WriteBehaviour) => void
  /** Completes once a write started hanging (`setWrites("hang")`). */
  readonly writeHung: Effect.Effect<void>
}

/** An agent-daemon device record for tests. */
export const device = (id: string, workspaceId = "ws-1"): DeviceRecord => ({
  deviceId: id,
  workspaceId,
  runtimeType: "agent-daemon"
})

/**
 * Connects a scripted Runtime to the gateway in memory and waits until the gateway registered it. The
 * connection lives in the caller's scope.
 */
export const connectMemory = (
  record: DeviceRecord
): Effect.Effect<MemoryConnection, never, Gateway | GatewayConfig | Scope.Scope> =>
  Effect.gen(function*() {
    const gateway = yield* Gateway
    const config = yield* GatewayConfig
    const inbound = yield* Queue.unbounded<string | Uint8Array, Socket.SocketError>()
    const outbound = yield* Queue.unbounded<string>()
    const coreClose = yield* Deferred.make<CoreClose>()
    const hung = yield* Deferred.make<void>()
    let writes: WriteBehaviour = "ok"

    const closeInbound = (code: number, reason?: string) =>
      Queue.failCauseUnsafe(
        inbound,
        Cause.fail(new Socket.SocketError({ reason: new Socket.SocketCloseError({ code, closeReason: reason }) }))
      )

    const write = (chunk: Uint8Array | string | Socket.CloseEvent): Effect.Effect<void, Socket.SocketError> =>
      Effect.suspend(() => {
        if (Socket.isCloseEvent(chunk)) {
          Deferred.doneUnsafe(coreClose, Exit.succeed({ code: chunk.code, reason: chunk.reason ?? "" }))
          closeInbound(chunk.code, chunk.reason)
          return Effect.void
        }
        if (writes === "fail") {
          return Effect.fail(new Socket.SocketError({ reason: new Socket.SocketWriteError({ cause: new Error("scripted write failure") }) }))
        }
        if (writes === "hang") {
          Deferred.doneUnsafe(hung, Exit.void)
          return Effect.never
        }
        Queue.offerUnsafe(outbound, typeof chunk === "string" ? chunk : new TextDecoder().decode(chunk))
        return Effect.void
      })

    const socket = Socket.make({
      reader: Effect.gen(function*() {
        yield* Effect.addFinalizer(() => Effect.sync(() => closeInbound(1006)))
        return {
          pull: Queue.takeAll(inbound),
          upgrade: Socket.SocketUpgradeError.unsupported
        }
      }),
      writer: Effect.succeed({
        write,
        writeAll: (chunks) => Effect.forEach(chunks, write, { discard: true })
      })
    })

    const connectionScope = yield* Effect.scope
    // The event subscription lasts until the connection is registered only: a subscription that outlived it would
    // keep every later event (and what it refers to) for the test's whole scope.
    const [event, accepted] = yield* Effect.scoped(Effect.gen(function*() {
      const events = yield* gateway.events
      const connected = yield* Stream.filter(events, (e) => e._tag === "Connected" && e.deviceId === record.deviceId).pipe(
        Stream.runHead,
        Effect.forkScoped
      )
      const accepted = yield* Effect.scoped(
        Effect.flatMap(
          fromSocket(socket, { capacity: config.sendQueueCapacity, writeDeadline: config.writeDeadline }),
          (transport) => gateway.accept(record, transport)
        )
      ).pipe(
        Effect.catch(() => Effect.die("in-memory socket failed before the handshake")),
        Effect.forkIn(connectionScope)
      )
      return [yield* Fiber.join(connected), accepted] as const
    }))
    if (Option.isNone(event) || event.value._tag !== "Connected") return yield* Effect.die("gateway did not register the connection")
    const connectionNumber = event.value.connectionNumber
    const session = Option.getOrThrow(yield* gateway.session(record.deviceId as Ids.DeviceId))
    if (session.connectionNumber !== connectionNumber) return yield* Effect.die("another connection replaced this one")

    const runtime: ScriptedRuntime = {
      send: (message) => Effect.sync(() => void Queue.offerUnsafe(inbound, encode(message))),
      sendRaw: (frame) => Effect.sync(() => void Queue.offerUnsafe(inbound, frame)),
      sendBinary: (frame) => Effect.sync(() => void Queue.offerUnsafe(inbound, frame)),
      receive: Effect.map(Queue.take(outbound), decodeCore),
      poll: Effect.map(Queue.poll(outbound), Option.map(decodeCore)),
      close: (code = 1000, reason = "client closing") => Effect.sync(() => void closeInbound(code, reason)),
      closedByCore: Deferred.await(coreClose)
    }
    return { runtime, session, accepted, setWrites: (b) => void (writes = b), writeHung: Deferred.await(hung) }
  })

// ---------------------------------------------------------------------------------------------- loopback WebSocket

/** A refused upgrade: the HTTP status and the JSON body. */
export interface UpgradeRefused {
  readonly _tag: "UpgradeRefused"
  readonly status: number
  readonly body: unknown
}

export interface DialOptions {
  /** The ws_url (without query). */
  readonly wsUrl: string
  readonly deviceId?: string | undefined
  readonly version?: string | undefined
  /** Sent as `Authorization: Bearer <credential>` when present. */
  readonly credential?: string | undefined
  /** A raw Authorization header value (overrides `credential`). */
  readonly authorization?: string | undefined
}

/**
 * Opens a real WebSocket to the gateway. Succeeds with the scripted Runtime once the upgrade completed, or
 * with `UpgradeRefused` when Core answered with an HTTP error. The socket is closed when the scope ends.
 */
export const dial = (options: DialOptions): Effect.Effect<ScriptedRuntime | UpgradeRefused, never, Scope.Scope> =>
  Effect.gen(function*() {
    const query = new URLSearchParams()
    if (options.deviceId !== undefined) query.set("device_id", options.deviceId)
    query.set("version", options.version ?? Version.ProtocolVersion)
    if (options.version === "") query.delete("version")
    const headers: Record<string, string> = {}
    const authorization = options.authorization ??
      (options.credential === undefined ? undefined : `Bearer ${options.credential}`)
    if (authorization !== undefined) headers["Authorization"] = authorization

    const inbound = yield* Queue.unbounded<string>()
    const coreClose = yield* Deferred.make<CoreClose>()
    const opened = yield* Deferred.make<ScriptedRuntime | UpgradeRefused>()

    const ws = yield* Effect.acquireRelease(
      Effect.sync(() => new WebSocket(`${options.wsUrl}?${query.toString()}`, { headers, maxPayload: Limits.MaxFrameBytes })),
      (ws) => Effect.sync(() => ws.terminate())
    )
    const runtime: ScriptedRuntime = {
      send: (message) => Effect.sync(() => ws.send(encode(message))),
      sendRaw: (frame) => Effect.sync(() => ws.send(frame)),
      sendBinary: (frame) => Effect.sync(() => ws.send(frame, { binary: true })),
      receive: Effect.map(Queue.take(inbound), decodeCore),
      poll: Effect.map(Queue.poll(inbound), Option.map(decodeCore)),
      close: (code = 1000, reason = "client closing") => Effect.sync(() => ws.close(code, reason)),
      closedByCore: Deferred.await(coreClose)
    }
    // Core sends text frames only: a binary one is kept as a marker that no decode accepts.
    ws.on("message", (data: WebSocket.RawData, isBinary: boolean) => {
      Queue.offerUnsafe(inbound, isBinary ? "<binary frame>" : data.toString())
    })
    ws.on("open", () => Deferred.doneUnsafe(opened, Exit.succeed(runtime)))
    ws.on("close", (code: number, reason: Buffer) => {
      Deferred.doneUnsafe(coreClose, Exit.succeed({ code, reason: reason.toString() }))
    })
    ws.on("error", () => {})
    ws.on("unexpected-response", (_request, response) => {
      const chunks: Array<Buffer> = []
      response.on("data", (chunk: Buffer) => chunks.push(chunk))
      response.on("end", () => {
        let body: unknown = undefined
        try {
          body = JSON.parse(Buffer.concat(chunks).toString("utf8"))
        } catch {
          body = Buffer.concat(chunks).toString("utf8")
        }
        Deferred.doneUnsafe(opened, Exit.succeed({ _tag: "UpgradeRefused", status: response.statusCode ?? 0, body }))
      })
    })
    return yield* Deferred.await(opened)
  })

/** Dials and dies unless the upgrade succeeded. */
export const dialOk = (options: DialOptions): Effect.Effect<ScriptedRuntime, never, Scope.Scope> =>
  Effect.flatMap(dial(options), (result) =>
    "_tag" in result ? Effect.die(`upgrade refused with ${result.status}`) : Effect.succeed(result))
