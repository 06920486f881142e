/**
 * The dev Core's view of its devices: stored records (credentials, the latest declaration) joined with the
 * gateway's live state (online, the live connection's declaration). Declaration changes are persisted
 * from the gateway's events in batches, liveness facts only when a connection ends (DeclarationPersistence.ts);
 * a connection that ended on an invalid heartbeat clears the stored declaration. The stored declaration is
 * only a listing cache: admission always reads the live connection's declaration (protocol "Capability
 * declarations").
 */
import { Context, Deferred, Effect, Layer, Option, Stream } from "effect"
import type { Capabilities, Ids } from "../../proto/index.js"
import type { Declaration } from "../DeviceSession.js"
import { Gateway } from "../Gateway.js"
import * as DeclarationPersistence from "./DeclarationPersistence.js"
import { type DeviceKey, DeviceStore, type StoredDevice } from "./DeviceStore.js"
import { OwnerLeases } from "./pg/OwnerLeases.js"
import type { StoreFailed } from "./StoreErrors.js"

export interface KindView {
  readonly kind: string
  readonly available: boolean
  readonly version: string | null
  /** The complete declaration, or null when unknown (an incomplete stored projection). */
  readonly capabilities: Capabilities.AgentKindCapabilities | null
}

export interface DeviceView {
  readonly device_id: string
  readonly workspace_id: string
  readonly runtime_type: string
  readonly created_at_ms: number
  readonly revoked: boolean
  readonly has_credential: boolean
  readonly online: boolean
  readonly connection_number: number | null
  /**
   * The device's owner lease (several nodes on PostgreSQL, docs/multi-node.md): the node holding its
   * connection, the lease generation and expiry (`live` while unexpired). Null without leases or before
   * the first connection.
   */
  readonly owner: {
    readonly node_id: string
    readonly node_url: string
    readonly generation: number
    readonly expires_at_ms: number
    readonly live: boolean
  } | null
  /** Null before the first heartbeat (capabilities unknown). From the live connection when online. */
  readonly declaration: {
    readonly source: "live" | "stored"
    readonly daemon_version: string | null
    readonly active_requests: number
    readonly heartbeat_ts: number
    readonly received_at_ms: number
    readonly kinds: ReadonlyArray<KindView>
  } | null
}

export class DeviceDirectory extends Context.Service<DeviceDirectory, {
  readonly list: Effect.Effect<ReadonlyArray<DeviceView>, StoreFailed>
  /** Up to `limit` devices after `after` in listing order (created, then id); see Listings.ts. */
  readonly listPage: (after: Option.Option<DeviceKey>, limit: number) => Effect.Effect<ReadonlyArray<DeviceView>, StoreFailed>
  readonly get: (deviceId: string) => Effect.Effect<Option.Option<DeviceView>, StoreFailed>
  /**
   * Waits until the device is connected and has sent its first valid heartbeat; succeeds with that
   * declaration. Interrupting the wait settles nothing.
   */
  readonly awaitDeclared: (deviceId: string) => Effect.Effect<Declaration>
}>()("agentwire/core/dev/DeviceDirectory") {}

const liveView = (declaration: Declaration): NonNullable<DeviceView["declaration"]> => ({
  source: "live",
  daemon_version: declaration.daemonVersion ?? null,
  active_requests: declaration.activeRequests,
  heartbeat_ts: declaration.ts,
  received_at_ms: declaration.receivedAtMs,
  kinds: [...declaration.kinds.values()].map((k) => ({
    kind: k.kind,
    available: k.available,
    version: k.version ?? null,
    capabilities: k.capabilities
  }))
})

const make = Effect.gen(function* () {
  const gateway = yield* Gateway
  const store = yield* DeviceStore
  const leases = yield* Effect.serviceOption(OwnerLeases)

  // Declaration changes are persisted durably in batches, liveness stays in memory (DeclarationPersistence.ts);
  // a store failure is logged and retried, never a stop of the gateway.
  yield* DeclarationPersistence.start(gateway.listen, store)

  const view = (device: StoredDevice) =>
    Effect.gen(function* () {
      const session = yield* gateway.session(device.deviceId as Ids.DeviceId)
      const live = Option.isSome(session) ? yield* session.value.declaration : Option.none()
      const now = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
      const lease = Option.isSome(leases) ? yield* leases.value.get(device.deviceId) : Option.none()
      const owner = Option.match(lease, {
        onNone: () => null,
        onSome: (l) => ({
          node_id: l.nodeId,
          node_url: l.nodeUrl,
          generation: l.generation,
          expires_at_ms: l.expiresAtMs,
          live: l.expiresAtMs > now
        })
      })
      const stored = Option.map(device.declaration, (d): NonNullable<DeviceView["declaration"]> => ({
        source: "stored",
        daemon_version: d.daemonVersion ?? null,
        active_requests: d.activeRequests,
        heartbeat_ts: d.heartbeatTs,
        received_at_ms: d.receivedAtMs,
        kinds: d.kinds.map((k) => ({
          kind: k.kind,
          available: k.available,
          version: k.version ?? null,
          capabilities: Option.getOrNull(k.capabilities)
        }))
      }))
      return {
        device_id: device.deviceId,
        workspace_id: device.workspaceId,
        runtime_type: device.runtimeType,
        created_at_ms: device.createdAtMs,
        revoked: device.revokedAtMs !== undefined,
        has_credential: device.hasActiveCredential,
        online: Option.isSome(session),
        connection_number: Option.isSome(session) ? session.value.connectionNumber : null,
        owner,
        declaration: Option.isSome(live) ? liveView(live.value) : Option.getOrNull(stored)
      } satisfies DeviceView
    })

  const awaitDeclared = (deviceId: string) =>
    Effect.scoped(Effect.gen(function* () {
      const done = yield* Deferred.make<Declaration>()
      const stream = yield* gateway.events
      yield* stream.pipe(
        Stream.runForEach((event) =>
          event._tag === "Declared" && event.deviceId === deviceId ? Deferred.succeed(done, event.declaration) : Effect.void
        ),
        Effect.forkScoped
      )
      // Already declared before we subscribed?
      const session = yield* gateway.session(deviceId as Ids.DeviceId)
      if (Option.isSome(session)) {
        const current = yield* session.value.declaration
        if (Option.isSome(current)) yield* Deferred.succeed(done, current.value)
      }
      return yield* Deferred.await(done)
    }))

  return DeviceDirectory.of({
    list: Effect.flatMap(store.list, Effect.forEach(view)),
    listPage: (after, limit) => Effect.flatMap(store.listPage(after, limit), Effect.forEach(view)),
    get: (deviceId) =>
      Effect.flatMap(store.get(deviceId), (device) =>
        Option.isNone(device) ? Effect.succeedNone : Effect.map(view(device.value), Option.some)),
    awaitDeclared
  })
})

export const layer: Layer.Layer<DeviceDirectory, never, Gateway | DeviceStore> = Layer.effect(DeviceDirectory, make)
