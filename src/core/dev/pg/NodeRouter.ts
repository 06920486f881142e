/**
 * Routing of operations between Core nodes on one PostgreSQL database (docs/multi-node.md "Routing"): durable
 * request rows (`node_requests`) plus `LISTEN/NOTIFY`, no cluster protocol of our own.
 *
 * Requester (`request`): inserts a row `pending` for the target node, `NOTIFY`s the target's channel, and waits
 * for the row to be `done` (woken by the target's `NOTIFY` on the requester's channel, and re-reading the row
 * every `pollInterval` in case a notification was missed), bounded by `timeout`. At the bound it withdraws the
 * row if it is still `pending` (`WHERE state = 'pending'`: the target can no longer claim it, so nothing ran:
 * `Withdrawn`); a row already claimed is never withdrawn nor replayed: its outcome is `Unknown`, which each
 * caller maps to its operation's unknown variant. A store failure after the insert is never a failure of the
 * request: the wait goes on until the bound.
 *
 * Target (`serve`): claims its `pending`, unexpired rows of the kinds it serves (`UPDATE … SET state =
 * 'claimed' WHERE state = 'pending' … FOR UPDATE SKIP LOCKED RETURNING`, so one claim wins), runs the handler,
 * writes the result (`done`) and `NOTIFY`s the requester. Claims run on every notification on its channel, at
 * start, after every (re)connection of the listening connection, and every `pollInterval`: a notification
 * lost across a reconnect delays a request by at most one poll.
 *
 * Channels are per node and per schema (`aw_` + a SHA-256 prefix of the schema and node id), so nodes of
 * different stores on one server never wake each other. Notifications carry request ids only; bodies are the
 * operations' inputs (never a credential or token) and stay in the row. Rows older than an hour are deleted.
 *
 * Signals (`signal` / `subscribe`): a `NOTIFY` on the target's channel carrying a key (`w:<key>`), waking the
 * subscribers of that key there (NodeStreams' flow control); a subscription keeps one pending wake, and every
 * reconnection of the listener wakes all, so callers re-read their rows on each wake and after a poll interval.
 */
import { PgClient } from "@effect/sql-pg"
import { Clock, Context, Deferred, Duration, Effect, FiberSet, Layer, Option, Queue, Schedule, type Scope, Semaphore } from "effect"
import { SqlClient } from "effect/sql"
import { createHash } from "node:crypto"
import { DevIds } from "../DevIds.js"
import { type StoreFailed, storeFailed, toInt } from "../StoreErrors.js"

/** What a routed request came to. */
export type RouteOutcome =
  /** The target ran the operation; its result (as the handler returned it, through JSON). */
  | { readonly _tag: "Answered"; readonly result: unknown }
  /** No node claimed it within the bound and it was withdrawn: nothing ran. */
  | { readonly _tag: "Withdrawn" }
  /** The target claimed it but no result arrived within the bound: it may have run. */
  | { readonly _tag: "Unknown" }

/** Runs a claimed request on this node; its value is stored as the result (JSON). Never fails. */
export type RouteHandler = (turnId: string | undefined, body: unknown) => Effect.Effect<unknown>

export interface NodeRouterOptions {
  /** This node's id (the owner lease's node id). */
  readonly nodeId: string
  /** How long a requester waits for a result. Default 60 s. */
  readonly timeout?: Duration.Input
  /** How often pending rows and awaited results are read again without a notification. Default 1 s. */
  readonly pollInterval?: Duration.Input
}

