/**
 * How the operator API's Server-Sent Events read (docs/operator-api.md "Events"): delivery facts named in
 * snake_case under `fact` (not the internal `_tag`), and a keep-alive comment line at a fixed interval so
 * proxies and clients can tell a quiet Turn from a dead connection.
 */
import { NodeHttpServerRequest } from "@effect/platform-node"
import { Clock, Duration, Effect, type Scope, Stream } from "effect"
import type { HttpServerRequest } from "effect/http"
import { Sse } from "effect/encoding"
import * as DueOrder from "../../proto/DueOrder.js"
import type { JournalItem } from "./JournalItem.js"
import { turnView } from "./TurnViews.js"

/** The SSE comment sent between events; clients ignore it (it has no `data`). */
export const KeepAliveComment = ": keep-alive\n\n"

/** How often the keep-alive comment is sent on an open event stream. */
export const DefaultKeepAlive = Duration.seconds(15)

/** `InputAccepted` → `input_accepted`. */
export const snakeCase = (tag: string): string =>
  tag.replace(/([a-z0-9])([A-Z])/g, "$1_$2").replace(/([A-Z]+)([A-Z][a-z])/g, "$1_$2").toLowerCase()

/** A fact tag's readable head: `{"fact":"input_accepted"` and the length of `{"_tag":"InputAccepted"` it replaces. */
interface FactHead {
  readonly fact: string
  readonly name: string
  readonly skip: number
}

/**
 * Heads by tag (issue 18: two regexes per event were ≈ 40 % of rendering a fact). Bounded: stored data names the
 * tags, so only short ones are kept and at most `maxHeads` of them; past that a head is computed each time.
 */
const heads = new Map<string, FactHead>()
const maxHeads = 256
const maxCachedTag = 64

const headOf = (tag: string): FactHead => {
  const cached = heads.get(tag)
  if (cached !== undefined) return cached
  const name = snakeCase(tag)
  const head = { fact: `{"fact":${JSON.stringify(name)}`, name, skip: 8 + JSON.stringify(tag).length }
  if (heads.size < maxHeads && tag.length <= maxCachedTag) heads.set(tag, head)
  return head
}

/** The first key a `for…in` visits: an own key when there is one (integer-like keys first, then insertion order). */
const firstKey = (value: object): string | undefined => {
  for (const key in value) return key
  return undefined
}

/**
 * A stored delivery fact (`{"_tag":"InputAccepted",…}`) as operators read it: `{"fact":"input_accepted",…}`,
 * the other fields unchanged and in order. Only the top level is rewritten (no recursion over stored data);
 * anything that is not an object with a string `_tag` is returned as it was.
 *
 * When `_tag` is the object's first own key (as every fact the journal writes), there is no integer-like key
 * (those come first), so `{ fact, ...rest }` serialises as the object itself with its `{"_tag":…` head swapped:
 * the head is replaced as text instead of copying the object (byte identity: test/core/dev/OperatorSse.test.ts).
 */
