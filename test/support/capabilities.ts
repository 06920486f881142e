/**
 * The shared capability fixture (protocol "Capability declarations"; reference part 1 §4.5). Every test that
 * needs a declaration builds it here, so a new capability field cannot slip in with a silent default:
 *
 * - `declaration(overrides)` starts from a literal that names each of the 30 fields and sets it to `false`
 *   (no loop, no spread of defaults), copies the caller's explicit overrides, and validates the result with
 *   `Capabilities.decodeCapabilities`, throwing when anything is missing, unknown or not a boolean.
 * - A field added to the schema but not to these literals fails the typecheck (`satisfies`), fails every
 *   `declaration()` call at run time, and fails the key-equality contract test in test/proto.
 *
 * Test-only: never imported by src.
 */
import { Result } from "effect"
import { Capabilities } from "../../src/proto/index.js"

export type Declaration = Capabilities.AgentKindCapabilities
/** Explicit decisions for some fields; every field left out stays unsupported. */
export type Overrides = Partial<Declaration>

/**
 * Builds a complete declaration: every field unsupported except the ones the caller names. Throws when the
 * result is not a valid declaration (an override naming a field that does not exist, or a non-boolean).
 */
export const declaration = (overrides: Overrides = {}): Declaration => {
  const base = {
    subagent_observations: false,
    streaming: false,
    permissions: false,
    usage: false,
    resume: false,
    native_session_recovery: false,
    workspace_authoring: false,
    steering: false,
    message_items: false,
    tool_observations: false,
    environment_none: false,
    local_environment: false,
    preparation: false,
    workspace_read_preparation: false,
    workspace_output_export: false,
    programmatic_tool_calling_disable: false,
    web_search_control: false,
    execution_controls: false,
    text_verbosity: false,
    structured_output: false,
    tool_search: false,
    message_images: false,
    function_result_images: false,
    subagent_control: false,
    durable_input_receipts: false,
    durable_turns: false,
    function_tools: false,
    mcp_http_tools: false,
    mcp_http_required: false,
    mcp_http_bearer_auth: false
  } satisfies Declaration
  const candidate: Record<string, unknown> = base
  for (const [name, value] of Object.entries(overrides)) candidate[name] = value
  const decoded = Capabilities.decodeCapabilities(candidate)
  if (Result.isFailure(decoded)) {
    throw new Error(`capability fixture: the declaration is not complete and valid (${decoded.failure.reason})`)
  }
  return decoded.success
}

/**
 * Every field explicitly supported, field by field (a test fixture for a Harness that can do everything; not the
 * scripted harness's declaration, which is `scriptedCapabilities` in scenarios/Fixtures.ts), validated by this
 * fixture.
 */
export const allSupported = (): Declaration =>
  declaration({
    subagent_observations: true,
    streaming: true,
    permissions: true,
    usage: true,
    resume: true,
    native_session_recovery: true,
    workspace_authoring: true,
    steering: true,
    message_items: true,
    tool_observations: true,
    environment_none: true,
    local_environment: true,
    preparation: true,
    workspace_read_preparation: true,
    workspace_output_export: true,
    programmatic_tool_calling_disable: true,
    web_search_control: true,
    execution_controls: true,
    text_verbosity: true,
    structured_output: true,
    tool_search: true,
    message_images: true,
    function_result_images: true,
    subagent_control: true,
    durable_input_receipts: true,
    durable_turns: true,
    function_tools: true,
    mcp_http_tools: true,
    mcp_http_required: true,
    mcp_http_bearer_auth: true
  } satisfies Declaration)

/**
 * Only the capabilities Core requires for every execution on a Harness (protocol table "Always"), plus the
 * caller's explicit extra decisions.
 */
export const alwaysRequiredOnly = (extra: Overrides = {}): Declaration =>
  declaration({
    streaming: true,
    steering: true,
    durable_turns: true,
    durable_input_receipts: true,
    preparation: true,
    execution_controls: true,
    tool_observations: true,
    ...extra
  })

/** One `supported_agent_kinds` entry for a heartbeat. */
export const descriptor = (
  kind: string,
  capabilities: Declaration,
  options: { readonly available?: boolean; readonly version?: string } = {}
): Capabilities.AgentKindDescriptor => ({
  kind,
  available: options.available ?? true,
  ...(options.version === undefined ? {} : { version: options.version }),
  capabilities
})
