/**
 * Shared execution-configuration rules (reference part 1 §6.2, §7; part 2 §7.1, §8.2): environment, MCP
 * origin and tool-search rules, the executable and read-only preparation profiles, the capabilities a
 * request needs, and the Run id of a prompt_request.
 */
import { assert, describe, it } from "@effect/vitest"
import { Option } from "effect"
import { Capabilities, Execution, Limits } from "../../src/proto/index.js"

type Config = Execution.PromptRequestPayload
const SESSION = "c41e9b72-0d3a-4f58-9e6b-2a7d5c8f1b03"
const minimal: Config = { agent_kind: "codex", conversation_id: "", run_id: "" }
const local = (network_access?: Execution.NetworkAccess): Execution.LocalEnvironment => ({
  id: "8d3f1a27-5b6c-4e9d-a0f2-7c1e3b5d9a46",
  workspace_directory: "/workspace",
  capability_sources: null,
  ...(network_access === undefined ? {} : { network_access })
})
const server = (connection_origin: Execution.ConnectionOrigin, extra: Partial<Execution.McpHttpServer> = {}): Execution.McpHttpServer => ({
  connection_origin,
  server_label: "tickets",
  server_url: "https://mcp.example.org/tickets",
  allowed_tools: null,
  ...extra
})
const fn = (name: string, defer_loading?: boolean): Execution.FunctionTool => ({
  name,
  description: "a function",
  parameters: { type: "object" },
  ...(defer_loading === undefined ? {} : { defer_loading })
})

