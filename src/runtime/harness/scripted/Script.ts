/**
 * The step language of the built-in `scripted` harness (README section "scripted-harness"). A Turn's input
 * text is either plain text (echoed back) or a JSON object `{"script": [step, …]}`. Each step is an object
 * with exactly one recognised shape (strict: an unknown member or a second step key makes the script
 * invalid). Parsing is pure and total: an invalid script becomes an `InvalidScript` the Turn reports as an
 * `error` frame followed by `done`; nothing is classified from prose.
 */
import { Duration, Option, Result, Schema } from "effect"
import { JsonObject, NonNegativeInt, PositiveInt } from "../../../proto/Checks.js"
import { EngineFailureCode } from "../../../proto/ErrorCodes.js"
import { compileValidator } from "../../../proto/internal/fastValidator.js"
import { Question } from "../../../proto/Interaction.js"
import type { MessageInput } from "../../../proto/MessageInput.js"
import { ToolObservation, Usage } from "../../../proto/RunEvents.js"

/** A duration such as "2 seconds", "150 millis" or a number of milliseconds (Effect's duration input). */
export const DurationInput = Schema.Union([Schema.String, NonNegativeInt]).pipe(
  Schema.check(
    Schema.makeFilter((input) => Option.isSome(Duration.fromInput(input as Duration.Input)), {
      expected: "a duration such as \"2 seconds\""
    })
  )
)

const SignalName = Schema.NonEmptyString

/** The most times one `delta` step may repeat its text (`repeat`). */
export const MaxRepeat = 1_000_000

/** A text fragment, `repeat` times in a row (default once): as many steps, from a script of one. */
export const DeltaStep = Schema.Struct({
  delta: Schema.String,
  phase: Schema.optionalKey(Schema.String),
  repeat: Schema.optionalKey(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: MaxRepeat })))
})
export const ThinkingStep = Schema.Struct({ thinking: Schema.String })
export const ToolCallStep = Schema.Struct({
  tool_call: Schema.Struct({
    id: Schema.optionalKey(Schema.NonEmptyString),
    name: Schema.String,
    /** `both` (default) emits a `before` frame then an `after` frame. */
    stage: Schema.optionalKey(Schema.Literals(["before", "after", "both"])),
    args: Schema.optionalKey(JsonObject),
    result: Schema.optionalKey(JsonObject),
    observation: Schema.optionalKey(ToolObservation)
  })
})
export const UsageStep = Schema.Struct({ usage: Usage })
export const SleepStep = Schema.Struct({ sleep: DurationInput })
export const ErrorStep = Schema.Struct({
  error: Schema.Struct({
    message: Schema.String,
    code: Schema.optionalKey(EngineFailureCode),
    http_status: Schema.optionalKey(Schema.Int.check(Schema.isBetween({ minimum: 100, maximum: 599 })))
  }).check(
    Schema.makeFilter((e) => e.http_status === undefined || e.code === "connection_failed", {
      expected: "http_status only with code connection_failed"
    })
  )
})
export const HangStep = Schema.Struct({ hang: Schema.Literal(true) })
export const AwaitSteerStep = Schema.Struct({
  await_steer: PositiveInt,
  /** How the native write of each input arriving during this step behaves (default `ok`). */
  write: Schema.optionalKey(Schema.Literals(["ok", "hang", "reject"])),
  /** With `write: "hang"`: the hung native call returns (unknown) once this signal fires. */
  write_returns_on: Schema.optionalKey(SignalName),
  /** How each written input is applied (default `ok`: accepted and echoed). */
  accept: Schema.optionalKey(Schema.Literals(["ok", "never", "reject", "unknown"]))
})
export const PermissionStep = Schema.Struct({
  permission: Schema.Struct({
    request_id: Schema.optionalKey(Schema.NonEmptyString),
    tool: Schema.String,
    title: Schema.String,
    detail: Schema.optionalKey(Schema.String),
    payload: Schema.optionalKey(JsonObject),
    /** Native withdrawal (`permission_cancel`) when this signal fires before a decision. */
    withdraw_on: Schema.optionalKey(SignalName),
    /** Native withdrawal after this long without a decision. */
    withdraw_after: Schema.optionalKey(DurationInput)
  })
})
export const AskStep = Schema.Struct({
  ask: Schema.Struct({
    ask_id: Schema.optionalKey(Schema.NonEmptyString),
    questions: Schema.Array(Question).check(
      Schema.makeFilter((qs) => new Set(qs.map((q) => q.id)).size === qs.length, { expected: "unique question ids" })
    ),
    tool_use_id: Schema.optionalKey(Schema.String),
    auto_resolution_ms: Schema.optionalKey(NonNegativeInt)
  })
})
export const FunctionCallStep = Schema.Struct({
  function_call: Schema.Struct({
    call_id: Schema.optionalKey(Schema.NonEmptyString),
    name: Schema.String,
    arguments: Schema.Json
  })
})
export const CloseFailsStep = Schema.Struct({ close_fails: NonNegativeInt })
export const CloseHangsStep = Schema.Struct({ close_hangs: NonNegativeInt })
export const CancelIgnoredStep = Schema.Struct({ cancel_ignored: Schema.Literal(true) })
export const CancelSettlesOnStep = Schema.Struct({ cancel_settles_on: SignalName })
export const CancelFailsStep = Schema.Struct({ cancel_fails: Schema.Literal(true) })
export const WaitStep = Schema.Struct({ wait: SignalName })
export const FailSubmissionsStep = Schema.Struct({ fail_submissions: NonNegativeInt })
export const NotReusableStep = Schema.Struct({ reusable: Schema.Literal(false) })
/** Writes a UTF-8 text file in the bound workspace (the Turn's working directory); creates missing parents. */
export const WriteFileStep = Schema.Struct({ write_file: Schema.Struct({ path: Schema.String, text: Schema.String }) })
/** Reads a workspace file (≤ 1 MiB) and emits its text as a delta. */
export const ReadFileStep = Schema.Struct({ read_file: Schema.String })

