/**
 * The journal of each Turn: every fact the delivery layer reports, persisted in order as it arrives
 * (`turn_events`, seq 1, 2, …; Run frames as the encoded wire frame, other facts encoded) and published to
 * live subscribers, plus Core-side notices (an input's receipt fact, an interaction's answer outcome) and,
 * last, the Turn's outcome. The same entries are what a restart replays through `Outcome.project`.
 *
 * `follow` replays what is stored and then continues live without a gap or a duplicate: it subscribes to the
 * live hub first, then reads the store, then passes on only live entries with a larger seq. It ends after the
 * outcome. A Turn already finished (also one finished by a previous process) replays and ends at once.
 *
 * Ownership: the Turn's runner is the only writer of its journal (one `open` per Turn). A subscriber that
 * goes away settles nothing; the journal never waits for a subscriber: each publish hands the item to every live
 * reader's bounded buffer in the writer's own step (LiveBuffer.ts; no hub and no fiber per reader between them,
 * issue 18), and a Turn's readers are dropped once the outcome is published.
 */
import { Context, Effect, Layer, Option, Result, Schema, Scope, Stream } from "effect"
import { fn } from "../TracedFn.js"
import { Messages } from "../../proto/index.js"
import { FreshMap } from "../../proto/FreshMap.js"
import { isRunEvent, type RunEvent } from "../RunEvent.js"
import * as Outcome from "../Outcome.js"
import type { LeaseLost } from "./pg/OwnerLeases.js"
import type { StoreFailed } from "./StoreErrors.js"
import * as LiveBuffer from "./LiveBuffer.js"
import * as WriterLock from "./WriterLock.js"
import type { FollowerLagging } from "./LiveBuffer.js"
import { JournalFeed } from "./pg/JournalFeed.js"
import type { JournalItem } from "./JournalItem.js"
import { factJson } from "./FactJson.js"
import {
  type AppendOptions,
  type AttemptBegin,
  isTerminalStatus,
  type JournalKind,
  type SettleJournal,
  type StoredEvent,
  type TurnRecord,
  TurnStore
} from "./TurnStore.js"

export type { JournalItem } from "./JournalItem.js"

export interface JournalWriter {
  readonly turnId: string
  /** The delivery attempt this writer records under. */
  readonly attempt: number
  /**
   * Persists one fact at the next seq (a `RunEvent` fact as the encoded frame), then publishes it. Success
   * proves it is stored.
   */
  readonly record: (fact: Outcome.TurnFact, options?: AppendOptions) => Effect.Effect<number, StoreFailed | LeaseLost>
  /**
   * Persists several facts at the next seqs in one store statement (group commit), then publishes them in
   * order. Success proves all are stored; a failure stores none. `options` apply to the one transaction.
   */
  readonly recordAll: (facts: ReadonlyArray<Outcome.TurnFact>, options?: AppendOptions) => Effect.Effect<void, StoreFailed | LeaseLost>
  /** Publishes a notice to live subscribers (not stored). */
  readonly notify: (event: "input" | "interaction" | "initialization", data: unknown) => Effect.Effect<void>
  /**
   * Publishes the stored outcome and retires the live hub: `written` is the record as `settle` wrote it; without
   * it the record is read back from the store.
   */
  readonly finish: (written?: TurnRecord) => Effect.Effect<void, StoreFailed>
  /**
   * `recordAll` and `finish` with one commit (issue 18, "settlefacts"): `facts` get the next seqs and `write` stores
   * their rows in the transaction that writes the Turn's outcome (`TurnStore.settle`). Success proves both are stored
   * (a failure stores neither) and answers what `write` answered with `publish`, run after it: the facts, then the
   * outcome (`finish`), handed to the readers in one step.
   */
  readonly settle: (
    facts: ReadonlyArray<Outcome.TurnFact>,
    options: AppendOptions | undefined,
    write: (journal: SettleJournal) => Effect.Effect<Option.Option<TurnRecord>, StoreFailed>
  ) => Effect.Effect<{ readonly written: Option.Option<TurnRecord>; readonly publish: Effect.Effect<void, StoreFailed> }, StoreFailed>
  /**
   * A writer opened with `begin`: its attempt is begun with its first stored append; this begins it now when no
   * append was stored yet (before the attempt settles or is queued again). Otherwise nothing.
   */
  readonly begun: Effect.Effect<void, StoreFailed>
}

