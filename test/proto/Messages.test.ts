/**
 * Contract tests of the message catalogue of both directions, driven by the catalogues themselves: every
 * type has a hand-written sample (test/proto/support/samples.ts) that survives encode → decode unchanged,
 * and every payload is refused with a typed `InvalidFrame` when it gains an unknown member (at the root and
 * at every nested object), loses a required member, carries `null` where the schema has no null, or comes
 * with an id that is missing, oversized or sent to the wrong direction.
 */
import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import { Messages } from "../../src/proto/index.js"
import { catalogueOf, decode, encode, getErr, getOk, invalidFrame, other } from "./support/frames.js"
import { allSamples, coreToRuntimeSamples, runtimeToCoreSamples } from "./support/samples.js"
import {
  acceptsNull,
  neverMentions,
  oversizedId,
  payloadAst,
  requiredMembers,
  strictObjectPaths,
  withNullMember,
  withoutMember,
  withUnknownMember
} from "./support/wireShape.js"

describe("Messages catalogue", () => {
  it("has a sample for exactly the Core → Runtime message types", () => {
    assert.deepStrictEqual(Object.keys(coreToRuntimeSamples).sort(), Object.keys(Messages.coreToRuntime).sort())
  })

  it("has a sample for exactly the Runtime → Core message types", () => {
    assert.deepStrictEqual(Object.keys(runtimeToCoreSamples).sort(), Object.keys(Messages.runtimeToCore).sort())
  })

  it("defines every type of the 0.10.0 reference in its direction and no type in both", () => {
    assert.deepStrictEqual(Object.keys(Messages.coreToRuntime).sort(), [
      "device_shutdown",
      "environment_quiesce",
      "environment_resume",
      "execution_prepare",
      "execution_release",
      "execution_start",
      "function_result",
      "permission_decision",
      "prompt_cancel",
      "prompt_for_user_choice_decision",
      "prompt_request",
      "prompt_steer",
      "runtime_prepare",
      "workspace_export",
      "workspace_read",
      "workspace_write"
    ])
    assert.deepStrictEqual(Object.keys(Messages.runtimeToCore).sort(), [
      "delta",
      "done",
      "environment_quiesced",
      "environment_resumed",
      "error",
      "function_call",
      "heartbeat",
      "interaction_decision_ack",
      "output_message",
      "permission_cancel",
      "permission_request",
      "preparation_status",
      "prompt_for_user_choice",
      "prompt_steer_ack",
      "runtime_prepare_result",
      "subagent_coordination",
      "subagent_identity",
      "subagent_item",
      "subagent_lifecycle",
      "subagent_turn",
      "thinking",
      "tool_call",
      "usage",
      "workspace_export_result",
      "workspace_read_result",
      "workspace_write_result"
    ])
    for (const type of Object.keys(Messages.coreToRuntime)) {
      assert.isTrue(Messages.isCoreToRuntimeType(type))
      assert.isFalse(Messages.isRuntimeToCoreType(type))
    }
    for (const type of Object.keys(Messages.runtimeToCore)) {
      assert.isTrue(Messages.isRuntimeToCoreType(type))
      assert.isFalse(Messages.isCoreToRuntimeType(type))
    }
  })

  it("gives heartbeat and device_shutdown no id, prompt_request an optional id and permission_cancel no payload", () => {
    const shapes = Object.entries({ ...Messages.coreToRuntime, ...Messages.runtimeToCore }).map(([type, d]) => [
      type,
      d.id,
      d.payload
    ])
    assert.deepStrictEqual(shapes.filter(([, id]) => id === "none").map(([t]) => t).sort(), ["device_shutdown", "heartbeat"])
    assert.deepStrictEqual(shapes.filter(([, id]) => id === "optional").map(([t]) => t), ["prompt_request"])
    assert.deepStrictEqual(shapes.filter(([, , payload]) => payload === false).map(([t]) => t), ["permission_cancel"])
  })

  it("bounds the encoded request payloads the reference bounds", () => {
    assert.strictEqual(Messages.coreToRuntime.workspace_read.maxPayloadBytes, 8 * 1024)
    assert.strictEqual(Messages.coreToRuntime.workspace_export.maxPayloadBytes, 8 * 1024)
    assert.strictEqual(Messages.coreToRuntime.workspace_write.maxPayloadBytes, 96 * 1024)
    assert.strictEqual(Messages.coreToRuntime.runtime_prepare.maxPayloadBytes, 1024 * 1024)
    assert.strictEqual(Messages.runtimeToCore.workspace_write_result.maxPayloadBytes, 96 * 1024)
    assert.strictEqual(Messages.runtimeToCore.workspace_export_result.maxPayloadBytes, 96 * 1024)
  })
})

