/**
 * Capability contract tests (protocol "Capability declarations", reference part 1 §4). Every per-field test
 * enumerates the fields from the schema itself (`AgentKindCapabilities.fields`), so a field added to the
 * schema is covered at once, and the fixture test fails until the shared fixture makes a decision for it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import { Capabilities, Messages } from "../../src/proto/index.js"
import { allSupported, alwaysRequiredOnly, declaration, descriptor } from "../support/capabilities.js"
import { encode, getErr, getOk, invalidFrame } from "./support/frames.js"
import { neverMentions } from "./support/wireShape.js"

type CapabilityName = Capabilities.CapabilityName
const schemaFields = Object.keys(Capabilities.AgentKindCapabilities.fields) as Array<CapabilityName>

/** A declaration with `name` set to `value` and every other field set to the opposite. */
const only = (name: CapabilityName, value: boolean): Capabilities.AgentKindCapabilities => {
  const flipped: Record<string, boolean> = {}
  for (const field of schemaFields) flipped[field] = field === name ? value : !value
  return getOk(Capabilities.decodeCapabilities(flipped))
}

/** The wire object of a complete declaration, as plain JSON to mutate. */
const wireCaps = (): Record<string, unknown> => ({ ...getOk(Capabilities.encodeCapabilities(declaration())) })

const heartbeatText = (capabilities: unknown): string =>
  JSON.stringify({
    type: "heartbeat",
    payload: {
      ts: 1767225600,
      active_requests: 0,
      supported_agent_kinds: [{ kind: "codex", available: true, capabilities }]
    }
  })

const invalidHeartbeat = (text: string) => invalidFrame(text, { code: "invalid_payload", type: "heartbeat" })
const incomplete = new Capabilities.InvalidDeclaration({ reason: "incomplete_or_invalid" })

describe("Capabilities schema", () => {
  it("declares exactly the 30 fields of the 0.10.0 reference, in declaration order", () => {
    assert.deepStrictEqual(schemaFields, [...Capabilities.capabilityNames])
    assert.deepStrictEqual(schemaFields, [
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
    ])
  })

  it("names the seven capabilities Core always requires", () => {
    assert.deepStrictEqual([...Capabilities.alwaysRequired].sort(), [
      "durable_input_receipts",
      "durable_turns",
      "execution_controls",
      "preparation",
      "steering",
      "streaming",
      "tool_observations"
    ])
  })
})

describe("the shared capability fixture", () => {
  it("makes a decision for exactly the schema's fields (a new field without one fails here)", () => {
    assert.deepStrictEqual(Object.keys(declaration()).sort(), [...schemaFields].sort())
    assert.deepStrictEqual(Object.keys(allSupported()).sort(), [...schemaFields].sort())
  })

  it("starts from every field unsupported and applies only explicit overrides", () => {
    assert.deepStrictEqual(Capabilities.supportedNames(declaration()), [])
    assert.deepStrictEqual(Capabilities.supportedNames(declaration({ usage: true, resume: true })), ["usage", "resume"])
    assert.deepStrictEqual(Capabilities.supportedNames(allSupported()), [...schemaFields])
  })

  it("supports exactly the always-required capabilities in alwaysRequiredOnly", () => {
    assert.deepStrictEqual([...Capabilities.supportedNames(alwaysRequiredOnly())].sort(), [...Capabilities.alwaysRequired].sort())
    assert.isTrue(alwaysRequiredOnly({ message_images: true }).message_images)
  })

  it("throws on an override that names no field or is not a boolean", () => {
    assert.throws(() => declaration({ teleportation: true } as unknown as Capabilities.AgentKindCapabilities))
    assert.throws(() => declaration({ streaming: "yes" } as unknown as Capabilities.AgentKindCapabilities))
  })

  it("builds heartbeat descriptors that are available unless told otherwise", () => {
    assert.deepStrictEqual(descriptor("codex", declaration(), { version: "1.0" }), {
      kind: "codex",
      available: true,
      version: "1.0",
      capabilities: declaration()
    })
    assert.strictEqual(descriptor("codex", declaration(), { available: false }).available, false)
  })
})