export class NodeRouter extends Context.Service<NodeRouter, {
  readonly nodeId: string
  /** Routes one operation to `targetNode` and waits (bounded) for what it came to. */
  readonly request: (
    targetNode: string,
    kind: string,
    turnId: string | undefined,
    body: unknown
  ) => Effect.Effect<RouteOutcome, StoreFailed>
  /** Serves requests of `kind` on this node from now on (claimed at once if some are pending). */
  readonly serve: (kind: string, handler: RouteHandler) => Effect.Effect<void>
  /** Wakes the subscribers of `key` on `targetNode` (a `NOTIFY` carrying the key; lost notifications are not retried). */
  readonly signal: (targetNode: string, key: string) => Effect.Effect<void>
  /**
   * Subscribes to the signals of `key` on this node for the scope: `wait(ms)` returns at the next signal (one
   * that arrived since the last wait counts) or after `ms`. Every reconnection of the listener wakes it too.
   */
  readonly subscribe: (key: string) => Effect.Effect<{ readonly wait: (ms: number) => Effect.Effect<void> }, never, Scope.Scope>
}>()("agentwire/core/dev/pg/NodeRouter") {
  static readonly layer = (
    options: NodeRouterOptions
  ): Layer.Layer<NodeRouter, StoreFailed, PgClient.PgClient | SqlClient.SqlClient | DevIds> => Layer.effect(NodeRouter, make(options))
}

/** A PostgreSQL channel name (≤ 63 bytes) for `what` in `schema`. */
export const channelName = (schema: string, what: string): string =>
  `aw_${createHash("sha256").update(`${schema}\u0000${what}`).digest("hex").slice(0, 40)}`

const PurgeAfterMs = 60 * 60 * 1000
const ClaimBatch = 64

interface ClaimedRow {
  readonly requestId: string
  readonly requester: string
  readonly kind: string
  readonly turnId: string | undefined
  readonly bodyJson: string
  readonly createdAtMs: number
}

const parseJson = (text: unknown): unknown => {
  if (typeof text !== "string") return null
  try {
    return JSON.parse(text)
  } catch {
    return null
  }
}