for (const { direction, type, sample } of allSamples) {
  const definition = catalogueOf(direction)[type]!
  const payload = payloadAst(definition.schema)

  describe(`${type} (${direction === "coreToRuntime" ? "Core → Runtime" : "Runtime → Core"})`, () => {
    const text = encode(sample.message)
    const frame = JSON.parse(text) as Record<string, unknown>
    const refused = (mutated: Record<string, unknown>, code: "invalid_payload") => {
      const mutatedText = JSON.stringify(mutated)
      const id = typeof mutated["id"] === "string" && definition.id !== "none" ? { id: mutated["id"] } : {}
      assert.deepStrictEqual(getErr(decode(direction, mutatedText)), invalidFrame(mutatedText, { code, type, ...id }))
    }

    it("survives encodeMessage and decode unchanged, from text and from bytes", () => {
      assert.deepStrictEqual(getOk(decode(direction, text)), sample.message)
      assert.deepStrictEqual(getOk(decode(direction, new TextEncoder().encode(text))), sample.message)
    })

    it("is refused as unknown_type by the other direction's decoder", () => {
      assert.deepStrictEqual(getErr(decode(other(direction), text)), invalidFrame(text, { code: "unknown_type" }))
    })

    if (payload === undefined) {
      it("ignores a payload sent with this body-less type", () => {
        const withPayload = JSON.stringify({ ...frame, payload: { anything: [1, 2, 3] } })
        assert.deepStrictEqual(getOk(decode(direction, withPayload)), sample.message)
      })
    } else {
      it("lists exactly the required payload members of the reference", () => {
        assert.deepStrictEqual([...requiredMembers(payload)].sort(), [...sample.required].sort())
      })

      it("refuses the payload when it carries an unknown member at its root", () => {
        refused(withUnknownMember(frame, []), "invalid_payload")
      })

      const nested = strictObjectPaths(payload, frame["payload"])
      if (nested.length > 0) {
        it(`refuses an unknown member inside each nested object (${nested.length})`, () => {
          for (const path of nested) refused(withUnknownMember(frame, path), "invalid_payload")
        })
      }

      if (sample.required.length > 0) {
        it("refuses the payload without each required member", () => {
          for (const member of sample.required) refused(withoutMember(frame, member), "invalid_payload")
        })
      }

      const nonNullable = payload.propertySignatures.map((p) => String(p.name)).filter((m) => !acceptsNull(payload, m))
      if (nonNullable.length > 0) {
        it("refuses null in each member whose schema has no null", () => {
          for (const member of nonNullable) refused(withNullMember(frame, member), "invalid_payload")
        })
      }

      if (sample.required.length > 0) {
        it("refuses a missing and a null payload (read as {}) because required members are absent", () => {
          const { payload: _dropped, ...withoutPayload } = frame
          for (const variant of [withoutPayload, { ...frame, payload: null }]) {
            const variantText = JSON.stringify(variant)
            const id = definition.id === "none" ? {} : { id: frame["id"] as string }
            assert.deepStrictEqual(
              getErr(decode(direction, variantText)),
              invalidFrame(variantText, { code: "invalid_payload", type, ...id })
            )
          }
        })
      }
    }

    if (definition.id === "none") {
      it("ignores an id sent with this type, even an oversized one", () => {
        for (const id of ["some-id", oversizedId("ignored-")]) {
          assert.deepStrictEqual(getOk(decode(direction, JSON.stringify({ ...frame, id }))), sample.message)
        }
      })
    } else {
      it("refuses an id over 128 bytes as id_too_large and never echoes it", () => {
        const id = oversizedId("LEAKCHECK-")
        const oversized = JSON.stringify({ ...frame, id })
        const error = getErr(decode(direction, oversized))
        assert.deepStrictEqual(error, invalidFrame(oversized, { code: "id_too_large", type }))
        assert.isTrue(neverMentions(error, "LEAKCHECK"))
      })

      it("accepts an id of exactly 128 bytes", () => {
        const id = "é".repeat(64) // 128 UTF-8 bytes
        const decoded = getOk(decode(direction, JSON.stringify({ ...frame, id })))
        assert.strictEqual((decoded as { readonly id?: string }).id, id)
      })

      if (definition.id === "required") {
        it("refuses a missing, empty or blank id as missing_id", () => {
          const { id: _dropped, ...withoutId } = frame
          for (const variant of [withoutId, { ...frame, id: "" }, { ...frame, id: "   " }]) {
            const variantText = JSON.stringify(variant)
            assert.deepStrictEqual(getErr(decode(direction, variantText)), invalidFrame(variantText, { code: "missing_id", type }))
          }
        })
      }
    }
  })
}

