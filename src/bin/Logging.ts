/**
 * Log output of the binary (docs/operations.md "Logs"): `text` is logfmt; `json` is one flat JSON object per
 * line: `{"ts","level","msg", …annotations, "cause"?, "<span>_ms"?}`. Annotations are top-level fields (not
 * nested under `annotations`); one that would shadow `ts`, `level`, `msg` or `cause` is prefixed with `a_`. A
 * cause (an error's rendering) is one string field, so a multi-line error stays on one line.
 */
import { Console, Logger } from "effect"

const Reserved = new Set(["ts", "level", "msg", "cause"])

/** A structured log record as one flat JSON line. */
export const flatJsonLine = (record: {
  readonly timestamp: string
  readonly level: string
  readonly message: unknown
  readonly cause: string | undefined
  readonly annotations: Record<string, unknown>
  readonly spans: Record<string, number>
}): string => {
  const line: Record<string, unknown> = { ts: record.timestamp, level: record.level, msg: record.message }
  for (const [key, value] of Object.entries(record.annotations)) line[Reserved.has(key) ? `a_${key}` : key] = value
  for (const [label, ms] of Object.entries(record.spans)) line[`${label}_ms`] = ms
  if (record.cause !== undefined && record.cause !== "") line.cause = record.cause
  return JSON.stringify(line)
}

/** The flat JSON formatter (a `Logger` producing one line per log call). */
export const formatFlatJson = Logger.map(Logger.formatStructured, flatJsonLine)

export type LogFormat = "text" | "json"

/**
 * Lines logged in the current event-loop task, and the console they go to (one at a time). Module state on purpose:
 * the binary has one stderr, and every logger of the process must keep its lines in one order.
 */
let pending: Array<string> = []
let pendingConsole: Console.Console | undefined
let flushScheduled = false
let exitHooked = false

/**
 * Writes the pending log lines now, in the order they were logged, as one console call. Runs by itself before the
 * next event-loop task and when the process exits; call it before writing to stderr beside the logger, so that
 * output stays in order after the lines logged before it.
 */
export const flushLogLines = (): void => {
  const target = pendingConsole
  if (target === undefined || pending.length === 0) return
  const text = pending.join("\n")
  pending = []
  pendingConsole = undefined
  target.error(text)
}

const enqueue = (console: Console.Console, line: string): void => {
  if (pendingConsole !== undefined && pendingConsole !== console) flushLogLines()
  pendingConsole = console
  pending.push(line)
  if (!flushScheduled) {
    flushScheduled = true
    setImmediate(() => {
      flushScheduled = false
      flushLogLines()
    })
  }
  if (!exitHooked) {
    exitHooked = true
    process.once("exit", flushLogLines)
  }
}

/**
 * `self`'s lines on the fiber's console's error stream, written once per event-loop task (issue 18): each line is
 * formatted when it is logged, and every line logged in the same task goes out in one console call (one write on
 * stderr) before the next task, in order. The daemon logs four `info` lines per Turn; one synchronous write and
 * console call each were about 11 % of its CPU at 16 concurrent Turns (docs/performance.md, "loglines").
 */
export const withBatchedConsoleError = <Message>(self: Logger.Logger<Message, string>): Logger.Logger<Message, void> =>
  Logger.make((options) => enqueue(options.fiber.getRef(Console.Console), self.log(options)))

/** The logger of a command for a format: to stderr, logfmt or flat JSON (lines written once per task). */
export const loggerFor = (format: LogFormat) =>
  format === "json" ? withBatchedConsoleError(formatFlatJson) : withBatchedConsoleError(Logger.formatLogFmt)
