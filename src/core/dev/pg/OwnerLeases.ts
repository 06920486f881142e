/**
 * Owner leases (docs/multi-node.md; protocol "Ownership and connection": a newer connection replaces the
 * previous one and Core fences the owner lease). One row per device in `device_leases`: the Core node that
 * holds its connection (node id and URL), a generation and an expiry.
 *
 * Rules:
 * - `claim` always succeeds for the newest connection (the single-node rule, now across nodes): it takes the
 *   row over from any holder, live or expired, and adds one to the generation. Generations only grow.
 * - `renew` extends the expiry only while the generation is still ours; otherwise `LeaseLost` (a newer owner
 *   exists), and the caller must evict its routes for the device.
 * - `fenced` runs a write in one transaction whose first statement locks the lease row on our generation
 *   (PostgreSQL: `SELECT … WHERE generation = ours FOR SHARE`; SQLite: `UPDATE … WHERE generation = ours`): a newer claim either committed before (the write is refused with
 *   `LeaseLost`, nothing written) or waits until the write commits. On SQLite `BEGIN IMMEDIATE` serializes
 *   the same way.
 * - `release` expires the lease at once if it is still ours (a clean disconnect); the row and its
 *   generation stay, so a later claim still moves the generation forward.
 *
 * Times come from `Clock`. This module never reads the database URL and logs nothing.
 */