describe("each capability field", () => {
  for (const name of schemaFields) {
    describe(name, () => {
      it("round-trips true and false through encodeCapabilities and decodeCapabilities", () => {
        for (const value of [true, false]) {
          const caps = only(name, value)
          const decoded = getOk(Capabilities.decodeCapabilities(getOk(Capabilities.encodeCapabilities(caps))))
          assert.deepStrictEqual(decoded, caps)
          assert.strictEqual(decoded[name], value)
        }
      })

      it("round-trips true and false inside a heartbeat frame", () => {
        for (const value of [true, false]) {
          const message: Messages.MessageOfType<"heartbeat"> = {
            type: "heartbeat",
            payload: { ts: 1, active_requests: 0, supported_agent_kinds: [descriptor("codex", only(name, value))] }
          }
          const decoded = getOk(Messages.decodeRuntimeToCore(encode(message)))
          assert.deepStrictEqual(decoded, message)
        }
      })

      it("is refused when omitted, null, a string, a number, or beside an unknown key", () => {
        const variants: Array<Record<string, unknown>> = []
        const omitted = wireCaps()
        delete omitted[name]
        variants.push(omitted, { ...wireCaps(), [name]: null }, { ...wireCaps(), [name]: "true" })
        variants.push({ ...wireCaps(), [name]: 1 }, { ...wireCaps(), [name]: 0 }, { ...wireCaps(), [`${name}_v2`]: true })
        for (const variant of variants) {
          assert.deepStrictEqual(getErr(Capabilities.decodeCapabilities(variant)), incomplete)
          const text = heartbeatText(variant)
          assert.deepStrictEqual(getErr(Messages.decodeRuntimeToCore(text)), invalidHeartbeat(text))
        }
      })

      it("cannot be encoded when missing, neither alone nor in a heartbeat", () => {
        const missing: Record<string, unknown> = { ...declaration() }
        delete missing[name]
        const caps = missing as unknown as Capabilities.AgentKindCapabilities
        assert.deepStrictEqual(getErr(Capabilities.encodeCapabilities(caps)), incomplete)
        const heartbeat = {
          type: "heartbeat",
          payload: { ts: 1, active_requests: 0, supported_agent_kinds: [descriptor("codex", caps)] }
        } as const
        assert.deepStrictEqual(
          getErr(Messages.encodeMessage(heartbeat)),
          new Messages.OutgoingFrameRejected({ type: "heartbeat", reason: "invalid_message" })
        )
      })

      it("round-trips through the persisted projection, which refuses it missing, renamed or not a boolean", () => {
        for (const value of [true, false]) {
          const caps = only(name, value)
          const row = Capabilities.toPersistedProjection(caps)
          assert.strictEqual((row as Record<string, boolean>)[`cap_${name}`], value)
          assert.deepStrictEqual(getOk(Capabilities.fromPersistedProjection(row)), caps)
        }
        const row: Record<string, unknown> = { ...Capabilities.toPersistedProjection(declaration()) }
        const missing = { ...row }
        delete missing[`cap_${name}`]
        const renamed = { ...missing, [`cap_${name}_old`]: false }
        for (const bad of [missing, renamed, { ...row, [`cap_${name}`]: null }, { ...row, [`cap_${name}`]: "false" }]) {
          assert.deepStrictEqual(getErr(Capabilities.fromPersistedProjection(bad)), incomplete)
        }
      })
    })
  }
})

