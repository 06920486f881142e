import { assert, describe, it } from "@effect/vitest"
import { Option, Result } from "effect"
import {
  admit,
  type AdmissionInput,
  type PublicFeature,
  publicFeatures,
  requiredCapabilities,
  rows,
  selectDevice
} from "../../../src/core/CapabilityPolicy.js"
import {
  BindingInvalid,
  CapabilitiesUndeclared,
  CapabilityUnsupported,
  HarnessUnavailable
} from "../../../src/core/Outcome.js"
import type { Capabilities } from "../../../src/proto/index.js"
import { alwaysRequiredOnly, type Overrides } from "../../support/capabilities.js"
import {
  admissionInput,
  agent,
  baselineDeclaration,
  binding,
  engine,
  fn,
  KIND,
  mcp,
  secret,
  snapshot
} from "./fixtures.js"

type CapabilityName = Capabilities.CapabilityName

/** One row of the design document's table, with an input that triggers it and one that does not. */
interface RowCase {
  readonly row: string
  readonly capabilities: ReadonlyArray<CapabilityName>
  readonly required: AdmissionInput
  readonly notRequired: AdmissionInput
  /** Extra capabilities the triggering input needs from other rows (so only this row decides). */
  readonly extra?: Overrides
  /** The public feature behind the row, when the engine profile must qualify it. */
  readonly feature?: { readonly name: PublicFeature | "text_verbosity"; readonly unqualified: AdmissionInput }
}

const hosted = (type: "openai_hosted" | "self_hosted") => ({ type, binding: binding() }) as const
const hostedCaps: Overrides = { local_environment: true, workspace_read_preparation: true, workspace_output_export: true }
const noFeature = (feature: PublicFeature) => engine({ qualifies: new Set(publicFeatures.filter((f) => f !== feature)) })