export class TurnJournal extends Context.Service<TurnJournal, {
  /**
   * The writer of one Turn's journal for one delivery attempt, continuing after the last stored seq:
   * `knownLastSeq` when the caller knows it, else read from the store (never an earlier writer's in-memory seq).
   * `begin`: the attempt is not begun in the store yet; the writer's first append begins it in its own
   * transaction (`AppendOptions.begin`), or `begun` does.
   */
  readonly open: (
    turnId: string,
    attempt: number,
    knownLastSeq?: number,
    begin?: AttemptBegin
  ) => Effect.Effect<JournalWriter, StoreFailed>
  /**
   * Stored entries after `afterSeq`, then live items, ending with the outcome. The stream fails with
   * `StoreFailed` when the store cannot be read; it ends without an outcome only for an unknown Turn. `known`:
   * the Turn's record as the caller just read it (not read again), or `"running"` when the caller knows the Turn
   * exists and its outcome is not recorded yet (its runner here is not settling: no read at all).
   */
  readonly follow: (
    turnId: string,
    afterSeq: number,
    onLagging?: Effect.Effect<void>,
    known?: TurnRecord | "running"
  ) => Stream.Stream<JournalItem, StoreFailed | FollowerLagging>
}>()("agentwire/core/dev/TurnJournal") {}

/** Encodes a received Run frame for the journal (the wire form of the decoded message). */
export const encodeFrame = (event: RunEvent): string => {
  const encoded = Messages.encodeMessage(event)
  return encoded._tag === "Success" ? encoded.success : JSON.stringify({ type: event.type, id: event.id })
}

const decodeFact = Schema.decodeUnknownResult(Outcome.TurnFact)

/** The stored form of a fact: Run events as frames, the rest as encoded facts. */
export const toEntry = (fact: Outcome.TurnFact): { readonly kind: JournalKind; readonly type: string; readonly bodyJson: string } =>
  fact._tag === "RunEvent"
    ? { kind: "frame", type: fact.event.type, bodyJson: encodeFrame(fact.event) }
    : { kind: "fact", type: fact._tag, bodyJson: factJson(fact) }

/**
 * A fact's stored row that is also its published entry (`record`, issue 18: one object per fact for both). The
 * journal row's extra `attempt` is not part of `JournalItem` (readers take the fields they know).
 */
const entryOf = (fact: Outcome.TurnFact, seq: number, attempt: number) =>
  fact._tag === "RunEvent"
    ? { _tag: "entry" as const, seq, attempt, kind: "frame" as const, type: fact.event.type, bodyJson: encodeFrame(fact.event) }
    : { _tag: "entry" as const, seq, attempt, kind: "fact" as const, type: fact._tag, bodyJson: factJson(fact) }

/** Reads a stored entry back as a fact; `None` for an entry that no longer decodes (kept, but not replayed). */
export const fromEntry = (entry: StoredEvent): Option.Option<Outcome.TurnFact> => {
  if (entry.kind === "frame") {
    const decoded = Messages.decodeRuntimeToCore(entry.bodyJson)
    return Result.isSuccess(decoded) && isRunEvent(decoded.success)
      ? Option.some({ _tag: "RunEvent", event: decoded.success })
      : Option.none()
  }
  let parsed: unknown
  try {
    parsed = JSON.parse(entry.bodyJson)
  } catch {
    return Option.none()
  }
  return Result.getSuccess(decodeFact(parsed))
}

/** How far a live reader may fall behind (in journal body characters) before it is dropped. */
export const maxLiveBytes = 8 * 1024 * 1024

/** A live item's weight in a reader's buffer: its body, plus a fixed share for the item itself. */
const weighItem = (item: JournalItem): number => (item._tag === "entry" ? item.bodyJson.length : 0) + 64

const isOutcome = (item: JournalItem): boolean => item._tag === "outcome"

const itemOf = (e: StoredEvent): JournalItem => ({ _tag: "entry", seq: e.seq, kind: e.kind, type: e.type, bodyJson: e.bodyJson })

/**
 * A Turn's live readers in this process, with what its writer last stored (`lastSeq`: undefined until a writer of
 * this process opened the journal) and whether the outcome is being published. Set before the matching
 * publish, so a follower that subscribed and then sees `lastSeq <= afterSeq` and not `finished` will receive
 * every later item on its subscription (no store read needed).
 */
interface Live {
  readonly readers: Set<LiveBuffer.Sink<JournalItem>>
  lastSeq: number | undefined
  finished: boolean
  /**
   * Every entry this process's writer stored, from seq 1, while the journal's first writer (opened knowing nothing
   * was stored) has stored at most `maxEarly`; else undefined. A follower that subscribes after the first appends
   * (the Turn's runner starts before its POST is answered) takes them from here, not from the store.
   */
  early: Array<JournalItem> | undefined
}

/** How many entries of a fresh journal are kept for late followers (a one-delta Turn stores about 11). */
const maxEarly = 32

/** Keeps `row` (just stored, after those kept before it) for late followers while the journal's first entries are kept. */
const keepEarly = (live: Live, row: JournalItem): void => {
  if (live.early === undefined) return
  if (live.early.length >= maxEarly) live.early = undefined
  else live.early.push(row)
}

