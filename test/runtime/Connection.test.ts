import { assert, describe, it } from "@effect/vitest"
import { Effect, Option, Tracer } from "effect"
import { scriptedCapabilities } from "../../scenarios/Fixtures.js"
import { capabilityNames } from "../../src/proto/Capabilities.js"
import { unsafeMake } from "../../src/proto/Ids.js"
import { StatusBoard } from "../../src/runtime/StatusBoard.js"
import {
  adjust,
  connect,
  next,
  prepareFrame,
  prepareReady,
  processLayer,
  promptFrame,
  same,
  script,
  silent,
  startFrame,
  until
} from "../support/runtimeTestWire.js"


describe("Heartbeat", () => {
  it.effect("is sent at once with complete, codec-encoded declarations, then every interval", () =>
    Effect.gen(function* () {
      const { core, heartbeat } = yield* connect({ heartbeatInterval: "15 seconds" })
      same(heartbeat, {
        type: "heartbeat",
        payload: {
          ts: 0,
          active_requests: 0,
          daemon_version: "9.9.9-test",
          supported_agent_kinds: [{ kind: "scripted", available: true, version: "1.0.0", capabilities: scriptedCapabilities }]
        }
      })
      // Declaration order on the wire.
      const kinds = heartbeat.type === "heartbeat" ? heartbeat.payload.supported_agent_kinds ?? [] : []
      same(Object.keys(kinds[0]?.capabilities ?? {}), [...capabilityNames])
      yield* adjust(14_999)
      assert.isTrue(yield* silent(core))
      yield* core.toRuntime(promptFrame("run-1", script([{ hang: true }])))
      yield* adjust(1)
      const second = yield* next(core, "heartbeat")
      same({ ts: second.payload.ts, active: second.payload.active_requests }, { ts: 15, active: 1 })
      yield* adjust(15_000)
      assert.strictEqual((yield* next(core, "heartbeat")).payload.ts, 30)
    }).pipe(Effect.provide(processLayer())))

  it.effect("declares the narrowed capabilities and availability from the registry", () =>
    Effect.gen(function* () {
      const { heartbeat } = yield* connect()
      same(heartbeat.type === "heartbeat" ? heartbeat.payload.supported_agent_kinds : undefined, [{
        kind: "scripted",
        available: false,
        version: "1.0.0",
        capabilities: { ...scriptedCapabilities, permissions: false, steering: false }
      }])
      const board = yield* StatusBoard
      const kinds = (yield* board.snapshot).kinds
      same(kinds.map((k) => [k.kind, k.available, k.version, k.supported.includes("permissions"), k.supported.length]), [
        ["scripted", false, "1.0.0", false, 24]
      ])
    }).pipe(Effect.provide(processLayer({ scripted: { disabledCapabilities: ["permissions", "steering"], available: false } }))))
})

