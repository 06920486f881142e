/**
 * Keeps this node's owner leases in step with the gateway's connections (docs/multi-node.md): when a device
 * connects here the lease is claimed before the upgrade is answered (`OwnerClaim`, taking it over from any
 * other node: the newest connection wins), so a Turn dispatched on the new connection is fenced from its first
 * write (`current`); the claim is taken over by the connection's keeper once the gateway publishes it, then
 * renewed every third of its TTL while the connection lives, and released when the connection ends. When a
 * renewal finds a newer owner (`LeaseLost`: the device connected to another node), this node closes the
 * connection with `replaced`, which evicts its Run and interaction routes exactly as a newer local
 * connection would (the existing single-node rule, now across nodes).
 *
 * One keeper fiber per device in a `FiberMap` (a newer local connection replaces the keeper of the older
 * one); a store failure while renewing is logged and retried at the next tick — the lease may then expire and
 * be taken over, which the next renewal reports as `LeaseLost`.
 */
import { Clock, Context, Effect, FiberMap, Layer, Option, Schedule, Stream } from "effect"
import type { Ids } from "../../../proto/index.js"
import { closeCodeFor } from "../../transport/DeviceTransport.js"
import { Gateway, type GatewayEvent } from "../../Gateway.js"
import { OwnerClaim, OwnerClaimFailed } from "../../OwnerClaim.js"
import { type Lease, OwnerLeases } from "./OwnerLeases.js"

export class LeaseKeeper extends Context.Service<LeaseKeeper, {
  /** The lease this node holds for the device's current connection here, if any. */
  readonly held: (deviceId: string) => Effect.Effect<Option.Option<Lease>>
  /**
   * The newest lease this node claimed for the device: the one claimed at the upgrade of a connection the
   * keeper has not taken over yet, else the held one. What a Turn's attempt on the device's current
   * connection here is fenced on.
   */
  readonly current: (deviceId: string) => Effect.Effect<Option.Option<Lease>>
}>()("agentwire/core/dev/pg/LeaseKeeper") {
  /** The keeper, and the gateway's upgrade hook (`OwnerClaim`) it answers. */
  static readonly layer: Layer.Layer<LeaseKeeper | OwnerClaim, never, Gateway | OwnerLeases> = Layer.effectContext(
    Effect.gen(function* () {
      const gateway = yield* Gateway
      const leases = yield* OwnerLeases
      const held = new Map<string, { readonly connectionNumber: number; lease: Lease }>()
      /** Leases claimed at an upgrade, not yet taken over by the connection's keeper. */
      const upgraded = new Map<string, Lease>()
      const keepers = yield* FiberMap.make<string>()
      /** The connection each device's keeper runs for (set before its claim completes). */
      const keeping = new Map<string, number>()
      const renewEvery = Math.max(1, Math.floor(leases.node.ttlMs / 3))

      /** Closes the device's connection here if it is still `connectionNumber` (a newer owner exists). */
      const evict = (deviceId: string, connectionNumber: number) =>
        Effect.gen(function* () {
          const session = yield* gateway.session(deviceId as Ids.DeviceId)
          if (Option.isSome(session) && session.value.connectionNumber === connectionNumber) {
            yield* session.value.close(closeCodeFor("replaced"), "replaced")
          }
        })

      /** The lease claimed at this connection's upgrade, or a fresh claim (a connection accepted without one). */
      const takeOver = (deviceId: string) =>
        Effect.suspend(() => {
          const claimed = upgraded.get(deviceId)
          if (claimed === undefined) return leases.claim(deviceId).pipe(Effect.retry(Schedule.spaced(renewEvery)))
          upgraded.delete(deviceId)
          return Effect.succeed(claimed)
        })

      const keep = (deviceId: string, connectionNumber: number) =>
        Effect.scoped(Effect.gen(function* () {
          const lease = yield* Effect.acquireRelease(
            takeOver(deviceId).pipe(Effect.tap((lease) => Effect.sync(() => held.set(deviceId, { connectionNumber, lease })))),
            (lease) =>
              Effect.gen(function* () {
                const entry = held.get(deviceId)
                if (entry?.connectionNumber === connectionNumber) held.delete(deviceId)
                yield* leases.release(entry?.lease ?? lease).pipe(Effect.ignore)
              })
          )
          yield* Effect.logInfo("owner lease claimed").pipe(
            Effect.annotateLogs({ device_id: deviceId, connection: connectionNumber, generation: lease.generation })
          )
          const renew = Effect.gen(function* () {
            const entry = held.get(deviceId)
            if (entry === undefined || entry.connectionNumber !== connectionNumber) return
            entry.lease = yield* leases.renew(entry.lease)
          })
          return yield* renew.pipe(
            Effect.catchTag("StoreFailed", () => Effect.logWarning("owner lease not renewed").pipe(Effect.annotateLogs({ device_id: deviceId }))),
            Effect.delay(renewEvery),
            Effect.forever,
            Effect.catchTag("LeaseLost", (lost) =>
              Effect.logInfo("owner lease taken by a newer owner; closing the connection here").pipe(
                Effect.annotateLogs({ device_id: deviceId, connection: connectionNumber, generation: lost.generation }),
                Effect.andThen(evict(deviceId, connectionNumber))
              ))
          )
        }))

      const onEvent = (event: GatewayEvent) => {
        switch (event._tag) {
          case "Connected":
            keeping.set(event.deviceId, event.connectionNumber)
            return FiberMap.run(keepers, event.deviceId, keep(event.deviceId, event.connectionNumber)).pipe(Effect.asVoid)
          case "Disconnected":
            if (keeping.get(event.deviceId) !== event.connectionNumber) return Effect.void
            keeping.delete(event.deviceId)
            return FiberMap.remove(keepers, event.deviceId)
          default:
            return Effect.void
        }
      }
      const events = yield* gateway.events
      yield* events.pipe(Stream.runForEach(onEvent), Effect.forkScoped)

      const beforeUpgrade = (deviceId: string) =>
        leases.claim(deviceId).pipe(
          Effect.tap((lease) =>
            Effect.sync(() => {
              const previous = upgraded.get(deviceId)
              if (previous === undefined || previous.generation < lease.generation) upgraded.set(deviceId, lease)
            })
          ),
          Effect.asVoid,
          Effect.mapError(() => new OwnerClaimFailed({ deviceId }))
        )

      const ownerOf = (deviceId: string) =>
        Effect.gen(function* () {
          const lease = yield* leases.get(deviceId)
          if (Option.isNone(lease)) return null
          const now = yield* Clock.currentTimeMillis
          return {
            node_id: lease.value.nodeId,
            node_url: lease.value.nodeUrl,
            generation: lease.value.generation,
            expires_at_ms: lease.value.expiresAtMs,
            live: lease.value.expiresAtMs > now
          }
        }).pipe(Effect.orElseSucceed(() => null))

      const heldLease = (deviceId: string) => Option.map(Option.fromNullishOr(held.get(deviceId)), (e) => e.lease)
      return Context.make(LeaseKeeper, LeaseKeeper.of({
        held: (deviceId) => Effect.sync(() => heldLease(deviceId)),
        current: (deviceId) =>
          Effect.sync(() => {
            const claimed = upgraded.get(deviceId)
            return claimed === undefined ? heldLease(deviceId) : Option.some(claimed)
          })
      })).pipe(Context.add(OwnerClaim, OwnerClaim.of({ beforeUpgrade, ownerOf })))
    })
  )
}