describe("capability declarations", () => {
  it("encode in declaration order whatever order the value was built in", () => {
    const reversed: Record<string, boolean> = {}
    for (const name of [...schemaFields].reverse()) reversed[name] = name.length % 2 === 0
    const caps = reversed as unknown as Capabilities.AgentKindCapabilities
    const encoded = getOk(Capabilities.encodeCapabilities(caps))
    assert.deepStrictEqual(Object.keys(encoded), [...schemaFields])
    // A heartbeat carries the declaration as given (the codec validates in place), so a declaration from
    // encodeCapabilities or the fixture goes out in declaration order.
    for (const ordered of [encoded, declaration({ usage: true })]) {
      const text = encode({
        type: "heartbeat",
        payload: { ts: 1, active_requests: 0, supported_agent_kinds: [descriptor("k", ordered)] }
      })
      const wire = JSON.parse(text) as { payload: { supported_agent_kinds: Array<{ capabilities: object }> } }
      assert.deepStrictEqual(Object.keys(wire.payload.supported_agent_kinds[0]!.capabilities), [...schemaFields])
    }
  })

  it("decode whatever order the keys arrive in", () => {
    const reversed: Record<string, boolean> = {}
    for (const name of [...schemaFields].reverse()) reversed[name] = name.startsWith("s")
    const decoded = getOk(Capabilities.decodeCapabilities(reversed))
    assert.deepStrictEqual(Capabilities.supportedNames(decoded), schemaFields.filter((n) => n.startsWith("s")))
    const text = heartbeatText(reversed)
    assert.isTrue(Result.isSuccess(Messages.decodeRuntimeToCore(text)))
  })

  it("are refused when the value is not an object", () => {
    const notAnObject = new Capabilities.InvalidDeclaration({ reason: "not_an_object" })
    for (const value of [null, undefined, [], "caps", 7, true]) {
      assert.deepStrictEqual(getErr(Capabilities.decodeCapabilities(value)), notAnObject)
      assert.deepStrictEqual(getErr(Capabilities.fromPersistedProjection(value)), notAnObject)
    }
  })

  it("make a heartbeat invalid when the capability object is missing, null or an array", () => {
    const missing = JSON.stringify({
      type: "heartbeat",
      payload: { ts: 1, active_requests: 0, supported_agent_kinds: [{ kind: "codex", available: true }] }
    })
    for (const text of [missing, heartbeatText(null), heartbeatText([]), heartbeatText([wireCaps()])]) {
      assert.deepStrictEqual(getErr(Messages.decodeRuntimeToCore(text)), invalidHeartbeat(text))
    }
  })

  it("make a heartbeat invalid when one kind is declared twice (H3)", () => {
    const text = JSON.stringify({
      type: "heartbeat",
      payload: {
        ts: 1,
        active_requests: 0,
        supported_agent_kinds: [
          { kind: "codex", available: true, capabilities: wireCaps() },
          { kind: "codex", available: false, capabilities: wireCaps() }
        ]
      }
    })
    assert.deepStrictEqual(getErr(Messages.decodeRuntimeToCore(text)), invalidHeartbeat(text))
  })

  it("accept a heartbeat that advertises no kind, with or without the empty array", () => {
    for (const kinds of [{}, { supported_agent_kinds: [] }]) {
      const text = JSON.stringify({ type: "heartbeat", payload: { ts: 5, active_requests: 2, ...kinds } })
      assert.deepStrictEqual(getOk(Messages.decodeRuntimeToCore(text)), {
        type: "heartbeat",
        payload: { ts: 5, active_requests: 2, ...kinds }
      })
    }
  })

  it("never echo the offending key or value in InvalidDeclaration", () => {
    const failures = [
      Capabilities.decodeCapabilities({ ...wireCaps(), LEAKCHECK_key: "LEAKCHECK_value" }),
      Capabilities.decodeCapabilities({ ...wireCaps(), streaming: "LEAKCHECK_value" }),
      Capabilities.fromPersistedProjection({ cap_LEAKCHECK_key: true }),
      Capabilities.encodeCapabilities({ ...declaration(), LEAKCHECK_key: true } as Capabilities.AgentKindCapabilities)
    ]
    for (const result of failures) {
      const error = getErr(result)
      assert.isTrue(neverMentions(error, "LEAKCHECK"), String(error))
      assert.strictEqual(error.message, "invalid capability declaration (incomplete_or_invalid)")
    }
  })

  it("project to one cap_<name> boolean per field, in declaration order", () => {
    const row = Capabilities.toPersistedProjection(allSupported())
    assert.deepStrictEqual(Object.keys(row), schemaFields.map((n) => `cap_${n}`))
    assert.isTrue(Object.values(row).every((v) => v === true))
  })

  it("refuse a persisted projection with an extra column even when every field is present", () => {
    const row = { ...Capabilities.toPersistedProjection(declaration()), cap_future_field: true }
    assert.deepStrictEqual(getErr(Capabilities.fromPersistedProjection(row)), incomplete)
    assert.isTrue(Result.isFailure(Capabilities.fromPersistedProjection({})))
  })
})