describe("Dispatcher", () => {
  it.effect("answers malformed control frames with the family's rejection when type and id are known", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* core.toRuntime(`{"type":"execution_prepare","id":"prep-1","payload":{"configuration":{}}}`)
      same(yield* next(core, "preparation_status"), {
        type: "preparation_status", id: "prep-1", payload: { revision: 0, state: "rejected", operation: "execution_prepare", error_code: "invalid_request" }
      })
      yield* core.toRuntime(`{"type":"execution_start","id":"prep-1","payload":{"handle":"h"}}`)
      assert.strictEqual((yield* next(core, "preparation_status")).payload.error_code, "invalid_start")
      yield* core.toRuntime(`{"type":"execution_release","id":"prep-1","payload":{"handle":""}}`)
      same((yield* next(core, "preparation_status")).payload, {
        revision: 0, state: "rejected", operation: "execution_release", error_code: "invalid_release"
      })
      yield* core.toRuntime(`{"type":"prompt_steer","id":"run-1","payload":{"input_id":"","input":[]}}`)
      same(yield* next(core, "prompt_steer_ack"), {
        type: "prompt_steer_ack", id: "run-1", payload: { input_id: "", accepted: false, error_code: "invalid_input" }
      })
      yield* core.toRuntime(`{"type":"prompt_request","id":"run-2","payload":{"agent_kind":""}}`)
      same((yield* next(core, "error")).id, "run-2")
      same(yield* next(core, "done"), { type: "done", id: "run-2", payload: { content: "" } })
      yield* core.toRuntime(`{"type":"workspace_read","id":"op-1","payload":{"path":1}}`)
      same((yield* next(core, "workspace_read_result")).payload, { outcome: "rejected", error_code: "invalid_request" })
      yield* core.toRuntime(`{"type":"runtime_prepare","id":"t-1","payload":{"step":"bogus"}}`)
      same((yield* next(core, "runtime_prepare_result")).payload, { outcome: "rejected", error_code: "invalid_request" })
      assert.isTrue(yield* silent(core))
    }).pipe(Effect.provide(processLayer())))

  it.effect("drops frames without a usable correlation, and decisions without a delivery id, with no reply", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      const drops = [
        "not json",
        "[]",
        `{"type":"no_such_type","id":"x"}`,
        `{"type":"execution_prepare","payload":{}}`,
        `{"type":"execution_prepare","id":"${"x".repeat(200)}","payload":{}}`,
        `{"type":"prompt_cancel","id":"run-1","payload":{"delivery_id":7}}`,
        `{"type":"permission_decision","id":"perm_1","payload":{"approved":true}}`,
        `{"type":"prompt_for_user_choice_decision","id":"ask_1","payload":{"delivery_id":"d","question_answers":[{"question_id":"q","answers":[],"header":"h"}]}}`,
        `{"type":"function_result","id":"run-1","payload":{"call_id":"c","success":true,"content":[]}}`,
        `{"type":"workspace_export","id":"e-1","payload":{"step":"begin","offset":"x"}}`,
        `{"type":"device_shutdown","payload":{"reason":5}}`
      ]
      for (const frame of drops) yield* core.toRuntime(frame)
      assert.isTrue(yield* silent(core))
      // A malformed suspension request with a known id is refused without echoing its payload.
      yield* core.toRuntime(`{"type":"environment_quiesce","id":"q-1","payload":{}}`)
      same((yield* next(core, "environment_quiesced")).payload, { environment_id: "", suspend_id: "", accepted: false, error_code: "invalid_request" })
      assert.isTrue(yield* silent(core))
    }).pipe(Effect.provide(processLayer())))

  it.effect("an invalid prompt_request for an active Run id never touches that Run's stream", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* core.toRuntime(promptFrame("run-1", script([{ hang: true }])))
      yield* core.toRuntime(`{"type":"prompt_request","id":"run-1","payload":{"agent_kind":""}}`)
      assert.isTrue(yield* silent(core))
    }).pipe(Effect.provide(processLayer())))

  it.effect("gives unsupported families their definite rejection", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* core.toRuntime({ type: "runtime_prepare", id: unsafeMake.transferId("t-1"), payload: { step: "commit" } })
      // A commit for a transfer never begun (test/runtime/transfer/Transfer.test.ts).
      same(yield* next(core, "runtime_prepare_result"), {
        type: "runtime_prepare_result", id: "t-1", payload: { outcome: "rejected", error_code: "invalid_request" }
      })
      yield* core.toRuntime({
        type: "workspace_read",
        id: unsafeMake.operationId("op-1"),
        payload: { run_id: unsafeMake.runId("run-1"), environment_id: "env", path: "", max_bytes: 0, operation: "directory", max_entries: 10 }
      })
      // Without an Environment binding there is nothing to read (test/runtime/workspace/Reads.test.ts).
      same((yield* next(core, "workspace_read_result")).payload, { outcome: "rejected", error_code: "resource_unavailable" })
      yield* core.toRuntime({ type: "workspace_write", id: unsafeMake.operationId("op-2"), payload: { step: "commit" } })
      // A commit for a write never begun (test/runtime/workspace/Writes.test.ts).
      same((yield* next(core, "workspace_write_result")).payload, { outcome: "rejected", error_code: "invalid_request" })
      yield* core.toRuntime({ type: "workspace_export", id: unsafeMake.operationId("op-3"), payload: { step: "begin", handle: unsafeMake.admissionHandle("h"), environment_id: "env" } })
      // Unbound: export is declared unsupported (test/runtime/workspace/Exports.test.ts).
      same((yield* next(core, "workspace_export_result")).payload, { outcome: "rejected", offset: 0, error_code: "read_unsupported" })
      yield* core.toRuntime({ type: "workspace_export", id: unsafeMake.operationId("op-3"), payload: { step: "next", offset: 65_536 } })
      same((yield* next(core, "workspace_export_result")).payload, { outcome: "rejected", offset: 65_536, error_code: "resource_unavailable" })
      yield* core.toRuntime({ type: "workspace_export", id: unsafeMake.operationId("op-3"), payload: { step: "cancel" } })
      const suspension = { environment_id: "env-1", suspend_id: unsafeMake.suspensionId("s-1") }
      yield* core.toRuntime({ type: "environment_quiesce", id: unsafeMake.operationId("q-1"), payload: suspension })
      same(yield* next(core, "environment_quiesced"), {
        type: "environment_quiesced", id: "q-1", payload: { environment_id: "env-1", suspend_id: "s-1", accepted: false, error_code: "invalid_request" }
      })
      yield* core.toRuntime({ type: "environment_resume", id: unsafeMake.operationId("r-1"), payload: suspension })
      same((yield* next(core, "environment_resumed")).payload, {
        environment_id: "env-1", suspend_id: "s-1", accepted: false, error_code: "invalid_request"
      }, "an unbound daemon has no Environment to resume")
      assert.isTrue(yield* silent(core))
    }).pipe(Effect.provide(processLayer())))

  it.effect("echoes a request's trace on its replies and on the Run it starts", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      const trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
      yield* prepareReady(core, "prep-1")
      const start = startFrame("prep-1", "executor-1", "handle-1", "run-1", script([{ delta: "x" }]))
      yield* core.toRuntime({ ...start, trace } as typeof start)
      const frames = []
      while (true) {
        const f = yield* core.fromRuntime
        frames.push(f)
        if (f.type === "done") break
      }
      assert.isTrue(frames.every((f) => "trace" in f && f.trace === trace))
    }).pipe(Effect.provide(processLayer())))

  it.effect("never echoes a malformed, oversized or all-zero trace; replies then carry none", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      const valid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
      const traces = [
        "not-a-traceparent",
        `${valid}-extra`,
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "x".repeat(300),
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01"
      ]
      // Raw frames: the trace never makes a request invalid, whatever it holds.
      const resume = (trace: string) =>
        JSON.stringify({ type: "environment_resume", id: "r-1", payload: { environment_id: "env-1", suspend_id: "s-1" }, trace })
      for (const trace of traces) {
        yield* core.toRuntime(resume(trace))
        const reply = yield* next(core, "environment_resumed")
        assert.isFalse("trace" in reply, trace)
      }
      yield* core.toRuntime(resume(valid))
      assert.strictEqual((yield* next(core, "environment_resumed")).trace, valid)
    }).pipe(Effect.provide(processLayer())))

  it.effect("runs each request handler in a span whose parent is Core's span, or in a local span without a valid trace", () =>
    Effect.gen(function* () {
      const spans: Array<{ readonly name: string; readonly parent: Option.Option<Tracer.AnySpan> }> = []
      const recording = Tracer.make({
        span: (options) => {
          spans.push({ name: options.name, parent: options.parent })
          return Tracer.nativeTracer.span(options)
        }
      })
      yield* Effect.gen(function* () {
        const { core } = yield* connect()
        const traceId = "4bf92f3577b34da6a3ce929d0e0e4736"
        const spanId = "00f067aa0ba902b7"
        yield* core.toRuntime({ ...prepareFrame("prep-1"), trace: `00-${traceId}-${spanId}-01` })
        yield* next(core, "preparation_status")
        yield* next(core, "preparation_status")
        yield* core.toRuntime({ ...promptFrame("run-1", script([{ delta: "x" }, { delta: "y" }])), trace: "garbage" })
        yield* until(core, "done")
        const prepare = spans.filter((s) => s.name === "Runtime.execution_prepare")
        assert.strictEqual(prepare.length, 1)
        const parent = Option.getOrUndefined(prepare[0]!.parent)
        same(parent === undefined ? undefined : { _tag: parent._tag, traceId: parent.traceId, spanId: parent.spanId, sampled: parent.sampled }, {
          _tag: "ExternalSpan", traceId, spanId, sampled: true
        })
        // A malformed trace starts a local trace: no external parent (here: the root of a new trace).
        const request = spans.filter((s) => s.name === "Runtime.prompt_request")
        assert.strictEqual(request.length, 1)
        assert.isTrue(Option.isNone(request[0]!.parent) || request[0]!.parent.value._tag === "Span")
        // Run events create no spans: one span per received request, and one per native Harness call below it.
        assert.isTrue(spans.every((s) => s.name.startsWith("Runtime.") || s.name.startsWith("Harness.")), spans.map((s) => s.name).join(","))
        const harnessPrepare = spans.filter((s) => s.name === "Harness.prepare")
        assert.strictEqual(harnessPrepare.length, 2) // the prepared Turn's Executor and the direct Run's
        assert.strictEqual(spans.filter((s) => s.name === "Harness.start").length, 1)
      }).pipe(Effect.withTracer(recording))
    }).pipe(Effect.provide(processLayer())))

  it.effect("the receive loop never waits on a preparation", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* core.toRuntime({ type: "execution_prepare", id: unsafeMake.preparationRequestId("slow"), payload: {
        session_id: unsafeMake.sessionId("c0ffee00-1234-4abc-9def-0123456789ab"),
        configuration: {
          agent_kind: "scripted", conversation_id: "", run_id: "", strict_resume: true,
          agent_state_key: "agents-api-c0ffee00-1234-4abc-9def-0123456789ab",
          agent_options: { scripted: { prepare_wait: "never-fired" } }
        }
      } })
      assert.strictEqual((yield* next(core, "preparation_status")).payload.state, "preparing")
      yield* core.toRuntime(promptFrame("run-1", script([{ delta: "still served" }])))
      assert.strictEqual((yield* next(core, "delta")).payload.delta, "still served")
    }).pipe(Effect.provide(processLayer())))
})
