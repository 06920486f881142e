/**
 * Opens one physical connection to Core: bootstrap, then the WebSocket dial (protocol "Ownership and
 * connection", steps 2 and 3). The daemon loop (Daemon.ts) calls `connect` once per attempt inside a fresh
 * connection scope; unit tests replace the service with in-memory connections.
 *
 * Never: retries (the loop owns backoff), sends a frame, or keeps anything from one attempt for the next.
 */
import { Context, type Duration, Effect, Layer, type Redacted, type Scope } from "effect"
import { randomBytes } from "node:crypto"
import { FetchHttpClient, HttpClient } from "effect/http"
import type { DeviceId } from "../../proto/Ids.js"
import { bootstrap } from "./Bootstrap.js"
import { type ConnectFailed, ConnectRejected } from "./ConnectError.js"
import type { Transport } from "./Transport.js"
import { dial, type TransportOptions } from "./WebSocketTransport.js"

/** One open connection. */
export interface Connected {
  readonly transport: Transport["Service"]
  /** The heartbeat cadence bootstrap returned (15 s fallback). */
  readonly heartbeatInterval: Duration.Duration
  /** Core's wire version from bootstrap, when plausible (operator messages only). */
  readonly coreVersion: string | undefined
  /** This attempt's id, sent to Core as `X-Agentwire-Connection-Id`; both sides log it as `connection_id`. */
  readonly connectionId?: string
}

/** A fresh id for one connection attempt: sent to Core in a header and logged by both sides as `connection_id`. */
export const newConnectionId = (): string => `c-${randomBytes(6).toString("hex")}`

export class Connector extends Context.Service<Connector, {
  /**
   * Bootstraps and dials. Success proves Core accepted this credential, device and wire version for a new
   * connection just now; the transport then belongs to the current scope (closing the scope closes it with
   * 1000). Fails with `ConnectRejected` (401/403/426: permanent) or `ConnectFailed` (transient). A 426 during
   * the upgrade carries Core's version from bootstrap in `core_version` when known.
   */
  readonly connect: Effect.Effect<Connected, ConnectRejected | ConnectFailed, Scope.Scope>
}>()("agentwire/runtime/Connector") {
  /** The production connector over HTTP and `ws`; needs an `HttpClient`. */
  static readonly layerNoDeps = (options: ConnectorOptions) =>
    Layer.effect(
      Connector,
      Effect.gen(function* () {
        const client = yield* HttpClient.HttpClient
        return Connector.of({
          connect: Effect.suspend(() => {
            const connectionId = newConnectionId()
            const id = { connectionId }
            return Effect.gen(function* () {
            const boot = yield* bootstrap({
              apiBase: options.apiBase,
              deviceId: options.deviceId,
              credential: options.credential,
              userAgent: options.userAgent,
              ...id
            }).pipe(Effect.provideService(HttpClient.HttpClient, client))
            if (boot.deviceId !== options.deviceId) {
              yield* Effect.logWarning("bootstrap returned a different device id; dialling with the configured one")
            }
            const transport = yield* dial({
              wsUrl: boot.wsUrl,
              deviceId: options.deviceId,
              credential: options.credential,
              userAgent: options.userAgent,
              ...id,
              ...(options.transport === undefined ? {} : { transport: options.transport })
            }).pipe(
              Effect.mapError((e) =>
                e._tag === "ConnectRejected" && e.status === 426 && boot.protocolVersion !== undefined
                  ? new ConnectRejected({ ...e, core_version: boot.protocolVersion })
                  : e
              )
            )
            return { transport, heartbeatInterval: boot.heartbeatInterval, coreVersion: boot.protocolVersion, connectionId }
            }).pipe(Effect.annotateLogs({ connection_id: connectionId }))
          })
        })
      })
    )

  /** The production connector, with Node's built-in `fetch` as the HTTP client (nothing extra in the bundle). */
  static readonly layer = (options: ConnectorOptions) =>
    Connector.layerNoDeps(options).pipe(Layer.provide(FetchHttpClient.layer))
}

export interface ConnectorOptions {
  /** The machine API base (`…/api/v1`). */
  readonly apiBase: string
  readonly deviceId: DeviceId
  readonly credential: Redacted.Redacted<string>
  readonly userAgent: string
  readonly transport?: TransportOptions
}
