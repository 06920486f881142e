/**
 * One realistic, hand-written sample per message type of both directions (values invented for these tests,
 * shaped after the reference examples), with the payload members the 0.10.0 reference says are always
 * written or required. The tables are typed against the catalogues, so a new message type without a sample
 * fails the typecheck, and the contract tests compare their keys with the catalogues at run time.
 */
import { Ids, type Messages } from "../../../src/proto/index.js"
import { allSupported, declaration, descriptor } from "../../support/capabilities.js"

export interface Sample<M> {
  /** A valid message as a sender builds it. */
  readonly message: M
  /** Payload members that must be present (reference: required / always written). */
  readonly required: ReadonlyArray<string>
}

type Table<T extends Messages.Message["type"]> = { readonly [K in T]: Sample<Messages.MessageOfType<K>> }

// ---------------------------------------------------------------------------------------------- identities

const { runId, preparationRequestId, admissionHandle, executorId, interactionId, deliveryId, inputId, callId } =
  Ids.unsafeMake
const { transferId, operationId, suspensionId, sessionId, ackSubjectId } = Ids.unsafeMake

const RUN = runId("run-5521-b")
const PREP = preparationRequestId("prep-4c2e")
const HANDLE = admissionHandle("7b3e0c91-2f4d-4a68-9c15-e0d2b6a4f387")
const EXECUTOR = executorId("1d6a9f40-8b2c-4e73-a5d1-3f9c7e2b0a64")
const SESSION = "c41e9b72-0d3a-4f58-9e6b-2a7d5c8f1b03"
const ENVIRONMENT = "8d3f1a27-5b6c-4e9d-a0f2-7c1e3b5d9a46"
const TRACE = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

/** The 12-byte body "# Intro\nHi.\n" used by the transfer samples. */
const BODY = { base64: "IyBJbnRybwpIaS4K", size: 12, sha256: "d8d1102ee261c2bc0fb7eeab1d14cec5b49b8cab27915f4c1d5b8cbaa8686dde" }

const executionConfiguration = {
  agent_kind: "codex",
  conversation_id: "",
  run_id: "",
  agent_options: { model: "gpt-5", system_prompt: "Answer briefly and cite file paths." },
  execution_controls: {
    web_search: "disabled",
    text_verbosity: "medium",
    disable_programmatic_tool_calling: true,
    output_format: {
      type: "json_schema",
      schema: { type: "object", properties: { summary: { type: "string" } }, required: ["summary"] }
    }
  },
  mcp_http_servers: [
    {
      connection_origin: "environment",
      server_label: "tickets",
      server_url: "https://mcp.example.org/tickets",
      allowed_tools: ["find_ticket"],
      required: true
    }
  ],
  local_environment: {
    id: ENVIRONMENT,
    workspace_directory: "/workspace",
    capability_sources: { skills: [{ type: "inline", name: "release-notes", description: "Drafts release notes" }] },
    network_access: "enabled"
  },
  agent_state_key: `agents-api-${SESSION}`,
  release_on_completion: true,
  strict_resume: true,
  observe_messages: true,
  observe_tool_observations: true,
  function_tools: [
    {
      name: "find_order",
      description: "Look up an order by its number",
      parameters: { type: "object", properties: { number: { type: "string" } }, required: ["number"] }
    }
  ],
  disable_subagents: true
} as const

// ---------------------------------------------------------------------------------------------- Core → Runtime