describe("Execution.validateConfiguration", () => {
  it("accepts Environment none with service MCP, a networked local Environment with environment MCP, and neither (C1)", () => {
    for (const config of [
      { ...minimal, disable_execution_environment: true, mcp_http_servers: [server("service")] },
      { ...minimal, local_environment: local("enabled"), mcp_http_servers: [server("environment")] },
      { ...minimal, local_environment: local("restricted"), mcp_http_servers: [] },
      { ...minimal, mcp_http_servers: null },
      minimal,
      { ...minimal, tool_search: true, function_tools: [fn("a", true), fn("b")] },
      { ...minimal, function_tools: [fn("a"), fn("b")] }
    ] satisfies ReadonlyArray<Config>) {
      assert.deepStrictEqual(Execution.validateConfiguration(config), Option.none())
    }
  })

  it("refuses a local Environment together with Environment none", () => {
    const config = { ...minimal, local_environment: local("enabled"), disable_execution_environment: true }
    assert.deepStrictEqual(Execution.validateConfiguration(config), Option.some("environment_conflict"))
  })

  it("refuses a service-origin server outside Environment none", () => {
    for (const config of [
      { ...minimal, mcp_http_servers: [server("service")] },
      { ...minimal, local_environment: local("enabled"), mcp_http_servers: [server("service")] },
      { ...minimal, disable_execution_environment: false, mcp_http_servers: [server("service")] }
    ] satisfies ReadonlyArray<Config>) {
      assert.deepStrictEqual(Execution.validateConfiguration(config), Option.some("mcp_origin_service"))
    }
  })

  it("refuses an environment-origin server without a local Environment whose network access is enabled (C2)", () => {
    for (const config of [
      { ...minimal, mcp_http_servers: [server("environment")] },
      { ...minimal, disable_execution_environment: true, mcp_http_servers: [server("environment")] },
      { ...minimal, local_environment: local(), mcp_http_servers: [server("environment")] },
      { ...minimal, local_environment: local("restricted"), mcp_http_servers: [server("environment")] },
      { ...minimal, local_environment: local("disabled"), mcp_http_servers: [server("environment")] }
    ] satisfies ReadonlyArray<Config>) {
      assert.deepStrictEqual(Execution.validateConfiguration(config), Option.some("mcp_origin_environment"))
    }
  })

  it("refuses tool search without a deferred function and a deferred function without tool search", () => {
    assert.deepStrictEqual(Execution.validateConfiguration({ ...minimal, tool_search: true }), Option.some("tool_search_pairing"))
    assert.deepStrictEqual(Execution.validateConfiguration({ ...minimal, tool_search: true, function_tools: [fn("a")] }), Option.some("tool_search_pairing"))
    assert.deepStrictEqual(Execution.validateConfiguration({ ...minimal, function_tools: [fn("a", true)] }), Option.some("tool_search_pairing"))
  })

  it("refuses two functions with one name and a blank function name", () => {
    assert.deepStrictEqual(Execution.validateConfiguration({ ...minimal, function_tools: [fn("a"), fn("a")] }), Option.some("duplicate_function"))
    assert.deepStrictEqual(Execution.validateConfiguration({ ...minimal, function_tools: [fn(" ")] }), Option.some("blank_function_name"))
  })

  it("admits 64 function tools and refuses 65 (Limits.MaxFunctionTools)", () => {
    const tools = (n: number) => Array.from({ length: n }, (_, i) => fn(`f${i}`))
    assert.strictEqual(Limits.MaxFunctionTools, 64)
    assert.deepStrictEqual(Execution.validateConfiguration({ ...minimal, function_tools: tools(64) }), Option.none())
    assert.deepStrictEqual(Execution.validateConfiguration({ ...minimal, function_tools: tools(65) }), Option.some("too_many_functions"))
    // The count is checked first: 65 tools with a duplicate are still "too many".
    assert.deepStrictEqual(
      Execution.validateConfiguration({ ...minimal, function_tools: [...tools(64), fn("f0")] }),
      Option.some("too_many_functions")
    )
  })

  it("admits a function name of 512 UTF-8 bytes and refuses 513, counting bytes, not characters (Limits.MaxFunctionNameBytes)", () => {
    assert.strictEqual(Limits.MaxFunctionNameBytes, 512)
    const check = (name: string) => Execution.validateConfiguration({ ...minimal, function_tools: [fn(name)] })
    assert.deepStrictEqual(check("a".repeat(512)), Option.none())
    assert.deepStrictEqual(check("a".repeat(513)), Option.some("function_name_too_long"))
    // "é" is 2 bytes: 256 of them are 512 bytes (256 characters), 256 plus one ASCII letter are 513.
    assert.deepStrictEqual(check("é".repeat(256)), Option.none())
    assert.deepStrictEqual(check("é".repeat(256) + "a"), Option.some("function_name_too_long"))
    // A 4-byte character: 128 × "😀" is 512 bytes in 256 UTF-16 units.
    assert.deepStrictEqual(check("😀".repeat(128)), Option.none())
    assert.deepStrictEqual(check("😀".repeat(128) + "a"), Option.some("function_name_too_long"))
  })

  it("applies the function-tool bounds to executable preparations too", () => {
    const config: Config = {
      ...minimal,
      agent_state_key: `agents-api-${SESSION}`,
      strict_resume: true,
      function_tools: [fn("x".repeat(513))]
    }
    assert.deepStrictEqual(Execution.validatePreparationConfiguration(SESSION, config), Option.some("function_name_too_long"))
  })
})

const prepared: Config = {
  ...minimal,
  agent_state_key: `agents-api-${SESSION}`,
  strict_resume: true,
  release_on_completion: true,
  disable_execution_environment: true
}

describe("Execution.validatePreparationConfiguration", () => {
  it("accepts an executable preparation without Run identity or input, with strict resume", () => {
    assert.deepStrictEqual(Execution.validatePreparationConfiguration(SESSION, prepared), Option.none())
    assert.deepStrictEqual(Execution.validatePreparationConfiguration(SESSION, { ...prepared, input: [] }), Option.none())
    assert.strictEqual(Execution.agentStateKeyFor(SESSION), `agents-api-${SESSION}`)
  })

  it("refuses each forbidden or missing member with its own code", () => {
    const { agent_state_key: _k, ...noKey } = prepared
    const { strict_resume: _s, ...noStrict } = prepared
    const cases: ReadonlyArray<[Config, Execution.PreparationConfigurationIssue]> = [
      [{ ...prepared, run_id: "run-1" }, "run_id_present"],
      [{ ...prepared, input: [{ content: [{ type: "input_text", text: "hi" }] }] }, "input_present"],
      [{ ...prepared, conversation_id: "conv-1" }, "conversation_id_present"],
      [{ ...prepared, workspace_authoring: true }, "workspace_authoring"],
      [noKey, "agent_state_key_mismatch"],
      [{ ...prepared, agent_state_key: "agents-api-other" }, "agent_state_key_mismatch"],
      [noStrict, "strict_resume_required"],
      [{ ...prepared, strict_resume: false }, "strict_resume_required"],
      [{ ...prepared, local_environment: local("enabled") }, "environment_conflict"],
      [{ ...prepared, tool_search: true }, "tool_search_pairing"]
    ]
    for (const [config, expected] of cases) {
      assert.deepStrictEqual(Execution.validatePreparationConfiguration(SESSION, config), Option.some(expected), expected)
    }
  })
})