/** Emits the Executor's effective MCP bindings as one JSON delta (bearer tokens only as `bearer: true`). */
export const McpServersStep = Schema.Struct({ mcp_servers: Schema.Literal(true) })

export const Step = Schema.Union([
  DeltaStep,
  ThinkingStep,
  ToolCallStep,
  UsageStep,
  SleepStep,
  ErrorStep,
  HangStep,
  AwaitSteerStep,
  PermissionStep,
  AskStep,
  FunctionCallStep,
  CloseFailsStep,
  CloseHangsStep,
  CancelIgnoredStep,
  CancelSettlesOnStep,
  CancelFailsStep,
  WaitStep,
  FailSubmissionsStep,
  NotReusableStep,
  WriteFileStep,
  ReadFileStep,
  McpServersStep
])
export type Step = typeof Step.Type

export const Script = Schema.Struct({ script: Schema.Array(Step) })

const decodeScript = Schema.decodeUnknownResult(Script, { onExcessProperty: "error" })
// The codec's compiled validator (no transformations in a script): a valid script is checked in place in one walk.
// Schema's interpreted decode of a 10,000-step relay script cost about 9 µs per step, more than relaying the step.
const isScript = compileValidator(Script.ast)

/** The script does not decode; `index` names the first offending step when known. */
export interface InvalidScript {
  readonly _tag: "InvalidScript"
  readonly index: number | undefined
}

export type ParsedInput =
  | { readonly _tag: "Echo"; readonly text: string }
  /** The steps are the caller's own (parsed for it alone): a Turn lets each go once it runs. */
  | { readonly _tag: "Script"; readonly steps: Array<Step> }
  | InvalidScript

/**
 * The text of a MessageInput as a text-only transport sees it: text parts concatenated within a message,
 * messages joined by a blank line, an image part as `[image]`.
 */
export const inputText = (input: MessageInput): string =>
  input
    .map((message) => message.content.map((part) => (part.type === "input_text" ? part.text : "[image]")).join(""))
    .join("\n\n")

/**
 * Plain text echoes; a JSON object with a `script` member is a script. A JSON object with `script` that does
 * not decode is an invalid script (never silently echoed).
 */
export const parseInput = (text: string): ParsedInput => {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    return { _tag: "Echo", text }
  }
  if (typeof value !== "object" || value === null || Array.isArray(value) || !("script" in value)) {
    return { _tag: "Echo", text }
  }
  if (isScript !== undefined && isScript(value)) return { _tag: "Script", steps: (value as { script: Array<Step> }).script }
  const decoded = decodeScript(value)
  if (Result.isSuccess(decoded)) return { _tag: "Script", steps: [...decoded.success.script] }
  const steps = (value as { script: unknown }).script
  if (Array.isArray(steps)) {
    const decodeStep = Schema.decodeUnknownResult(Step, { onExcessProperty: "error" })
    const index = steps.findIndex((step) => Result.isFailure(decodeStep(step)))
    return { _tag: "InvalidScript", index: index === -1 ? undefined : index }
  }
  return { _tag: "InvalidScript", index: undefined }
}

/** Splits text into word-sized fragments whose concatenation is exactly the text. */
export const echoFragments = (text: string): ReadonlyArray<string> => {
  if (text.length === 0) return []
  const parts = text.match(/\s*\S+/g)
  if (parts === null) return [text]
  const joined = parts.join("")
  const trailing = text.slice(joined.length)
  if (trailing.length > 0) parts[parts.length - 1] = parts[parts.length - 1] + trailing
  return parts
}

/** Options a preparation may carry in `agent_options.scripted`. */
export const PrepareOptions = Schema.Struct({
  /** `fail`: preparation fails with nothing to clean up; `fail_with_residue`: it fails after creating a resource. */
  prepare: Schema.optionalKey(Schema.Literals(["ok", "fail", "fail_with_residue"])),
  /** Preparation completes only after this signal fires. */
  prepare_wait: Schema.optionalKey(SignalName),
  /** Preparation takes this long (on the Effect clock). */
  prepare_sleep: Schema.optionalKey(DurationInput),
  /** The Executor's first n native closes fail. */
  close_fails: Schema.optionalKey(NonNegativeInt),
  /** The Executor's first n native closes hang (until the attempt's timeout). */
  close_hangs: Schema.optionalKey(NonNegativeInt)
})
export type PrepareOptions = typeof PrepareOptions.Type

export const decodePrepareOptions = Schema.decodeUnknownResult(PrepareOptions, { onExcessProperty: "error" })

/** A validated duration input as a Duration. */
export const toDuration = (input: string | number): Duration.Duration =>
  Duration.fromInputUnsafe(input as Duration.Input)
