/**
 * DeviceSession over the real socket transport and an in-memory scripted Runtime: declarations, routing,
 * subscriptions, send queue, liveness and write deadlines. Every timer runs on TestClock.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Exit, Fiber, Layer, Option, Stream } from "effect"
import { TestClock } from "effect/testing"
import { steerAckKey } from "../../../src/core/DeviceSession.js"
import { NotSent, ObservationLost, SubscriberOverflow, SubscriptionRejected } from "../../../src/core/Errors.js"
import { Gateway } from "../../../src/core/Gateway.js"
import { Ids, Messages, Trace } from "../../../src/proto/index.js"
import { declaration } from "../../support/capabilities.js"
import {
  connectMemory,
  device,
  deviceId,
  frames,
  heartbeat,
  kind,
  requestId,
  runId
} from "../../support/coreScriptedRuntime.js"
import { yieldTimes } from "../../support/coreFakeSession.js"
import { captureLogs, collect, gatewayLayer, settle } from "./helpers.js"

const lost = (reason: ObservationLost["reason"]) => new ObservationLost({ reason })
const handle = Ids.unsafeMake.admissionHandle
const executor = Ids.unsafeMake.executorId
const promptCancel = (run: string): Messages.CoreToRuntime => ({ type: "prompt_cancel", id: runId(run), payload: {} })

describe("DeviceSession declarations", () => {
  it.effect("knows no capabilities before the first heartbeat, then holds the heartbeat's declaration", () =>
    Effect.gen(function*() {
      const connection = yield* connectMemory(device("dev-1"))
      assert.deepStrictEqual(yield* connection.session.declaration, Option.none())
      yield* TestClock.adjust("5 seconds")
      yield* connection.runtime.send(
        heartbeat([kind("codex"), kind("claude_code", { available: false })], {
          ts: 1_760_000_100,
          activeRequests: 2,
          daemonVersion: "1.4.2"
        })
      )
      yield* settle(connection)
      const known = Option.getOrThrow(yield* connection.session.declaration)
      assert.deepStrictEqual([...known.kinds.keys()], ["codex", "claude_code"])
      assert.strictEqual(known.kinds.get("claude_code")?.available, false)
      assert.strictEqual(known.daemonVersion, "1.4.2")
      assert.strictEqual(known.activeRequests, 2)
      assert.strictEqual(known.ts, 1_760_000_100)
      assert.strictEqual(known.receivedAtMs, 5_000)
    }).pipe(Effect.provide(gatewayLayer())))

  it.effect("stops advertising a kind that a later heartbeat leaves out", () =>
    Effect.gen(function*() {
      const connection = yield* connectMemory(device("dev-1"))
      yield* connection.runtime.send(heartbeat([kind("codex"), kind("claude_code")]))
      yield* connection.runtime.send(heartbeat([kind("codex", { capabilities: declaration({ streaming: true }) })]))
      yield* settle(connection)
      const known = Option.getOrThrow(yield* connection.session.declaration)
      assert.deepStrictEqual([...known.kinds.keys()], ["codex"])
      assert.deepStrictEqual(known.kinds.get("codex")?.capabilities, declaration({ streaming: true }))
    }).pipe(Effect.provide(gatewayLayer())))

  it.effect("connections declaring the same kinds share one kinds map; another declaration has its own", () =>
    Effect.gen(function*() {
      const declare = (id: string, kinds: Parameters<typeof heartbeat>[0]) =>
        Effect.gen(function*() {
          const connection = yield* connectMemory(device(id))
          yield* connection.runtime.send(heartbeat(kinds, { daemonVersion: id }))
          yield* settle(connection)
          return Option.getOrThrow(yield* connection.session.declaration)
        })
      const off = declaration({ streaming: true })
      const a = yield* declare("dev-1", [kind("codex"), kind("claude_code", { available: false })])
      const b = yield* declare("dev-2", [kind("codex"), kind("claude_code", { available: false })])
      const c = yield* declare("dev-3", [kind("codex", { capabilities: off }), kind("claude_code", { available: false })])
      // Shared (issue 18: one map, descriptors and capabilities objects per distinct declaration, not per device) …
      assert.strictEqual(b.kinds, a.kinds)
      assert.strictEqual(b.daemonVersion, "dev-2")
      // … and each connection still sees exactly what it declared.
      assert.notStrictEqual(c.kinds, a.kinds)
      assert.deepStrictEqual([...c.kinds.keys()], ["codex", "claude_code"])
      assert.deepStrictEqual(c.kinds.get("codex")?.capabilities, off)
      assert.strictEqual(a.kinds.get("codex")?.capabilities.steering, true)
      assert.strictEqual(c.kinds.get("codex")?.capabilities.steering, false)
      assert.strictEqual(a.kinds.get("claude_code")?.available, false)
    }).pipe(Effect.provide(gatewayLayer())))

  it.effect("treats a heartbeat without kinds as a known, empty declaration", () =>
    Effect.gen(function*() {
      const connection = yield* connectMemory(device("dev-1"))
      yield* connection.runtime.send(heartbeat([]))
      yield* settle(connection)
      const known = Option.getOrThrow(yield* connection.session.declaration)
      assert.strictEqual(known.kinds.size, 0)
    }).pipe(Effect.provide(gatewayLayer())))

  it.effect("a repeated heartbeat with other liveness numbers updates them; one whose number is invalid still closes", () =>
    Effect.gen(function*() {
      const connection = yield* connectMemory(device("dev-1"))
      const text = (ts: number, activeRequests: number) =>
        Messages.encodeMessage(heartbeat([kind("codex")], { ts, activeRequests, daemonVersion: "1.4.2" })).pipe(
          (r) => (r._tag === "Success" ? r.success : "")
        )
      yield* connection.runtime.sendRaw(text(100, 2))
      yield* settle(connection)
      const first = Option.getOrThrow(yield* connection.session.declaration)
      yield* TestClock.adjust("15 seconds")
      // The same text with other numbers (the fast path of HeartbeatFrame.ts).
      yield* connection.runtime.sendRaw(text(115, 0))
      yield* settle(connection)
      const second = Option.getOrThrow(yield* connection.session.declaration)
      assert.deepStrictEqual([second.ts, second.activeRequests, second.receivedAtMs], [115, 0, 15_000])
      assert.strictEqual(second.kinds, first.kinds)
      assert.strictEqual(second.daemonVersion, "1.4.2")
      // A negative ts in the same text: refused by the generic decoder, as any invalid heartbeat.
      yield* connection.runtime.sendRaw(text(116, 0).replace('"ts":116', '"ts":-1'))
      assert.deepStrictEqual(yield* connection.session.closed, lost("invalid_heartbeat"))
      assert.deepStrictEqual(yield* connection.session.declaration, Option.none())
      assert.deepStrictEqual(yield* connection.runtime.closedByCore, { code: 1008, reason: "invalid_heartbeat" })
    }).pipe(Effect.provide(gatewayLayer())))

  it.effect("an invalid heartbeat clears the declaration, closes the transport and settles nothing", () =>
    Effect.gen(function*() {
      const connection = yield* connectMemory(device("dev-1"))
      const gateway = yield* Gateway
      const run = yield* connection.session.subscribeDurable(runId("run-1"))
      const preparation = yield* connection.session.subscribePreparation(requestId("prep-1"))
      yield* connection.runtime.send(heartbeat())
      yield* connection.runtime.send(frames.delta("run-1", "partial", 1))
      yield* settle(connection)
      assert.isTrue(Option.isSome(yield* connection.session.declaration))

      const invalid = JSON.parse(Messages.encodeMessage(heartbeat()).pipe((r) => r._tag === "Success" ? r.success : "")) as {
        payload: { supported_agent_kinds: Array<{ capabilities: Record<string, boolean> }> }
      }
      delete invalid.payload.supported_agent_kinds[0]!.capabilities["streaming"]
      yield* connection.runtime.sendRaw(JSON.stringify(invalid))

      assert.deepStrictEqual(yield* connection.session.closed, lost("invalid_heartbeat"))
      assert.deepStrictEqual(yield* connection.session.declaration, Option.none())
      assert.deepStrictEqual(yield* connection.runtime.closedByCore, { code: 1008, reason: "invalid_heartbeat" })
      assert.deepStrictEqual(yield* Fiber.join(connection.accepted), lost("invalid_heartbeat"))
      const events = yield* collect(run)
      assert.deepStrictEqual(events.items.map((e) => e.type), ["delta"])
      assert.deepStrictEqual(events.exit, Exit.fail(lost("invalid_heartbeat")))
      assert.deepStrictEqual((yield* collect(preparation)).exit, Exit.fail(lost("invalid_heartbeat")))
      assert.deepStrictEqual(yield* gateway.session(deviceId("dev-1")), Option.none())
    }).pipe(Effect.provide(gatewayLayer())))
})

describe("DeviceSession Run subscriptions", () => {
  it.effect("delivers a Run's frames in order and ends after done", () =>
    Effect.gen(function*() {
      const { runtime, session } = yield* connectMemory(device("dev-1"))
      const run = yield* session.subscribeDurable(runId("run-1"))
      yield* runtime.send(frames.delta("run-1", "a", 1))
      yield* runtime.send(frames.error("run-1", "engine failed"))
      yield* runtime.send(frames.done("run-1", "a"))
      yield* runtime.send(frames.delta("run-1", "late", 2))
      const events = yield* collect(run)
      assert.deepStrictEqual(events.items, [
        frames.delta("run-1", "a", 1),
        frames.error("run-1", "engine failed"),
        frames.done("run-1", "a")
      ])
      assert.isTrue(Exit.isSuccess(events.exit))
    }).pipe(Effect.provide(gatewayLayer())))

  it.effect("fails with ObservationLost on disconnection and never invents an error or a done", () =>
    Effect.gen(function*() {
      const connection = yield* connectMemory(device("dev-1"))
      const run = yield* connection.session.subscribeDurable(runId("run-1"))
      const preparation = yield* connection.session.subscribePreparation(requestId("prep-1"))
      const replies = yield* connection.session.expectReplies("interaction_decision_ack", "delivery-1")
      yield* connection.runtime.send(frames.delta("run-1", "a", 1))
      yield* settle(connection)
      yield* connection.runtime.close(1006)
      const events = yield* collect(run)
      assert.deepStrictEqual(events.items, [frames.delta("run-1", "a", 1)])
      assert.deepStrictEqual(events.exit, Exit.fail(lost("disconnected")))
      assert.deepStrictEqual((yield* collect(preparation)).exit, Exit.fail(lost("disconnected")))
      assert.deepStrictEqual((yield* collect(replies)).exit, Exit.fail(lost("disconnected")))
      assert.deepStrictEqual(yield* connection.session.closed, lost("disconnected"))
      assert.deepStrictEqual(
        yield* Effect.flip(connection.session.subscribeDurable(runId("run-2"))),
        new SubscriptionRejected({ reason: "connection_closed" })
      )
    }).pipe(Effect.provide(gatewayLayer())))

  it.effect("holds the read loop while a Run subscriber is full; a consumer that takes nothing for the stall timeout is gone", () =>
    Effect.gen(function*() {
      const connection = yield* connectMemory(device("dev-1"))
      const slow = yield* connection.session.subscribeDurable(runId("run-1"))
      const other = yield* connection.session.subscribeDurable(runId("run-2"))
      const otherEnded = yield* Deferred.make<void>()
      const closed = yield* Deferred.make<void>()
      yield* Effect.forkChild(Effect.andThen(connection.session.closed, Deferred.succeed(closed, undefined)))
      const otherDone = yield* Effect.forkChild(Effect.tap(collect(other), () => Deferred.succeed(otherEnded, undefined)))
      for (let i = 1; i <= 3; i++) yield* connection.runtime.send(frames.delta("run-1", `d${i}`, i))
      yield* connection.runtime.send(frames.done("run-2"))
      yield* yieldTimes(100)
      // Backpressure: d3 waits for room, so run-2's done behind it is not read yet. The liveness timeout (60 s)
      // does not run while the read loop waits.
      yield* TestClock.adjust("89999 millis")
      yield* yieldTimes(100)
      assert.isFalse(Deferred.isDoneUnsafe(otherEnded))
      assert.isFalse(Deferred.isDoneUnsafe(closed))
      yield* TestClock.adjust("1 millis")
      assert.deepStrictEqual((yield* Fiber.join(otherDone)).items, [frames.done("run-2")])
      const events = yield* collect(slow)
      assert.deepStrictEqual(events.items, [frames.delta("run-1", "d1", 1), frames.delta("run-1", "d2", 2)])
      assert.deepStrictEqual(events.exit, Exit.fail(new SubscriberOverflow({ capacity: 2 })))
    }).pipe(Effect.provide(gatewayLayer({ runSubscriptionBuffer: 2, subscriberStallTimeout: Duration.seconds(90) }))))

  it.effect("resumes reading as soon as a full Run subscriber's consumer takes a frame, losing nothing", () =>
    Effect.gen(function*() {
      const connection = yield* connectMemory(device("dev-1"))
      const slow = yield* connection.session.subscribeDurable(runId("run-1"))
      for (let i = 1; i <= 50; i++) yield* connection.runtime.send(frames.delta("run-1", `d${i}`, i))
      yield* connection.runtime.send(frames.done("run-1"))
      yield* yieldTimes(100)
      // Nobody read yet and no time passed: the frames wait in the socket, none was dropped.
      const events = yield* collect(slow)
      assert.deepStrictEqual(events.exit, Exit.void)
      assert.deepStrictEqual(events.items.map((e) => e.type === "delta" ? e.payload.sequence : 0), [...Array.from({ length: 50 }, (_, i) => i + 1), 0])
    }).pipe(Effect.provide(gatewayLayer({ runSubscriptionBuffer: 2 }))))

  it.effect("delivers a burst read in one socket read to a consuming subscriber without overflowing its buffer", () =>
    Effect.gen(function*() {
      const connection = yield* connectMemory(device("dev-1"))
      const stream = yield* connection.session.subscribeDurable(runId("run-1"))
      const consumer = yield* Effect.forkChild(collect(stream))
      yield* Effect.yieldNow
      // 2000 deltas and a done arrive before the session pulls: one read, far more than the 64-event buffer
      for (let i = 1; i <= 2000; i++) yield* connection.runtime.send(frames.delta("run-1", "x", i))
      yield* connection.runtime.send(frames.done("run-1"))
      const events = yield* Fiber.join(consumer)
      assert.deepStrictEqual(events.exit, Exit.void)
      assert.strictEqual(events.items.length, 2001)
      assert.deepStrictEqual(events.items[1999], frames.delta("run-1", "x", 2000))
    }).pipe(Effect.provide(gatewayLayer({ runSubscriptionBuffer: 64 }))))

  it.effect("rejects a duplicate subscription and accepts it again once the first one's scope closed", () =>
    Effect.gen(function*() {
      const { session } = yield* connectMemory(device("dev-1"))
      yield* Effect.scoped(Effect.gen(function*() {
        yield* Effect.asVoid(session.subscribeDurable(runId("run-1")))
        assert.deepStrictEqual(
          yield* Effect.flip(session.subscribeDurable(runId("run-1"))),
          new SubscriptionRejected({ reason: "duplicate" })
        )
      }))
      yield* Effect.asVoid(session.subscribeDurable(runId("run-1")))
    }).pipe(Effect.provide(gatewayLayer())))

  it.effect("drops frames of a Run nobody subscribed to and keeps the connection", () =>
    Effect.gen(function*() {
      const connection = yield* connectMemory(device("dev-1"))
      yield* connection.runtime.send(frames.delta("run-9", "nobody", 1))
      yield* connection.runtime.send(frames.done("run-9"))
      yield* settle(connection)
      const run = yield* connection.session.subscribeDurable(runId("run-9"))
      yield* connection.runtime.send(frames.done("run-9", "second"))
      assert.deepStrictEqual((yield* collect(run)).items, [frames.done("run-9", "second")])
    }).pipe(Effect.provide(gatewayLayer())))

  it.effect("fails only the named Run with invalid_run_frame when its delta fails decoding", () =>
    Effect.gen(function*() {
      const connection = yield* connectMemory(device("dev-1"))
      const broken = yield* connection.session.subscribeDurable(runId("run-1"))
      const healthy = yield* connection.session.subscribeDurable(runId("run-2"))
      yield* connection.runtime.send(frames.delta("run-1", "ok", 1))
      yield* connection.runtime.sendRaw(JSON.stringify({ type: "delta", id: "run-1", payload: { delta: 5, sequence: 2 } }))
      yield* connection.runtime.send(frames.done("run-2"))
      const events = yield* collect(broken)
      assert.deepStrictEqual(events.items, [frames.delta("run-1", "ok", 1)])
      assert.deepStrictEqual(events.exit, Exit.fail(lost("invalid_run_frame")))
      assert.deepStrictEqual((yield* collect(healthy)).items, [frames.done("run-2")])
      assert.isUndefined(connection.accepted.pollUnsafe())
    }).pipe(Effect.provide(gatewayLayer())))

  it.effect("applies the per-family policy: a malformed request ends its Run, a malformed usage or subagent frame is dropped", () =>
    Effect.gen(function*() {
      const connection = yield* connectMemory(device("dev-1"))
      const ended = yield* connection.session.subscribeDurable(runId("run-1"))
      const going = yield* connection.session.subscribeDurable(runId("run-2"))
      // A permission_request without its request id ends run-1; run-2's malformed usage and subagent frame
      // (and a malformed permission_cancel) are dropped and its stream goes on to done.
      yield* connection.runtime.sendRaw(JSON.stringify({ type: "permission_request", id: "run-1", payload: { tool: "shell" } }))
      yield* connection.runtime.sendRaw(JSON.stringify({ type: "usage", id: "run-2", payload: { input_tokens: "many" } }))
      yield* connection.runtime.sendRaw(JSON.stringify({ type: "subagent_lifecycle", id: "run-2", payload: 7 }))
      yield* connection.runtime.sendRaw(JSON.stringify({ type: "permission_cancel", id: 5 }))
      yield* connection.runtime.send(frames.delta("run-2", "still here", 1))
      yield* connection.runtime.send(frames.done("run-2"))
      assert.deepStrictEqual((yield* collect(ended)).exit, Exit.fail(lost("invalid_run_frame")))
      const rest = yield* collect(going)
      assert.deepStrictEqual(rest.items, [frames.delta("run-2", "still here", 1), frames.done("run-2")])
      assert.deepStrictEqual(rest.exit, Exit.void)
    }).pipe(Effect.provide(gatewayLayer())))

  it.effect("drops other invalid frames with a payload-free log line and keeps the connection", () => {
    const logs = captureLogs()
    return Effect.gen(function*() {
      const connection = yield* connectMemory(device("dev-1"))
      yield* connection.runtime.sendRaw("not json TOPSECRET")
      yield* connection.runtime.sendRaw(JSON.stringify({ type: "bogus", id: "x", payload: { secret: "TOPSECRET" } }))
      yield* connection.runtime.sendRaw(JSON.stringify({ type: "delta", payload: { delta: "TOPSECRET", sequence: 1 } }))
      yield* settle(connection)
      assert.isUndefined(connection.accepted.pollUnsafe())
      const dropped = logs.lines.filter((line) => line.includes("invalid frame dropped"))
      assert.strictEqual(dropped.length, 3)
      assert.isTrue(dropped.some((line) => line.includes("not_json")))
      assert.isTrue(dropped.some((line) => line.includes("unknown_type")))
      assert.isTrue(dropped.some((line) => line.includes("missing_id")))
      assert.isFalse(logs.lines.some((line) => line.includes("TOPSECRET")))
    }).pipe(Effect.provide(gatewayLayer().pipe(Layer.provideMerge(logs.layer))))
  })

  it.effect("routes permission_cancel to the Run that emitted the permission_request", () =>
    Effect.gen(function*() {
      const connection = yield* connectMemory(device("dev-1"))
      const run = yield* connection.session.subscribeDurable(runId("run-1"))
      yield* connection.runtime.send(frames.permissionRequest("run-1", "perm-1"))
      yield* connection.runtime.send(frames.permissionCancel("perm-unknown"))
      yield* connection.runtime.send(frames.permissionCancel("perm-1"))
      yield* connection.runtime.send(frames.permissionCancel("perm-1"))
      yield* connection.runtime.send(frames.done("run-1"))
      assert.deepStrictEqual((yield* collect(run)).items, [
        frames.permissionRequest("run-1", "perm-1"),
        frames.permissionCancel("perm-1"),
        frames.done("run-1")
      ])
    }).pipe(Effect.provide(gatewayLayer())))
})

describe("DeviceSession preparation subscriptions", () => {
  const status = (
    revision: number,
    state: Messages.MessageOfType<"preparation_status">["payload"]["state"],
    extra: Partial<Messages.MessageOfType<"preparation_status">["payload"]> = {}
  ): Messages.MessageOfType<"preparation_status">["payload"] => ({
    handle: handle("h-1"),
    executor_id: executor("e-1"),
    revision,
    state,
    ...(state === "ready" ? { expires_at: 300_000 } : {}),
    ...(state === "starting" || state === "started" ? { run_id: runId("run-1") } : {}),
    ...extra
  })

  it.effect("applies revisions in order: older, repeated and foreign-handle statuses ignored, rejected passes", () =>
    Effect.gen(function*() {
      const connection = yield* connectMemory(device("dev-1"))
      const stream = yield* connection.session.subscribePreparation(requestId("prep-1"))
      const rejected: Messages.MessageOfType<"preparation_status">["payload"] = {
        revision: 0,
        state: "rejected",
        operation: "execution_start",
        error_code: "start_conflict"
      }
      const sent = [
        status(1, "preparing"),
        status(1, "preparing"), // repeated
        status(2, "ready"),
        status(1, "preparing"), // older
        status(3, "starting", { handle: handle("h-other") }), // foreign handle
        rejected,
        status(3, "starting"),
        status(4, "started"),
        status(5, "released") // after the terminal state
      ]
      for (const s of sent) yield* connection.runtime.send(frames.status("prep-1", s))
      const events = yield* collect(stream)
      assert.deepStrictEqual(events.items, [
        status(1, "preparing"),
        status(2, "ready"),
        rejected,
        status(3, "starting"),
        status(4, "started")
      ])
      assert.isTrue(Exit.isSuccess(events.exit))
    }).pipe(Effect.provide(gatewayLayer())))

  it.effect("drops statuses of request ids nobody subscribed to", () =>
    Effect.gen(function*() {
      const connection = yield* connectMemory(device("dev-1"))
      yield* connection.runtime.send(frames.status("prep-1", status(1, "preparing")))
      yield* settle(connection)
      const stream = yield* connection.session.subscribePreparation(requestId("prep-1"))
      yield* connection.runtime.send(frames.status("prep-1", status(2, "failed", { error_code: "preparation_failed" })))
      assert.deepStrictEqual((yield* collect(stream)).items, [status(2, "failed", { error_code: "preparation_failed" })])
    }).pipe(Effect.provide(gatewayLayer())))

  it.effect("fails the subscription with invalid_frame for a status whose shape is wrong for its state", () =>
    Effect.gen(function*() {
      const connection = yield* connectMemory(device("dev-1"))
      const stream = yield* connection.session.subscribePreparation(requestId("prep-1"))
      yield* connection.runtime.send(frames.status("prep-1", { handle: handle("h-1"), revision: 1, state: "ready" }))
      assert.deepStrictEqual((yield* collect(stream)).exit, Exit.fail(lost("invalid_frame")))
    }).pipe(Effect.provide(gatewayLayer())))

  it.effect("buffers 16 statuses, then fails with SubscriberOverflow", () =>
    Effect.gen(function*() {
      const connection = yield* connectMemory(device("dev-1"))
      const stream = yield* connection.session.subscribePreparation(requestId("prep-1"))
      for (let r = 1; r <= 17; r++) yield* connection.runtime.send(frames.status("prep-1", status(r, "preparing")))
      yield* settle(connection)
      const events = yield* collect(stream)
      assert.strictEqual(events.items.length, 16)
      assert.deepStrictEqual(events.exit, Exit.fail(new SubscriberOverflow({ capacity: 16 })))
    }).pipe(Effect.provide(gatewayLayer())))

  it.effect("keeps at most 64 preparation subscriptions per connection", () =>
    Effect.gen(function*() {
      const { session } = yield* connectMemory(device("dev-1"))
      for (let i = 0; i < 64; i++) yield* Effect.asVoid(session.subscribePreparation(requestId(`prep-${i}`)))
      assert.deepStrictEqual(
        yield* Effect.flip(session.subscribePreparation(requestId("prep-64"))),
        new SubscriptionRejected({ reason: "capacity" })
      )
    }).pipe(Effect.provide(gatewayLayer())))
})

describe("DeviceSession replies", () => {
  it.effect("delivers a decision receipt to the waiter of its delivery id and drops one without waiter", () =>
    Effect.gen(function*() {
      const connection = yield* connectMemory(device("dev-1"))
      const replies = yield* connection.session.expectReplies("interaction_decision_ack", "delivery-1")
      yield* connection.runtime.send(frames.decisionAck("perm-1", "delivery-unknown"))
      yield* connection.runtime.send(frames.decisionAck("perm-1", "delivery-1"))
      assert.deepStrictEqual(Option.getOrThrow(yield* Stream.runHead(replies)), frames.decisionAck("perm-1", "delivery-1"))
    }).pipe(Effect.provide(gatewayLayer())))

  it.effect("delivers several steer receipts per input and nothing for a receipt without input_id", () =>
    Effect.gen(function*() {
      const connection = yield* connectMemory(device("dev-1"))
      const receipts = yield* connection.session.expectReplies("prompt_steer_ack", steerAckKey(runId("run-1"), "in-1"))
      const uncorrelated = yield* connection.session.expectReplies("prompt_steer_ack", steerAckKey(runId("run-1"), ""))
      yield* connection.runtime.send({
        type: "prompt_steer_ack",
        id: runId("run-1"),
        payload: { input_id: "", accepted: false, error_code: "invalid_input" }
      })
      yield* connection.runtime.send(frames.steerAck("run-1", "in-1", "written"))
      yield* connection.runtime.send(frames.steerAck("run-1", "in-1", "accepted"))
      assert.deepStrictEqual(yield* Stream.runCollect(Stream.take(receipts, 2)), [
        frames.steerAck("run-1", "in-1", "written"),
        frames.steerAck("run-1", "in-1", "accepted")
      ])
      yield* settle(connection)
      yield* connection.runtime.close()
      assert.deepStrictEqual(yield* collect(uncorrelated), { items: [], exit: Exit.fail(lost("disconnected")) })
    }).pipe(Effect.provide(gatewayLayer())))

  it.effect("rejects a duplicate pending key and frees the key when the caller is interrupted", () =>
    Effect.gen(function*() {
      const connection = yield* connectMemory(device("dev-1"))
      const waiting = yield* Effect.scoped(
        Effect.flatMap(connection.session.expectReplies("environment_quiesced", "op-1"), Stream.runHead)
      ).pipe(Effect.forkChild)
      yield* settle(connection)
      assert.deepStrictEqual(
        yield* Effect.flip(Effect.scoped(connection.session.expectReplies("environment_quiesced", "op-1"))),
        new SubscriptionRejected({ reason: "duplicate" })
      )
      yield* Fiber.interrupt(waiting)
      const replies = yield* connection.session.expectReplies("environment_quiesced", "op-1")
      yield* connection.runtime.send(frames.quiesced("op-1"))
      assert.deepStrictEqual(Option.getOrThrow(yield* Stream.runHead(replies)), frames.quiesced("op-1"))
    }).pipe(Effect.provide(gatewayLayer())))

  it.effect("fails a waiter with invalid_frame when its correlated reply fails decoding", () =>
    Effect.gen(function*() {
      const connection = yield* connectMemory(device("dev-1"))
      const replies = yield* connection.session.expectReplies("environment_quiesced", "op-1")
      yield* connection.runtime.sendRaw(JSON.stringify({ type: "environment_quiesced", id: "op-1", payload: { accepted: "yes" } }))
      assert.deepStrictEqual((yield* collect(replies)).exit, Exit.fail(lost("invalid_frame")))
    }).pipe(Effect.provide(gatewayLayer())))
})

describe("DeviceSession send", () => {
  it.effect("puts an envelope in the send queue; the Runtime receives it", () =>
    Effect.gen(function*() {
      const connection = yield* connectMemory(device("dev-1"))
      yield* connection.session.send(promptCancel("run-1"))
      assert.deepStrictEqual(yield* connection.runtime.receive, promptCancel("run-1"))
    }).pipe(Effect.provide(gatewayLayer())))

  it.effect("answers NotSent{queue_full} at once when the bounded queue is full", () =>
    Effect.gen(function*() {
      const connection = yield* connectMemory(device("dev-1"))
      connection.setWrites("hang")
      yield* connection.session.send(promptCancel("run-0"))
      yield* connection.writeHung
      yield* connection.session.send(promptCancel("run-1"))
      yield* connection.session.send(promptCancel("run-2"))
      assert.deepStrictEqual(
        yield* Effect.flip(connection.session.send(promptCancel("run-3"))),
        new NotSent({ type: "prompt_cancel", reason: "queue_full" })
      )
    }).pipe(Effect.provide(gatewayLayer({ sendQueueCapacity: 2 }))))

  it.effect("refuses an invalid message and any send after the connection closed", () =>
    Effect.gen(function*() {
      const connection = yield* connectMemory(device("dev-1"))
      assert.deepStrictEqual(
        yield* Effect.flip(connection.session.send({ type: "prompt_cancel", id: runId(""), payload: {} })),
        new NotSent({ type: "prompt_cancel", reason: "invalid_message" })
      )
      yield* connection.session.close(1000, "disconnected")
      assert.deepStrictEqual(
        yield* Effect.flip(connection.session.send(promptCancel("run-1"))),
        new NotSent({ type: "prompt_cancel", reason: "connection_closed" })
      )
    }).pipe(Effect.provide(gatewayLayer())))

  it.effect("closes the connection when a write fails", () =>
    Effect.gen(function*() {
      const connection = yield* connectMemory(device("dev-1"))
      const run = yield* connection.session.subscribeDurable(runId("run-1"))
      connection.setWrites("fail")
      yield* connection.session.send(promptCancel("run-1"))
      assert.deepStrictEqual(yield* Fiber.join(connection.accepted), lost("disconnected"))
      assert.deepStrictEqual((yield* collect(run)).exit, Exit.fail(lost("disconnected")))
      assert.strictEqual((yield* connection.runtime.closedByCore).code, 1011)
    }).pipe(Effect.provide(gatewayLayer())))

  it.effect("closes the connection when a write misses its 10 s deadline, not before", () =>
    Effect.gen(function*() {
      const connection = yield* connectMemory(device("dev-1"))
      connection.setWrites("hang")
      yield* connection.session.send(promptCancel("run-1"))
      yield* connection.writeHung
      yield* TestClock.adjust("9999 millis")
      assert.isUndefined(connection.accepted.pollUnsafe())
      yield* TestClock.adjust("1 millis")
      assert.deepStrictEqual(yield* Fiber.join(connection.accepted), lost("disconnected"))
      assert.strictEqual((yield* connection.runtime.closedByCore).code, 1011)
    }).pipe(Effect.provide(gatewayLayer({ livenessTimeout: Duration.hours(1) }))))
})

describe("DeviceSession liveness", () => {
  it.effect("closes a connection with no inbound frame for exactly 60 s (59.999 s still open)", () =>
    Effect.gen(function*() {
      const connection = yield* connectMemory(device("dev-1"))
      const run = yield* connection.session.subscribeDurable(runId("run-1"))
      yield* TestClock.adjust("59999 millis")
      assert.isUndefined(connection.accepted.pollUnsafe())
      yield* TestClock.adjust("1 millis")
      assert.deepStrictEqual(yield* Fiber.join(connection.accepted), lost("liveness_timeout"))
      assert.deepStrictEqual(yield* connection.runtime.closedByCore, { code: 4002, reason: "liveness_timeout" })
      assert.deepStrictEqual((yield* collect(run)).exit, Exit.fail(lost("liveness_timeout")))
    }).pipe(Effect.provide(gatewayLayer())))

  it.effect("counts the 60 s from the last inbound frame of any kind", () =>
    Effect.gen(function*() {
      const connection = yield* connectMemory(device("dev-1"))
      yield* TestClock.adjust("30 seconds")
      yield* connection.runtime.sendRaw("garbage counts as traffic")
      yield* settle(connection)
      yield* TestClock.adjust("59999 millis")
      assert.isUndefined(connection.accepted.pollUnsafe())
      yield* TestClock.adjust("1 millis")
      assert.deepStrictEqual(yield* Fiber.join(connection.accepted), lost("liveness_timeout"))
    }).pipe(Effect.provide(gatewayLayer())))

  it.effect("restarts the 60 s at every later socket read too (the clock is read once per read)", () =>
    Effect.gen(function*() {
      const connection = yield* connectMemory(device("dev-1"))
      // Heartbeats: valid frames the read side routes without waiting (an invalid one restarts it when its log
      // line is done).
      yield* TestClock.adjust("30 seconds")
      yield* connection.runtime.send(heartbeat([kind("codex")]))
      yield* connection.runtime.send(heartbeat([kind("codex")], { activeRequests: 1 }))
      yield* settle(connection)
      yield* TestClock.adjust("50 seconds")
      yield* connection.runtime.send(heartbeat([kind("codex")], { activeRequests: 2 }))
      yield* settle(connection)
      yield* TestClock.adjust("59999 millis")
      assert.isUndefined(connection.accepted.pollUnsafe())
      yield* TestClock.adjust("1 millis")
      assert.deepStrictEqual(yield* Fiber.join(connection.accepted), lost("liveness_timeout"))
    }).pipe(Effect.provide(gatewayLayer())))
})

describe("DeviceSession traces", () => {
  it.effect("stamps a request without a trace with the caller's span, and keeps a trace the caller set", () =>
    Effect.gen(function*() {
      const connection = yield* connectMemory(device("dev-1"))
      yield* connection.session.send(promptCancel("run-1")).pipe(Effect.withSpan("core.caller"))
      const stamped = yield* connection.runtime.receive
      const span = Option.getOrThrow(Trace.parseTraceparent(stamped.trace))
      assert.strictEqual(span.traceId.length, 32)
      const explicit = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
      yield* connection.session.send({ ...promptCancel("run-2"), trace: explicit }).pipe(Effect.withSpan("core.caller"))
      assert.strictEqual((yield* connection.runtime.receive).trace, explicit)
      yield* connection.session.send(promptCancel("run-3"))
      assert.isUndefined((yield* connection.runtime.receive).trace)
    }).pipe(Effect.provide(gatewayLayer())))
})
