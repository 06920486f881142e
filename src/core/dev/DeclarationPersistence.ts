/**
 * What the dev Core stores of device heartbeats (docs/store.md "Declarations"): declaration changes durably,
 * liveness in memory.
 *
 * A heartbeat whose declaration (daemon version, kinds, availability, versions, capabilities) and connection
 * are what was last stored changes only liveness facts (its `ts`, when Core received it, active requests):
 * those stay in memory (the live connection answers for an online device) and are written once, when the
 * connection ends, so a stored view of an offline device shows when it was last heard. A changed declaration,
 * or the first heartbeat of a connection, is written whole. A connection that ended on an invalid heartbeat
 * clears the stored declaration.
 *
 * Writes are batched: changes queue per device (a later one replaces an earlier one of the same device) and
 * one writer fiber writes what is queued, oldest first, up to `maxBatch` changes per transaction
 * (`DeviceStore.persistDeclarations`). A failed batch is logged and retried after `retryDelay`, merged under
 * anything newer. Nothing waits on these writes:
 * the stored declaration is a listing cache, admission reads the live connection's declaration. When the
 * scope closes, what is queued and every unwritten liveness fact are written once more (best effort).
 */
import { Duration, Effect, Queue, type Scope, Stream } from "effect"
import { createHash } from "node:crypto"
import type { Declaration } from "../DeviceSession.js"
import type { GatewayEvent } from "../Gateway.js"
import type { DeclarationChange, DeviceStore } from "./DeviceStore.js"

export interface DeclarationPersistenceOptions {
  /** How long a failed batch waits before it is written again (default 1 s). */
  readonly retryDelay?: Duration.Input
  /**
   * The most changes one transaction writes (default 256). The store's connection is shared with every
   * operator read, which waits behind a running transaction: a bound keeps that wait one small batch long
   * when thousands of devices connect at once (their first heartbeats are all changes).
   */
  readonly maxBatch?: number
}

/** The declaration as a digest of what is stored durably (liveness facts left out). */
export const declarationDigest = (declaration: Declaration): string => {
  const hash = createHash("sha1")
  hash.update(declaration.daemonVersion ?? "\u0000")
  for (const k of declaration.kinds.values()) {
    hash.update(JSON.stringify([k.kind, k.available, k.version ?? null, k.capabilities]))
  }
  return hash.digest("base64")
}

/**
 * Per device: what the store holds, as far as this process wrote it, and the liveness facts not yet written. The
 * facts are copied into the entry's own fields on each heartbeat (issue 18): keeping the event's `Declaration` until
 * the next heartbeat, 15 s later, made every repeated heartbeat promote an object into V8's old generation.
 */
class Known {
  /** Whether the fields below hold the connection's latest heartbeat, not yet stored. */
  unstored = false
  activeRequests = 0
  ts = 0
  receivedAtMs = 0
  constructor(
    /** Digest of the stored declaration (`declarationDigest`). */
    readonly digest: string,
    /** The connection whose declaration is stored. */
    readonly connectionNumber: number
  ) {}
}

