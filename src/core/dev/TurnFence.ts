/**
 * Fenced Turn writes (docs/multi-node.md "Fenced Turn writes"). With several Core nodes on one database, a
 * delivery attempt is begun on the owner lease this node holds for the device's connection (`LeaseKeeper.current`,
 * claimed before the upgrade was answered), and every durable write of that attempt — journal facts, the
 * outcome, input receipts, interaction records — runs in `OwnerLeases.fenced` on the lease's generation: when
 * a newer owner exists the write is refused with `LeaseLost` and nothing of it is stored. The runner then stops
 * observing the Turn without recording an outcome (the lease sweeper reconciles it from its journal) and the
 * connection here is closed `replaced`.
 *
 * A single-node Core (SQLite) has no leases: `leaseFor` answers none and writes are not fenced.
 */
import { Duration, Effect, Option } from "effect"
import { LeaseKeeper } from "./pg/LeaseKeeper.js"
import { JournalFence, type Lease, type LeaseLost, OwnerLeases } from "./pg/OwnerLeases.js"
import type { StoreFailed } from "./StoreErrors.js"

/** `DurableWrites.makeDurable`'s result: a store write retried until it succeeds. */
export type Durable<O> = <B, E = never>(owner: O, operation: string, write: Effect.Effect<B, StoreFailed | E>) => Effect.Effect<B, E>

export interface TurnFence {
  /** Whether writes are fenced (several nodes): then an attempt needs a lease. */
  readonly enabled: boolean
  readonly nodeId: string | undefined
  /** The lease to begin an attempt on the device's current connection here with. */
  readonly leaseFor: (deviceId: string) => Effect.Effect<Option.Option<Lease>>
  /**
   * Wraps retried store writes (`DurableWrites`): each `write` runs fenced on `lease` (unfenced without one),
   * every retry too; `LeaseLost` ends the retries and fails the result. A `journal` write (group-committed by
   * another fiber) carries the lease into its batch (`JournalFence`) instead of running in `fenced`.
   */
  readonly guard: <O>(durable: Durable<O>) => <A>(
    owner: O,
    operation: string,
    lease: Lease | undefined,
    write: Effect.Effect<A, StoreFailed | LeaseLost>
  ) => Effect.Effect<A, LeaseLost>
}

export const make: Effect.Effect<TurnFence> = Effect.gen(function* () {
  const keeper = yield* Effect.serviceOption(LeaseKeeper)
  const leases = yield* Effect.serviceOption(OwnerLeases)
  const enabled = Option.isSome(keeper) && Option.isSome(leases)
  const fenced = <A>(operation: string, lease: Lease | undefined, write: Effect.Effect<A, StoreFailed | LeaseLost>) =>
    lease === undefined || Option.isNone(leases)
      ? write
      : operation === "journal"
      ? Effect.provideService(write, JournalFence, lease)
      : leases.value.fenced(lease, write)
  return {
    enabled,
    nodeId: Option.isSome(leases) ? leases.value.node.nodeId : undefined,
    leaseFor: Option.isSome(keeper) ? keeper.value.current : () => Effect.succeed(Option.none()),
    guard: <O>(durable: Durable<O>) =>
    <A>(o: O, operation: string, lease: Lease | undefined, write: Effect.Effect<A, StoreFailed | LeaseLost>) =>
      // `LeaseLost` is not a `StoreFailed`: it ends the retries and fails the write as it is.
      durable<A, LeaseLost>(o, operation, fenced(operation, lease, write))
  }
})

/** How long an attempt waits when this node holds no lease for the device's connection (it is being replaced). */
export const leaselessPause = Duration.millis(100)
