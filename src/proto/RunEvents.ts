/**
 * Run event frames (Runtime → Core), Envelope.id = Run id: delta, thinking, output_message, tool_call,
 * usage, error and done. Ordering rules: an `error` is not terminal and is always followed by `done`;
 * `done` closes the Run stream. Usage frames and `done.usage` are cumulative snapshots of the current
 * execution that replace the previous one; an absent measurement is unknown, never zero.
 */
import { Option, Schema, SchemaGetter } from "effect"
import { JsonObject, NonNegativeInt } from "./Checks.js"
import { EngineFailureCode } from "./ErrorCodes.js"
import { InputContent } from "./MessageInput.js"

/** An incremental text fragment. `item_id` is present when the Run observes messages. */
export const DeltaPayload = Schema.Struct({
  item_id: Schema.optionalKey(Schema.String),
  delta: Schema.String,
  /** Fragment order within the Run, starting at 1. */
  sequence: NonNegativeInt
})
export type DeltaPayload = typeof DeltaPayload.Type

/** An internal reasoning fragment; not part of the final answer. */
export const ThinkingPayload = Schema.Struct({
  text: Schema.String,
  sequence: Schema.optionalKey(NonNegativeInt)
})
export type ThinkingPayload = typeof ThinkingPayload.Type

export const OutputMessageStatus = Schema.Literals(["in_progress", "completed", "incomplete"])
export type OutputMessageStatus = typeof OutputMessageStatus.Type

/** A native message boundary (opt-in `observe_messages`). `text` is present exactly when completed. */
export const OutputMessagePayload = Schema.Struct({
  id: Schema.NonEmptyString,
  status: OutputMessageStatus,
  phase: Schema.optionalKey(Schema.String),
  text: Schema.optionalKey(Schema.String)
}).check(
  Schema.makeFilter((m) => (m.status === "completed") === (m.text !== undefined), {
    expected: "text present exactly when the message is completed"
  })
)
export type OutputMessagePayload = typeof OutputMessagePayload.Type

/** A web-search action of a tool observation. */
export const WebSearchAction = Schema.Struct({
  type: Schema.String,
  query: Schema.optionalKey(Schema.String),
  queries: Schema.optionalKey(Schema.Array(Schema.String)),
  url: Schema.optionalKey(Schema.String),
  pattern: Schema.optionalKey(Schema.String)
})

export const ObservationKind = Schema.Literals(["command", "mcp", "function", "web_search"])
export type ObservationKind = typeof ObservationKind.Type
export const ObservationStatus = Schema.Literals(["in_progress", "completed", "failed", "incomplete"])
export type ObservationStatus = typeof ObservationStatus.Type

/** The engine-neutral tool observation (opt-in `observe_tool_observations`). */
export const ToolObservation = Schema.Struct({
  kind: ObservationKind,
  status: ObservationStatus,
  name: Schema.optionalKey(Schema.String),
  command: Schema.optionalKey(Schema.String),
  cwd: Schema.optionalKey(Schema.String),
  exit_code: Schema.optionalKey(Schema.Int),
  duration_ms: Schema.optionalKey(NonNegativeInt),
  server: Schema.optionalKey(Schema.String),
  arguments: Schema.optionalKey(Schema.NullOr(Schema.Json)),
  output: Schema.optionalKey(Schema.NullOr(Schema.Json)),
  error: Schema.optionalKey(Schema.NullOr(Schema.Json)),
  content: Schema.optionalKey(Schema.Array(InputContent)),
  action: Schema.optionalKey(WebSearchAction)
})
export type ToolObservation = typeof ToolObservation.Type

export const ToolCallStage = Schema.Literals(["before", "after"])
export type ToolCallStage = typeof ToolCallStage.Type

/** A tool call about to run (`before`) or with its result (`after`); `id` pairs the two. Decoded strictly. */
export const ToolCallPayload = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  stage: ToolCallStage,
  args: Schema.optionalKey(JsonObject),
  result: Schema.optionalKey(JsonObject),
  observation: Schema.optionalKey(ToolObservation)
})
export type ToolCallPayload = typeof ToolCallPayload.Type

/** A complete, correctly scoped token measurement of the current execution. */
export const TokenUsage = Schema.Struct({
  input_tokens: NonNegativeInt,
  cached_input_tokens: NonNegativeInt,
  output_tokens: NonNegativeInt,
  reasoning_output_tokens: NonNegativeInt,
  total_tokens: NonNegativeInt
})
export type TokenUsage = typeof TokenUsage.Type

