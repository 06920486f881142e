/**
 * W3C `traceparent` handling. The trace is diagnostic correlation only: a missing, oversized or malformed
 * value never rejects a frame, never changes ownership and is never used as a request id. A receiver that
 * cannot parse it starts a local trace.
 *
 * Both sides use the same four operations (protocol "Envelope", `trace`):
 * - receiving: `withReceivedTrace(name, envelope.trace)` runs the handler in a span whose parent is the
 *   sender's span when the trace parses, and in a local span otherwise;
 * - replying: `echo(request.trace)` is the value to copy onto a reply, present only when it parses, so a
 *   malformed value is never echoed back;
 * - sending: `currentTraceparent` formats the caller's current span for the `trace` of an outgoing frame.
 * Never fails, never logs the value.
 */
import { Effect, Function, Option, Tracer } from "effect"
import { MaxEchoedTraceChars } from "./Limits.js"

/** A parsed traceparent (version 00). */
export interface TraceContext {
  readonly traceId: string
  readonly spanId: string
  readonly sampled: boolean
}

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/
const ZERO_TRACE = "00000000000000000000000000000000"
const ZERO_SPAN = "0000000000000000"
/** Longest traceparent we look at; anything longer is treated as absent (never echoed). */
export const MaxTraceparentChars = MaxEchoedTraceChars

/**
 * Parses a traceparent. Returns `None` for anything that is not a valid W3C traceparent: the caller then
 * starts a local trace. Never fails.
 */
export const parseTraceparent = (value: string | undefined): Option.Option<TraceContext> => {
  // Typed callers pass a string; a value read from elsewhere (a log record, a header map) may not be one.
  if (typeof value !== "string" || value.length > MaxTraceparentChars) return Option.none()
  const m = TRACEPARENT.exec(value)
  if (m === null) return Option.none()
  const [, version, traceId, spanId, flags, rest] = m
  if (version === "ff") return Option.none()
  // version 00 has exactly four fields; a future version may append more, which we ignore.
  if (version === "00" && rest !== undefined) return Option.none()
  if (traceId === ZERO_TRACE || spanId === ZERO_SPAN) return Option.none()
  return Option.some({ traceId: traceId!, spanId: spanId!, sampled: (parseInt(flags!, 16) & 1) === 1 })
}

/** Formats a trace context as a version-00 traceparent. */
export const formatTraceparent = (ctx: TraceContext): string =>
  `00-${ctx.traceId}-${ctx.spanId}-${ctx.sampled ? "01" : "00"}`

/**
 * The trace to copy onto a reply: the request's value when it is short enough to echo, otherwise none.
 * It does not check the format, so a malformed value passes: new code uses `echo`.
 */
export const echoable = (value: string | undefined): string | undefined =>
  value !== undefined && value.length <= MaxTraceparentChars ? value : undefined

/**
 * The trace to copy onto a reply: the request's value, unchanged, when it parses as a valid traceparent
 * (so at most 256 characters); `undefined` for a missing, oversized or malformed value, which is then
 * omitted from the reply. Never fails.
 */
export const echo = (value: string | undefined): string | undefined =>
  Option.isSome(parseTraceparent(value)) ? value : undefined

/** The sender's span as the parent of a local span (`Effect.withParentSpan`, `SpanOptions.parent`). */
export const toExternalSpan = (ctx: TraceContext): Tracer.ExternalSpan =>
  Tracer.externalSpan({ traceId: ctx.traceId, spanId: ctx.spanId, sampled: ctx.sampled })

// `parentOf`'s last answer: every chunk frame of a write or a transfer is a request with the operation's same
// traceparent, and parsing it (a regular expression) with its span object cost about 7 µs per 64 KiB chunk
// (`docs/performance.md` "Workspace"). The answer is a pure function of the value, so one entry is enough.
let lastParentValue: string | undefined
let lastParent: Option.Option<Tracer.ExternalSpan> = Option.none()

/** The sender's span from a received trace, or `None` when the value is missing or does not parse. */
export const parentOf = (value: string | undefined): Option.Option<Tracer.ExternalSpan> => {
  if (value !== undefined && value === lastParentValue) return lastParent
  const parent = Option.map(parseTraceparent(value), toExternalSpan)
  lastParentValue = value
  lastParent = parent
  return parent
}

/**
 * Runs `self` in a span named `name`. With a valid received traceparent the span continues the sender's
 * trace (its parent is the sender's span); without one (missing or malformed) it is a local span: a child
 * of the current local span if there is one, otherwise the root of a new local trace. The received value
 * never becomes an attribute and never affects the result of `self`.
 */
export const withReceivedTrace: {
  (name: string, value: string | undefined, options?: Tracer.SpanOptions): <A, E, R>(
    self: Effect.Effect<A, E, R>
  ) => Effect.Effect<A, E, R>
  <A, E, R>(
    self: Effect.Effect<A, E, R>,
    name: string,
    value: string | undefined,
    options?: Tracer.SpanOptions
  ): Effect.Effect<A, E, R>
} = Function.dual(
  (args) => Effect.isEffect(args[0]),
  <A, E, R>(
    self: Effect.Effect<A, E, R>,
    name: string,
    value: string | undefined,
    options?: Tracer.SpanOptions
  ): Effect.Effect<A, E, R> => {
    const parent = parentOf(value)
    return Option.isSome(parent)
      ? Effect.withSpan(self, name, { ...options, parent: parent.value })
      : Effect.withSpan(self, name, options ?? {})
  }
)

/**
 * The traceparent of the caller's current span (native or adopted external), for the `trace` of an
 * outgoing frame; `undefined` when there is no span or its ids are not W3C-shaped (a custom tracer's),
 * in which case the frame carries no trace. Never fails.
 */
export const currentTraceparent: Effect.Effect<string | undefined> = Effect.map(
  // `serviceOption`, not `Effect.option(Effect.currentParentSpan)`: with no span that one fails with a
  // `NoSuchElementError` first, whose stack trace costs about 20 µs per outgoing request (issue 18).
  Effect.serviceOption(Tracer.ParentSpan),
  (span) => {
    if (Option.isNone(span)) return undefined
    const value = formatTraceparent({ traceId: span.value.traceId, spanId: span.value.spanId, sampled: span.value.sampled })
    return echo(value)
  }
)