import { Clock, Context, Effect, Layer, Option, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { StoreFailed, storeFailed, toInt } from "../StoreErrors.js"

/** This Core node: a stable id (by default its public URL) and the URL other nodes and operators reach it at. */
export interface NodeIdentity {
  readonly nodeId: string
  readonly nodeUrl: string
  /** How long a lease lives without renewal (default 15 s); renewed every third of it. */
  readonly ttlMs?: number
}

export const DefaultLeaseTtlMs = 15_000

export interface Lease {
  readonly deviceId: string
  readonly nodeId: string
  readonly nodeUrl: string
  readonly generation: number
  readonly expiresAtMs: number
}

/** The lease is no longer ours: a newer owner claimed the device (or the row is gone). Nothing was written. */
export class LeaseLost extends Schema.TaggedError<LeaseLost>()("LeaseLost", {
  deviceId: Schema.String,
  generation: Schema.Number
}) {
  override get message() {
    return `the owner lease of device ${this.deviceId.slice(0, 128)} (generation ${this.generation}) was taken by a newer owner`
  }
}

/**
 * The owner lease a Turn's journal appends are fenced on. Journal appends are group-committed by a writer
 * fiber (`GroupCommit.ts`), so they cannot run inside `fenced`: the runner sets this reference around them
 * (`TurnFence.ts`), `TurnStore.appendEvents` carries it into the batch, and the batch's transaction probes
 * every carried lease (`FOR SHARE`) before inserting; a stale one fails the batch with `LeaseLost`, and the
 * group commit then commits each write alone, so only the fenced-out Turn's append is refused.
 */
export const JournalFence = Context.Reference<Lease | undefined>("agentwire/core/dev/pg/JournalFence", {
  defaultValue: () => undefined
})

export class OwnerLeases extends Context.Service<OwnerLeases, {
  readonly node: { readonly nodeId: string; readonly nodeUrl: string; readonly ttlMs: number }
  /** Takes the device's lease for this node (always succeeds over any holder); succeeds with the new lease. */
  readonly claim: (deviceId: string) => Effect.Effect<Lease, StoreFailed>
  /** Extends our lease by the TTL; `LeaseLost` when a newer owner exists. */
  readonly renew: (lease: Lease) => Effect.Effect<Lease, LeaseLost | StoreFailed>
  /** Expires our lease now (if it is still ours). */
  readonly release: (lease: Lease) => Effect.Effect<void, StoreFailed>
  /** The device's lease row, live or expired. */
  readonly get: (deviceId: string) => Effect.Effect<Option.Option<Lease>, StoreFailed>
  /**
   * Runs `write` in one transaction fenced on `lease`'s generation: success proves no newer owner had
   * claimed the device when it committed; `LeaseLost` proves nothing of `write` was committed.
   */
  readonly fenced: <A, E, R>(lease: Lease, write: Effect.Effect<A, E, R>) => Effect.Effect<A, E | LeaseLost | StoreFailed, R>
  /**
   * The lease sweeper's fence over a dead owner: moves the generation of the device's lease forward when it
   * is still `generation` and expired, so the old owner's writes and renewals are refused from now on
   * (a write in flight commits first). Succeeds with whether this call moved it (one caller wins).
   */
  readonly takeExpired: (deviceId: string, generation: number) => Effect.Effect<boolean, StoreFailed>
}>()("agentwire/core/dev/pg/OwnerLeases") {
  static readonly layer = (node: NodeIdentity): Layer.Layer<OwnerLeases, never, SqlClient.SqlClient> =>
    Layer.effect(OwnerLeases, make(node))
}

const readLease = (row: Record<string, unknown>): Lease => ({
  deviceId: String(row.device_id),
  nodeId: String(row.node_id),
  nodeUrl: String(row.node_url),
  generation: toInt(row.generation),
  expiresAtMs: toInt(row.expires_at_ms)
})

const make = (node: NodeIdentity) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const ttlMs = node.ttlMs ?? DefaultLeaseTtlMs

    const claim = Effect.fn("OwnerLeases.claim")(function* (deviceId: string) {
      const now = yield* Clock.currentTimeMillis
      const rows = yield* sql`INSERT INTO device_leases
          (device_id, node_id, node_url, generation, expires_at_ms, claimed_at_ms)
        VALUES (${deviceId}, ${node.nodeId}, ${node.nodeUrl}, 1, ${now + ttlMs}, ${now})
        ON CONFLICT (device_id) DO UPDATE SET
          node_id = excluded.node_id,
          node_url = excluded.node_url,
          generation = device_leases.generation + 1,
          expires_at_ms = excluded.expires_at_ms,
          claimed_at_ms = excluded.claimed_at_ms
        RETURNING device_id, node_id, node_url, generation, expires_at_ms`.pipe(storeFailed("claim_lease"))
      return readLease(rows[0]!)
    })

    const renew = Effect.fn("OwnerLeases.renew")(function* (lease: Lease) {
      const now = yield* Clock.currentTimeMillis
      const rows = yield* sql`UPDATE device_leases SET expires_at_ms = ${now + ttlMs}
        WHERE device_id = ${lease.deviceId} AND generation = ${lease.generation}
        RETURNING device_id, node_id, node_url, generation, expires_at_ms`.pipe(storeFailed("renew_lease"))
      if (rows.length === 0) return yield* new LeaseLost({ deviceId: lease.deviceId, generation: lease.generation })
      return readLease(rows[0]!)
    })

    const release = Effect.fn("OwnerLeases.release")(function* (lease: Lease) {
      const now = yield* Clock.currentTimeMillis
      yield* sql`UPDATE device_leases SET expires_at_ms = ${now}
        WHERE device_id = ${lease.deviceId} AND generation = ${lease.generation} AND expires_at_ms > ${now}`.pipe(
        storeFailed("release_lease")
      )
    })

    const get = (deviceId: string) =>
      sql`SELECT device_id, node_id, node_url, generation, expires_at_ms FROM device_leases WHERE device_id = ${deviceId}`.pipe(
        Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), readLease)),
        storeFailed("get_lease")
      )

    /**
     * The fence: on PostgreSQL a `SELECT … FOR SHARE` of the lease row on our generation (no new row version per
     * write; a concurrent claim waits for our commit, and a claim that committed first makes the re-checked row
     * miss our generation); on SQLite an `UPDATE`, which takes the database's write lock at once.
     */
    const holds = (lease: Lease) =>
      sql.onDialectOrElse({
        pg: () =>
          sql`SELECT generation FROM device_leases
            WHERE device_id = ${lease.deviceId} AND generation = ${lease.generation} FOR SHARE`,
        orElse: () =>
          sql`UPDATE device_leases SET generation = generation
            WHERE device_id = ${lease.deviceId} AND generation = ${lease.generation}
            RETURNING generation`
      }).pipe(storeFailed("fence_lease"))

    const fenced = <A, E, R>(lease: Lease, write: Effect.Effect<A, E, R>) =>
      sql.withTransaction(Effect.gen(function* () {
        const held = yield* holds(lease)
        if (held.length === 0) return yield* new LeaseLost({ deviceId: lease.deviceId, generation: lease.generation })
        return yield* write
      })).pipe(
        Effect.catchTag("SqlError", () => Effect.fail(new StoreFailed({ operation: "fenced_write" })))
      )

    const takeExpired = Effect.fn("OwnerLeases.takeExpired")(function* (deviceId: string, generation: number) {
      const now = yield* Clock.currentTimeMillis
      const rows = yield* sql`UPDATE device_leases SET generation = generation + 1
        WHERE device_id = ${deviceId} AND generation = ${generation} AND expires_at_ms <= ${now}
        RETURNING generation`.pipe(storeFailed("take_expired_lease"))
      return rows.length > 0
    })

    return OwnerLeases.of({
      node: { nodeId: node.nodeId, nodeUrl: node.nodeUrl, ttlMs },
      claim,
      renew,
      release,
      get,
      fenced,
      takeExpired
    })
  })
