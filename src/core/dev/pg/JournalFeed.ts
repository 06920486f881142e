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
 * entry can follow it.
 *
 * The notices (an input's receipt, an interaction's state, initialization progress) are not stored: the running
 * node sends each on the same channel as a small JSON payload (`noticed`), in order with its append
 * notifications, and a follower passes each notice of its Turn on after the entries announced before it, as
 * the running node's own followers see them. A notice over NOTIFY's payload bound is not sent (the stored facts
 * carry the same information) and a follower that was not listening when one was sent never sees it.
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
  /** Tells every node's followers of the Turn about a notice, in order with `appended`; never waits. */
  readonly noticed: (turnId: string, event: NoticeEvent, data: unknown) => Effect.Effect<void>
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

type NoticeEvent = Extract<JournalItem, { _tag: "notice" }>["event"]
const noticeEvents: ReadonlySet<string> = new Set<NoticeEvent>(["input", "interaction", "initialization"])

/** PostgreSQL refuses a NOTIFY payload of 8000 bytes or more. */
const maxNoticeBytes = 7_900

/** A notice's payload (a JSON object; a Turn id never starts with `{`), or undefined when over the bound. */
const encodeNotice = (turnId: string, event: NoticeEvent, data: unknown): string | undefined => {
  const json = JSON.stringify({ t: turnId, e: event, d: data })
  return Buffer.byteLength(json) <= maxNoticeBytes ? json : undefined
}

/** The notice in a payload when it is one for `turnId` (payloads come from this schema's nodes only). */
const noticeFor = (turnId: string, payload: string): JournalItem | undefined => {
  if (!payload.startsWith("{") || payload.length > maxNoticeBytes) return undefined
  try {
    const n = JSON.parse(payload) as { t?: unknown; e?: unknown; d?: unknown }
    if (n.t !== turnId || typeof n.e !== "string" || !noticeEvents.has(n.e)) return undefined
    return { _tag: "notice", event: n.e as NoticeEvent, data: n.d }
  } catch {
    return undefined
  }
}

const make = (options: { readonly pollInterval?: Duration.Input }) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const pg = yield* PgClient.PgClient
    const store = yield* TurnStore
    const pollMs = Math.max(1, Duration.toMillis(Duration.fromInputUnsafe(options.pollInterval ?? Duration.seconds(1))))
    const schemaRows = yield* sql`SELECT current_schema() AS schema`.pipe(storeFailed("journal_feed_schema"))
    const channel = channelName(String(schemaRows[0]?.schema ?? "public"), "journal")

    // Outgoing, in order, sent by one fiber: Turn ids with new entries (a burst of appends for a Turn not yet
    // sent is one notification) and notices.
    let outgoing: Array<string> = []
    const unsent = new Set<string>()
    const flush = yield* Queue.sliding<void>(1)
    yield* Effect.gen(function* () {
      yield* Queue.take(flush)
      const payloads = outgoing
      outgoing = []
      unsent.clear()
      yield* Effect.forEach(payloads, (payload) => Effect.ignore(pg.notify(channel, payload)), { discard: true })
    }).pipe(Effect.forever, Effect.forkScoped)
    const send = (payload: string) => {
      outgoing.push(payload)
      return Queue.offer(flush, undefined)
    }

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
        const relevant = (payload: string) => payload === turnId || payload === Everyone || noticeFor(turnId, payload) !== undefined
        // Waits for news of this Turn: an append notification or one of its notices.
        const next = Effect.gen(function* () {
          while (true) {
            const payload = yield* PubSub.take(subscription)
            if (relevant(payload)) return [payload]
          }
        })
        return Stream.paginate(afterSeq, (last: number) =>
          Effect.gen(function* () {
            let cursor = last
            const items: Array<JournalItem> = []
            const read = Effect.gen(function* () {
              const stored = yield* store.events(turnId, cursor)
              for (const e of stored) items.push({ _tag: "entry", seq: e.seq, kind: e.kind, type: e.type, bodyJson: e.bodyJson })
              if (stored.length > 0) cursor = stored[stored.length - 1]!.seq
            })
            // Payloads in the order the running node sent them: the entries an append notification announced
            // are read before a notice sent after it is passed on.
            const passOn = (payloads: ReadonlyArray<string>) =>
              Effect.gen(function* () {
                let announced = false
                for (const payload of payloads) {
                  if (payload === turnId || payload === Everyone) {
                    announced = true
                    continue
                  }
                  const notice = noticeFor(turnId, payload)
                  if (notice === undefined) continue
                  if (announced) yield* read
                  announced = false
                  items.push(notice)
                }
              })
            yield* passOn(yield* PubSub.takeUpTo(subscription, 4096))
            const turn = yield* store.get(turnId)
            if (Option.isNone(turn)) return [items, Option.none()] as const
            // Terminal read first: every entry is stored before the outcome, so the read after it is the last.
            const terminal = isTerminalStatus(turn.value.status)
            yield* read
            if (terminal) return [[...items, { _tag: "outcome", turn: turn.value }], Option.none()] as const
            if (items.length === 0) yield* passOn(yield* Effect.raceFirst(next, Effect.as(Effect.sleep(pollMs), [])))
            return [items, Option.some(cursor)] as const
          }))
      }))

    return JournalFeed.of({
      appended: (turnId) =>
        Effect.suspend(() => {
          if (unsent.has(turnId)) return Effect.void
          unsent.add(turnId)
          return send(turnId)
        }).pipe(Effect.asVoid),
      noticed: (turnId, event, data) =>
        Effect.suspend(() => {
          const payload = encodeNotice(turnId, event, data)
          return payload === undefined ? Effect.logDebug("notice over the NOTIFY bound: not sent to other nodes") : send(payload)
        }).pipe(Effect.asVoid),
      follow
    })
  })
