import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import { admit, type Admitted } from "../../../src/core/CapabilityPolicy.js"
import * as Request from "../../../src/core/ExecutionRequest.js"
import { CapabilityUnsupported, ConfigurationRejected } from "../../../src/core/Outcome.js"
import { Execution, Ids, MessageInput, Messages } from "../../../src/proto/index.js"
import { allSupported } from "../../support/capabilities.js"
import { agent, baselineDeclaration, binding, engine, fn, KIND, mcp, secret, SESSION, snapshot, spec } from "./fixtures.js"

const REQ = Ids.unsafeMake.preparationRequestId("prep-1")
const RUN = Ids.unsafeMake.runId("run-1")

const admitted = (caps = allSupported()): Admitted => ({ kind: KIND, capabilities: caps, required: [] })
/** A 1×1 PNG in the public inline image profile. */
const PNG = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAAC0lEQVR4nGNgAAIAAAUAAXpeqz8AAAAASUVORK5CYII="
const withImage = (url: string): MessageInput.MessageInput => [
  { content: [{ type: "input_text", text: "look" }, { type: "input_image", image_url: url }] }
]

const prepared = (s = spec(), a = admitted()) => {
  const result = Request.executionPrepare(REQ, s, a)
  if (Result.isFailure(result)) throw new Error(`unexpected ${result.failure._tag}`)
  return result.success.payload.configuration
}