describe("prompt_request without an envelope id", () => {
  it("decodes, leaving the payload's run_id to name the Run (E8)", () => {
    const { id: _dropped, ...message } = coreToRuntimeSamples.prompt_request.message
    const decoded = getOk(Messages.decodeCoreToRuntime(encode(message)))
    assert.deepStrictEqual(decoded, message)
  })
})

describe("encodeMessage", () => {
  it("refuses a message that breaks its schema and sends nothing", () => {
    const broken = { ...runtimeToCoreSamples.delta.message, payload: { delta: "x", sequence: -1 } }
    assert.deepStrictEqual(
      getErr(Messages.encodeMessage(broken)),
      new Messages.OutgoingFrameRejected({ type: "delta", reason: "invalid_message" })
    )
  })

  it("refuses an unknown member in an outgoing payload", () => {
    const extra = {
      ...coreToRuntimeSamples.execution_release.message,
      payload: { handle: coreToRuntimeSamples.execution_release.message.payload.handle, surplus: 1 }
    }
    assert.deepStrictEqual(
      getErr(Messages.encodeMessage(extra as unknown as Messages.Message)),
      new Messages.OutgoingFrameRejected({ type: "execution_release", reason: "invalid_message" })
    )
  })

  it("refuses a message of an unknown type without echoing the type", () => {
    const error = getErr(Messages.encodeMessage({ type: "LEAKCHECK_type" } as unknown as Messages.Message))
    assert.deepStrictEqual(error, new Messages.OutgoingFrameRejected({ type: "unknown", reason: "invalid_message" }))
    assert.isTrue(neverMentions(error, "LEAKCHECK"))
  })

  it("refuses a frame over 4 MiB and accepts one just under it", () => {
    const base = runtimeToCoreSamples.delta.message
    const overhead = encode({ ...base, payload: { ...base.payload, delta: "" } }).length
    const fits = { ...base, payload: { ...base.payload, delta: "a".repeat(4 * 1024 * 1024 - overhead) } }
    assert.strictEqual(encode(fits).length, 4 * 1024 * 1024)
    const tooLarge = { ...base, payload: { ...base.payload, delta: "a".repeat(4 * 1024 * 1024 - overhead + 1) } }
    assert.deepStrictEqual(
      getErr(Messages.encodeMessage(tooLarge)),
      new Messages.OutgoingFrameRejected({ type: "delta", reason: "frame_too_large", bytes: 4 * 1024 * 1024 + 1 })
    )
  })

  it("counts UTF-8 bytes, not characters, against the 4 MiB frame bound", () => {
    const base = runtimeToCoreSamples.delta.message
    const overhead = encode({ ...base, payload: { ...base.payload, delta: "" } }).length
    // Each "é" is two bytes: the frame has fewer than 4 MiB characters but more than 4 MiB bytes.
    const text = "é".repeat((4 * 1024 * 1024 - overhead) / 2 + 1)
    const error = getErr(Messages.encodeMessage({ ...base, payload: { ...base.payload, delta: text } }))
    assert.strictEqual(error.reason, "frame_too_large")
  })
})

describe("request payload bounds", () => {
  it("accepts a workspace_read payload of 8 KiB and refuses one byte more as payload_too_large", () => {
    const message = coreToRuntimeSamples.workspace_read.message
    const build = (pathLength: number) =>
      JSON.stringify({ ...message, payload: { ...message.payload, path: "p".repeat(pathLength) } })
    const payloadBytes = (pathLength: number) =>
      JSON.stringify({ ...message.payload, path: "p".repeat(pathLength) }).length
    const fitting = 8 * 1024 - payloadBytes(0)
    assert.strictEqual(payloadBytes(fitting), 8 * 1024)
    assert.isTrue(Result.isSuccess(Messages.decodeCoreToRuntime(build(fitting))))
    const over = build(fitting + 1)
    assert.deepStrictEqual(
      getErr(Messages.decodeCoreToRuntime(over)),
      invalidFrame(over, { code: "payload_too_large", type: "workspace_read", id: message.id })
    )
  })
})
