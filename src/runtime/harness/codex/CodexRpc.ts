/**
 * The JSON-RPC client of one `codex app-server` (reference harnesses.md §2.1): one JSON object per line in both
 * directions, requests with ids and deadlines, notifications and server-to-client requests delivered in native
 * order on one queue, and answers to server requests written exactly once.
 *
 * Writes are serialized; a line is `written` when it was completely flushed to stdin. Before that point every
 * failure is definite (`RpcNotSent`); after it, a JSON-RPC error is a definite `RpcRejected` and a missing or
 * undecodable response is `RpcUnknown` (never replayed). Peer data is bounded: a malformed or unknown message
 * is logged at debug level by method name only, never raw.
 */
import { type Cause, Data, Deferred, type Duration, Effect, Option, Queue, Schema, type Scope, Semaphore } from "effect"

/** What the client needs from a process: ordered stdout lines and a flushed line write. */
export interface LineChannel {
  /** Ends (`Done`) or fails (an overlong line) when the process output ends: the client ends with it. */
  readonly lines: Queue.Dequeue<string, unknown>
  readonly writeLine: (line: string) => Effect.Effect<void, { readonly _tag: string }>
}

export type RequestId = number | string

/** A notification or a server-to-client request, in native order. */
export type Incoming =
  | { readonly _tag: "Notification"; readonly method: string; readonly params: unknown }
  | { readonly _tag: "ServerRequest"; readonly id: RequestId; readonly method: string; readonly params: unknown }

/** The request line was not completely written: the app-server cannot have acted on it. */
export class RpcNotSent extends Data.TaggedError("RpcNotSent")<{ readonly method: string }> {}

/** The app-server answered with a JSON-RPC error: definite, nothing took effect. `message` is bounded. */
export class RpcRejected extends Data.TaggedError("RpcRejected")<{
  readonly method: string
  readonly code: number
  readonly message: string
}> {}

/** Written, but no decodable response arrived (deadline, process exit, invalid result): outcome unknown. */
export class RpcUnknown extends Data.TaggedError("RpcUnknown")<{
  readonly method: string
  readonly reason: "timeout" | "exited" | "invalid_response"
}> {}

export type RpcError = RpcNotSent | RpcRejected | RpcUnknown

export interface RpcClient {
  /**
   * Sends a request and decodes its result with `schema`. `written` runs exactly once, right after the complete
   * line was flushed (before the response is awaited).
   */
  readonly call: <A>(
    method: string,
    params: unknown,
    schema: Schema.Decoder<A>,
    options: { readonly timeout: Duration.Input; readonly written?: Effect.Effect<void> | undefined }
  ) => Effect.Effect<A, RpcError>
  readonly notify: (method: string, params?: unknown) => Effect.Effect<void, RpcNotSent>
  /** Answers a server-to-client request (the caller answers each id once). */
  readonly respond: (id: RequestId, result: unknown) => Effect.Effect<void, RpcNotSent>
  /** Notifications and server requests; ends when the process output ends. */
  readonly incoming: Queue.Dequeue<Incoming, Cause.Done>
}

/** Bound on a peer string kept in an error or a log annotation. */
export const bounded = (text: string, max = 200): string => (text.length <= max ? text : `${text.slice(0, max)}…`)

const JsonRpcError = Schema.Struct({ code: Schema.Number, message: Schema.String })
const decodeRpcError = Schema.decodeUnknownOption(JsonRpcError)

type Pending = Deferred.Deferred<unknown, RpcRejected | RpcUnknown>