/** A cumulative usage snapshot. Every member is optional: absent means unknown, not zero. */
export const Usage = Schema.Struct({
  tokens: Schema.optionalKey(TokenUsage),
  provider: Schema.optionalKey(Schema.String),
  model: Schema.optionalKey(Schema.String),
  input_tokens: Schema.optionalKey(NonNegativeInt),
  output_tokens: Schema.optionalKey(NonNegativeInt),
  cost_usd: Schema.optionalKey(Schema.Finite.check(Schema.isGreaterThanOrEqualTo(0))),
  /** Native evidence; nothing is derived from it. */
  raw: Schema.optionalKey(JsonObject)
})
export type Usage = typeof Usage.Type

/** True when a snapshot carries no measurement at all (then `done` omits it). */
export const isEmptyUsage = (usage: Usage): boolean => Object.keys(usage).length === 0

// ---------------------------------------------------------------------------------------------- error

/** A Run's error after normalization: `code` only from the accepted set, `http_status` only with connection_failed. */
export const ErrorPayload = Schema.Struct({
  error: Schema.String,
  code: Schema.optionalKey(EngineFailureCode),
  http_status: Schema.optionalKey(Schema.Int.check(Schema.isBetween({ minimum: 100, maximum: 599 })))
}).check(
  // Decoding already drops such a status (normalizeEngineFailure); encoding refuses it, so a sent frame
  // always reads back as the same value.
  Schema.makeFilter((e) => e.http_status === undefined || e.code === "connection_failed", {
    expected: "http_status only with code connection_failed"
  })
)
export type ErrorPayload = typeof ErrorPayload.Type

/** Classification of an engine failure as accepted by Core. */
export interface EngineFailure {
  readonly code: EngineFailureCode
  readonly httpStatus: number | undefined
}

const engineCodes: ReadonlySet<string> = new Set(EngineFailureCode.literals)

/**
 * Normalizes raw `code` / `http_status` values: an unknown, missing or non-string code leaves the error
 * unclassified; `http_status` survives only with `connection_failed` as an integer 100..599. Malformed
 * values never make the frame fail and never discard usage or done. Core's delivery and journal draining
 * both use this one extraction.
 */
export const normalizeEngineFailure = (code: unknown, httpStatus: unknown): Option.Option<EngineFailure> => {
  if (typeof code !== "string" || !engineCodes.has(code)) return Option.none()
  const status = code === "connection_failed" && typeof httpStatus === "number" && Number.isInteger(httpStatus) &&
      httpStatus >= 100 && httpStatus <= 599
    ? httpStatus
    : undefined
  return Option.some({ code: code as EngineFailureCode, httpStatus: status })
}

const ErrorPayloadWire = Schema.Struct({
  error: Schema.String,
  code: Schema.optionalKey(Schema.Unknown),
  http_status: Schema.optionalKey(Schema.Unknown)
})

/** The error frame's payload codec: tolerant of malformed `code` / `http_status`, which it drops. */
export const ErrorPayloadFromWire = ErrorPayloadWire.pipe(
  Schema.decodeTo(ErrorPayload, {
    decode: SchemaGetter.transform((wire: typeof ErrorPayloadWire.Type): ErrorPayload => {
      const failure = normalizeEngineFailure(wire.code, wire.http_status)
      if (Option.isNone(failure)) return { error: wire.error }
      return failure.value.httpStatus === undefined
        ? { error: wire.error, code: failure.value.code }
        : { error: wire.error, code: failure.value.code, http_status: failure.value.httpStatus }
    }),
    encode: SchemaGetter.transform((payload: ErrorPayload): typeof ErrorPayloadWire.Type => payload)
  })
)

// ---------------------------------------------------------------------------------------------- done

/** Continuity facts: the native Session to resume next time. */
export const DoneMetadata = Schema.Struct({
  agent_session_id: Schema.optionalKey(Schema.String),
  agent_session_type: Schema.optionalKey(Schema.String)
})
export type DoneMetadata = typeof DoneMetadata.Type

/**
 * The terminal frame of a Run, also the shape of a cancellation receipt's `outcome`. `content` is always
 * written (may be ""). A done after a settled cancellation does not imply success.
 */
export const DonePayload = Schema.Struct({
  content: Schema.String,
  transcript: Schema.optionalKey(Schema.String),
  usage: Schema.optionalKey(Usage),
  metadata: Schema.optionalKey(DoneMetadata),
  /** Unix ms at which the native root completed, frozen before child settlement. */
  source_completed_at_ms: Schema.optionalKey(NonNegativeInt)
})
export type DonePayload = typeof DonePayload.Type
