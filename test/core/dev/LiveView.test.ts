import { assert, describe, it } from "@effect/vitest"
import { formatFrame, quote, summarize } from "../../../src/core/dev/LiveView.js"
import type { TappedFrame } from "../../../src/core/FrameTap.js"
import { Ids, type Messages } from "../../../src/proto/index.js"
import { allSupported } from "../../support/capabilities.js"

const run = Ids.unsafeMake.runId("run-1")
const tapped = (direction: TappedFrame["direction"], message: Messages.Message, at = 1_250): TappedFrame => ({
  direction,
  deviceId: Ids.unsafeMake.deviceId("dev-1"),
  connectionNumber: 1,
  type: message.type,
  ...("id" in message && message.id !== undefined ? { id: message.id } : {}),
  bytes: 100,
  at,
  message
})

describe("LiveView", () => {
  it("prints time, direction, type, id and a short summary, in one line per frame", () => {
    const line = formatFrame(tapped("runtime→core", { type: "delta", id: run, payload: { delta: "Hello", sequence: 1 } }), 1_000)
    assert.strictEqual(line, `  +0.250s  ← delta                  run-1                   #1 "Hello"`)
    const out = formatFrame(
      tapped("core→runtime", {
        type: "prompt_steer",
        id: run,
        payload: { input_id: Ids.unsafeMake.inputId("in-1"), input: [{ content: [{ type: "input_text", text: "x" }] }], durable_receipt: true }
      }),
      1_000
    )
    assert.match(out, /→ prompt_steer\s+run-1\s+input in-1 · 1 message$/)
  })

  it("summarizes receipts by what they prove", () => {
    const ack = (payload: Messages.MessageOfType<"prompt_steer_ack">["payload"]) => summarize({ type: "prompt_steer_ack", id: run, payload })
    assert.strictEqual(ack({ input_id: "in-1", accepted: false, written: true }), "input in-1: written")
    assert.strictEqual(ack({ input_id: "in-1", accepted: true }), "input in-1: accepted")
    assert.strictEqual(ack({ input_id: "in-1", accepted: false, error_code: "busy" }), "input in-1: error busy")
    assert.strictEqual(
      summarize({
        type: "heartbeat",
        payload: { ts: 1, active_requests: 0, supported_agent_kinds: [{ kind: "scripted", available: true, capabilities: allSupported() }] }
      }),
      "scripted available (30/30 capabilities) · 0 active"
    )
    assert.strictEqual(summarize({ type: "usage", id: run, payload: {} }), "usage (no measurement)")
  })

  it("never shows agent_options, bearer tokens, error texts or decision messages", () => {
    const secrets = ["sk-live-secret", "bearer-secret", "stack trace with secret", "private message"]
    const frames: ReadonlyArray<Messages.Message> = [
      {
        type: "execution_prepare",
        id: Ids.unsafeMake.preparationRequestId("prep-1"),
        payload: {
          session_id: Ids.unsafeMake.sessionId("s1"),
          configuration: {
            agent_kind: "scripted",
            conversation_id: "",
            run_id: "",
            agent_options: { api_key: "sk-live-secret" },
            mcp_http_servers: [{ connection_origin: "service", server_label: "m", server_url: "https://m", allowed_tools: null, bearer_token: "bearer-secret" }]
          }
        }
      },
      { type: "error", id: run, payload: { error: "stack trace with secret", code: "server_error" } },
      {
        type: "permission_decision",
        id: Ids.unsafeMake.interactionId("p1"),
        payload: { delivery_id: Ids.unsafeMake.deliveryId("d1"), approved: false, message: "private message" }
      }
    ]
    for (const message of frames) {
      const line = formatFrame(tapped("core→runtime", message), 0)
      for (const secret of secrets) assert.notInclude(line, secret)
    }
  })

  it("bounds and cleans peer text", () => {
    assert.strictEqual(quote("a\nb\u0007c"), `"a⏎b·c"`)
    assert.strictEqual(quote("x".repeat(60), 10), `"xxxxxxxxxx…"`)
  })
})
