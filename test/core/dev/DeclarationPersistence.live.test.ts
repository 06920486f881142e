/**
 * Heartbeats persist only what changed (issue 18): an unchanged declaration of the same connection stays in
 * memory, a changed one or a new connection is written whole, the ended connection's latest liveness facts
 * are written once, an invalid heartbeat clears; writes are batched, a failed batch is retried without
 * losing a newer change.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option, Queue, Stream } from "effect"
import { TestClock } from "effect/testing"
import * as Capabilities from "../../../src/proto/Capabilities.js"
import { Ids } from "../../../src/proto/index.js"
import type { Declaration } from "../../../src/core/DeviceSession.js"
import type { GatewayEvent } from "../../../src/core/Gateway.js"
import { DeviceCredentials } from "../../../src/core/DeviceCredentials.js"
import * as DeclarationPersistence from "../../../src/core/dev/DeclarationPersistence.js"
import { type DeclarationChange, DeviceStore } from "../../../src/core/dev/DeviceStore.js"
import { DevIds } from "../../../src/core/dev/DevIds.js"
import * as Store from "../../../src/core/dev/Store.js"
import { StoreFailed } from "../../../src/core/dev/StoreErrors.js"
import { declaration as capabilities } from "../../support/capabilities.js"

const device = Ids.unsafeMake.deviceId("dev-a")
const decl = (ts: number, options: { readonly streaming?: boolean; readonly active?: number } = {}): Declaration => ({
  kinds: new Map<string, Capabilities.AgentKindDescriptor>([[
    "scripted",
    { kind: "scripted", available: true, version: "1", capabilities: capabilities({ streaming: options.streaming ?? true }) }
  ]]),
  daemonVersion: "0.1.0",
  activeRequests: options.active ?? 0,
  ts,
  receivedAtMs: ts * 1000
})
const declared = (ts: number, connectionNumber = 1, options?: Parameters<typeof decl>[1], changed = true): GatewayEvent => ({
  _tag: "Declared",
  deviceId: device,
  connectionNumber,
  declaration: decl(ts, options),
  changed
})
const disconnected = (connectionNumber: number, reason: "disconnected" | "invalid_heartbeat" = "disconnected"): GatewayEvent => ({
  _tag: "Disconnected",
  deviceId: device,
  connectionNumber,
  reason,
  at: 0
})

describe("DeclarationPersistence tracker", () => {
  it("queues the first heartbeat and a changed declaration, keeps unchanged ones in memory", () => {
    const t = DeclarationPersistence.makeTracker()
    assert.isTrue(t.apply(declared(1)))
    assert.deepStrictEqual(t.take().map((c) => c._tag), ["Record"])
    for (let ts = 2; ts <= 100; ts++) assert.isFalse(t.apply(declared(ts, 1, { active: ts % 3 })))
    assert.deepStrictEqual(t.take(), [])
    // a capability changed: written whole
    assert.isTrue(t.apply(declared(101, 1, { streaming: false })))
    const changed = t.take()
    assert.strictEqual(changed.length, 1)
    assert.strictEqual(changed[0]!._tag === "Record" && changed[0]!.declaration.ts, 101)
    // the same declaration on a new connection: written whole
    assert.isTrue(t.apply(declared(102, 2, { streaming: false })))
    assert.deepStrictEqual(t.take().map((c) => c._tag), ["Record"])
  })

  it("keeps a heartbeat the gateway reports unchanged in memory without a digest, but writes it on a new connection", () => {
    const t = DeclarationPersistence.makeTracker()
    assert.isTrue(t.apply(declared(1, 1)))
    t.take()
    // unchanged on the same connection: liveness only (the stored digest is this connection's previous one)
    assert.isFalse(t.apply(declared(2, 1, { active: 3 }, false)))
    assert.deepStrictEqual(t.take(), [])
    assert.isTrue(t.apply(disconnected(1)))
    assert.deepStrictEqual(t.take(), [
      { _tag: "Liveness", deviceId: device, activeRequests: 3, heartbeatTs: 2, receivedAtMs: 2000 }
    ] satisfies Array<DeclarationChange>)
    // a first heartbeat of a new connection is written whole even if the event says unchanged
    assert.isTrue(t.apply(declared(3, 2, {}, false)))
    assert.deepStrictEqual(t.take().map((c) => c._tag), ["Record"])
  })

  it("writes the ended connection's latest liveness once, never an older connection's, and clears on an invalid heartbeat", () => {
    const t = DeclarationPersistence.makeTracker()
    t.apply(declared(1, 5))
    t.take()
    t.apply(declared(2, 5, { active: 4 }))
    t.apply(declared(3, 5, { active: 2 }))
    assert.isFalse(t.apply(disconnected(4)))
    assert.isTrue(t.apply(disconnected(5)))
    assert.deepStrictEqual(t.take(), [
      { _tag: "Liveness", deviceId: device, activeRequests: 2, heartbeatTs: 3, receivedAtMs: 3000 }
    ] satisfies Array<DeclarationChange>)
    assert.isFalse(t.apply(disconnected(5)))
    t.apply(declared(4, 6))
    assert.isTrue(t.apply(disconnected(6, "invalid_heartbeat")))
    assert.deepStrictEqual(t.take(), [{ _tag: "Clear", deviceId: device }])
  })

  it("puts a failed batch back under newer changes, and drains unstored liveness at shutdown", () => {
    const t = DeclarationPersistence.makeTracker()
    t.apply(declared(1))
    const failed = t.take()
    t.apply(declared(2, 1, { streaming: false }))
    t.putBack(failed)
    const next = t.take()
    assert.strictEqual(next.length, 1)
    assert.strictEqual(next[0]!._tag === "Record" && next[0]!.declaration.ts, 2)
    t.apply(declared(3, 1, { streaming: false, active: 1 }))
    assert.deepStrictEqual(t.drain(), [
      { _tag: "Liveness", deviceId: device, activeRequests: 1, heartbeatTs: 3, receivedAtMs: 3000 }
    ] satisfies Array<DeclarationChange>)
    assert.deepStrictEqual(t.drain(), [])
  })
})

describe("DeclarationPersistence batch bound", () => {
  const many = (n: number, connectionNumber = 1): Array<GatewayEvent> =>
    Array.from({ length: n }, (_, i) => ({
      _tag: "Declared",
      deviceId: Ids.unsafeMake.deviceId(`dev-${i}`),
      connectionNumber,
      declaration: decl(1),
      changed: true
    }))

  it("takes at most the limit, oldest first, and the rest later", () => {
    const t = DeclarationPersistence.makeTracker()
    for (const event of many(5)) t.apply(event)
    assert.deepStrictEqual(t.take(2).map((c) => c.deviceId), ["dev-0", "dev-1"])
    assert.deepStrictEqual(t.take(2).map((c) => c.deviceId), ["dev-2", "dev-3"])
    assert.deepStrictEqual(t.take(2).map((c) => c.deviceId), ["dev-4"])
    assert.deepStrictEqual(t.take(2), [])
  })

  it.effect("writes 600 first heartbeats as transactions of at most maxBatch changes, none lost", () =>
    Effect.gen(function* () {
      const batches: Array<number> = []
      const written = new Set<string>()
      const store = DeviceStore.of({
        persistDeclarations: (changes: ReadonlyArray<DeclarationChange>) =>
          Effect.sync(() => {
            batches.push(changes.length)
            for (const change of changes) written.add(change.deviceId)
          })
      } as unknown as DeviceStore["Service"])
      const events = yield* Queue.unbounded<GatewayEvent>()
      yield* Effect.scoped(Effect.gen(function* () {
        yield* DeclarationPersistence.start(Stream.fromQueue(events), store, { maxBatch: 256 })
        yield* Queue.offerAll(events, many(600))
        for (let i = 0; i < 50 && written.size < 600; i++) yield* TestClock.adjust("10 millis")
        assert.deepStrictEqual(batches, [256, 256, 88])
        assert.strictEqual(written.size, 600)
      }))
    }))
})

const memory = Store.layerFile(":memory:").pipe(Layer.provide(DevIds.layerTest))

describe("DeclarationPersistence over the store", () => {
  it.effect("batches writes: 200 unchanged heartbeats cost one record, the disconnect one liveness update", () =>
    Effect.gen(function* () {
      const real = yield* DeviceStore
      yield* (yield* DeviceCredentials).issue("dev-a")
      const batches: Array<ReadonlyArray<DeclarationChange>> = []
      let failNext = 0
      const store = DeviceStore.of({
        ...real,
        persistDeclarations: (changes) =>
          Effect.suspend(() => {
            if (failNext > 0) {
              failNext--
              return Effect.fail(new StoreFailed({ operation: "record_declaration" }))
            }
            batches.push(changes)
            return real.persistDeclarations(changes)
          })
      })
      const events = yield* Queue.unbounded<GatewayEvent>()
      yield* Effect.scoped(Effect.gen(function* () {
        yield* DeclarationPersistence.start(Stream.fromQueue(events), store)
        for (let ts = 1; ts <= 200; ts++) yield* Queue.offer(events, declared(ts, 1, { active: ts % 2 }))
        yield* Effect.yieldNow
        yield* TestClock.adjust("10 millis")
        assert.deepStrictEqual(batches.map((b) => b.map((c) => c._tag)), [["Record"]])
        const first = Option.getOrThrow(Option.getOrThrow(yield* real.get("dev-a")).declaration)
        assert.strictEqual(first.heartbeatTs, 1)
        // The store fails once: the batch is retried after the delay and nothing is lost.
        failNext = 1
        yield* Queue.offer(events, disconnected(1))
        yield* TestClock.adjust("999 millis")
        assert.strictEqual(batches.length, 1)
        yield* TestClock.adjust("1 millis")
        yield* Effect.yieldNow
        assert.deepStrictEqual(batches.map((b) => b.map((c) => c._tag)), [["Record"], ["Liveness"]])
        const last = Option.getOrThrow(Option.getOrThrow(yield* real.get("dev-a")).declaration)
        assert.deepStrictEqual([last.heartbeatTs, last.activeRequests, last.receivedAtMs], [200, 0, 200_000])
        // A new connection heartbeats; its liveness is written when the scope closes (shutdown).
        yield* Queue.offer(events, declared(300, 2))
        yield* Queue.offer(events, declared(301, 2, { active: 7 }))
        yield* TestClock.adjust("10 millis")
      }))
      const final = Option.getOrThrow(Option.getOrThrow(yield* real.get("dev-a")).declaration)
      assert.deepStrictEqual([final.connectionNumber, final.heartbeatTs, final.activeRequests], [2, 301, 7])
    }).pipe(Effect.provide(memory)))

  it.effect("following Gateway.listen: the same writes, each event applied as it is published", () =>
    Effect.gen(function* () {
      const real = yield* DeviceStore
      yield* (yield* DeviceCredentials).issue("dev-a")
      const batches: Array<ReadonlyArray<string>> = []
      const store = DeviceStore.of({
        ...real,
        persistDeclarations: (changes) =>
          Effect.suspend(() => {
            batches.push(changes.map((c) => c._tag))
            return real.persistDeclarations(changes)
          })
      })
      const listeners = new Set<(event: GatewayEvent) => void>()
      const listen: DeclarationPersistence.Listen = (listener) =>
        Effect.acquireRelease(Effect.sync(() => listeners.add(listener)), () => Effect.sync(() => listeners.delete(listener)))
      const publish = (event: GatewayEvent) => listeners.forEach((listener) => listener(event))
      // The store answers asynchronously: let real time pass too until the writes are in (bounded).
      const until = (done: () => boolean) =>
        Effect.gen(function* () {
          for (let i = 0; i < 200 && !done(); i++) {
            yield* TestClock.adjust("10 millis")
            yield* Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, 5)))
          }
        })
      yield* Effect.scoped(Effect.gen(function* () {
        yield* DeclarationPersistence.start(listen, store)
        assert.strictEqual(listeners.size, 1)
        for (let ts = 1; ts <= 200; ts++) publish(declared(ts, 1, { active: ts % 2 }, ts === 1))
        yield* until(() => batches.length >= 1)
        assert.deepStrictEqual(batches, [["Record"]])
        publish(disconnected(1))
        yield* until(() => batches.length >= 2)
        assert.deepStrictEqual(batches, [["Record"], ["Liveness"]])
        const last = Option.getOrThrow(Option.getOrThrow(yield* real.get("dev-a")).declaration)
        assert.deepStrictEqual([last.heartbeatTs, last.activeRequests], [200, 0])
        publish(declared(300, 2))
        publish(declared(301, 2, { active: 7 }, false))
        yield* until(() => batches.length >= 3)
      }))
      // The listener is gone with the scope; the last liveness was written at its close.
      assert.strictEqual(listeners.size, 0)
      const final = Option.getOrThrow(Option.getOrThrow(yield* real.get("dev-a")).declaration)
      assert.deepStrictEqual([final.connectionNumber, final.heartbeatTs, final.activeRequests], [2, 301, 7])
    }).pipe(Effect.provide(memory)))
})
