/**
 * W3C `traceparent` handling. The trace is diagnostic correlation only: a missing, oversized or malformed
 * value never rejects a frame, never changes ownership and is never used as a request id. A receiver that
 * cannot parse it starts a local trace.
 */
import { Option } from "effect"
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

/** The trace to copy onto a reply: the request's value when it is short enough to echo, otherwise none. */
export const echoable = (value: string | undefined): string | undefined =>
  value !== undefined && value.length <= MaxTraceparentChars ? value : undefined
