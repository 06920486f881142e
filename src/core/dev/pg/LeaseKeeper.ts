/**
 * Keeps this node's owner leases in step with the gateway's connections (docs/multi-node.md): when a device
 * connects here the lease is claimed (taking it over from any other node: the newest connection wins), it is
 * renewed every third of its TTL while the connection lives, and released when the connection ends. When a
 * renewal finds a newer owner (`LeaseLost`: the device connected to another node), this node closes the
 * connection with `replaced`, which evicts its Run and interaction routes exactly as a newer local
 * connection would (the existing single-node rule, now across nodes).
 *
 * One keeper fiber per device in a `FiberMap` (a newer local connection replaces the keeper of the older
 * one); a store failure while renewing is logged and retried at the next tick — the lease may then expire and
 * be taken over, which the next renewal reports as `LeaseLost`.
 */
import { Context, Effect, FiberMap, Layer, Option, Schedule, Stream } from "effect"
import type { Ids } from "../../../proto/index.js"
import { closeCodeFor } from "../../transport/DeviceTransport.js"
import { Gateway, type GatewayEvent } from "../../Gateway.js"
import { type Lease, OwnerLeases } from "./OwnerLeases.js"

export class LeaseKeeper extends Context.Service<LeaseKeeper, {
  /** The lease this node holds for the device's current connection here, if any. */
  readonly held: (deviceId: string) => Effect.Effect<Option.Option<Lease>>
}>()("agentwire/core/dev/pg/LeaseKeeper") {
  static readonly layer: Layer.Layer<LeaseKeeper, never, Gateway | OwnerLeases> = Layer.effect(
    LeaseKeeper,
    Effect.gen(function* () {
      const gateway = yield* Gateway
      const leases = yield* OwnerLeases
      const held = new Map<string, { readonly connectionNumber: number; lease: Lease }>()
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

      const keep = (deviceId: string, connectionNumber: number) =>
        Effect.scoped(Effect.gen(function* () {
          const lease = yield* Effect.acquireRelease(
            leases.claim(deviceId).pipe(Effect.retry(Schedule.spaced(renewEvery))),
            (lease) =>
              Effect.gen(function* () {
                const entry = held.get(deviceId)
                if (entry?.connectionNumber === connectionNumber) held.delete(deviceId)
                yield* leases.release(entry?.lease ?? lease).pipe(Effect.ignore)
              })
          )
          held.set(deviceId, { connectionNumber, lease })
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

      return LeaseKeeper.of({
        held: (deviceId) => Effect.sync(() => Option.map(Option.fromNullishOr(held.get(deviceId)), (e) => e.lease))
      })
    })
  )
}
