/**
 * The owner-lease hook of the WebSocket upgrade (docs/multi-node.md "Lease claimed at the upgrade"). When
 * several Core nodes share one database, the node a daemon connects to takes the device's owner lease
 * before it answers `101 Switching Protocols`, so every Turn dispatched on the new connection is fenced on
 * that lease from its first write. A single-node Core provides no hook (the gateway's in-process fence is the
 * whole rule); when it is present and the claim fails, the upgrade is refused (500 `internal`) and nothing
 * is accepted. The same hook answers the device-status route's `owner`.
 */
import { Context, type Effect, Schema } from "effect"

/** The owner lease could not be claimed (the store failed); the upgrade is refused. */
export class OwnerClaimFailed extends Schema.TaggedError<OwnerClaimFailed>()("OwnerClaimFailed", {
  deviceId: Schema.String
}) {
  override get message() {
    return `the owner lease of device ${this.deviceId.slice(0, 128)} could not be claimed`
  }
}

/** The device's owner lease as the device-status route and the operator device view report it. */
export interface OwnerView {
  readonly node_id: string
  readonly node_url: string
  readonly generation: number
  readonly expires_at_ms: number
  /** The lease is unexpired. */
  readonly live: boolean
}

export class OwnerClaim extends Context.Service<OwnerClaim, {
  /** Claims the device's owner lease for this node (the newest connection always wins it). */
  readonly beforeUpgrade: (deviceId: string) => Effect.Effect<void, OwnerClaimFailed>
  /** The device's owner lease, live or expired; none before its first connection or when the store failed. */
  readonly ownerOf: (deviceId: string) => Effect.Effect<OwnerView | null>
}>()("agentwire/core/OwnerClaim") {}
