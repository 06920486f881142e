/**
 * `fn(name)`: `Effect.fn(name)` without its stack traces, for methods Core calls per Turn or per request
 * (issue 18). `Effect.fn("X")` captures a `new Error()` at each call (the call site, for a failure's trace);
 * this runs the same generator body in a span of the same name and options, with no captured trace. The span,
 * its attributes and its parent are those of `Effect.fn`; what is lost is only the source location a traced
 * failure prints (the span's name still says which method failed).
 */
import { Effect, type Tracer } from "effect"

const noStack = { captureStackTrace: false } as const

/** Same signature as `Effect.fn(name, options)`; the body must be a generator function. */
export const fn = (name: string, options?: Tracer.SpanOptionsNoTrace): Effect.fn.Traced => {
  const span = Effect.withSpan(name, options, noStack)
  // The span is the last pipeable, so it wraps the body and the caller's pipeables, as `Effect.fn` does.
  return ((body: never, ...pipeables: Array<never>) =>
    (Effect.fnUntraced as (...args: ReadonlyArray<unknown>) => unknown)(body, ...pipeables, span)) as Effect.fn.Traced
}
