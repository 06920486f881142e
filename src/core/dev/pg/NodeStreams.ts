/**
 * A byte stream from one Core node to another through PostgreSQL (docs/multi-node.md "Workspace export from any
 * node"): the rows of `node_streams` / `node_stream_chunks`, woken by `NodeRouter` signals (`NOTIFY`).
 *
 * - **Consumer** (`consume`): creates the stream row (both beats now), starts the producer (through a routed
 *   request), then takes chunk `seq` = 0, 1, … by deleting it (`DELETE … RETURNING`: the deletion is the
 *   acknowledgement) and signals the producer; hands each chunk to its `onChunk` (the HTTP response) before
 *   taking the next one. The row whose `final_json` is set ends the stream with that value. It renews its beat
 *   every `beatInterval` while it lives and deletes the stream row (its chunks cascade) on every exit.
 * - **Producer** (`produce`): writes each chunk only while fewer than `window` of its chunks are unread
 *   (flow control: it reads the lowest unread seq when its own count says the window is full, and waits for
 *   the consumer's signal), then the final row. It renews its beat; when the stream row is gone (the consumer
 *   ended or was purged) or the consumer's beat is stale, its body is interrupted.
 * - **Bounds:** at most `window` data rows plus the final row per stream in PostgreSQL; one chunk in the
 *   consumer's hands and one in the producer's. A producer whose beat is older than `staleAfter` is lost: the
 *   consumer fails with `StreamLost` (never a short stream that looks complete). Streams whose both beats
 *   are older than 10 minutes (both nodes died) are deleted by any node.
 */
import { Cause, Clock, Context, Data, Deferred, Duration, Effect, Fiber, Layer, Queue, Schedule } from "effect"
import { SqlClient } from "effect/sql"
import { DevIds } from "../DevIds.js"
import { type StoreFailed, storeFailed, toInt } from "../StoreErrors.js"
import { NodeRouter } from "./NodeRouter.js"

/** The producer stopped renewing its beat (or the stream row vanished) before the final row: the stream is cut. */
export class StreamLost extends Data.TaggedError("StreamLost")<{ readonly chunks: number }> {}
/** The consumer is gone (its row deleted, or its beat stale): the producer stops. */
export class StreamAbandoned extends Data.TaggedError("StreamAbandoned")<{}> {}

export interface NodeStreamsOptions {
  /** Unread data chunks a producer may have in PostgreSQL. Default 4. */
  readonly window?: number
  /** How often each side renews its beat. Default 2 s. */
  readonly beatInterval?: Duration.Input
  /** A beat older than this means the other side is gone. Default 10 s. */
  readonly staleAfter?: Duration.Input
  /** How long a side waits for a signal before reading the rows again. Default 1 s. */
  readonly pollInterval?: Duration.Input
}

const PurgeAfterMs = 10 * 60 * 1000
/** Chunks of the body joined into one row at most (4 × the Runtime's 64 KiB). */
const BatchChunks = 4
const parseJson = (text: unknown): unknown => {
  try {
    return JSON.parse(String(text))
  } catch {
    return null
  }
}
const ms = (d: Duration.Input) => Duration.toMillis(Duration.fromInputUnsafe(d))

export class NodeStreams extends Context.Service<NodeStreams, {
  /**
   * Opens a stream produced by `producerNode`: `start(streamId)` asks that node to produce it; then every chunk
   * goes to `onChunk` in order; succeeds with the final value. The rows are deleted on every exit.
   */
  readonly consume: <S, E1, E2, R1, R2>(
    producerNode: string,
    start: (streamId: string) => Effect.Effect<S, E1, R1>,
    onChunk: (bytes: Uint8Array) => Effect.Effect<void, E2, R2>
  ) => Effect.Effect<{ readonly started: S; readonly final: unknown }, E1 | E2 | StreamLost | StoreFailed, R1 | R2>
  /**
   * Produces stream `streamId` for `consumerNode`: runs `body` with a `write` that respects the window, then
   * writes its value as the final row. Interrupted when the consumer is gone (then nothing more is written).
   */
  readonly produce: <E, R>(
    streamId: string,
    consumerNode: string,
    body: (write: (bytes: Uint8Array) => Effect.Effect<void, StreamAbandoned>) => Effect.Effect<unknown, E, R>
  ) => Effect.Effect<void, E | StreamAbandoned, R>
}>()("agentwire/core/dev/pg/NodeStreams") {
  static readonly layer = (options: NodeStreamsOptions = {}): Layer.Layer<NodeStreams, never, NodeRouter | SqlClient.SqlClient | DevIds> =>
    Layer.effect(NodeStreams, make(options))
}