/** The pure bookkeeping: what each event changes, and what must be written. Exported for tests. */
export const makeTracker = () => {
  const known = new Map<string, Known>()
  /** How many `known` entries hold an unstored heartbeat. */
  let unstored = 0
  /** Per device: the change to write next. */
  const pending = new Map<string, DeclarationChange>()

  const liveness = (deviceId: string, entry: Known): DeclarationChange => ({
    _tag: "Liveness",
    deviceId,
    activeRequests: entry.activeRequests,
    heartbeatTs: entry.ts,
    receivedAtMs: entry.receivedAtMs
  })

  const keepLatest = (entry: Known, declaration: Declaration): false => {
    if (!entry.unstored) unstored++
    entry.unstored = true
    entry.activeRequests = declaration.activeRequests
    entry.ts = declaration.ts
    entry.receivedAtMs = declaration.receivedAtMs
    return false
  }

  /** Applies one gateway event; true when a change was queued. */
  const apply = (event: GatewayEvent): boolean => {
    switch (event._tag) {
      case "Declared": {
        const entry = known.get(event.deviceId)
        // What is stored for this connection is its previous declaration's digest (every change of the
        // connection set it): an unchanged declaration needs no digest (issue 18, heartbeat CPU).
        const same = entry !== undefined && entry.connectionNumber === event.connectionNumber
        if (same && !event.changed) return keepLatest(entry, event.declaration)
        const digest = declarationDigest(event.declaration)
        if (same && entry.digest === digest) return keepLatest(entry, event.declaration)
        if (entry?.unstored === true) unstored--
        known.set(event.deviceId, new Known(digest, event.connectionNumber))
        pending.set(event.deviceId, {
          _tag: "Record",
          deviceId: event.deviceId,
          connectionNumber: event.connectionNumber,
          declaration: event.declaration
        })
        return true
      }
      case "Disconnected": {
        const entry = known.get(event.deviceId)
        if (event.reason === "invalid_heartbeat") {
          if (entry?.unstored === true) unstored--
          known.delete(event.deviceId)
          pending.set(event.deviceId, { _tag: "Clear", deviceId: event.deviceId })
          return true
        }
        // Only the ended connection's own liveness (a newer connection of the device keeps its own).
        if (entry === undefined || !entry.unstored || entry.connectionNumber !== event.connectionNumber) return false
        entry.unstored = false
        unstored--
        const queued = pending.get(event.deviceId)
        pending.set(
          event.deviceId,
          queued?._tag === "Record"
            ? {
              ...queued,
              declaration: {
                ...queued.declaration,
                activeRequests: entry.activeRequests,
                ts: entry.ts,
                receivedAtMs: entry.receivedAtMs
              }
            }
            : liveness(event.deviceId, entry)
        )
        return true
      }
      default:
        return false
    }
  }

  /** Takes the next batch: up to `limit` queued changes, oldest first (all of them by default). */
  const take = (limit = Number.POSITIVE_INFINITY): Array<DeclarationChange> => {
    if (pending.size <= limit) {
      const batch = [...pending.values()]
      pending.clear()
      return batch
    }
    const batch: Array<DeclarationChange> = []
    for (const [deviceId, change] of pending) {
      if (batch.length >= limit) break
      batch.push(change)
      pending.delete(deviceId)
    }
    return batch
  }

  /** Puts a failed batch back, under anything queued since (newer changes win). */
  const putBack = (batch: ReadonlyArray<DeclarationChange>): void => {
    for (const change of batch) if (!pending.has(change.deviceId)) pending.set(change.deviceId, change)
  }

  /** Everything to write at shutdown: the queue, then every unstored liveness fact. */
  const drain = (): Array<DeclarationChange> => {
    const batch = take()
    const queued = new Set(batch.map((c) => c.deviceId))
    for (const [deviceId, entry] of known) {
      if (!entry.unstored) continue
      if (!queued.has(deviceId)) batch.push(liveness(deviceId, entry))
      entry.unstored = false
    }
    unstored = 0
    return batch
  }

  return { apply, take, putBack, drain, size: () => ({ stored: known.size, unstored, pending: pending.size }) }
}

/**
 * Registers a synchronous observer of gateway events for the caller's scope (`Gateway.listen`).
 */
export type Listen = (listener: (event: GatewayEvent) => void) => Effect.Effect<void, never, Scope.Scope>

/**
 * Follows `events` and persists declarations as described above, in fibers of the caller's scope. `events` is
 * either a stream whose subscription is already in place (`Gateway.events`), or `Gateway.listen`: each event is
 * then applied to the bookkeeping as it is published, so a heartbeat that changes nothing wakes no fiber
 * (issue 18: a woken subscriber fiber per heartbeat was the largest cost the dev Core added to a heartbeat).
 * Either way nothing published after the call is missed.
 */
export const start = (
  events: Stream.Stream<GatewayEvent> | Listen,
  store: DeviceStore["Service"],
  options: DeclarationPersistenceOptions = {}
): Effect.Effect<void, never, Scope.Scope> =>
  Effect.gen(function* () {
    const retryDelay = options.retryDelay ?? Duration.seconds(1)
    const maxBatch = options.maxBatch ?? 256
    const tracker = makeTracker()
    const wake = yield* Queue.sliding<void>(1)

    // A taken batch is written uninterruptibly: stopping Core while it is in flight (the store answers
    // asynchronously, from its worker thread or a server) lets it commit instead of rolling it back and losing it.
    const writeBatch = Effect.uninterruptibleMask((restore) =>
      Effect.suspend(() => {
        const batch = tracker.take(maxBatch)
        return store.persistDeclarations(batch).pipe(
          // More queued than one batch holds: write the rest next, after whatever waits for the connection.
          Effect.andThen(Effect.suspend(() => (tracker.size().pending > 0 ? Queue.offer(wake, undefined) : Effect.void))),
          Effect.catch((error) =>
            Effect.sync(() => tracker.putBack(batch)).pipe(
              Effect.andThen(Effect.logWarning("declarations not persisted; retrying").pipe(
                Effect.annotateLogs({ operation: error.operation, changes: batch.length })
              )),
              Effect.andThen(restore(Effect.sleep(retryDelay))),
              Effect.andThen(Queue.offer(wake, undefined))
            ))
        )
      })
    )

    yield* Effect.addFinalizer(() =>
      Effect.suspend(() => store.persistDeclarations(tracker.drain())).pipe(
        Effect.catch(() => Effect.logWarning("declarations not persisted at shutdown"))
      )
    )
    yield* Queue.take(wake).pipe(Effect.andThen(writeBatch), Effect.forever, Effect.forkScoped)
    if (typeof events === "function") {
      yield* events((event) => {
        if (tracker.apply(event)) Queue.offerUnsafe(wake, undefined)
      })
    } else {
      yield* events.pipe(
        Stream.runForEach((event) => (tracker.apply(event) ? Queue.offer(wake, undefined) : Effect.void)),
        Effect.forkScoped
      )
    }
  })
