/**
 * The frames the codec bench decodes and encodes: one realistic message per measured kind, with values
 * invented for the bench. Run frames (delta, tool_call, usage, done) and the heartbeat go Runtime → Core;
 * execution_prepare and prompt_steer go Core → Runtime.
 */
import { Capabilities, Ids, type Messages } from "../src/proto/index.js"

const { runId, preparationRequestId, sessionId, inputId } = Ids.unsafeMake

const RUN = runId("run-0b7c1f2e-4d5a")
const SESSION = "5f0c2d8e-9a41-4b37-8e6d-1c2f3a4b5d6e"
const ENVIRONMENT = "a2d4f6e8-1b3c-4d5e-9f70-8a9b0c1d2e3f"

const capabilities = (supported: (name: Capabilities.CapabilityName, index: number) => boolean) =>
  Object.fromEntries(Capabilities.capabilityNames.map((name, i) => [name, supported(name, i)])) as
    Capabilities.AgentKindCapabilities

const usage = {
  tokens: {
    input_tokens: 18_402,
    cached_input_tokens: 12_288,
    output_tokens: 1_337,
    reasoning_output_tokens: 512,
    total_tokens: 19_739
  },
  provider: "openai",
  model: "gpt-5-codex",
  cost_usd: 0.0371
} as const

/** The measured kinds, in table order. */
export const frameKinds = [
  "delta",
  "tool_call",
  "usage",
  "done",
  "heartbeat",
  "execution_prepare",
  "prompt_steer"
] as const
export type FrameKind = (typeof frameKinds)[number]

/** Which direction decodes the kind, and whether it is a Run frame (the 50 % target) or the heartbeat (25 %). */
export const frameClass: Record<FrameKind, { readonly direction: "runtimeToCore" | "coreToRuntime"; readonly target?: number }> = {
  delta: { direction: "runtimeToCore", target: 0.5 },
  tool_call: { direction: "runtimeToCore", target: 0.5 },
  usage: { direction: "runtimeToCore", target: 0.5 },
  done: { direction: "runtimeToCore", target: 0.5 },
  heartbeat: { direction: "runtimeToCore", target: 0.25 },
  execution_prepare: { direction: "coreToRuntime" },
  prompt_steer: { direction: "coreToRuntime" }
}

export const messages: { readonly [K in FrameKind]: Messages.MessageOfType<K> } = {
  delta: {
    type: "delta",
    id: RUN,
    payload: { item_id: "msg_0042", delta: "The parser accepts trailing commas only in ", sequence: 118 }
  },
  tool_call: {
    type: "tool_call",
    id: RUN,
    payload: {
      id: "call_8f2d",
      name: "shell",
      stage: "after",
      args: { command: ["rg", "--files", "src/parser"], timeout_ms: 10_000 },
      result: { exit_code: 0, stdout_bytes: 88 },
      observation: {
        kind: "command",
        status: "completed",
        command: "rg --files src/parser",
        cwd: "/workspace",
        exit_code: 0,
        duration_ms: 41,
        output: "src/parser/lexer.ts\nsrc/parser/grammar.ts\nsrc/parser/index.ts\n"
      }
    }
  },
  usage: { type: "usage", id: RUN, payload: usage },
  done: {
    type: "done",
    id: RUN,
    payload: {
      content: "The parser accepts trailing commas only in object literals; arrays reject them (grammar.ts:212).",
      usage,
      metadata: { agent_session_id: "thread_41c9e0", agent_session_type: "codex_thread" },
      source_completed_at_ms: 1_767_225_712_345
    }
  },
  heartbeat: {
    type: "heartbeat",
    payload: {
      ts: 1_767_225_600,
      active_requests: 3,
      daemon_version: "0.1.0",
      supported_agent_kinds: [
        { kind: "codex", available: true, version: "0.46.0", capabilities: capabilities(() => true) },
        { kind: "claude_code", available: true, version: "2.0.14", capabilities: capabilities((_, i) => i % 3 !== 0) },
        { kind: "scripted", available: false, capabilities: capabilities((_, i) => i % 2 === 0) }
      ]
    }
  },
  execution_prepare: {
    type: "execution_prepare",
    id: preparationRequestId("prep-7e21c0d4"),
    payload: {
      session_id: sessionId(SESSION),
      configuration: {
        agent_kind: "codex",
        conversation_id: "",
        run_id: "",
        agent_options: { model: "gpt-5-codex", reasoning_effort: "medium", system_prompt: "Be concise; cite paths." },
        execution_controls: { web_search: "disabled", text_verbosity: "medium", disable_programmatic_tool_calling: true },
        mcp_http_servers: [
          {
            connection_origin: "environment",
            server_label: "issues",
            server_url: "https://mcp.example.net/issues",
            allowed_tools: ["search_issues", "get_issue"],
            required: false
          }
        ],
        local_environment: {
          id: ENVIRONMENT,
          workspace_directory: "/workspace",
          capability_sources: { skills: [{ type: "inline", name: "changelog", description: "Writes changelog entries" }] },
          network_access: "restricted",
          allowed_domains: ["registry.npmjs.org"]
        },
        agent_state_key: `agents-api-${SESSION}`,
        strict_resume: true,
        observe_messages: true,
        observe_tool_observations: true,
        function_tools: [
          {
            name: "lookup_release",
            description: "Find a release by tag",
            parameters: { type: "object", properties: { tag: { type: "string" } }, required: ["tag"] }
          }
        ],
        disable_subagents: true
      }
    }
  },
  prompt_steer: {
    type: "prompt_steer",
    id: RUN,
    payload: {
      input_id: inputId("input-0003"),
      input: [{ content: [{ type: "input_text", text: "Also check the array case in grammar.ts." }] }],
      durable_receipt: true
    }
  }
}

/** The wire text of each kind (what a peer sends). */
export const texts: { readonly [K in FrameKind]: string } = Object.fromEntries(
  frameKinds.map((k) => [k, JSON.stringify(messages[k])])
) as { readonly [K in FrameKind]: string }