export const coreToRuntimeSamples: Table<Messages.CoreToRuntimeType> = {
  runtime_prepare: {
    message: {
      type: "runtime_prepare",
      id: transferId("3e9b6d2a-7c41-4f0a-b8d5-2a6c9e1f4b70"),
      payload: {
        step: "begin",
        environment_id: ENVIRONMENT,
        session_id: SESSION,
        action: "file",
        file: { path: "/workspace/docs/intro.md" },
        size_bytes: BODY.size,
        sha256: BODY.sha256
      },
      trace: TRACE
    },
    required: ["step"]
  },
  execution_prepare: {
    message: {
      type: "execution_prepare",
      id: PREP,
      payload: { session_id: sessionId(SESSION), configuration: executionConfiguration },
      trace: TRACE
    },
    required: ["session_id", "configuration"]
  },
  execution_start: {
    message: {
      type: "execution_start",
      id: PREP,
      payload: {
        executor_id: EXECUTOR,
        handle: HANDLE,
        run_id: RUN,
        input: [
          { content: [{ type: "input_text", text: "Summarise the open tickets for the release." }] },
          { content: [{ type: "input_text", text: "Keep it under ten lines." }] }
        ]
      }
    },
    required: ["executor_id", "handle", "run_id", "input"]
  },
  execution_release: {
    message: { type: "execution_release", id: PREP, payload: { handle: HANDLE } },
    required: ["handle"]
  },
  prompt_request: {
    message: {
      type: "prompt_request",
      id: RUN,
      payload: {
        agent_kind: "claude_code",
        conversation_id: "",
        run_id: RUN,
        input: [{ content: [{ type: "input_text", text: "Which tests cover the parser?" }] }],
        execution_controls: { web_search: "disabled", text_verbosity: "low" },
        mcp_http_servers: [
          {
            connection_origin: "service",
            server_label: "docs",
            server_url: "https://mcp.example.org/docs",
            allowed_tools: null,
            bearer_token: "vault-resolved-token"
          }
        ],
        agent_session_id: "thread_7f2a",
        strict_resume: true,
        require_existing_native_session: true,
        observe_tool_observations: true,
        observe_subagent_identities: true,
        max_concurrent_subagents: 2,
        disable_execution_environment: true
      }
    },
    required: ["agent_kind", "conversation_id", "run_id"]
  },
  prompt_cancel: {
    message: { type: "prompt_cancel", id: RUN, payload: { delivery_id: deliveryId("cancel-81d0") } },
    required: []
  },
  device_shutdown: {
    message: { type: "device_shutdown", payload: { reason: "operator requested a drain" } },
    required: []
  },
  permission_decision: {
    message: {
      type: "permission_decision",
      id: interactionId("perm_4be1a7c2"),
      payload: {
        delivery_id: deliveryId("decision-0931"),
        approved: true,
        message: "Only inside the build directory.",
        updated_input: { command: "rm -rf build/tmp" }
      }
    },
    required: ["delivery_id", "approved"]
  },
  prompt_for_user_choice_decision: {
    message: {
      type: "prompt_for_user_choice_decision",
      id: interactionId("ask_93c0d2e5"),
      payload: {
        delivery_id: deliveryId("decision-0932"),
        question_answers: [
          { question_id: "target-branch", answers: ["release/2.4"] },
          { question_id: "extra-notes", answers: [] }
        ]
      }
    },
    required: ["delivery_id"]
  },
  prompt_steer: {
    message: {
      type: "prompt_steer",
      id: RUN,
      payload: {
        input_id: inputId("17"),
        input: [{ content: [{ type: "input_text", text: "Also list the flaky ones." }] }],
        durable_receipt: true
      }
    },
    required: ["input_id", "input"]
  },
  function_result: {
    message: {
      type: "function_result",
      id: RUN,
      payload: {
        delivery_id: deliveryId("function:9b1c"),
        call_id: callId("call_7"),
        success: true,
        content: [{ type: "input_text", text: "Order 5521 shipped on Monday." }]
      }
    },
    required: ["delivery_id", "call_id", "success", "content"]
  },
  workspace_read: {
    message: {
      type: "workspace_read",
      id: operationId("a4c2e8f1-6b3d-4f09-8e7a-5d1c9b2f0e36"),
      payload: {
        handle: HANDLE,
        environment_id: ENVIRONMENT,
        path: "src",
        max_bytes: 0,
        operation: "directory",
        max_entries: 200
      }
    },
    required: ["environment_id", "path", "max_bytes"]
  },
  workspace_write: {
    message: {
      type: "workspace_write",
      id: operationId("f2b7c9e4-1a8d-4c56-b3e0-9d6a2f4c8b17"),
      payload: {
        step: "begin",
        environment_id: ENVIRONMENT,
        session_id: SESSION,
        path: "docs/intro.md",
        size_bytes: BODY.size,
        sha256: BODY.sha256
      }
    },
    required: ["step"]
  },
  workspace_export: {
    message: {
      type: "workspace_export",
      id: operationId("e9d1c3b5-7a2f-4e68-9c04-b6a8d2f1e357"),
      payload: { step: "begin", handle: HANDLE, environment_id: ENVIRONMENT }
    },
    required: ["step"]
  },
  environment_quiesce: {
    message: {
      type: "environment_quiesce",
      id: operationId("q-6f1e"),
      payload: { environment_id: ENVIRONMENT, suspend_id: suspensionId("suspend-0012") }
    },
    required: ["environment_id", "suspend_id"]
  },
  environment_resume: {
    message: {
      type: "environment_resume",
      id: operationId("r-6f1f"),
      payload: { environment_id: ENVIRONMENT, suspend_id: suspensionId("suspend-0012"), rollback: true }
    },
    required: ["environment_id", "suspend_id"]
  }
}

// ---------------------------------------------------------------------------------------------- Runtime → Core

const finalUsage = {
  tokens: {
    input_tokens: 2310,
    cached_input_tokens: 1900,
    output_tokens: 188,
    reasoning_output_tokens: 64,
    total_tokens: 2498
  },
  provider: "openai",
  model: "gpt-5",
  cost_usd: 0.0142
} as const

