/**
 * Capability declarations (protocol "Capability declarations"). `AgentKindCapabilities` describes one composed
 * Runtime + Harness. Every field is required: on the wire each is a JSON boolean (true = supported,
 * false = unsupported) and all 30 are present, including false ones. There is no default and no implicit
 * basic descriptor: decoding rejects an omitted, null, non-boolean or unknown field and a missing capability
 * object; encoding an incomplete declaration fails. A new field needs an explicit decision in every
 * declaration: the compiler enforces it for literals, the contract tests for everything else.
 */
import { Result, Schema } from "effect"
import { NonNegativeInt } from "./Checks.js"
import { MaxAgentKinds } from "./Limits.js"

/** The 30 capability fields, in declaration order (encoders emit this order; decoders do not depend on it). */
export const capabilityNames = [
  "subagent_observations",
  "streaming",
  "permissions",
  "usage",
  "resume",
  "native_session_recovery",
  "workspace_authoring",
  "steering",
  "message_items",
  "tool_observations",
  "environment_none",
  "local_environment",
  "preparation",
  "workspace_read_preparation",
  "workspace_output_export",
  "programmatic_tool_calling_disable",
  "web_search_control",
  "execution_controls",
  "text_verbosity",
  "structured_output",
  "tool_search",
  "message_images",
  "function_result_images",
  "subagent_control",
  "durable_input_receipts",
  "durable_turns",
  "function_tools",
  "mcp_http_tools",
  "mcp_http_required",
  "mcp_http_bearer_auth"
] as const
export type CapabilityName = (typeof capabilityNames)[number]

const fields = Object.fromEntries(capabilityNames.map((name) => [name, Schema.Boolean])) as {
  readonly [K in CapabilityName]: typeof Schema.Boolean
}

/** One composed Runtime + Harness declaration: 30 required booleans, strict. */
export const AgentKindCapabilities = Schema.Struct(fields)
export type AgentKindCapabilities = typeof AgentKindCapabilities.Type

/** Capabilities Core requires for every execution on a Harness (together with `available: true`). */
export const alwaysRequired: ReadonlyArray<CapabilityName> = [
  "streaming",
  "steering",
  "durable_turns",
  "durable_input_receipts",
  "preparation",
  "execution_controls",
  "tool_observations"
]

const strict = { onExcessProperty: "error" } as const
const decodeCaps = Schema.decodeUnknownResult(AgentKindCapabilities, strict)
const encodeCaps = Schema.encodeUnknownResult(AgentKindCapabilities, strict)

/** A declaration that failed validation; the offending key and value are deliberately not echoed. */
export class InvalidDeclaration extends Schema.TaggedError<InvalidDeclaration>()("InvalidDeclaration", {
  reason: Schema.Literals(["not_an_object", "incomplete_or_invalid"])
}) {
  override get message() {
    return `invalid capability declaration (${this.reason})`
  }
}

/** Validates an unknown value as a complete declaration (the same rule as the wire decode). */
export const decodeCapabilities = (input: unknown): Result.Result<AgentKindCapabilities, InvalidDeclaration> =>
  typeof input !== "object" || input === null || Array.isArray(input)
    ? Result.fail(new InvalidDeclaration({ reason: "not_an_object" }))
    : Result.mapError(decodeCaps(input), () => new InvalidDeclaration({ reason: "incomplete_or_invalid" }))

/**
 * Encodes a declaration for the wire, in declaration order. Fails when any field is missing or not a boolean:
 * an incomplete declaration is never sent.
 */
export const encodeCapabilities = (
  caps: AgentKindCapabilities
): Result.Result<Record<CapabilityName, boolean>, InvalidDeclaration> =>
  Result.match(encodeCaps(caps), {
    onFailure: () => Result.fail(new InvalidDeclaration({ reason: "incomplete_or_invalid" })),
    onSuccess: (encoded) => {
      const ordered = {} as Record<CapabilityName, boolean>
      for (const name of capabilityNames) ordered[name] = (encoded as Record<CapabilityName, boolean>)[name]
      return Result.succeed(ordered)
    }
  })

/** The capabilities a declaration supports, in declaration order. */
export const supportedNames = (caps: AgentKindCapabilities): ReadonlyArray<CapabilityName> =>
  capabilityNames.filter((name) => caps[name])

// ---------------------------------------------------------------------------------------------- persistence

/**
 * The persisted boolean projection of a declaration: one `cap_<name>` boolean per field, so a store can keep
 * each as a column and a reader can reject a projection written before a field existed.
 */
export type PersistedProjection = { readonly [K in CapabilityName as `cap_${K}`]: boolean }

export const toPersistedProjection = (caps: AgentKindCapabilities): PersistedProjection => {
  const out: Record<string, boolean> = {}
  for (const name of capabilityNames) out[`cap_${name}`] = caps[name]
  return out as PersistedProjection
}

/**
 * Reads a persisted projection back. A projection missing any field (written by an older build) or holding
 * an unknown one is rejected: the stored declaration is then unknown, which never admits anything.
 */
export const fromPersistedProjection = (row: unknown): Result.Result<AgentKindCapabilities, InvalidDeclaration> => {
  if (typeof row !== "object" || row === null || Array.isArray(row)) {
    return Result.fail(new InvalidDeclaration({ reason: "not_an_object" }))
  }
  const record = row as Record<string, unknown>
  const keys = Object.keys(record)
  if (keys.length !== capabilityNames.length) return Result.fail(new InvalidDeclaration({ reason: "incomplete_or_invalid" }))
  const caps: Record<string, unknown> = {}
  for (const name of capabilityNames) {
    if (!Object.prototype.hasOwnProperty.call(record, `cap_${name}`)) {
      return Result.fail(new InvalidDeclaration({ reason: "incomplete_or_invalid" }))
    }
    caps[name] = record[`cap_${name}`]
  }
  return decodeCapabilities(caps)
}

// ---------------------------------------------------------------------------------------------- heartbeat

/** One entry of `supported_agent_kinds`: a Harness kind, its availability, version and complete declaration. */
export const AgentKindDescriptor = Schema.Struct({
  kind: Schema.NonEmptyString,
  available: Schema.Boolean,
  version: Schema.optionalKey(Schema.String),
  capabilities: AgentKindCapabilities
})
export type AgentKindDescriptor = typeof AgentKindDescriptor.Type

/**
 * Heartbeat payload. Heartbeats prove liveness only: never progress and never a receipt. Each one carries the
 * complete current declaration and replaces the previous snapshot; a kind it omits is not advertised.
 */
export const HeartbeatPayload = Schema.Struct({
  /** Sender clock in Unix seconds. */
  ts: NonNegativeInt,
  /** Runs currently active in the daemon. */
  active_requests: NonNegativeInt,
  /** The Runtime build version (not the wire version). */
  daemon_version: Schema.optionalKey(Schema.String),
  /** Absent or empty: no engine is advertised. A kind may appear at most once; at most 32 kinds (`Limits.MaxAgentKinds`). */
  supported_agent_kinds: Schema.optionalKey(
    Schema.Array(AgentKindDescriptor).check(
      Schema.isMaxLength(MaxAgentKinds),
      Schema.makeFilter((kinds) => new Set(kinds.map((k) => k.kind)).size === kinds.length, {
        expected: "each kind declared once"
      })
    )
  )
})
export type HeartbeatPayload = typeof HeartbeatPayload.Type