const make = (options: NodeRouterOptions) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const pg = yield* PgClient.PgClient
    const ids = yield* DevIds
    const nodeId = options.nodeId
    const timeoutMs = Duration.toMillis(Duration.fromInputUnsafe(options.timeout ?? Duration.seconds(60)))
    const pollMs = Math.max(1, Duration.toMillis(Duration.fromInputUnsafe(options.pollInterval ?? Duration.seconds(1))))
    const schemaRows = yield* sql`SELECT current_schema() AS schema`.pipe(storeFailed("route_schema"))
    const schema = String(schemaRows[0]?.schema ?? "public")
    const channelOf = (node: string) => channelName(schema, `node\u0000${node}`)
    const ownChannel = channelOf(nodeId)

    const handlers = new Map<string, RouteHandler>()
    /** Requests of this node awaiting their result: woken by the target's notification. */
    const waiters = new Map<string, Deferred.Deferred<void>>()
    const claimWake = yield* Queue.sliding<void>(1)
    const claimLock = yield* Semaphore.make(1)
    const running = yield* FiberSet.make()

    /** Signal subscriptions of this node by key (`subscribe`): each a sliding queue of one, so no wake is lost. */
    const signals = new Map<string, Set<Queue.Queue<void>>>()
    const wakeWaiters = Effect.andThen(
      Effect.forEach([...waiters.values()], (d) => Deferred.succeed(d, undefined), { discard: true }),
      Effect.forEach([...signals.values()].flatMap((set) => [...set]), (q) => Queue.offer(q, undefined), { discard: true })
    )

    // ------------------------------------------------------------------------------------ requester

    const readRow = (requestId: string) =>
      sql`SELECT state, result_json FROM node_requests WHERE request_id = ${requestId}`.pipe(
        Effect.map((rows) => Option.fromNullishOr(rows[0])),
        storeFailed("route_read")
      )

    const answered = (row: Option.Option<Record<string, unknown>>): Option.Option<RouteOutcome> =>
      Option.isSome(row) && row.value.state === "done"
        ? Option.some({ _tag: "Answered", result: parseJson(row.value.result_json) })
        : Option.none()

    const awaitResult = (requestId: string, deadline: number) =>
      Effect.gen(function* () {
        while (true) {
          const row = yield* Effect.option(readRow(requestId))
          const done = answered(Option.flatten(row))
          if (Option.isSome(done)) return done.value
          const now = yield* Clock.currentTimeMillis
          if (now >= deadline) break
          const wake = yield* Deferred.make<void>()
          waiters.set(requestId, wake)
          yield* Effect.raceFirst(Deferred.await(wake), Effect.sleep(Math.min(pollMs, deadline - now)))
        }
        const now = yield* Clock.currentTimeMillis
        const withdrawn = yield* Effect.option(
          sql`UPDATE node_requests SET state = 'withdrawn', done_at_ms = ${now}
            WHERE request_id = ${requestId} AND state = 'pending' RETURNING request_id`.pipe(storeFailed("route_withdraw"))
        )
        if (Option.isSome(withdrawn) && withdrawn.value.length > 0) return { _tag: "Withdrawn" } as const
        const last = answered(Option.flatten(yield* Effect.option(readRow(requestId))))
        return Option.getOrElse(last, (): RouteOutcome => ({ _tag: "Unknown" }))
      }).pipe(Effect.ensuring(Effect.sync(() => waiters.delete(requestId))))

    const request = Effect.fn("NodeRouter.request")(function* (
      targetNode: string,
      kind: string,
      turnId: string | undefined,
      body: unknown
    ) {
      const requestId = yield* ids.next("request")
      const now = yield* Clock.currentTimeMillis
      const deadline = now + timeoutMs
      yield* sql`INSERT INTO node_requests
          (request_id, target_node, requester_node, kind, turn_id, body_json, state, created_at_ms, expires_at_ms)
        VALUES (${requestId}, ${targetNode}, ${nodeId}, ${kind}, ${turnId ?? null}, ${JSON.stringify(body ?? null)},
          'pending', ${now}, ${deadline})`.pipe(storeFailed("route_insert"))
      // From here on the request may run: it ends answered, withdrawn (nothing ran) or unknown — never failed.
      yield* pg.notify(channelOf(targetNode), "q").pipe(Effect.ignore)
      return yield* awaitResult(requestId, deadline)
    })

    // ------------------------------------------------------------------------------------ target

    const execute = (row: ClaimedRow) =>
      Effect.gen(function* () {
        const handler = handlers.get(row.kind)
        const result = handler === undefined
          ? null
          : yield* handler(row.turnId, parseJson(row.bodyJson)).pipe(
            Effect.catchCause((cause) =>
              Effect.as(
                Effect.logError("routed request failed on this node").pipe(
                  Effect.annotateLogs({ request_id: row.requestId, kind: row.kind, cause: String(cause).slice(0, 300) })
                ),
                null
              ))
          )
        const now = yield* Clock.currentTimeMillis
        yield* sql`UPDATE node_requests SET state = 'done', result_json = ${JSON.stringify(result ?? null)}, done_at_ms = ${now}
          WHERE request_id = ${row.requestId} AND state = 'claimed'`.pipe(
          storeFailed("route_result"),
          Effect.retry({ schedule: Schedule.spaced(pollMs), times: 10 }),
          Effect.tapError(() => Effect.logWarning("routed request result not stored").pipe(Effect.annotateLogs({ request_id: row.requestId }))),
          Effect.ignore
        )
        yield* pg.notify(channelOf(row.requester), `r:${row.requestId}`).pipe(Effect.ignore)
      })

    const claim = claimLock.withPermit(Effect.gen(function* () {
      const kinds = [...handlers.keys()]
      if (kinds.length === 0) return
      const now = yield* Clock.currentTimeMillis
      const rows = yield* sql`UPDATE node_requests SET state = 'claimed', claimed_at_ms = ${now}
        WHERE state = 'pending' AND request_id IN (
          SELECT request_id FROM node_requests
          WHERE target_node = ${nodeId} AND state = 'pending' AND expires_at_ms > ${now} AND ${sql.in("kind", kinds)}
          ORDER BY created_at_ms LIMIT ${ClaimBatch} FOR UPDATE SKIP LOCKED)
        RETURNING request_id, requester_node, kind, turn_id, body_json, created_at_ms`.pipe(storeFailed("route_claim"))
      const claimed: Array<ClaimedRow> = rows.map((r) => ({
        requestId: String(r.request_id),
        requester: String(r.requester_node),
        kind: String(r.kind),
        turnId: r.turn_id === null || r.turn_id === undefined ? undefined : String(r.turn_id),
        bodyJson: String(r.body_json),
        createdAtMs: toInt(r.created_at_ms)
      }))
      claimed.sort((x, y) => x.createdAtMs - y.createdAtMs)
      for (const row of claimed) yield* FiberSet.run(running, execute(row))
    }))

    let lastPurge = 0
    const purge = Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      if (now - lastPurge < 60_000) return
      lastPurge = now
      yield* sql`DELETE FROM node_requests WHERE target_node = ${nodeId} AND created_at_ms < ${now - PurgeAfterMs}`.pipe(
        storeFailed("route_purge")
      )
    })

    // Claims on a notification (coalesced), and every poll interval in case one was missed.
    yield* Effect.gen(function* () {
      yield* Effect.raceFirst(Queue.take(claimWake), Effect.sleep(pollMs))
      yield* claim.pipe(Effect.andThen(purge), Effect.catchTag("StoreFailed", () => Effect.void))
    }).pipe(Effect.forever, Effect.forkScoped)

    // The listening connection: every (re)connection wakes the claims and the waiters, since notifications
    // sent while it was down are lost.
    const onNotification = (payload: string) =>
      payload.startsWith("r:")
        ? Effect.suspend(() => {
          const waiter = waiters.get(payload.slice(2))
          return waiter === undefined ? Effect.void : Deferred.succeed(waiter, undefined)
        })
        : payload.startsWith("w:")
        ? Effect.suspend(() => Effect.forEach(signals.get(payload.slice(2)) ?? [], (q) => Queue.offer(q, undefined), { discard: true }))
        : Queue.offer(claimWake, undefined)
    yield* Effect.scoped(Effect.gen(function* () {
      const notifications = yield* pg.listen(ownChannel)
      yield* Queue.offer(claimWake, undefined)
      yield* wakeWaiters
      while (true) {
        const n = yield* Queue.take(notifications)
        yield* onNotification(n.payload)
      }
    })).pipe(
      Effect.tapCause(() => Effect.logWarning("node request listener lost its connection; listening again")),
      Effect.retry(Schedule.spaced(pollMs)),
      Effect.forkScoped
    )

    return NodeRouter.of({
      nodeId,
      request,
      serve: (kind, handler) =>
        Effect.suspend(() => {
          handlers.set(kind, handler)
          return Queue.offer(claimWake, undefined)
        }).pipe(Effect.asVoid),
      signal: (targetNode, key) => pg.notify(channelOf(targetNode), `w:${key}`).pipe(Effect.ignore),
      subscribe: (key) =>
        Effect.acquireRelease(
          Effect.flatMap(Queue.sliding<void>(1), (queue) =>
            Effect.sync(() => {
              const set = signals.get(key) ?? new Set()
              set.add(queue)
              signals.set(key, set)
              return queue
            })),
          (queue) =>
            Effect.sync(() => {
              const set = signals.get(key)
              set?.delete(queue)
              if (set !== undefined && set.size === 0) signals.delete(key)
            })
        ).pipe(Effect.map((queue) => ({
          wait: (ms: number) => Effect.asVoid(Effect.raceFirst(Queue.take(queue), Effect.sleep(Math.max(1, ms))))
        })))
    })
  })
