/**
 * The connection registry: replacement fencing, events, shutdown, and the frame tap.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Exit, Fiber, Layer, Option, Queue, Scope, Stream } from "effect"
import { ObservationLost, SubscriptionRejected } from "../../../src/core/Errors.js"
import * as FrameTap from "../../../src/core/FrameTap.js"
import { Gateway, type GatewayEvent } from "../../../src/core/Gateway.js"
import { GatewayConfig } from "../../../src/core/GatewayConfig.js"
import { Messages } from "../../../src/proto/index.js"
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
import { allSupported } from "../../support/capabilities.js"
import { collect, gatewayLayer, settle } from "./helpers.js"

const lost = (reason: ObservationLost["reason"]) => new ObservationLost({ reason })

describe("Gateway replacement", () => {
  it.effect("a newer connection fences the previous one: its observers end with replaced and nothing is inherited", () =>
    Effect.gen(function*() {
      const gateway = yield* Gateway
      const first = yield* connectMemory(device("dev-1"))
      yield* first.runtime.send(heartbeat())
      const run = yield* first.session.subscribeDurable(runId("run-1"))
      const preparation = yield* first.session.subscribePreparation(requestId("prep-1"))
      const replies = yield* first.session.expectReplies("interaction_decision_ack", "delivery-1")
      yield* first.runtime.send(frames.permissionRequest("run-1", "perm-1"))
      yield* settle(first)

      const second = yield* connectMemory(device("dev-1"))
      assert.isAbove(second.session.connectionNumber, first.session.connectionNumber)
      assert.deepStrictEqual(yield* first.session.closed, lost("replaced"))
      assert.deepStrictEqual(yield* first.runtime.closedByCore, { code: 4000, reason: "replaced" })
      const runEvents = yield* collect(run)
      assert.deepStrictEqual(runEvents.items, [frames.permissionRequest("run-1", "perm-1")])
      assert.deepStrictEqual(runEvents.exit, Exit.fail(lost("replaced")))
      assert.deepStrictEqual((yield* collect(preparation)).exit, Exit.fail(lost("replaced")))
      assert.deepStrictEqual((yield* collect(replies)).exit, Exit.fail(lost("replaced")))
      assert.deepStrictEqual(yield* Fiber.join(first.accepted), lost("replaced"))

      // The registry holds the new connection, even after the old one finished.
      const current = Option.getOrThrow(yield* gateway.session(deviceId("dev-1")))
      assert.strictEqual(current.connectionNumber, second.session.connectionNumber)
      // The new connection knows nothing of the old one: no declaration, no routes.
      assert.deepStrictEqual(yield* second.session.declaration, Option.none())
      const again = yield* second.session.subscribeDurable(runId("run-1"))
      yield* second.runtime.send(frames.permissionCancel("perm-1"))
      yield* second.runtime.send(frames.done("run-1"))
      assert.deepStrictEqual((yield* collect(again)).items, [frames.done("run-1")])
      // The old session refuses further use.
      assert.deepStrictEqual(
        yield* Effect.flip(first.session.subscribeDurable(runId("run-2"))),
        new SubscriptionRejected({ reason: "connection_closed" })
      )
    }).pipe(Effect.provide(gatewayLayer())))

  it.effect("publishes Connected, Declared and Disconnected with the reason; a replaced connection's Disconnected comes first", () =>
    Effect.gen(function*() {
      const gateway = yield* Gateway
      const events = yield* gateway.events
      const seen = yield* Stream.take(events, 5).pipe(Stream.runCollect, Effect.forkChild)
      const first = yield* connectMemory(device("dev-1", "ws-9"))
      yield* first.runtime.send(heartbeat())
      yield* settle(first)
      const second = yield* connectMemory(device("dev-1", "ws-9"))
      yield* second.runtime.close()
      const all = (yield* Fiber.join(seen)) as ReadonlyArray<GatewayEvent>
      assert.deepStrictEqual(all.map((e) => [e._tag, e.connectionNumber]), [
        ["Connected", first.session.connectionNumber],
        ["Declared", first.session.connectionNumber],
        ["Disconnected", first.session.connectionNumber],
        ["Connected", second.session.connectionNumber],
        ["Disconnected", second.session.connectionNumber]
      ])
      const [connected, , replaced, , dropped] = all
      assert.strictEqual(connected?._tag === "Connected" ? connected.workspaceId : undefined, "ws-9")
      assert.strictEqual(replaced?._tag === "Disconnected" ? replaced.reason : undefined, "replaced")
      assert.strictEqual(dropped?._tag === "Disconnected" ? dropped.reason : undefined, "disconnected")
      assert.deepStrictEqual(yield* gateway.session(deviceId("dev-1")), Option.none())
    }).pipe(Effect.provide(gatewayLayer())))

  it.effect("reports whether a heartbeat changed the declaration; an unchanged one keeps the kinds map", () =>
    Effect.gen(function*() {
      const gateway = yield* Gateway
      const events = yield* gateway.events
      const seen = yield* Stream.filter(events, (e) => e._tag === "Declared").pipe(Stream.take(6), Stream.runCollect, Effect.forkChild)
      const conn = yield* connectMemory(device("dev-1"))
      const off = { ...allSupported(), streaming: false }
      yield* conn.runtime.send(heartbeat([kind("codex")], { ts: 1, daemonVersion: "1" }))
      yield* conn.runtime.send(heartbeat([kind("codex")], { ts: 2, daemonVersion: "1", activeRequests: 3 }))
      yield* conn.runtime.send(heartbeat([kind("codex", { capabilities: off })], { ts: 3, daemonVersion: "1" }))
      yield* conn.runtime.send(heartbeat([kind("codex", { available: false, capabilities: off })], { ts: 4, daemonVersion: "1" }))
      yield* conn.runtime.send(heartbeat([kind("codex", { available: false, capabilities: off })], { ts: 5, daemonVersion: "2" }))
      yield* conn.runtime.send(heartbeat([kind("codex", { available: false, capabilities: off }), kind("claude")], { ts: 6, daemonVersion: "2" }))
      const all = (yield* Fiber.join(seen)) as ReadonlyArray<GatewayEvent>
      const declared = all.flatMap((e) => e._tag === "Declared" ? [e] : [])
      assert.deepStrictEqual(declared.map((e) => [e.declaration.ts, e.changed]), [
        [1, true], [2, false], [3, true], [4, true], [5, true], [6, true]
      ])
      assert.strictEqual(declared[1]!.declaration.kinds, declared[0]!.declaration.kinds)
      assert.strictEqual(declared[1]!.declaration.activeRequests, 3)
      assert.strictEqual(declared[2]!.declaration.kinds.get("codex")?.capabilities.streaming, false)
    }).pipe(Effect.provide(gatewayLayer())))

  it.effect("listen calls a listener with every event as it is published, until the listener's scope closes", () =>
    Effect.gen(function*() {
      const gateway = yield* Gateway
      const seen: Array<[GatewayEvent["_tag"], number]> = []
      const listening = yield* Scope.make()
      yield* Scope.provide(listening)(gateway.listen((e) => void seen.push([e._tag, e.connectionNumber])))
      const first = yield* connectMemory(device("dev-1"))
      yield* first.runtime.send(heartbeat([kind("codex")], { ts: 1 }))
      yield* settle(first)
      // Synchronous: the unchanged heartbeat is seen once its frame was routed, with no fiber in between.
      yield* first.runtime.send(heartbeat([kind("codex")], { ts: 2 }))
      yield* settle(first)
      const n = first.session.connectionNumber
      assert.deepStrictEqual(seen, [["Connected", n], ["Declared", n], ["Declared", n]])
      const second = yield* connectMemory(device("dev-1"))
      yield* settle(second)
      assert.deepStrictEqual(seen.slice(3), [["Disconnected", n], ["Connected", second.session.connectionNumber]])
      yield* Scope.close(listening, Exit.void)
      yield* second.runtime.send(heartbeat())
      yield* settle(second)
      assert.strictEqual(seen.length, 5)
    }).pipe(Effect.provide(gatewayLayer())))

  it.effect("lists one current session per connected device", () =>
    Effect.gen(function*() {
      const gateway = yield* Gateway
      yield* connectMemory(device("dev-1"))
      yield* connectMemory(device("dev-2"))
      const last = yield* connectMemory(device("dev-1"))
      const sessions = yield* gateway.sessions
      assert.deepStrictEqual(
        sessions.map((s) => [s.deviceId, s.connectionNumber]).sort(),
        [["dev-1", last.session.connectionNumber], ["dev-2", 2]].sort()
      )
    }).pipe(Effect.provide(gatewayLayer())))
})

describe("Gateway shutdown", () => {
  it.effect("closes every session with gateway_shutdown and refuses new connections", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const context = yield* Layer.buildWithScope(gatewayLayer(), scope)
      const gateway = Context.get(context, Gateway)
      const connection = yield* connectMemory(device("dev-1")).pipe(Effect.provide(context))
      const run = yield* connection.session.subscribeDurable(runId("run-1"))
      yield* Scope.close(scope, Exit.void)
      assert.deepStrictEqual((yield* collect(run)).exit, Exit.fail(lost("gateway_shutdown")))
      assert.deepStrictEqual(yield* connection.runtime.closedByCore, { code: 1001, reason: "gateway_shutdown" })
      assert.deepStrictEqual(yield* Fiber.join(connection.accepted), lost("gateway_shutdown"))
      assert.deepStrictEqual(yield* gateway.sessions, [])
      const closes: Array<number> = []
      const refused = yield* gateway.accept(device("dev-2"), {
        listen: () => {},
        pause: () => {},
        resume: () => {},
        offer: () => "closed",
        close: (code) => Effect.sync(() => void closes.push(code))
      })
      assert.deepStrictEqual(refused, lost("gateway_shutdown"))
      assert.deepStrictEqual(closes, [1001])
    }))
})

describe("FrameTap", () => {
  it.effect("sees every frame both ways, including invalid ones, with direction, type, id and size", () =>
    Effect.gen(function*() {
      const tapped = yield* Queue.unbounded<FrameTap.TappedFrame>()
      const layer = Gateway.layer.pipe(
        Layer.provideMerge(GatewayConfig.layer({ publicUrl: "http://core.test" })),
        Layer.provide(FrameTap.layerQueue(tapped))
      )
      yield* Effect.gen(function*() {
        const connection = yield* connectMemory(device("dev-1"))
        yield* connection.runtime.send(heartbeat())
        yield* connection.runtime.sendRaw("{}")
        const cancel: Messages.CoreToRuntime = { type: "prompt_cancel", id: runId("run-1"), payload: {} }
        yield* connection.session.send(cancel)
        const frames = yield* Queue.takeN(tapped, 3)
        const byDirection = frames.map((f) => [f.direction, f.type, f.id ?? null, f.invalid ?? null, f.deviceId])
        assert.deepStrictEqual(byDirection.sort(), [
          ["core→runtime", "prompt_cancel", "run-1", null, "dev-1"],
          ["runtime→core", "heartbeat", null, null, "dev-1"],
          ["runtime→core", "invalid", null, "not_an_envelope", "dev-1"]
        ].sort())
        const sent = frames.find((f) => f.direction === "core→runtime")!
        assert.deepStrictEqual(sent.message, cancel)
        assert.strictEqual(sent.bytes, JSON.stringify(cancel).length)
      }).pipe(Effect.provide(layer))
    }))

  it.effect("never slows routing, even when the tap never returns", () =>
    Effect.gen(function*() {
      const layer = Gateway.layer.pipe(
        Layer.provideMerge(GatewayConfig.layer({ publicUrl: "http://core.test", tapBuffer: 1 })),
        Layer.provide(FrameTap.layer(() => Effect.never))
      )
      yield* Effect.gen(function*() {
        const connection = yield* connectMemory(device("dev-1"))
        const run = yield* connection.session.subscribeDurable(runId("run-1"))
        for (let i = 1; i <= 20; i++) yield* connection.runtime.send(frames.delta("run-1", "x", i))
        yield* connection.runtime.send(frames.done("run-1"))
        assert.strictEqual((yield* collect(run)).items.length, 21)
      }).pipe(Effect.provide(layer))
    }))
})