export const readableFact = (bodyJson: string): string => {
  let parsed: unknown
  try {
    parsed = JSON.parse(bodyJson)
  } catch {
    return bodyJson
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return bodyJson
  const tag = (parsed as { readonly _tag?: unknown })._tag
  if (typeof tag !== "string") return bodyJson
  const head = headOf(tag)
  if (Object.hasOwn(parsed, "_tag") && firstKey(parsed) === "_tag") return head.fact + JSON.stringify(parsed).slice(head.skip)
  const { _tag, ...rest } = parsed as { readonly _tag?: unknown }
  return JSON.stringify({ fact: head.name, ...rest })
}

/** Keeps the open event streams of one operator API alive (`makeKeepAlive`). */
export interface KeepAlive {
  /**
   * Runs `effect` (an event stream's writer) with a keep-alive comment handed to `write` every interval (the first
   * one interval after the start), until `effect` ends, fails or is interrupted. The comments go beside the events,
   * not through a stream (issue 18: a ticker merged into the stream cost a hand-off between fibers for every event,
   * and a stream stage around the writer cost its own channel per request); `write` runs between two of the
   * writer's writes, never inside one, and never after it ended.
   */
  readonly around: <A, E, R>(effect: Effect.Effect<A, E, R>, write: (comment: string) => void) => Effect.Effect<A, E, R>
}

/** An open stream's comment writer (one entry of the keep-alive `DueOrder`). */
interface Kept {
  readonly write: (comment: string) => void
}

/**
 * One timer for every event stream of the scope (issue 18, "turnshttp": a ticker fiber per stream cost a fiber, its
 * start and its interruption, and a timer, per followed Turn). The open streams are a `DueOrder`: each is due one
 * interval after its start or its last comment, always now plus the interval, so they fall due in the order they
 * were added. A stream that ends leaves at once. The timer lives in the scope that made it (the operator API's): a
 * stream started after it closed gets no comments.
 */
export const makeKeepAlive = (interval: Duration.Input = DefaultKeepAlive): Effect.Effect<KeepAlive, never, Scope.Scope> =>
  Effect.gen(function* () {
    const every = Math.max(1, Duration.toMillis(Duration.fromInputUnsafe(interval)))
    const clock = yield* Clock.Clock
    const order: DueOrder.DueOrder<Kept> = yield* DueOrder.make<Kept>((kept, now) => {
      order.add(kept, now + every)
      try {
        kept.write(KeepAliveComment)
      } catch {
        order.remove(kept) // a writer that throws gets no more comments; the others keep theirs
      }
    })
    return {
      around: (effect, write) =>
        Effect.suspend(() => {
          const kept: Kept = { write }
          order.add(kept, clock.currentTimeMillisUnsafe() + every)
          return Effect.onExit(effect, () => Effect.sync(() => order.remove(kept)))
        })
    }
  })

/**
 * Writes `text` on the response of `request` straight away (while it is open), beside the response's body stream:
 * the keep-alive comments of an event stream.
 */
export const writeBeside = (request: HttpServerRequest.HttpServerRequest) => (text: string): void => {
  openResponse(request)?.write(text)
}

/** The Node response of `request` while it can still be written; undefined once it ended or was destroyed. */
const openResponse = (request: HttpServerRequest.HttpServerRequest): NodeWritable | undefined => {
  const response: unknown = NodeHttpServerRequest.toServerResponse(request)
  return typeof response === "object" && response !== null && "write" in response && typeof response.write === "function" &&
      !("writableEnded" in response && response.writableEnded === true) && !("destroyed" in response && response.destroyed === true)
    ? response as NodeWritable
    : undefined
}

/** The part of Node's `ServerResponse` the event writer uses. */
interface NodeWritable {
  readonly write: (text: string) => boolean
  /** The connection: its writes wait while it is corked, until the response's `end` uncorks it fully. */
  readonly socket?: { readonly cork: () => void } | null
  readonly once: (event: "drain" | "close", listener: () => void) => unknown
  readonly off: (event: "drain" | "close", listener: () => void) => unknown
}

/** Waits until `response` drained its buffer (or closed). */
const drained = (response: NodeWritable): Effect.Effect<void> =>
  Effect.callback<void>((resume) => {
    const done = () => {
      response.off("drain", done)
      response.off("close", done)
      resume(Effect.void)
    }
    response.once("drain", done)
    response.once("close", done)
    return Effect.sync(() => {
      response.off("drain", done)
      response.off("close", done)
    })
  })

/**
 * A Turn's event stream written straight to the response of `request` (issue 18: one write per batch of items the
 * follower has ready, their SSE text joined, with no stream stages, no byte encoding and no hand-off between the
 * follower and the response). When the socket's buffer is full the writer waits for `drain` before it takes more,
 * so a client that stops reading pushes back into its follower (LiveBuffer.ts drops it past its bound). A failure
 * of `items` ends the stream with `failed` (the `error` event). The response body itself carries nothing: the
 * server writes the headers before it runs the body and ends the response after it.
 */
export const writeEvents = <E>(
  items: Stream.Stream<JournalItem, E>,
  request: HttpServerRequest.HttpServerRequest,
  failed: string
): Effect.Effect<void> =>
  items.pipe(
    Stream.runForEachArray((batch) => {
      const response = openResponse(request)
      if (response === undefined) return Effect.void
      let text = ""
      for (let i = 0; i < batch.length; i++) text += sseEvent(batch[i]!)
      // The outcome is the stream's last item: its write waits on the corked socket for the server's `end`, which
      // queues the body's last chunk behind it and uncorks the socket fully, so both leave in one write (issue 18,
      // "ssecork"). The socket, not the response: a corked response keeps chunked writes in a buffer of its own that
      // `end` writes after that last chunk (the client then sees the body end before the outcome). No wait for
      // `drain` after it: a corked socket never drains, and the stream ends here (`end` flushes what is buffered).
      const last = batch[batch.length - 1]!._tag === "outcome"
      if (last) response.socket?.cork()
      return response.write(text) || last ? Effect.void : drained(response)
    }),
    Effect.catch(() =>
      Effect.sync(() => {
        openResponse(request)?.write(failed)
      })
    )
  )

/** Closes the client's connection: a client that stopped reading never pulls the end of its stream. */
const closeConnection = (request: HttpServerRequest.HttpServerRequest): void => {
  const response: unknown = NodeHttpServerRequest.toServerResponse(request)
  if (typeof response === "object" && response !== null && "destroy" in response && typeof response.destroy === "function") {
    response.destroy()
  }
}

/**
 * What happens when the client of `request` fell too far behind the live Turn (`FollowerLagging`, LiveBuffer.ts):
 * one warning (the Turn id only) and its connection closed. The Turn is unaffected; the client may follow again
 * with `Last-Event-ID`.
 */
export const dropLaggingClient = (request: HttpServerRequest.HttpServerRequest, turnId: string): Effect.Effect<void> =>
  Effect.logWarning("operator event stream dropped: the client fell behind the Turn").pipe(
    Effect.annotateLogs({ turn_id: turnId }),
    Effect.andThen(Effect.sync(() => closeConnection(request)))
  )

/** One SSE event for a journal item. Entries carry their seq as the SSE id (for `Last-Event-ID`). */
export const sseEvent = (item: JournalItem): string => {
  switch (item._tag) {
    case "entry":
      return Sse.encoder.write({
        _tag: "Event",
        id: String(item.seq),
        event: item.kind === "frame" ? "frame" : "fact",
        data: item.kind === "frame" ? item.bodyJson : readableFact(item.bodyJson)
      })
    case "notice":
      return Sse.encoder.write({ _tag: "Event", id: undefined, event: item.event, data: JSON.stringify(item.data) })
    case "outcome":
      return Sse.encoder.write({ _tag: "Event", id: undefined, event: "outcome", data: JSON.stringify(turnView(item.turn)) })
  }
}