/** Starts the client's reader in the given scope. */
export const makeRpcClient = (channel: LineChannel): Effect.Effect<RpcClient, never, Scope.Scope> =>
  Effect.gen(function* () {
    const incoming = yield* Queue.unbounded<Incoming, Cause.Done>()
    const pending = new Map<number, { readonly method: string; readonly result: Pending }>()
    const writes = yield* Semaphore.make(1)
    let nextId = 0
    let ended = false

    const dispatch = (line: string): Effect.Effect<void> => {
      let message: unknown
      try {
        message = JSON.parse(line)
      } catch {
        return Effect.logDebug("codex app-server: ignored a line that is not JSON")
      }
      if (typeof message !== "object" || message === null || Array.isArray(message)) {
        return Effect.logDebug("codex app-server: ignored a message that is not an object")
      }
      const m = message as Record<string, unknown>
      const method = m["method"]
      const id = m["id"]
      const validId = typeof id === "number" || typeof id === "string"
      if (typeof method === "string") {
        const params = m["params"]
        return Effect.asVoid(Queue.offer(
          incoming,
          validId ? { _tag: "ServerRequest", id, method, params } : { _tag: "Notification", method, params }
        ))
      }
      if (typeof id !== "number") return Effect.logDebug("codex app-server: ignored a response without a known id")
      const entry = pending.get(id)
      if (entry === undefined) return Effect.logDebug("codex app-server: ignored a response to no pending request")
      pending.delete(id)
      if ("error" in m) {
        const error = decodeRpcError(m["error"])
        return Effect.asVoid(Deferred.fail(
          entry.result,
          Option.isSome(error)
            ? new RpcRejected({ method: entry.method, code: error.value.code, message: bounded(error.value.message) })
            : new RpcUnknown({ method: entry.method, reason: "invalid_response" })
        ))
      }
      return Effect.asVoid(Deferred.succeed(entry.result, m["result"]))
    }

    yield* Effect.gen(function* () {
      while (true) {
        const line = yield* Queue.take(channel.lines)
        if (line.trim() !== "") yield* dispatch(line)
      }
    }).pipe(
      Effect.ignore,
      Effect.ensuring(Effect.suspend(() => {
        ended = true
        const lost = [...pending.values()]
        pending.clear()
        return Effect.andThen(
          Effect.forEach(lost, (e) => Deferred.fail(e.result, new RpcUnknown({ method: e.method, reason: "exited" }))),
          Queue.end(incoming)
        )
      })),
      Effect.forkScoped
    )

    const write = (method: string, message: unknown) =>
      writes.withPermits(1)(channel.writeLine(JSON.stringify(message))).pipe(
        Effect.mapError(() => new RpcNotSent({ method }))
      )

    const call: RpcClient["call"] = (method, params, schema, options) =>
      Effect.uninterruptibleMask((restore) =>
        Effect.gen(function* () {
          const id = ++nextId
          const result: Pending = yield* Deferred.make<unknown, RpcRejected | RpcUnknown>()
          if (ended) return yield* new RpcNotSent({ method })
          pending.set(id, { method, result })
          yield* restore(write(method, { id, method, params })).pipe(
            Effect.tapError(() => Effect.sync(() => pending.delete(id)))
          )
          // Dispatched: from here on a missing response is unknown, never a failure.
          if (options.written !== undefined) yield* options.written
          // Interruptible while waiting (the deadline included): a caller that gives up never waits the budget out.
          const raw = yield* restore(Deferred.await(result).pipe(
            Effect.timeoutOrElse({
              duration: options.timeout,
              orElse: () =>
                Effect.flatMap(Deferred.poll(result), (polled) =>
                  Option.isNone(polled)
                    ? Effect.fail(new RpcUnknown({ method, reason: "timeout" }))
                    : polled.value)
            })
          )).pipe(Effect.ensuring(Effect.sync(() => pending.delete(id))))
          const decoded = Schema.decodeUnknownOption(schema)(raw)
          return Option.isSome(decoded) ? decoded.value : yield* new RpcUnknown({ method, reason: "invalid_response" })
        })
      )

    return {
      call,
      notify: (method, params) => write(method, params === undefined ? { method } : { method, params }),
      respond: (id, result) => write("response", { id, result }),
      incoming
    }
  })