const readOnly: Config = {
  ...minimal,
  workspace_read_only: true,
  local_environment: local("enabled"),
  agent_state_key: `agents-api-${SESSION}`,
  strict_resume: true,
  release_on_completion: true
}

describe("Execution.validateReadOnlyConfiguration", () => {
  it("accepts exactly the bound Environment and resource identity", () => {
    assert.deepStrictEqual(Execution.validateReadOnlyConfiguration(readOnly), Option.none())
    const explicitEmpty = { ...readOnly, agent_options: {}, function_tools: [], input: [], agent_session_id: "", mcp_http_servers: null }
    assert.deepStrictEqual(Execution.validateReadOnlyConfiguration(explicitEmpty), Option.none())
  })

  it("names each required member that is missing", () => {
    const without = <K extends keyof Config>(key: K): Config => {
      const copy = { ...readOnly }
      delete copy[key]
      return copy
    }
    for (const member of ["workspace_read_only", "local_environment", "agent_state_key", "strict_resume", "release_on_completion"] as const) {
      assert.deepStrictEqual(Execution.validateReadOnlyConfiguration(without(member)), Option.some(member))
    }
    assert.deepStrictEqual(Execution.validateReadOnlyConfiguration({ ...readOnly, agent_state_key: "" }), Option.some("agent_state_key"))
  })

  it("names each forbidden member that is present, including an explicit empty MCP list", () => {
    const cases: ReadonlyArray<[string, Partial<Config>]> = [
      ["run_id", { run_id: "run-1" }],
      ["conversation_id", { conversation_id: "c" }],
      ["agent_session_id", { agent_session_id: "thread_1" }],
      ["input", { input: [{ content: [{ type: "input_text", text: "x" }] }] }],
      ["require_existing_native_session", { require_existing_native_session: true }],
      ["workspace_authoring", { workspace_authoring: true }],
      ["disable_execution_environment", { disable_execution_environment: true }],
      ["agent_options", { agent_options: { model: "gpt-5" } }],
      ["execution_controls", { execution_controls: { web_search: "disabled", text_verbosity: "medium" } }],
      ["mcp_http_servers", { mcp_http_servers: [] }],
      ["function_tools", { function_tools: [fn("a")] }],
      ["tool_search", { tool_search: true }],
      ["observe_messages", { observe_messages: true }],
      ["observe_tool_observations", { observe_tool_observations: true }],
      ["observe_subagent_identities", { observe_subagent_identities: true }]
    ]
    for (const [member, extra] of cases) {
      assert.deepStrictEqual(Execution.validateReadOnlyConfiguration({ ...readOnly, ...extra } as Config), Option.some(member))
    }
  })
})

