/**
 * Journal followers fed from the database (docs/multi-node.md "SSE on every node"): with several Core nodes,
 * the node running a Turn `NOTIFY`s a per-schema journal channel with the Turn id after each stored append
 * (coalesced: one notification per Turn per flush, never waiting for the database), and a follower on any
 * other node reads the new entries from the store.
 *
 * `follow` replays what is stored after `afterSeq`, then, on each notification for the Turn (or every
 * `pollInterval`, in case one was lost across a reconnect of the listening connection), reads what was stored
 * after the last seq it passed on. Every entry is passed on once, in seq order; the stream ends with the
 * outcome, read after the Turn's terminal status, which is written only after every fact before it, so no
 * entry can follow it. The in-process notices (an input's receipt, an interaction's answer outcome) are not
 * stored and do not reach followers on other nodes; the stored facts carry the same information.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Duration, Effect, Layer, Option, PubSub, Queue, Schedule, Stream } from "effect"
import { SqlClient } from "effect/sql"
import { type StoreFailed, storeFailed } from "../StoreErrors.js"
import type { JournalItem } from "../JournalItem.js"
import { isTerminalStatus, TurnStore } from "../TurnStore.js"
import { channelName } from "./NodeRouter.js"

export class JournalFeed extends Context.Service<JournalFeed, {
  /** Tells every node the Turn's journal grew (or ended). Coalesced; never waits for the database. */
  readonly appended: (turnId: string) => Effect.Effect<void>
  /** Stored entries after `afterSeq`, then each entry as it is stored by any node, ending with the outcome. */
  readonly follow: (turnId: string, afterSeq: number) => Stream.Stream<JournalItem, StoreFailed>
}>()("agentwire/core/dev/pg/JournalFeed") {
  static readonly layer = (
    options: { readonly pollInterval?: Duration.Input } = {}
  ): Layer.Layer<JournalFeed, StoreFailed, PgClient.PgClient | SqlClient.SqlClient | TurnStore> =>
    Layer.effect(JournalFeed, make(options))
}

/** Wakes every follower (after a reconnect: notifications sent meanwhile are lost). */
const Everyone = "*"

const make = (options: { readonly pollInterval?: Duration.Input }) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const pg = yield* PgClient.PgClient
    const store = yield* TurnStore
    const pollMs = Math.max(1, Duration.toMillis(Duration.fromInputUnsafe(options.pollInterval ?? Duration.seconds(1))))
    const schemaRows = yield* sql`SELECT current_schema() AS schema`.pipe(storeFailed("journal_feed_schema"))
    const channel = channelName(String(schemaRows[0]?.schema ?? "public"), "journal")

    // Outgoing: Turn ids with new entries, flushed by one fiber (a burst of appends is one notification).
    const pending = new Set<string>()
    const flush = yield* Queue.sliding<void>(1)
    yield* Effect.gen(function* () {
      yield* Queue.take(flush)
      const turnIds = [...pending]
      pending.clear()
      yield* Effect.forEach(turnIds, (turnId) => Effect.ignore(pg.notify(channel, turnId)), { discard: true })
    }).pipe(Effect.forever, Effect.forkScoped)

    // Incoming: every notification, to every follower of this node.
    const hub = yield* PubSub.unbounded<string>()
    yield* Effect.scoped(Effect.gen(function* () {
      const notifications = yield* pg.listen(channel)
      yield* PubSub.publish(hub, Everyone)
      while (true) {
        const n = yield* Queue.take(notifications)
        yield* PubSub.publish(hub, n.payload)
      }
    })).pipe(
      Effect.tapCause(() => Effect.logWarning("journal feed listener lost its connection; listening again")),
      Effect.retry(Schedule.spaced(pollMs)),
      Effect.forkScoped
    )

    const follow = (turnId: string, afterSeq: number): Stream.Stream<JournalItem, StoreFailed> =>
      Stream.unwrap(Effect.gen(function* () {
        // Subscribed before the first read: a notification in between is waiting for the first wait.
        const subscription = yield* PubSub.subscribe(hub)
        const nextFor = Effect.gen(function* () {
          while (true) {
            const id = yield* PubSub.take(subscription)
            if (id === turnId || id === Everyone) return
          }
        })
        return Stream.paginate(afterSeq, (last: number) =>
          Effect.gen(function* () {
            const turn = yield* store.get(turnId)
            if (Option.isNone(turn)) return [[], Option.none()] as const
            // Terminal read first: every entry is stored before the outcome, so this read is the last one.
            const terminal = isTerminalStatus(turn.value.status)
            const stored = yield* store.events(turnId, last)
            const items: Array<JournalItem> = stored.map((e) => ({ _tag: "entry", seq: e.seq, kind: e.kind, type: e.type, bodyJson: e.bodyJson }))
            if (terminal) return [[...items, { _tag: "outcome", turn: turn.value }], Option.none()] as const
            if (items.length === 0) yield* Effect.raceFirst(nextFor, Effect.sleep(pollMs))
            return [items, Option.some(stored.length > 0 ? stored[stored.length - 1]!.seq : last)] as const
          }))
      }))

    return JournalFeed.of({
      appended: (turnId) =>
        Effect.suspend(() => {
          pending.add(turnId)
          return Queue.offer(flush, undefined)
        }).pipe(Effect.asVoid),
      follow
    })
  })