const make = (options: NodeStreamsOptions) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const router = yield* NodeRouter
    const ids = yield* DevIds
    const window = Math.max(1, options.window ?? 4)
    const beatMs = ms(options.beatInterval ?? Duration.seconds(2))
    const staleMs = ms(options.staleAfter ?? Duration.seconds(10))
    const pollMs = ms(options.pollInterval ?? Duration.seconds(1))
    const key = (streamId: string) => `s:${streamId}`

    /**
     * Renews `column` every beat interval. The producer's beat also watches the consumer: `onGone` runs when the
     * stream row is gone or the consumer's beat is stale. The consumer checks the producer itself (below).
     */
    const beat = (streamId: string, column: "consumer_beat_ms" | "producer_beat_ms", onGone: Effect.Effect<void>) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const rows = yield* (column === "producer_beat_ms"
          ? sql`UPDATE node_streams SET producer_beat_ms = ${now} WHERE stream_id = ${streamId} RETURNING consumer_beat_ms AS other`
          : sql`UPDATE node_streams SET consumer_beat_ms = ${now} WHERE stream_id = ${streamId} RETURNING producer_beat_ms AS other`).pipe(
            storeFailed("stream_beat")
          )
        return column === "producer_beat_ms" && (rows.length === 0 || now - toInt(rows[0]!.other) > staleMs)
      }).pipe(
        Effect.catchTag("StoreFailed", () => Effect.succeed(false)),
        Effect.flatMap((gone) => (gone ? Effect.andThen(onGone, Effect.never) : Effect.void)),
        Effect.repeat(Schedule.spaced(beatMs))
      )

    const consume = <S, E1, E2, R1, R2>(
      producerNode: string,
      start: (streamId: string) => Effect.Effect<S, E1, R1>,
      onChunk: (bytes: Uint8Array) => Effect.Effect<void, E2, R2>
    ) =>
      Effect.flatMap(ids.next("request"), (streamId) =>
        Effect.gen(function* () {
          const now = yield* Clock.currentTimeMillis
          yield* sql`INSERT INTO node_streams (stream_id, consumer_node, producer_node, consumer_beat_ms, producer_beat_ms, created_at_ms)
            VALUES (${streamId}, ${router.nodeId}, ${producerNode}, ${now}, ${now}, ${now})`.pipe(storeFailed("stream_open"))
          const wake = yield* router.subscribe(key(streamId))
          yield* Effect.forkScoped(beat(streamId, "consumer_beat_ms", Effect.void))
          const started = yield* start(streamId)
          // The producer beats from its start on; until then (a slow claim) its row holds the creation time.
          const startedAt = yield* Clock.currentTimeMillis
          let seq = 0
          while (true) {
            const rows = yield* sql`DELETE FROM node_stream_chunks WHERE stream_id = ${streamId} AND seq = ${seq}
              RETURNING data, final_json`.pipe(storeFailed("stream_take"))
            const row = rows[0]
            if (row !== undefined) {
              yield* router.signal(producerNode, key(streamId))
              if (row.final_json !== null && row.final_json !== undefined) {
                return { started, final: parseJson(row.final_json) }
              }
              yield* onChunk(new Uint8Array(Buffer.from(String(row.data ?? ""), "base64")))
              seq += 1
              continue
            }
            const producer = yield* sql`SELECT producer_beat_ms FROM node_streams WHERE stream_id = ${streamId}`.pipe(
              storeFailed("stream_beat_read")
            )
            const at = yield* Clock.currentTimeMillis
            if (producer.length === 0 || at - Math.max(startedAt, toInt(producer[0]!.producer_beat_ms)) > staleMs) {
              return yield* new StreamLost({ chunks: seq })
            }
            yield* wake.wait(pollMs)
          }
        }).pipe(
          Effect.scoped,
          // The consumer owns the rows: every exit deletes the stream (its chunks cascade) and wakes the producer.
          Effect.ensuring(Effect.ignore(Effect.andThen(
            sql`DELETE FROM node_streams WHERE stream_id = ${streamId}`,
            router.signal(producerNode, key(streamId))
          )))
        )).pipe(Effect.withSpan("NodeStreams.consume"))

    const produce = <E, R>(
      streamId: string,
      consumerNode: string,
      body: (write: (bytes: Uint8Array) => Effect.Effect<void, StreamAbandoned>) => Effect.Effect<unknown, E, R>
    ) =>
      Effect.scoped(Effect.gen(function* () {
        const wake = yield* router.subscribe(key(streamId))
        const abandoned = new StreamAbandoned()
        const gone = yield* Deferred.make<void>()
        let written = 0
        let lowestUnread = 0
        /** Waits until fewer than `window` rows are unread; fails when the consumer is gone. */
        const room = Effect.gen(function* () {
          while (written - lowestUnread >= window) {
            const rows = yield* sql`SELECT s.consumer_beat_ms AS beat,
                (SELECT MIN(c.seq) FROM node_stream_chunks c WHERE c.stream_id = s.stream_id) AS lowest
              FROM node_streams s WHERE s.stream_id = ${streamId}`.pipe(Effect.mapError(() => abandoned))
            const now = yield* Clock.currentTimeMillis
            if (rows.length === 0 || now - toInt(rows[0]!.beat) > staleMs) return yield* abandoned
            const lowest = rows[0]!.lowest
            lowestUnread = lowest === null || lowest === undefined ? written : toInt(lowest)
            if (written - lowestUnread < window) break
            yield* wake.wait(pollMs)
          }
        })
        // The body's chunks go through a small queue to one writer fiber, so the body (the Runtime exchange)
        // fetches its next chunk while the previous ones are inserted; the writer joins what is queued (at most
        // `BatchChunks`) into one row. The stream row's foreign key refuses a row once the consumer deleted it.
        const pending = yield* Queue.bounded<Uint8Array, Cause.Done>(BatchChunks)
        const writer = yield* Effect.forkScoped(Effect.gen(function* () {
          while (true) {
            const batch = yield* Queue.takeBetween(pending, 1, BatchChunks)
            if (batch.length === 0) continue
            yield* room
            const data = batch.length === 1 ? Buffer.from(batch[0]!) : Buffer.concat(batch)
            yield* sql`INSERT INTO node_stream_chunks (stream_id, seq, data) VALUES (${streamId}, ${written}, ${data.toString("base64")})`.pipe(
              Effect.mapError(() => abandoned)
            )
            written += 1
            yield* router.signal(consumerNode, key(streamId))
          }
        }).pipe(
          Effect.catchIf(Cause.isDone, () => Effect.void),
          Effect.tapError(() => Deferred.succeed(gone, undefined))
        ))
        const write = (bytes: Uint8Array) => Queue.offer(pending, bytes).pipe(Effect.asVoid)
        yield* Effect.forkScoped(beat(streamId, "producer_beat_ms", Deferred.succeed(gone, undefined)))
        const run = yield* Effect.forkScoped(body(write))
        const result = yield* Effect.raceFirst(
          Effect.gen(function* () {
            const value = yield* Fiber.join(run)
            // Every queued chunk is written before the final row.
            yield* Queue.end(pending)
            yield* Fiber.join(writer)
            return value
          }),
          Effect.andThen(Deferred.await(gone), Effect.fail(abandoned))
        )
        yield* sql`INSERT INTO node_stream_chunks (stream_id, seq, final_json) VALUES (${streamId}, ${written}, ${
          JSON.stringify(result ?? null)
        })`.pipe(Effect.mapError(() => abandoned))
        yield* router.signal(consumerNode, key(streamId))
      })).pipe(Effect.withSpan("NodeStreams.produce"))

    // Streams both of whose nodes stopped beating (both died) are deleted by any node, once a minute.
    yield* Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      yield* sql`DELETE FROM node_streams WHERE consumer_beat_ms < ${now - PurgeAfterMs} AND producer_beat_ms < ${now - PurgeAfterMs}`
    }).pipe(Effect.ignore, Effect.repeat(Schedule.spaced(Duration.minutes(1))), Effect.forkScoped)

    return NodeStreams.of({ consume, produce })
  })