describe("ExecutionRequest", () => {
  describe("execution_prepare configuration", () => {
    it("carries no Run identity, conversation or input, and the Session's state key", () => {
      const config = prepared()
      assert.strictEqual(config.run_id, "")
      assert.strictEqual(config.conversation_id, "")
      assert.isUndefined(config.input)
      assert.strictEqual(config.agent_state_key, `agents-api-${SESSION}`)
      assert.strictEqual(config.agent_kind, KIND)
    })

    it("always sets execution_controls with web search disabled and medium verbosity by default", () => {
      assert.deepStrictEqual(prepared().execution_controls, { web_search: "disabled", text_verbosity: "medium" })
    })

    it("sets the resolved verbosity, the explicit programmatic-tool-calling disable and the json_schema output format", () => {
      const outputFormat = { type: "json_schema", schema: { type: "object" } } as const
      const config = prepared(
        spec({ agent: agent({ text_verbosity: "low", disable_programmatic_tool_calling: true, output_format: outputFormat }) })
      )
      assert.deepStrictEqual(config.execution_controls, {
        web_search: "disabled",
        text_verbosity: "low",
        disable_programmatic_tool_calling: true,
        output_format: outputFormat
      })
    })

    it("always sets observe_tool_observations, strict_resume and release_on_completion", () => {
      const config = prepared()
      assert.isTrue(config.observe_tool_observations)
      assert.isTrue(config.strict_resume)
      assert.isTrue(config.release_on_completion)
    })

    it("sets observe_messages only when the Runtime declares message_items", () => {
      assert.isTrue(prepared().observe_messages)
      const without = prepared(spec(), admitted(baselineDeclaration()))
      assert.isUndefined(without.observe_messages)
    })

    it("derives the sub-agent fields from multi_agent.enabled", () => {
      const off = prepared()
      assert.isTrue(off.disable_subagents)
      assert.isUndefined(off.observe_subagent_identities)
      const on = prepared(spec({ agent: agent({ multi_agent: { enabled: true, max_concurrent_subagents: 3 } }) }))
      assert.isTrue(on.observe_subagent_identities)
      assert.isUndefined(on.disable_subagents)
      assert.strictEqual(on.max_concurrent_subagents, 3)
    })

    it("disables the execution environment for type none and carries no local_environment", () => {
      const config = prepared()
      assert.isTrue(config.disable_execution_environment)
      assert.isUndefined(config.local_environment)
    })

    it("carries the exact binding for hosted types, without a working directory", () => {
      const bound = binding({ capability_sources: { directories: ["/workspace/skills"] } })
      for (const type of ["openai_hosted", "self_hosted"] as const) {
        const config = prepared(spec({ environment: { type, binding: bound } }))
        assert.deepStrictEqual(config.local_environment, bound)
        assert.isUndefined(config.disable_execution_environment)
        assert.notProperty(config, "work_dir")
      }
    })

    it("requires an existing native Session when a started Turn has no recorded id, and resumes a recorded one", () => {
      const recovering = prepared(spec({ session: { has_started_turn: true, native_session_id: undefined } }))
      assert.isTrue(recovering.require_existing_native_session)
      assert.isUndefined(recovering.agent_session_id)
      const resuming = prepared(spec({ session: { has_started_turn: true, native_session_id: "thread_0199" } }))
      assert.isUndefined(resuming.require_existing_native_session)
      assert.strictEqual(resuming.agent_session_id, "thread_0199")
      const fresh = prepared()
      assert.isUndefined(fresh.require_existing_native_session)
    })

    it("freezes MCP origins and reads the Vault credential only into bearer_token", () => {
      const s = spec({
        agent: agent({ mcp_http_servers: [mcp({ required: true, vault_credential: secret("tok-secret-1") })] })
      })
      assert.notInclude(JSON.stringify(s), "tok-secret-1")
      assert.notInclude(String(s.agent.mcp_http_servers[0]?.vault_credential), "tok-secret-1")
      const config = prepared(s)
      assert.deepStrictEqual(config.mcp_http_servers, [
        {
          connection_origin: "service",
          server_label: "docs",
          server_url: "https://mcp.example/docs",
          allowed_tools: null,
          required: true,
          bearer_token: "tok-secret-1"
        }
      ])
    })

    it("passes function tools and tool search through", () => {
      const config = prepared(spec({ agent: agent({ tool_search: true, function_tools: [fn("lookup", true)] }) }))
      assert.isTrue(config.tool_search)
      assert.deepStrictEqual(config.function_tools, [fn("lookup", true)])
    })

    it("passes the preparation validator and the capabilities it needs are admitted", () => {
      const config = prepared()
      assert.isTrue(Execution.validatePreparationConfiguration(SESSION, config)._tag === "None")
      for (const name of Execution.requiredCapabilities(config)) assert.isTrue(allSupported()[name])
    })

    it("rejects a configuration that violates a shared rule, before sending", () => {
      const result = Request.executionPrepare(REQ, spec({ agent: agent({ tool_search: true }) }), admitted())
      assert.deepStrictEqual(result, Result.fail(new ConfigurationRejected({ issue: "tool_search_pairing" })))
    })

    it("rejects a request that needs a capability the admitted declaration lacks", () => {
      const result = Request.executionPrepare(REQ, spec(), admitted(baselineDeclaration({ durable_turns: false })))
      assert.deepStrictEqual(
        result,
        Result.fail(new CapabilityUnsupported({ kind: KIND, capability: "durable_turns", source: "declaration" }))
      )
    })

    it("agrees with the admission policy: every admitted spec builds", () => {
      const s = spec({
        agent: agent({ multi_agent: { enabled: true }, function_tools: [fn("a")], disable_programmatic_tool_calling: true }),
        environment: { type: "self_hosted", binding: binding() },
        engine: engine({ controls: { web_search: true, text_verbosity: true } })
      })
      const decision = admit(Request.admissionInput(s, Request.requestFactsFor(MessageInput.text("hi"))), snapshot(allSupported()))
      assert.isTrue(Result.isSuccess(decision))
      if (Result.isSuccess(decision)) assert.isTrue(Result.isSuccess(Request.executionPrepare(REQ, s, decision.success)))
    })
  })

  describe("read-only preparation", () => {
    it("carries exactly the bound Environment and resource identity", () => {
      const result = Request.readOnlyPrepare(REQ, spec({ environment: { type: "self_hosted", binding: binding() } }), admitted())
      assert.isTrue(Result.isSuccess(result))
      if (Result.isSuccess(result)) {
        assert.deepStrictEqual(result.success.payload.configuration, {
          agent_kind: KIND,
          conversation_id: "",
          run_id: "",
          local_environment: binding(),
          workspace_read_only: true,
          agent_state_key: `agents-api-${SESSION}`,
          release_on_completion: true,
          strict_resume: true
        })
      }
    })
  })

  describe("prompt_request", () => {
    it("names the Run in the envelope and the payload and carries the ordered input", () => {
      const input = [...MessageInput.text("first"), ...MessageInput.text("second")]
      const result = Request.promptRequest(RUN, spec(), admitted(), input)
      assert.isTrue(Result.isSuccess(result))
      if (Result.isSuccess(result)) {
        assert.strictEqual(result.success.id, RUN)
        assert.strictEqual(result.success.payload.run_id, RUN)
        assert.deepStrictEqual(result.success.payload.input, input)
        assert.isTrue(Result.isSuccess(Messages.encodeMessage(result.success)))
      }
    })

    it("rejects an invalid input before sending", () => {
      assert.deepStrictEqual(
        Request.promptRequest(RUN, spec(), admitted(), []),
        Result.fail(new ConfigurationRejected({ issue: "input_empty_input" }))
      )
    })

    it("rejects an input image outside the public inline profile before sending", () => {
      assert.deepStrictEqual(
        Request.promptRequest(RUN, spec(), admitted(), withImage("data:image/gif;base64,R0lGODlhAQABAAAAACw=")),
        Result.fail(new ConfigurationRejected({ issue: "input_image_media_type" }))
      )
      assert.isTrue(Result.isSuccess(Request.promptRequest(RUN, spec(), admitted(), withImage(PNG))))
    })
  })

  describe("start, release, steer, cancel", () => {
    it("builds execution_start with the Executor, handle, Run id and input", () => {
      const result = Request.executionStart(
        REQ,
        { executor_id: Ids.unsafeMake.executorId("ex-1"), handle: Ids.unsafeMake.admissionHandle("h-1") },
        RUN,
        MessageInput.text("go")
      )
      assert.deepStrictEqual(
        result,
        Result.succeed({
          type: "execution_start",
          id: REQ,
          payload: { executor_id: "ex-1", handle: "h-1", run_id: RUN, input: MessageInput.text("go") }
        } as Messages.MessageOfType<"execution_start">)
      )
    })

    it("rejects a start input whose image is outside the public inline profile, before sending", () => {
      const ready = { executor_id: Ids.unsafeMake.executorId("ex-1"), handle: Ids.unsafeMake.admissionHandle("h-1") }
      assert.deepStrictEqual(
        Request.executionStart(REQ, ready, RUN, withImage("data:image/png;base64,AAAA")),
        Result.fail(new ConfigurationRejected({ issue: "input_image_format_mismatch" }))
      )
      assert.deepStrictEqual(
        Request.validateInput(withImage("data:image/png;base64,@@@@")),
        Result.fail(new ConfigurationRejected({ issue: "input_image_base64" }))
      )
      assert.isTrue(Result.isSuccess(Request.executionStart(REQ, ready, RUN, withImage(PNG))))
    })

    it("sets durable_receipt on every prompt_steer", () => {
      const result = Request.promptSteer(RUN, Ids.unsafeMake.inputId("42"), MessageInput.text("also"))
      assert.isTrue(Result.isSuccess(result) && result.success.payload.durable_receipt === true)
    })

    it("builds release and cancel envelopes with the right ids", () => {
      const release = Request.executionRelease(REQ, Ids.unsafeMake.admissionHandle("h-1"))
      assert.isTrue(Result.isSuccess(release) && release.success.id === REQ)
      const cancel = Request.promptCancel(RUN, Ids.unsafeMake.deliveryId("cancel-1"))
      assert.isTrue(Result.isSuccess(cancel) && cancel.success.id === RUN && cancel.success.payload.delivery_id === "cancel-1")
      const abort = Request.promptCancel(RUN)
      assert.isTrue(Result.isSuccess(abort) && abort.success.payload.delivery_id === undefined)
    })
  })
})