const cases: ReadonlyArray<RowCase> = [
  {
    row: "environment_none",
    capabilities: ["environment_none"],
    required: admissionInput({ environment: { type: "none" } }),
    notRequired: admissionInput({ environment: hosted("self_hosted") }),
    extra: {}
  },
  {
    row: "hosted_environment",
    capabilities: ["local_environment", "workspace_read_preparation", "workspace_output_export"],
    required: admissionInput({ environment: hosted("openai_hosted") }),
    notRequired: admissionInput({ environment: { type: "none" } })
  },
  {
    row: "idle_directory_read",
    capabilities: ["workspace_read_preparation"],
    required: admissionInput({ operation: "idle_directory_read", environment: hosted("self_hosted") }),
    notRequired: admissionInput()
  },
  {
    row: "native_session_recovery",
    capabilities: ["native_session_recovery"],
    required: admissionInput({ session: { has_started_turn: true, native_session_id: undefined } }),
    notRequired: admissionInput({ session: { has_started_turn: true, native_session_id: "thread_0199" } })
  },
  {
    row: "web_search_control",
    capabilities: ["web_search_control"],
    required: admissionInput({ engine: engine({ controls: { web_search: true, text_verbosity: false } }) }),
    notRequired: admissionInput()
  },
  {
    row: "text_verbosity",
    capabilities: ["text_verbosity"],
    required: admissionInput({ engine: engine({ controls: { web_search: false, text_verbosity: true } }) }),
    notRequired: admissionInput({ agent: agent({ text_verbosity: "medium" }) }),
    feature: {
      name: "text_verbosity",
      unqualified: admissionInput({ agent: agent({ text_verbosity: "low" }) })
    }
  },
  {
    row: "json_schema_output",
    capabilities: ["structured_output", "message_items"],
    required: admissionInput({ agent: agent({ output_format: { type: "json_schema", schema: { type: "object" } } }) }),
    notRequired: admissionInput(),
    feature: {
      name: "structured_output",
      unqualified: admissionInput({
        engine: noFeature("structured_output"),
        agent: agent({ output_format: { type: "json_schema", schema: { type: "object" } } })
      })
    }
  },
  {
    row: "multi_agent_enabled",
    capabilities: ["subagent_observations"],
    required: admissionInput({ agent: agent({ multi_agent: { enabled: true } }) }),
    notRequired: admissionInput(),
    feature: {
      name: "multi_agent",
      unqualified: admissionInput({ engine: noFeature("multi_agent"), agent: agent({ multi_agent: { enabled: true } }) })
    }
  },
  {
    row: "multi_agent_disabled",
    capabilities: ["subagent_control"],
    required: admissionInput({ agent: agent({ multi_agent: { enabled: false } }) }),
    notRequired: admissionInput({ agent: agent({ multi_agent: { enabled: true } }) }),
    extra: { subagent_observations: true }
  },
  {
    row: "tool_search",
    capabilities: ["tool_search"],
    required: admissionInput({ agent: agent({ tool_search: true, function_tools: [fn("lookup", true)] }) }),
    notRequired: admissionInput({ agent: agent({ function_tools: [fn("lookup")] }) }),
    extra: { function_tools: true },
    feature: {
      name: "tool_search",
      unqualified: admissionInput({
        engine: noFeature("tool_search"),
        agent: agent({ tool_search: true, function_tools: [fn("lookup", true)] })
      })
    }
  },
  {
    row: "programmatic_tool_calling_disable",
    capabilities: ["programmatic_tool_calling_disable"],
    required: admissionInput({ agent: agent({ disable_programmatic_tool_calling: true }) }),
    notRequired: admissionInput(),
    feature: {
      name: "programmatic_tool_calling_disable",
      unqualified: admissionInput({
        engine: noFeature("programmatic_tool_calling_disable"),
        agent: agent({ disable_programmatic_tool_calling: true })
      })
    }
  },
  {
    row: "function_tools",
    capabilities: ["function_tools"],
    required: admissionInput({ agent: agent({ function_tools: [fn("lookup")] }) }),
    notRequired: admissionInput(),
    feature: {
      name: "function_tools",
      unqualified: admissionInput({ engine: noFeature("function_tools"), agent: agent({ function_tools: [fn("lookup")] }) })
    }
  },
  {
    row: "message_images",
    capabilities: ["message_images"],
    required: admissionInput({ request: { message_images: true, function_result_images: false } }),
    notRequired: admissionInput(),
    feature: {
      name: "message_images",
      unqualified: admissionInput({
        engine: noFeature("message_images"),
        request: { message_images: true, function_result_images: false }
      })
    }
  },
  {
    row: "function_result_images",
    capabilities: ["function_result_images"],
    required: admissionInput({ request: { message_images: false, function_result_images: true } }),
    notRequired: admissionInput(),
    feature: {
      name: "function_result_images",
      unqualified: admissionInput({
        engine: noFeature("function_result_images"),
        request: { message_images: false, function_result_images: true }
      })
    }
  },
  {
    row: "mcp_http_tools",
    capabilities: ["mcp_http_tools"],
    required: admissionInput({ agent: agent({ mcp_http_servers: [mcp()] }) }),
    notRequired: admissionInput(),
    feature: {
      name: "mcp_http_tools",
      unqualified: admissionInput({ engine: noFeature("mcp_http_tools"), agent: agent({ mcp_http_servers: [mcp()] }) })
    }
  },
  {
    row: "mcp_http_required",
    capabilities: ["mcp_http_required"],
    required: admissionInput({ agent: agent({ mcp_http_servers: [mcp({ required: true })] }) }),
    notRequired: admissionInput({ agent: agent({ mcp_http_servers: [mcp()] }) }),
    extra: { mcp_http_tools: true },
    feature: {
      name: "mcp_http_required",
      unqualified: admissionInput({
        engine: noFeature("mcp_http_required"),
        agent: agent({ mcp_http_servers: [mcp({ required: true })] })
      })
    }
  },
  {
    row: "mcp_http_bearer_auth",
    capabilities: ["mcp_http_bearer_auth"],
    required: admissionInput({ agent: agent({ mcp_http_servers: [mcp({ vault_credential: secret("tok-123") })] }) }),
    notRequired: admissionInput({ agent: agent({ mcp_http_servers: [mcp()] }) }),
    extra: { mcp_http_tools: true },
    feature: {
      name: "mcp_http_bearer_auth",
      unqualified: admissionInput({
        engine: noFeature("mcp_http_bearer_auth"),
        agent: agent({ mcp_http_servers: [mcp({ vault_credential: secret("tok-123") })] })
      })
    }
  }
]

/** Everything the baseline and the triggering input need, so the row alone decides. */
const satisfying = (c: RowCase, drop?: CapabilityName): Capabilities.AgentKindCapabilities => {
  const caps: Record<string, boolean> = { ...(c.extra ?? {}) }
  if (c.required.environment.type !== "none") Object.assign(caps, hostedCaps)
  for (const name of c.capabilities) caps[name] = true
  if (drop !== undefined) caps[drop] = false
  return baselineDeclaration(caps)
}

