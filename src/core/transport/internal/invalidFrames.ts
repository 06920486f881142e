/**
 * The invalid-frame budget of one Runtime connection (issue #17: 50,000 invalid frames from one authenticated
 * device wrote 7.3 MiB of WARN lines and were never answered by a close).
 *
 * Per window of 60 s (the window starts at the first invalid frame after the previous window ended):
 * - the first 8 invalid frames are logged individually (code, known type, bounded id, size: never peer text);
 * - later ones are only counted; when the next window starts, or when the connection is closed for them, one
 *   summary line reports how many were not logged, by code;
 * - the 65th invalid frame of a window closes the connection with 1008 (policy violation); its observers end
 *   with `ObservationLost("invalid_frame")`.
 *
 * A conforming Runtime sends no invalid frame at all, so the budget only bounds a faulty or hostile one. An
 * invalid heartbeat is not counted here: it closes the connection at once (protocol "Capability declarations").
 */
import { Duration, Effect } from "effect"

export interface InvalidFrameBudgetOptions {
  /** Invalid frames logged individually per window. */
  readonly logBurst: number
  /** Invalid frames tolerated per window; one more closes the connection. */
  readonly closeThreshold: number
  readonly window: Duration.Duration
}

export const defaultInvalidFrameBudget: InvalidFrameBudgetOptions = {
  logBurst: 8,
  closeThreshold: 64,
  window: Duration.seconds(60)
}

/** What to do with one invalid frame. */
export interface InvalidFrameVerdict {
  /** Log this frame's own line. */
  readonly log: boolean
  /** The threshold was crossed by this frame: close the connection (reported once). */
  readonly close: boolean
  /** A summary of the frames counted without a line, to log now (end of a window or close). */
  readonly summary?: { readonly unlogged: number; readonly byCode: Readonly<Record<string, number>> }
}

export interface InvalidFrameBudget {
  readonly admit: (code: string, nowMillis: number) => InvalidFrameVerdict
}

export const makeInvalidFrameBudget = (options: Partial<InvalidFrameBudgetOptions> = {}): InvalidFrameBudget => {
  const { closeThreshold, logBurst, window } = { ...defaultInvalidFrameBudget, ...options }
  const windowMillis = Duration.toMillis(window)
  let start: number | undefined
  let count = 0
  let unlogged = 0
  let byCode: Record<string, number> = {}
  let closed = false

  const takeSummary = () => {
    if (unlogged === 0) return undefined
    const summary = { unlogged, byCode }
    unlogged = 0
    byCode = {}
    return summary
  }

  return {
    admit: (code, now) => {
      let summary: InvalidFrameVerdict["summary"]
      if (start === undefined || now - start >= windowMillis) {
        summary = takeSummary()
        start = now
        count = 0
      }
      count++
      if (count > closeThreshold) {
        if (closed) return { log: false, close: false }
        closed = true
        return { log: false, close: true, ...summarize(takeSummary(), summary) }
      }
      if (count <= logBurst) return { log: true, close: false, ...(summary === undefined ? {} : { summary }) }
      unlogged++
      byCode[code] = (byCode[code] ?? 0) + 1
      return { log: false, close: false, ...(summary === undefined ? {} : { summary }) }
    }
  }
}

/** Merges the summary of a finished window with the current one (both can be due when the threshold closes). */
const summarize = (
  current: InvalidFrameVerdict["summary"],
  previous: InvalidFrameVerdict["summary"]
): { summary?: NonNullable<InvalidFrameVerdict["summary"]> } => {
  if (current === undefined) return previous === undefined ? {} : { summary: previous }
  if (previous === undefined) return { summary: current }
  const byCode: Record<string, number> = { ...previous.byCode }
  for (const [code, n] of Object.entries(current.byCode)) byCode[code] = (byCode[code] ?? 0) + n
  return { summary: { unlogged: previous.unlogged + current.unlogged, byCode } }
}

/**
 * The log effects of a verdict around the frame's own line: the summary first, then the line when it is
 * logged, then the close notice.
 */
export const logVerdict = (verdict: InvalidFrameVerdict, line: Effect.Effect<void>): Effect.Effect<void> => {
  const parts: Array<Effect.Effect<void>> = []
  if (verdict.summary !== undefined) {
    parts.push(
      Effect.logWarning("invalid frames not logged individually").pipe(
        Effect.annotateLogs({ unlogged: verdict.summary.unlogged, by_code: JSON.stringify(verdict.summary.byCode) })
      )
    )
  }
  if (verdict.log) parts.push(line)
  if (verdict.close) {
    parts.push(Effect.logWarning("too many invalid frames: connection closed (1008)"))
  }
  return parts.length === 0 ? Effect.void : Effect.asVoid(Effect.all(parts, { discard: true }))
}
