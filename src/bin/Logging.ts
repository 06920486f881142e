/**
 * Log output of the binary (docs/operations.md "Logs"): `text` is logfmt; `json` is one flat JSON object per
 * line: `{"ts","level","msg", …annotations, "cause"?, "<span>_ms"?}`. Annotations are top-level fields (not
 * nested under `annotations`); one that would shadow `ts`, `level`, `msg` or `cause` is prefixed with `a_`. A
 * cause (an error's rendering) is one string field, so a multi-line error stays on one line.
 */
import { Logger } from "effect"

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

/** The logger of a command for a format: to stderr, logfmt or flat JSON. */
export const loggerFor = (format: LogFormat) =>
  format === "json" ? Logger.withConsoleError(formatFlatJson) : Logger.withConsoleError(Logger.formatLogFmt)