export const runtimeToCoreSamples: Table<Messages.RuntimeToCoreType> = {
  heartbeat: {
    message: {
      type: "heartbeat",
      payload: {
        ts: 1767225600,
        active_requests: 1,
        daemon_version: "0.4.1",
        supported_agent_kinds: [
          descriptor("codex", allSupported(), { version: "0.46.0" }),
          descriptor("claude_code", declaration({ streaming: true, usage: true }), { available: false })
        ]
      }
    },
    required: ["ts", "active_requests"]
  },
  runtime_prepare_result: {
    message: {
      type: "runtime_prepare_result",
      id: transferId("3e9b6d2a-7c41-4f0a-b8d5-2a6c9e1f4b70"),
      payload: { outcome: "received", offset: BODY.size },
      trace: TRACE
    },
    required: ["outcome"]
  },
  preparation_status: {
    message: {
      type: "preparation_status",
      id: PREP,
      payload: { executor_id: EXECUTOR, handle: HANDLE, revision: 2, state: "ready", expires_at: 1767225900000 },
      trace: TRACE
    },
    required: ["revision", "state"]
  },
  delta: {
    message: { type: "delta", id: RUN, payload: { item_id: "msg_01", delta: "Three tickets are ", sequence: 3 } },
    required: ["delta", "sequence"]
  },
  thinking: {
    message: { type: "thinking", id: RUN, payload: { text: "The tracker groups tickets by label.", sequence: 1 } },
    required: ["text"]
  },
  output_message: {
    message: {
      type: "output_message",
      id: RUN,
      payload: { id: "msg_01", status: "completed", phase: "final_answer", text: "Three tickets are still open." }
    },
    required: ["id", "status"]
  },
  tool_call: {
    message: {
      type: "tool_call",
      id: RUN,
      payload: {
        id: "call_shell_3",
        name: "shell",
        stage: "after",
        args: { cmd: "ls tests" },
        result: { exit: 0 },
        observation: {
          kind: "command",
          status: "completed",
          command: "ls tests",
          cwd: "/workspace",
          exit_code: 0,
          duration_ms: 37,
          output: "parser.test.ts\nlexer.test.ts\n",
          content: [{ type: "input_text", text: "parser.test.ts\nlexer.test.ts\n" }]
        }
      }
    },
    required: ["id", "name", "stage"]
  },
  usage: {
    message: { type: "usage", id: RUN, payload: finalUsage },
    required: []
  },
  error: {
    message: {
      type: "error",
      id: RUN,
      payload: { error: "the upstream connection was reset", code: "connection_failed", http_status: 503 }
    },
    required: ["error"]
  },
  done: {
    message: {
      type: "done",
      id: RUN,
      payload: {
        content: "Three tickets are still open.",
        usage: finalUsage,
        metadata: { agent_session_id: "thread_7f2a", agent_session_type: "codex_thread" },
        source_completed_at_ms: 1767225712345
      }
    },
    required: ["content"]
  },
  permission_request: {
    message: {
      type: "permission_request",
      id: RUN,
      payload: {
        request_id: interactionId("perm_4be1a7c2"),
        tool: "Bash",
        title: "Delete the build output",
        detail: "The command removes build/tmp recursively.",
        payload: { command: "rm -rf build/tmp" }
      }
    },
    required: ["request_id", "tool", "title"]
  },
  permission_cancel: {
    message: { type: "permission_cancel", id: interactionId("perm_4be1a7c2") },
    required: []
  },
  prompt_for_user_choice: {
    message: {
      type: "prompt_for_user_choice",
      id: RUN,
      payload: {
        ask_id: interactionId("ask_93c0d2e5"),
        questions: [
          {
            id: "target-branch",
            header: "Branch",
            question: "Which branch should the notes describe?",
            options: [{ label: "main" }, { label: "release/2.4", description: "the frozen release line" }]
          },
          { id: "extra-notes", question: "Anything to add?", is_other: true, options: [] }
        ],
        tool_use_id: "toolu_0c1d",
        auto_resolution_ms: 600000
      }
    },
    required: ["ask_id", "questions"]
  },
  interaction_decision_ack: {
    message: {
      type: "interaction_decision_ack",
      id: ackSubjectId(RUN),
      payload: {
        delivery_id: deliveryId("cancel-81d0"),
        applied: true,
        outcome: { content: "Two of the three", metadata: { agent_session_id: "thread_7f2a" } }
      }
    },
    required: ["delivery_id", "applied"]
  },
  prompt_steer_ack: {
    message: { type: "prompt_steer_ack", id: RUN, payload: { input_id: "17", accepted: false, written: true } },
    required: ["input_id", "accepted"]
  },
  function_call: {
    message: {
      type: "function_call",
      id: RUN,
      payload: { call_id: callId("call_7"), name: "find_order", arguments: { number: "5521" } }
    },
    required: ["call_id", "name", "arguments"]
  },
  workspace_read_result: {
    message: {
      type: "workspace_read_result",
      id: operationId("a4c2e8f1-6b3d-4f09-8e7a-5d1c9b2f0e36"),
      payload: {
        outcome: "completed",
        close_acknowledged: true,
        directory: {
          entries: [
            { name: "parser.ts", kind: "file", size_bytes: 4096 },
            { name: "fixtures", kind: "directory", size_bytes: null }
          ],
          truncated: false
        }
      }
    },
    required: ["outcome"]
  },
  workspace_write_result: {
    message: {
      type: "workspace_write_result",
      id: operationId("f2b7c9e4-1a8d-4c56-b3e0-9d6a2f4c8b17"),
      payload: { outcome: "completed", size_bytes: BODY.size }
    },
    required: ["outcome"]
  },
  workspace_export_result: {
    message: {
      type: "workspace_export_result",
      id: operationId("e9d1c3b5-7a2f-4e68-9c04-b6a8d2f1e357"),
      payload: { outcome: "chunk", offset: 0, data: BODY.base64 }
    },
    required: ["outcome", "offset"]
  },
  environment_quiesced: {
    message: {
      type: "environment_quiesced",
      id: operationId("q-6f1e"),
      payload: { environment_id: ENVIRONMENT, suspend_id: "suspend-0012", accepted: true }
    },
    required: ["environment_id", "suspend_id", "accepted"]
  },
  environment_resumed: {
    message: {
      type: "environment_resumed",
      id: operationId("r-6f1f"),
      payload: { environment_id: ENVIRONMENT, suspend_id: "suspend-0012", accepted: false, error_code: "not_suspended" }
    },
    required: ["environment_id", "suspend_id", "accepted"]
  },
  subagent_identity: {
    message: {
      type: "subagent_identity",
      id: RUN,
      payload: {
        native_id: "agent-child-2",
        parent_native_id: "agent-root",
        native_created_at: 1767225650,
        parent_turn_id: "turn-1",
        source_item_id: "item-14",
        name: "test-runner",
        instructions: null
      }
    },
    required: [
      "native_id",
      "parent_native_id",
      "native_created_at",
      "parent_turn_id",
      "source_item_id",
      "name",
      "instructions"
    ]
  },
  subagent_lifecycle: {
    message: {
      type: "subagent_lifecycle",
      id: RUN,
      payload: { native_id: "agent-child-2", effect_id: "effect-3", status: "running", occurred_at_ms: 1767225651000 }
    },
    required: ["native_id", "effect_id", "status", "occurred_at_ms"]
  },
  subagent_turn: {
    message: {
      type: "subagent_turn",
      id: RUN,
      payload: {
        native_id: "agent-child-2",
        turn_id: "child-turn-1",
        status: "completed",
        created_at_ms: 1767225651000,
        started_at_ms: 1767225651200,
        completed_at_ms: null,
        usage: { input_tokens: 300, output_tokens: 41 }
      }
    },
    required: ["native_id", "turn_id", "status", "created_at_ms", "started_at_ms", "completed_at_ms", "usage"]
  },
  subagent_item: {
    message: {
      type: "subagent_item",
      id: RUN,
      payload: {
        native_id: "agent-child-2",
        turn_id: "child-turn-1",
        item_id: "child-msg-1",
        position: 0,
        kind: "output_message",
        payload: { id: "child-msg-1", status: "completed", text: "All parser tests pass." }
      }
    },
    required: ["native_id", "turn_id", "item_id", "position", "kind", "payload"]
  },
  subagent_coordination: {
    message: {
      type: "subagent_coordination",
      id: RUN,
      payload: {
        id: "coord-5",
        kind: "create_subagent_call",
        status: "completed",
        actor_id: "",
        recipients: ["agent-child-2"],
        text: "Run the parser tests.",
        model: null,
        reasoning_effort: "low"
      }
    },
    required: ["id", "kind", "status", "actor_id", "recipients", "text", "model", "reasoning_effort"]
  }
}

/** Both tables, with the direction each sample belongs to. */
export const allSamples: ReadonlyArray<{
  readonly direction: "coreToRuntime" | "runtimeToCore"
  readonly type: string
  readonly sample: Sample<Messages.Message>
}> = [
  ...Object.entries(coreToRuntimeSamples).map(([type, sample]) => ({ direction: "coreToRuntime" as const, type, sample })),
  ...Object.entries(runtimeToCoreSamples).map(([type, sample]) => ({ direction: "runtimeToCore" as const, type, sample }))
]