describe("Execution.requiredCapabilities", () => {
  const needs = (config: Config) => [...Execution.requiredCapabilities(config)].sort()

  it("needs nothing for a bare request", () => {
    assert.deepStrictEqual(needs(minimal), [])
  })

  it("derives each capability from the request member that needs it", () => {
    const image = { type: "input_image", image_url: "data:image/png;base64,AAAA" } as const
    const cases: ReadonlyArray<[Partial<Config>, ReadonlyArray<Capabilities.CapabilityName>]> = [
      [{ execution_controls: { web_search: "disabled", text_verbosity: "medium" } }, ["execution_controls"]],
      [{ execution_controls: { web_search: "enabled", text_verbosity: "medium" } }, ["execution_controls", "web_search_control"]],
      [{ execution_controls: { web_search: "disabled", text_verbosity: "high" } }, ["execution_controls", "text_verbosity"]],
      [{ execution_controls: { web_search: "disabled", text_verbosity: "medium", disable_programmatic_tool_calling: true } }, ["execution_controls", "programmatic_tool_calling_disable"]],
      [{ execution_controls: { web_search: "disabled", text_verbosity: "medium", disable_programmatic_tool_calling: false } }, ["execution_controls"]],
      [{ execution_controls: { web_search: "disabled", text_verbosity: "medium", output_format: { type: "json_schema", schema: {} } } }, ["execution_controls", "structured_output"]],
      [{ observe_messages: true }, ["message_items"]],
      [{ observe_tool_observations: true }, ["tool_observations"]],
      [{ observe_subagent_identities: true }, ["subagent_observations"]],
      [{ disable_subagents: true }, ["subagent_control"]],
      [{ disable_execution_environment: true }, ["environment_none"]],
      [{ local_environment: local("enabled") }, ["local_environment"]],
      [{ workspace_read_only: true }, ["workspace_read_preparation"]],
      [{ require_existing_native_session: true }, ["native_session_recovery"]],
      [{ strict_resume: true }, ["durable_turns"]],
      [{ release_on_completion: true }, ["durable_turns"]],
      [{ function_tools: [fn("a")] }, ["function_tools"]],
      [{ tool_search: true }, ["tool_search"]],
      [{ workspace_authoring: true }, ["workspace_authoring"]],
      [{ mcp_http_servers: [server("service")] }, ["mcp_http_tools"]],
      [{ mcp_http_servers: [] }, []],
      [{ mcp_http_servers: [server("service", { required: true })] }, ["mcp_http_required", "mcp_http_tools"]],
      [{ mcp_http_servers: [server("service", { bearer_token: "secret" })] }, ["mcp_http_bearer_auth", "mcp_http_tools"]],
      [{ mcp_http_servers: [server("service", { bearer_token: "" })] }, ["mcp_http_tools"]],
      [{ input: [{ content: [{ type: "input_text", text: "look" }, image] }] }, ["message_images"]],
      [{ input: [{ content: [{ type: "input_text", text: "look" }] }] }, []]
    ]
    for (const [extra, expected] of cases) {
      assert.deepStrictEqual(needs({ ...minimal, ...extra } as Config), [...expected].sort(), JSON.stringify(extra))
    }
  })

  it("names only real capability fields", () => {
    const everything: Config = {
      ...minimal,
      execution_controls: { web_search: "enabled", text_verbosity: "low", disable_programmatic_tool_calling: true, output_format: { type: "json_schema", schema: {} } },
      observe_messages: true,
      observe_tool_observations: true,
      observe_subagent_identities: true,
      disable_subagents: true,
      disable_execution_environment: true,
      workspace_read_only: true,
      require_existing_native_session: true,
      strict_resume: true,
      function_tools: [fn("a", true)],
      tool_search: true,
      workspace_authoring: true,
      mcp_http_servers: [server("service", { required: true, bearer_token: "t" })]
    }
    const needed = Execution.requiredCapabilities(everything)
    for (const name of needed) assert.include(Capabilities.capabilityNames, name)
    assert.strictEqual(new Set(needed).size, needed.length)
  })
})

describe("Execution.resolvePromptRunId", () => {
  it("takes the envelope id first and the payload run_id as the fallback (E8)", () => {
    assert.deepStrictEqual(Execution.resolvePromptRunId("run-env", { ...minimal, run_id: "run-payload" }), Option.some("run-env"))
    assert.deepStrictEqual(Execution.resolvePromptRunId(undefined, { ...minimal, run_id: "run-payload" }), Option.some("run-payload"))
    assert.deepStrictEqual(Execution.resolvePromptRunId("  ", { ...minimal, run_id: "run-payload" }), Option.some("run-payload"))
  })

  it("finds no Run when both are empty or blank", () => {
    assert.deepStrictEqual(Execution.resolvePromptRunId(undefined, minimal), Option.none())
    assert.deepStrictEqual(Execution.resolvePromptRunId("", { ...minimal, run_id: " " }), Option.none())
  })

  it("finds no Run in a payload run_id over 128 bytes, which could never be echoed, and accepts exactly 128", () => {
    assert.deepStrictEqual(Execution.resolvePromptRunId(undefined, { ...minimal, run_id: "r".repeat(129) }), Option.none())
    assert.deepStrictEqual(Execution.resolvePromptRunId(undefined, { ...minimal, run_id: "é".repeat(64) }), Option.some("é".repeat(64)))
  })
})