describe("CapabilityPolicy", () => {
  it("covers every row of the design document's table", () => {
    assert.deepStrictEqual(
      rows.map((r) => r.name),
      ["always", ...cases.map((c) => c.row)]
    )
    for (const c of cases) {
      assert.deepStrictEqual(rows.find((r) => r.name === c.row)?.capabilities, c.capabilities, c.row)
    }
  })

  describe("row always (streaming, steering, durable_turns, durable_input_receipts, preparation, execution_controls, tool_observations)", () => {
    const always: ReadonlyArray<CapabilityName> = [
      "streaming",
      "steering",
      "durable_turns",
      "durable_input_receipts",
      "preparation",
      "execution_controls",
      "tool_observations"
    ]

    it("admits an execution when every always capability is declared and the Harness is available", () => {
      const result = admit(admissionInput(), snapshot(baselineDeclaration()))
      assert.isTrue(Result.isSuccess(result))
      if (Result.isSuccess(result)) {
        assert.deepStrictEqual(result.success.required, [...always, "environment_none", "subagent_control"])
      }
    })

    for (const capability of always) {
      it(`refuses an execution without ${capability}`, () => {
        assert.deepStrictEqual(
          admit(admissionInput(), snapshot(baselineDeclaration({ [capability]: false }))),
          Result.fail(new CapabilityUnsupported({ kind: KIND, capability, source: "declaration" }))
        )
      })
    }

    it("refuses a Harness that declares everything but is not available", () => {
      assert.deepStrictEqual(
        admit(admissionInput(), snapshot(baselineDeclaration(), { available: false })),
        Result.fail(new HarnessUnavailable({ kind: KIND, reason: "unavailable" }))
      )
    })

    it("refuses a kind missing from the heartbeat (not advertised, never inferred)", () => {
      assert.deepStrictEqual(
        admit(admissionInput(), snapshot(baselineDeclaration(), { kind: "claude" })),
        Result.fail(new HarnessUnavailable({ kind: KIND, reason: "not_advertised" }))
      )
    })

    it("refuses before the first heartbeat: capabilities are unknown", () => {
      assert.deepStrictEqual(
        admit(admissionInput(), Option.none()),
        Result.fail(new CapabilitiesUndeclared({ kind: KIND }))
      )
    })
  })

  for (const c of cases) {
    describe(`row ${c.row} (${c.capabilities.join(", ")})`, () => {
      it("admits when required and declared", () => {
        const result = admit(c.required, snapshot(satisfying(c)))
        assert.isTrue(Result.isSuccess(result), JSON.stringify(Result.isFailure(result) ? result.failure : null))
        if (Result.isSuccess(result)) {
          for (const name of c.capabilities) assert.include(result.success.required, name)
        }
      })

      for (const capability of c.capabilities) {
        it(`refuses when required and ${capability} is missing`, () => {
          assert.deepStrictEqual(
            admit(c.required, snapshot(satisfying(c, capability))),
            Result.fail(new CapabilityUnsupported({ kind: KIND, capability, source: "declaration" }))
          )
        })
      }

      it("does not require it when the condition is false", () => {
        assert.isTrue(c.capabilities.every((name) => !requiredCapabilities(c.notRequired).includes(name)))
        const caps = alwaysRequiredOnly({ environment_none: true, subagent_control: true, subagent_observations: true, ...hostedCaps, function_tools: true, mcp_http_tools: true })
        const without: Record<string, boolean> = { ...caps }
        for (const name of c.capabilities) without[name] = false
        // Keep what the non-triggering input itself needs from other rows.
        for (const name of requiredCapabilities(c.notRequired)) without[name] = true
        assert.isTrue(Result.isSuccess(admit(c.notRequired, snapshot(without as Capabilities.AgentKindCapabilities))))
      })

      if (c.feature !== undefined) {
        const feature = c.feature
        it(`refuses when the engine profile does not qualify ${feature.name}`, () => {
          assert.deepStrictEqual(
            admit(feature.unqualified, snapshot(satisfying(c))),
            Result.fail(new CapabilityUnsupported({ kind: KIND, capability: c.capabilities[0]!, source: "engine_profile" }))
          )
        })
      }
    })
  }

  describe("rows without an admission rule", () => {
    it("never requires permissions, workspace_authoring, usage or resume", () => {
      const everything = admissionInput({
        engine: engine({ controls: { web_search: true, text_verbosity: true } }),
        agent: agent({
          multi_agent: { enabled: true },
          output_format: { type: "json_schema", schema: {} },
          tool_search: true,
          function_tools: [fn("a", true)],
          disable_programmatic_tool_calling: true,
          mcp_http_servers: [mcp({ required: true, vault_credential: secret("s") })]
        }),
        environment: hosted("self_hosted"),
        session: { has_started_turn: true, native_session_id: undefined },
        request: { message_images: true, function_result_images: true }
      })
      const required = requiredCapabilities(everything)
      for (const name of ["permissions", "workspace_authoring", "usage", "resume"] as const) {
        assert.notInclude(required, name)
      }
    })
  })

  describe("binding", () => {
    it("refuses a hosted Environment without its binding before looking at any device", () => {
      assert.deepStrictEqual(
        admit(admissionInput({ environment: { type: "openai_hosted", binding: undefined } }), Option.none()),
        Result.fail(new BindingInvalid({ reason: "missing_binding" }))
      )
    })

    it("refuses an idle directory read on an Environment of type none", () => {
      assert.deepStrictEqual(
        admit(admissionInput({ operation: "idle_directory_read" }), snapshot(baselineDeclaration())),
        Result.fail(new BindingInvalid({ reason: "no_workspace_binding" }))
      )
    })

    it("refuses a service-origin MCP server on a hosted Environment", () => {
      assert.deepStrictEqual(
        admit(
          admissionInput({ environment: hosted("self_hosted"), agent: agent({ mcp_http_servers: [mcp({ connection_origin: "service" })] }) }),
          snapshot(baselineDeclaration())
        ),
        Result.fail(new BindingInvalid({ reason: "mcp_origin_service" }))
      )
    })

    it("refuses an environment-origin MCP server without network access", () => {
      assert.deepStrictEqual(
        admit(
          admissionInput({
            environment: { type: "self_hosted", binding: binding({ network_access: "disabled" }) },
            agent: agent({ mcp_http_servers: [mcp()] })
          }),
          snapshot(baselineDeclaration())
        ),
        Result.fail(new BindingInvalid({ reason: "mcp_origin_environment" }))
      )
    })

    it("admits an idle directory read on an unavailable Harness that declares workspace_read_preparation", () => {
      const result = admit(
        admissionInput({ operation: "idle_directory_read", environment: hosted("self_hosted") }),
        snapshot(alwaysRequiredOnly({ streaming: false, workspace_read_preparation: true }), { available: false })
      )
      assert.isTrue(Result.isSuccess(result))
    })
  })

  describe("selectDevice", () => {
    it("selects the first device whose declaration admits the request", () => {
      const result = selectDevice(admissionInput(), [
        { device: "a", declaration: Option.none() },
        { device: "b", declaration: snapshot(baselineDeclaration({ steering: false })) },
        { device: "c", declaration: snapshot(baselineDeclaration()) }
      ])
      assert.isTrue(Result.isSuccess(result) && result.success.device === "c")
    })

    it("returns the most definite refusal when no device admits, and never another kind", () => {
      assert.deepStrictEqual(
        selectDevice(admissionInput(), [
          { device: "a", declaration: Option.none() },
          { device: "b", declaration: snapshot(baselineDeclaration(), { kind: "claude" }) },
          { device: "c", declaration: snapshot(baselineDeclaration({ steering: false })) }
        ]),
        Result.fail(new CapabilityUnsupported({ kind: KIND, capability: "steering", source: "declaration" }))
      )
      assert.deepStrictEqual(
        selectDevice(admissionInput(), [{ device: "a", declaration: Option.none() }]),
        Result.fail(new CapabilitiesUndeclared({ kind: KIND }))
      )
      assert.deepStrictEqual(
        selectDevice(admissionInput(), []),
        Result.fail(new HarnessUnavailable({ kind: KIND, reason: "not_advertised" }))
      )
    })

    it("counts devices left out of the candidates (the kind index) exactly as if they had been walked", () => {
      const steeringless = { device: "c", declaration: snapshot(baselineDeclaration({ steering: false })) }
      const otherKind = { device: "b", declaration: snapshot(baselineDeclaration(), { kind: "claude" }) }
      const undeclared = { device: "a", declaration: Option.none() }
      // Every mix of walked and counted devices gives the refusal of the full walk.
      for (const [walked, others] of [
        [[undeclared, otherKind, steeringless], { declared: 0, undeclared: 0 }],
        [[steeringless], { declared: 1, undeclared: 1 }]
      ] as const) {
        assert.deepStrictEqual(
          selectDevice(admissionInput(), walked, others),
          Result.fail(new CapabilityUnsupported({ kind: KIND, capability: "steering", source: "declaration" }))
        )
      }
      for (const [walked, others] of [[[undeclared, otherKind], { declared: 0, undeclared: 0 }], [[], { declared: 1, undeclared: 1 }]] as const) {
        assert.deepStrictEqual(
          selectDevice(admissionInput(), walked, others),
          Result.fail(new HarnessUnavailable({ kind: KIND, reason: "not_advertised" }))
        )
      }
      assert.deepStrictEqual(
        selectDevice(admissionInput(), [], { declared: 0, undeclared: 2 }),
        Result.fail(new CapabilitiesUndeclared({ kind: KIND }))
      )
    })

    it("refuses an invalid binding whatever the devices", () => {
      assert.deepStrictEqual(
        selectDevice(admissionInput({ environment: { type: "self_hosted", binding: undefined } }), [
          { device: "a", declaration: snapshot(baselineDeclaration()) }
        ]),
        Result.fail(new BindingInvalid({ reason: "missing_binding" }))
      )
    })
  })
})
