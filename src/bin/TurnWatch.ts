/**
 * `agentwire turn watch ID`: a Turn's Server-Sent Events (docs/operator-api.md "Events") as the demo's live
 * view (src/core/dev/LiveView.ts): one line per Run frame with the time since the watch started, then one line
 * per delivery fact, and the outcome last. `--json` prints each event as one JSON line instead
 * (`{"event","id","data"}`, data parsed).
 *
 * Frames are decoded with the wire schemas before they are summarized, so the view shows exactly what the
 * demo shows and never a payload member it does not name. The stream ends after the `outcome` event.
 */
import { Console, Effect, Result, Stream } from "effect"
import { Sse } from "effect/encoding"
import { FetchHttpClient, HttpClient, HttpClientRequest } from "effect/http"
import type { TappedFrame } from "../core/FrameTap.js"
import { formatFrame, quote, usageSummary } from "../core/dev/LiveView.js"
import { Messages } from "../proto/index.js"
import { OperatorPrefix, type OperatorTarget, OperatorUnreachable } from "./OperatorClient.js"

/** An SSE event of the Turn stream. */
export interface TurnEvent {
  readonly event: string
  readonly id: string | undefined
  readonly data: string
}

const parse = (data: string): unknown => {
  try {
    return JSON.parse(data)
  } catch {
    return undefined
  }
}

/** The live-view line of one event (`undefined` for events the view leaves out). */
export const formatEvent = (event: TurnEvent, startMs: number, nowMs: number): string | undefined => {
  switch (event.event) {
    case "frame": {
      const decoded = Messages.decodeRuntimeToCore(event.data)
      const tapped: TappedFrame = Result.isSuccess(decoded)
        ? {
          direction: "runtime→core",
          deviceId: "" as TappedFrame["deviceId"],
          connectionNumber: 0,
          type: decoded.success.type,
          ...("id" in decoded.success && typeof decoded.success.id === "string" ? { id: decoded.success.id } : {}),
          bytes: event.data.length,
          at: nowMs,
          message: decoded.success
        }
        : { direction: "runtime→core", deviceId: "" as TappedFrame["deviceId"], connectionNumber: 0, type: "invalid", bytes: event.data.length, at: nowMs, invalid: decoded.failure.code }
      return formatFrame(tapped, startMs)
    }
    case "fact":
    case "input":
    case "interaction": {
      const body = parse(event.data) as Record<string, unknown> | undefined
      const name = event.event === "fact" ? String(body?.fact ?? "fact") : event.event
      const detail = Object.entries(body ?? {})
        .filter(([key, value]) => key !== "fact" && (typeof value === "string" || typeof value === "number" || typeof value === "boolean"))
        .slice(0, 4)
        .map(([key, value]) => `${key}=${typeof value === "string" ? quote(value, 40) : String(value)}`)
        .join(" ")
      const elapsed = `+${((nowMs - startMs) / 1000).toFixed(3)}s`.padStart(9)
      return `${elapsed}  · ${name.padEnd(22)} ${detail}`.trimEnd()
    }
    case "outcome": {
      const turn = parse(event.data) as { status?: unknown; outcome?: { error_code?: unknown; usage?: unknown } | null } | undefined
      const status = typeof turn?.status === "string" ? turn.status : "unknown"
      const code = typeof turn?.outcome?.error_code === "string" ? ` (${turn.outcome.error_code})` : ""
      return `outcome: ${status}${code} · ${usageSummary(turn?.outcome?.usage as Parameters<typeof usageSummary>[0])}`
    }
    default:
      return undefined
  }
}

/** The SSE events of a Turn from `after` (a journal seq), until the stream ends. */
export const events = (target: OperatorTarget, turnId: string, after = 0): Stream.Stream<TurnEvent, OperatorUnreachable> =>
  Stream.unwrap(
    Effect.gen(function* () {
      const client = yield* HttpClient.HttpClient
      const base = target.url.replace(/\/+$/, "")
      const request = HttpClientRequest.get(`${base}${OperatorPrefix}/turns/${encodeURIComponent(turnId)}/events`).pipe(
        HttpClientRequest.bearerToken(target.token),
        HttpClientRequest.setHeader("accept", "text/event-stream"),
        after > 0 ? HttpClientRequest.setHeader("last-event-id", String(after)) : (r) => r
      )
      const response = yield* client.execute(request)
      if (response.status !== 200) {
        const text = yield* response.text
        const body = parse(text) as { error?: unknown } | undefined
        return yield* new OperatorUnreachable({
          url: base,
          reason: `HTTP ${response.status}${typeof body?.error === "string" ? ` ${body.error}` : ""}`
        })
      }
      return response.stream.pipe(
        Stream.decodeText(),
        Stream.pipeThroughChannel(Sse.decode({ maxEventSize: 8 * 1024 * 1024 })),
        Stream.map((e): TurnEvent => ({ event: e.event, id: e.id, data: e.data }))
      )
    }).pipe(
      Effect.catchTag("HttpClientError", (e) => Effect.fail(new OperatorUnreachable({ url: target.url, reason: e.reason._tag })))
    )
  ).pipe(
    Stream.mapError((e) => (e instanceof OperatorUnreachable ? e : new OperatorUnreachable({ url: target.url, reason: "the event stream broke" }))),
    Stream.provide(FetchHttpClient.layer)
  )

/** Prints a Turn's events until its outcome; succeeds with the final Turn status (or "unknown"). */
export const watch = (target: OperatorTarget, turnId: string, options: { readonly json: boolean; readonly nowMs: () => number }) =>
  Effect.gen(function* () {
    const startMs = options.nowMs()
    let status = "unknown"
    yield* events(target, turnId).pipe(
      Stream.runForEach((event) => {
        if (event.event === "outcome") {
          const turn = parse(event.data) as { status?: unknown } | undefined
          if (typeof turn?.status === "string") status = turn.status
        }
        if (options.json) return Console.log(JSON.stringify({ event: event.event, id: event.id ?? null, data: parse(event.data) ?? null }))
        const line = formatEvent(event, startMs, options.nowMs())
        return line === undefined ? Effect.void : Console.log(line)
      })
    )
    return status
  })