/** Hands `item` to every reader of the Turn now (each buffers it or drops itself; none waits). */
const publish = (live: Live, item: JournalItem): void => {
  for (const reader of live.readers) reader.offer(item)
}

const make = Effect.gen(function* () {
  const store = yield* TurnStore
  const lives = new FreshMap<string, Live>()
  // Several Core nodes (PostgreSQL): every stored append and the outcome are announced to followers on other
  // nodes (pg/JournalFeed.ts); absent on a single node.
  const feed = yield* Effect.serviceOption(JournalFeed)
  const announce = (turnId: string) => (Option.isSome(feed) ? feed.value.appended(turnId) : Effect.void)

  const liveFor = (turnId: string): Live => {
    const existing = lives.get(turnId)
    if (existing !== undefined) return existing
    const live: Live = { readers: new Set(), lastSeq: undefined, finished: false, early: undefined }
    lives.set(turnId, live)
    return live
  }

  // Generator functions made once for the service, not per Turn (docs/performance.md, "generators").
  const finishLive = Effect.fnUntraced(function* (turnId: string, live: Live, written?: TurnRecord) {
    const turn = written !== undefined ? Option.some(written) : yield* store.get(turnId)
    live.finished = true
    yield* announce(turnId)
    if (Option.isSome(turn)) publish(live, { _tag: "outcome", turn: turn.value })
    live.readers.clear()
    if (lives.get(turnId) === live) lives.delete(turnId)
  })

  const open = fn("TurnJournal.open")(function* (turnId: string, attempt: number, knownLastSeq?: number, begin?: AttemptBegin) {
    const live = liveFor(turnId)
    // Each writer continues from the store (or what its caller knows), never from an earlier writer's
    // in-memory seq: that one may be stale (an attempt on another node wrote since), and two writers sharing it
    // would both store their facts instead of the second one's append failing on the (turn_id, seq) key.
    live.lastSeq = knownLastSeq ?? (yield* store.lastSeq(turnId))
    live.early = knownLastSeq === 0 ? [] : undefined
    const lock = WriterLock.make()
    const current = () => live.lastSeq ?? 0
    /** The attempt's begin, until an append carried it (or `begun` wrote it). */
    let pendingBegin = begin
    const withBegin = (options: AppendOptions | undefined): AppendOptions | undefined =>
      pendingBegin === undefined ? options : { ...options, begin: pendingBegin }
    const finish = (written?: TurnRecord) => finishLive(turnId, live, written)
    /**
     * The rows of `facts` at the next seqs (each is both its stored row and its published entry, issue 18), and
     * what follows their commit: the attempt is begun and they end the journal.
     */
    const stage = (facts: ReadonlyArray<Outcome.TurnFact>) => {
      const first = current() + 1
      const rows = facts.map((fact, i) => entryOf(fact, first + i, attempt))
      const stored = () => {
        pendingBegin = undefined
        live.lastSeq = first + rows.length - 1
        for (const row of rows) keepEarly(live, row)
      }
      return { rows, stored }
    }
    const publishRows = (rows: ReadonlyArray<JournalItem>) => {
      for (const row of rows) publish(live, row)
    }
    const writer: JournalWriter = {
      turnId,
      attempt,
      // Per fact (issue 18): one store append and, once it committed, the seq, the announcement and the publish
      // in one step (every reader takes the item at once).
      record: (fact, options) =>
        lock.run(() => {
          const next = current() + 1
          // One object is both the stored row and the published entry (issue 18: no intermediate per fact).
          const row = entryOf(fact, next, attempt)
          const stored = Effect.map(store.appendEvents(turnId, [row], withBegin(options)), () => {
            pendingBegin = undefined
            live.lastSeq = next
            keepEarly(live, row)
            publish(live, row)
            return next
          })
          return Option.isSome(feed) ? Effect.tap(stored, () => feed.value.appended(turnId)) : stored
        }),
      // Per group of facts (issue 18, "tmain"): as `record`, one object per fact is both its stored row and its
      // published entry, and no generator; the announcement (several nodes) still comes before the publish.
      recordAll: (facts, options) =>
        lock.run(() => {
          const { rows, stored } = stage(facts)
          const appended = store.appendEvents(turnId, rows, withBegin(options))
          // On one node (the Turn's hot path) one step after the commit; with several, the announcement between.
          return Option.isNone(feed)
            ? Effect.map(appended, () => {
              stored()
              publishRows(rows)
            })
            : appended.pipe(Effect.map(stored), Effect.andThen(feed.value.appended(turnId)), Effect.map(() => publishRows(rows)))
        }),
      notify: (event, data) =>
        Effect.suspend(() => {
          publish(live, { _tag: "notice", event, data })
          return Option.isSome(feed) ? feed.value.noticed(turnId, event, data) : Effect.void
        }),
      finish,
      settle: (facts, options, write) =>
        lock.run(() => {
          const { rows, stored } = stage(facts)
          const journal = { events: rows, markDispatched: options?.markDispatched, begin: withBegin(options)?.begin }
          return Effect.map(write(journal), (written) => {
            stored()
            // Run by the caller once it may publish (after a transaction of its own around `write`, several nodes).
            const published = Effect.suspend(() => {
              publishRows(rows)
              return finish(Option.getOrUndefined(written))
            })
            return { written, publish: published }
          })
        }),
      begun: lock.run(() => {
        const pending = pendingBegin
        if (pending === undefined) return Effect.void
        return Effect.map(store.beginAttempt(turnId, pending.deviceId, pending.owner), () => {
          pendingBegin = undefined
        })
      })
    }
    return writer
  })

  /** What is stored after `afterSeq`, then the outcome (for a Turn already terminal). */
  const replayFinished = (turnId: string, afterSeq: number, turn: TurnRecord) =>
    Effect.map(store.events(turnId, afterSeq), (stored): Stream.Stream<JournalItem> =>
      Stream.fromIterable([...stored.map(itemOf), { _tag: "outcome" as const, turn }]))

  /** The reader's stream of `follow`, made once it subscribed (or the stored journal of a finished Turn). */
  const followFrom = Effect.fnUntraced(function* (
    turnId: string,
    afterSeq: number,
    onLagging: Effect.Effect<void> | undefined,
    known: TurnRecord | "running" | undefined
  ) {
    if (known !== "running") {
      const first = known !== undefined ? Option.some(known) : yield* store.get(turnId)
      if (Option.isNone(first)) return Stream.empty
      if (isTerminalStatus(first.value.status)) return yield* replayFinished(turnId, afterSeq, first.value)
    }
    // Subscribe before reading the store, so nothing published in between is missed. The Turn's live state
    // is created here when its writer has not opened it yet. Every publish from now on goes straight into this
    // reader's bounded buffer: a reader that stops reading is dropped (`FollowerLagging`), never a cost to the
    // Turn (LiveBuffer.ts); its stream ends after the outcome.
    const live = liveFor(turnId)
    const { sink, stream: buffered } = yield* LiveBuffer.makeSink<JournalItem>(weighItem, maxLiveBytes, isOutcome, onLagging)
    live.readers.add(sink)
    // On the stream's scope itself: no copy of the reader's context to run it (issue 18, "tmain").
    yield* Scope.addFinalizer(yield* Effect.scope, Effect.sync(() => live.readers.delete(sink)))
    // A writer of this process holds the journal, has stored nothing after `afterSeq` and has not published
    // the outcome: everything still to come arrives on the subscription; no store read (issue 18).
    if (!live.finished && live.lastSeq !== undefined && live.lastSeq <= afterSeq) {
      return buffered.pipe(Stream.filter((item) => item._tag !== "entry" || item.seq > afterSeq))
    }
    // Such a writer has stored only entries it still keeps (`early`): those after `afterSeq`, then the subscription.
    if (!live.finished && live.lastSeq !== undefined && live.early !== undefined) {
      const last = live.lastSeq
      const kept = live.early.filter((item) => item._tag === "entry" && item.seq > afterSeq)
      return Stream.concat(Stream.fromIterable(kept), buffered.pipe(Stream.filter((item) => item._tag !== "entry" || item.seq > last)))
    }
    // A writer of this process holds the journal and has not published the outcome: the outcome comes on the
    // subscription (after every stored entry), so the Turn row need not be read again (issue 18).
    if (live.finished || live.lastSeq === undefined) {
      const turn = yield* store.get(turnId)
      if (Option.isSome(turn) && isTerminalStatus(turn.value.status)) {
        return yield* replayFinished(turnId, afterSeq, turn.value)
      }
    }
    const stored = yield* store.events(turnId, afterSeq)
    const last = stored.length > 0 ? stored[stored.length - 1]!.seq : afterSeq
    const rest = buffered.pipe(Stream.filter((item) => item._tag !== "entry" || item.seq > last))
    return Stream.concat(Stream.fromIterable(stored.map(itemOf)), rest)
  })

  const follow = (
    turnId: string,
    afterSeq: number,
    onLagging?: Effect.Effect<void>,
    known?: TurnRecord | "running"
  ): Stream.Stream<JournalItem, StoreFailed | FollowerLagging> => Stream.unwrap(followFrom(turnId, afterSeq, onLagging, known))

  return TurnJournal.of({ open, follow })
})


export const layer: Layer.Layer<TurnJournal, never, TurnStore> = Layer.effect(TurnJournal, make)
