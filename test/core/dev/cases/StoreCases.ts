/** Store tests shared by every store dialect (docs/store.md). */
import { assert, it } from "@effect/vitest"
import { Effect, Layer, Option, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { TestClock } from "effect/testing"
import { CredentialRejected, DeviceCredentials, digestCredential } from "../../../../src/core/DeviceCredentials.js"
import { DeviceStore } from "../../../../src/core/dev/DeviceStore.js"
import type * as Store from "../../../../src/core/dev/Store.js"
import { SessionStore } from "../../../../src/core/dev/SessionStore.js"
import { TurnStore } from "../../../../src/core/dev/TurnStore.js"
import { DevIds } from "../../../../src/core/dev/DevIds.js"
import * as Suspensions from "../../../../src/core/dev/Suspensions.js"
import { Gateway } from "../../../../src/core/Gateway.js"
import { MessageInput } from "../../../../src/proto/index.js"
import { declaration } from "../../../support/capabilities.js"

/** Suspension reads never reach the gateway (only quiesce and resume do). */
const noGateway = Layer.succeed(Gateway, {} as Gateway["Service"])

/** Session "s1" of the scripted kind, bound to no device: the setup most Turn cases share. */
export const createSessionS1 = (sessions: SessionStore["Service"]) =>
  sessions.create({ sessionId: "s1", agentKind: "scripted", environmentType: "none", configuration: {}, deviceId: undefined })

/** Turns "t1" (run-1) and "t2" (run-2) of Session "s1", both queued. */
const createTurnsT1T2 = (turns: TurnStore["Service"]) =>
  Effect.andThen(
    turns.create({ turnId: "t1", sessionId: "s1", runId: "run-1", input: MessageInput.text("hi") }),
    turns.create({ turnId: "t2", sessionId: "s1", runId: "run-2", input: MessageInput.text("hi") })
  )

/** The Store cases over `store` (a fresh store per test): SQLite in Store.test.ts, PostgreSQL in pg/. */
export const storeCases = (store: Layer.Layer<Store.StoreServices, unknown>) => {
  it.effect("stores only the digest of an issued credential and authenticates exactly its device", () =>
    Effect.gen(function* () {
      const credentials = yield* DeviceCredentials
      const sql = yield* SqlClient.SqlClient
      const credential = yield* credentials.issue("dev-a")
      const other = yield* credentials.issue("dev-b")
      assert.isTrue(Redacted.value(credential).startsWith("awdc_"))
      const rows = yield* sql`SELECT device_id, digest FROM device_credentials ORDER BY device_id`
      assert.deepStrictEqual(rows.map((r) => r.digest), [digestCredential(credential), digestCredential(other)])
      const dump = JSON.stringify(
        yield* sql`SELECT * FROM device_credentials`,
        (_, v: unknown) => (typeof v === "bigint" ? v.toString() : v) // PostgreSQL BIGINT reads as bigint
      )
      assert.notInclude(dump, Redacted.value(credential))

      const ok = yield* credentials.authenticate("dev-a", credential)
      assert.deepStrictEqual(ok, { deviceId: "dev-a", workspaceId: "default", runtimeType: "agent-daemon" })
      assert.deepStrictEqual(
        yield* Effect.flip(credentials.authenticate("dev-b", credential)),
        new CredentialRejected({ code: "bad_credential" })
      )
      assert.deepStrictEqual(
        yield* Effect.flip(credentials.authenticate("dev-x", credential)),
        new CredentialRejected({ code: "unknown_device" })
      )
      assert.deepStrictEqual(
        yield* Effect.flip(credentials.authenticate("dev-a", Redacted.make("awdc_wrong"))),
        new CredentialRejected({ code: "bad_credential" })
      )
      // Without a device id (bootstrap, before the body): the credential names its own device.
      assert.deepStrictEqual(yield* credentials.identify(credential), ok)
      assert.strictEqual((yield* credentials.identify(other)).deviceId, "dev-b")
      assert.deepStrictEqual(
        yield* Effect.flip(credentials.identify(Redacted.make("awdc_wrong"))),
        new CredentialRejected({ code: "bad_credential" })
      )
      yield* credentials.revoke("dev-a")
      assert.deepStrictEqual(
        yield* Effect.flip(credentials.identify(credential)),
        new CredentialRejected({ code: "bad_credential" })
      )
    }).pipe(Effect.provide(store)))

  it.effect("refuses a revoked credential and a replaced one", () =>
    Effect.gen(function* () {
      const credentials = yield* DeviceCredentials
      const first = yield* credentials.issue("dev-a")
      const second = yield* credentials.issue("dev-a")
      assert.deepStrictEqual(
        yield* Effect.flip(credentials.authenticate("dev-a", first)),
        new CredentialRejected({ code: "bad_credential" })
      )
      yield* credentials.authenticate("dev-a", second)
      yield* credentials.revoke("dev-a")
      assert.deepStrictEqual(
        yield* Effect.flip(credentials.authenticate("dev-a", second)),
        new CredentialRejected({ code: "bad_credential" })
      )
      const device = yield* (yield* DeviceStore).get("dev-a")
      assert.isTrue(Option.isSome(device) && device.value.revokedAtMs !== undefined && !device.value.hasActiveCredential)
    }).pipe(Effect.provide(store)))

  it.effect("keeps the latest declaration with the persisted capability projection", () =>
    Effect.gen(function* () {
      const devices = yield* DeviceStore
      const sql = yield* SqlClient.SqlClient
      yield* (yield* DeviceCredentials).issue("dev-a")
      const caps = declaration({ streaming: true, steering: true })
      yield* TestClock.setTime(5_000)
      yield* devices.recordDeclaration("dev-a", 7, {
        kinds: new Map([["scripted", { kind: "scripted", available: true, version: "1", capabilities: caps }]]),
        daemonVersion: "0.1.0",
        activeRequests: 2,
        ts: 5,
        receivedAtMs: 5_000
      })
      const stored = yield* devices.get("dev-a")
      assert.isTrue(Option.isSome(stored))
      const decl = Option.getOrThrow(Option.getOrThrow(stored).declaration)
      assert.deepStrictEqual(decl, {
        connectionNumber: 7,
        daemonVersion: "0.1.0",
        activeRequests: 2,
        heartbeatTs: 5,
        receivedAtMs: 5_000,
        kinds: [{ kind: "scripted", available: true, version: "1", capabilities: Option.some(caps) }]
      })
      // A projection missing a field reads back as unknown, never as a default.
      yield* sql`UPDATE device_kinds SET cap_usage = NULL WHERE device_id = 'dev-a'`
      const partial = Option.getOrThrow(Option.getOrThrow(yield* devices.get("dev-a")).declaration)
      assert.isTrue(Option.isNone(partial.kinds[0]!.capabilities))
      yield* devices.clearDeclaration("dev-a")
      assert.isTrue(Option.isNone(Option.getOrThrow(yield* devices.get("dev-a")).declaration))
    }).pipe(Effect.provide(store)))

  it.effect("writes a batch of declaration changes in one transaction, in order, and none of a failing batch", () =>
    Effect.gen(function* () {
      const devices = yield* DeviceStore
      yield* (yield* DeviceCredentials).issue("dev-a")
      yield* (yield* DeviceCredentials).issue("dev-b")
      const caps = declaration({ streaming: true })
      const decl = (ts: number) => ({
        kinds: new Map([["scripted", { kind: "scripted", available: true, version: "1", capabilities: caps }]]),
        daemonVersion: "0.1.0",
        activeRequests: 0,
        ts,
        receivedAtMs: ts * 1000
      })
      yield* devices.persistDeclarations([
        { _tag: "Record", deviceId: "dev-a", connectionNumber: 1, declaration: decl(1) },
        { _tag: "Record", deviceId: "dev-b", connectionNumber: 2, declaration: decl(1) },
        { _tag: "Liveness", deviceId: "dev-a", activeRequests: 3, heartbeatTs: 9, receivedAtMs: 9_000 },
        { _tag: "Clear", deviceId: "dev-b" }
      ])
      const a = Option.getOrThrow(Option.getOrThrow(yield* devices.get("dev-a")).declaration)
      assert.deepStrictEqual([a.connectionNumber, a.activeRequests, a.heartbeatTs, a.receivedAtMs, a.kinds.length], [1, 3, 9, 9_000, 1])
      assert.isTrue(Option.isNone(Option.getOrThrow(yield* devices.get("dev-b")).declaration))
      // A change for an unknown device violates the foreign key: the whole batch is refused, dev-a unchanged.
      const failed = yield* Effect.flip(devices.persistDeclarations([
        { _tag: "Liveness", deviceId: "dev-a", activeRequests: 0, heartbeatTs: 10, receivedAtMs: 10_000 },
        { _tag: "Record", deviceId: "dev-unknown", connectionNumber: 3, declaration: decl(10) }
      ]))
      assert.strictEqual(failed._tag, "StoreFailed")
      const after = Option.getOrThrow(Option.getOrThrow(yield* devices.get("dev-a")).declaration)
      assert.strictEqual(after.heartbeatTs, 9)
    }).pipe(Effect.provide(store)))

  it.effect("finds a Session's unfinished Turn and whether one was dispatched by index probes", () =>
    Effect.gen(function* () {
      const sessions = yield* SessionStore
      const turns = yield* TurnStore
      yield* createSessionS1(sessions)
      yield* sessions.create({ sessionId: "s2", agentKind: "scripted", environmentType: "none", configuration: {}, deviceId: undefined })
      assert.isTrue(Option.isNone(yield* turns.unfinishedOf("s1")))
      assert.isFalse(yield* turns.hasDispatched("s1"))
      yield* turns.create({ turnId: "t1", sessionId: "s1", runId: "run-1", input: MessageInput.text("hi") })
      assert.strictEqual(Option.getOrThrow(yield* turns.unfinishedOf("s1")).turnId, "t1")
      assert.isTrue(Option.isNone(yield* turns.unfinishedOf("s2")))
      yield* turns.markDispatched("t1")
      assert.isTrue(yield* turns.hasDispatched("s1"))
      assert.isFalse(yield* turns.hasDispatched("s1", "t1"))
      assert.isFalse(yield* turns.hasDispatched("s2"))
      const started = yield* turns.startChecks("s1")
      assert.deepStrictEqual([Option.getOrThrow(started.session), started.unfinished, started.dispatched], [Option.getOrThrow(yield* sessions.get("s1")), true, true])
      assert.deepStrictEqual(yield* turns.startChecks("s2"), { session: yield* sessions.get("s2"), unfinished: false, dispatched: false })
      assert.deepStrictEqual(yield* turns.startChecks("nope"), { session: Option.none(), unfinished: false, dispatched: false })
      yield* turns.complete("t1", { status: "completed" } as never)
      assert.isTrue(Option.isNone(yield* turns.unfinishedOf("s1")))
      const after = yield* turns.startChecks("s1")
      assert.deepStrictEqual([after.unfinished, after.dispatched], [false, true])
    }).pipe(Effect.provide(store)))

  it.effect("advances the input cursor only on acceptance, once per input", () =>
    Effect.gen(function* () {
      const sessions = yield* SessionStore
      const turns = yield* TurnStore
      yield* createSessionS1(sessions)
      yield* turns.create({ turnId: "t1", sessionId: "s1", runId: "run-1", input: MessageInput.text("hi") })
      yield* turns.insertInput("t1", "in-1", MessageInput.text("a"))
      yield* turns.insertInput("t1", "in-2", MessageInput.text("b"))
      yield* turns.setInputStatus("t1", "in-1", "written")
      yield* turns.setInputStatus("t1", "in-2", "not_sent")
      assert.strictEqual(Option.getOrThrow(yield* turns.get("t1")).inputCursor, 0)
      assert.strictEqual(yield* turns.acceptInput("t1", "in-1"), 1)
      assert.strictEqual(yield* turns.acceptInput("t1", "in-1"), 1)
      // a late `written` never rewinds an accepted input
      yield* turns.setInputStatus("t1", "in-1", "written")
      const inputs = yield* turns.inputs("t1")
      assert.deepStrictEqual(inputs.map((i) => [i.inputId, i.status, i.position]), [["in-1", "accepted", 1], ["in-2", "not_sent", undefined]])
      assert.strictEqual(Option.getOrThrow(yield* turns.get("t1")).inputCursor, 1)
    }).pipe(Effect.provide(store)))

  it.effect("appends a group of journal entries in one statement (group commit), in seq order", () =>
    Effect.gen(function* () {
      const sessions = yield* SessionStore
      const turns = yield* TurnStore
      yield* createSessionS1(sessions)
      yield* turns.create({ turnId: "t1", sessionId: "s1", runId: "run-1", input: MessageInput.text("hi") })
      const group = Array.from({ length: 4100 }, (_, i) => ({
        seq: i + 1,
        attempt: 1,
        kind: "frame" as const,
        type: "delta",
        bodyJson: JSON.stringify({ type: "delta", n: i + 1, text: "x".repeat(200) })
      }))
      yield* turns.appendEvents("t1", group)
      yield* turns.appendEvents("t1", [])
      const stored = yield* turns.events("t1", 0)
      assert.deepStrictEqual(stored.map((e) => e.seq), group.map((e) => e.seq))
      assert.strictEqual(stored[4099]!.bodyJson, group[4099]!.bodyJson)
      assert.strictEqual(yield* turns.lastSeq("t1"), 4100)
    }).pipe(Effect.provide(store)))

  it.effect("writes a terminal outcome once and abandons pending interactions", () =>
    Effect.gen(function* () {
      const sessions = yield* SessionStore
      const turns = yield* TurnStore
      yield* createSessionS1(sessions)
      yield* turns.create({ turnId: "t1", sessionId: "s1", runId: "run-1", input: MessageInput.text("hi") })
      yield* turns.beginAttempt("t1", "dev-a")
      yield* turns.markDispatched("t1")
      yield* turns.appendEvent("t1", { seq: 1, attempt: 1, kind: "frame", type: "delta", bodyJson: `{"type":"delta"}` })
      yield* turns.appendEvent("t1", { seq: 2, attempt: 1, kind: "frame", type: "done", bodyJson: `{"type":"done"}` })
      assert.isTrue(yield* turns.recordInteraction("t1", "permission", "p1", { request_id: "p1" }))
      assert.isFalse(yield* turns.recordInteraction("t1", "permission", "p1", { request_id: "p1" }))
      assert.isTrue(yield* turns.complete("t1", { status: "completed", content: "ok", usage: { input_tokens: 3 } }))
      assert.isFalse(yield* turns.complete("t1", { status: "failed", error_code: "event_stream_incomplete" }))
      const turn = Option.getOrThrow(yield* turns.get("t1"))
      assert.deepStrictEqual([turn.status, turn.errorCode, turn.content, turn.usage], ["completed", undefined, "ok", { input_tokens: 3 }])
      assert.deepStrictEqual((yield* turns.events("t1", 1)).map((e) => [e.seq, e.type]), [[2, "done"]])
      assert.strictEqual(yield* turns.lastSeq("t1"), 2)
      assert.deepStrictEqual((yield* turns.interactions("t1")).map((i) => i.status), ["abandoned"])
    }).pipe(Effect.provide(store)))

  it.effect("settles in one transaction: the record as written, abandoned interactions, the Session's native id; a dispatch mark rides its append", () =>
    Effect.gen(function* () {
      const sessions = yield* SessionStore
      const turns = yield* TurnStore
      yield* createSessionS1(sessions)
      yield* turns.create({ turnId: "t1", sessionId: "s1", runId: "run-1", input: MessageInput.text("hi") })
      assert.strictEqual(yield* turns.beginAttempt("t1", "dev-a"), 1)
      assert.strictEqual(yield* turns.beginAttempt("t1", "dev-a"), 2)
      // A plain append does not mark the Turn dispatched; the append of the Run's dispatch does, once.
      yield* turns.appendEvents("t1", [{ seq: 1, attempt: 2, kind: "fact", type: "Dispatching", bodyJson: "{}" }])
      assert.isFalse(yield* turns.hasDispatched("s1"))
      yield* turns.appendEvents("t1", [{ seq: 2, attempt: 2, kind: "fact", type: "Dispatched", bodyJson: "{}" }], { markDispatched: true })
      const dispatchedAt = Option.getOrThrow(yield* turns.get("t1")).dispatchedAtMs
      assert.isDefined(dispatchedAt)
      assert.isTrue(yield* turns.hasDispatched("s1"))
      assert.isTrue(yield* turns.recordInteraction("t1", "permission", "p1", { request_id: "p1" }))
      const written = yield* turns.settle("t1", { status: "completed", content: "ok", native_session_id: "native-1" }, "s1")
      const record = Option.getOrThrow(written)
      assert.deepStrictEqual([record.status, record.content, record.nativeSessionId, record.attempt], ["completed", "ok", "native-1", 2])
      assert.deepStrictEqual(record, Option.getOrThrow(yield* turns.get("t1")))
      assert.strictEqual(Option.getOrThrow(yield* sessions.get("s1")).nativeSessionId, "native-1")
      assert.deepStrictEqual((yield* turns.interactions("t1")).map((i) => i.status), ["abandoned"])
      // Written once: a second settle writes nothing (still updates the Session's native id, as before).
      const again = yield* turns.settle("t1", { status: "failed", error_code: "delivery_unknown", native_session_id: "native-2" }, "s1")
      assert.isTrue(Option.isNone(again))
      assert.strictEqual(Option.getOrThrow(yield* turns.get("t1")).status, "completed")
      assert.strictEqual(Option.getOrThrow(yield* sessions.get("s1")).nativeSessionId, "native-2")
      // Only the settle that writes the outcome abandons interactions (same transaction, same condition).
      assert.isTrue(yield* turns.recordInteraction("t1", "permission", "p2", { request_id: "p2" }))
      assert.isTrue(Option.isNone(yield* turns.settle("t1", { status: "failed", error_code: "delivery_unknown" }, "s1")))
      assert.deepStrictEqual((yield* turns.interactions("t1")).map((i) => [i.interactionId, i.status]), [["p1", "abandoned"], ["p2", "pending"]])
      // A terminal Turn begins no attempt: its attempt number stays.
      assert.strictEqual(yield* turns.beginAttempt("t1", "dev-a"), 2)
    }).pipe(Effect.provide(store)))

  it.effect("a Turn's creation is group-committed with other Turns' appends; a create that fails fails alone", () =>
    Effect.gen(function* () {
      const sessions = yield* SessionStore
      const turns = yield* TurnStore
      yield* createSessionS1(sessions)
      const created = yield* turns.create({ turnId: "t1", sessionId: "s1", runId: "run-1", input: MessageInput.text("hi") })
      assert.deepStrictEqual(created, Option.getOrThrow(yield* turns.get("t1")))
      const results = yield* Effect.all([
        turns.appendEvents("t1", [{ seq: 1, attempt: 1, kind: "fact", type: "Dispatching", bodyJson: "{}" }]),
        turns.create({ turnId: "t1", sessionId: "s1", runId: "run-x", input: MessageInput.text("again") }),
        turns.create({ turnId: "t2", sessionId: "s1", runId: "run-2", input: MessageInput.text("hi") })
      ], { concurrency: "unbounded", mode: "result" })
      assert.deepStrictEqual(results.map((r) => r._tag), ["Success", "Failure", "Success"])
      const failure = results[1]!
      assert.isTrue(failure._tag === "Failure" && failure.failure._tag === "StoreFailed" && failure.failure.operation === "create_turn")
      assert.deepStrictEqual((yield* turns.events("t1", 0)).map((e) => e.seq), [1])
      assert.strictEqual(Option.getOrThrow(yield* turns.get("t1")).runId, "run-1")
      assert.strictEqual(Option.getOrThrow(yield* turns.get("t2")).status, "queued")
    }).pipe(Effect.provide(store)))

  it.effect("a settle is group-committed with other Turns' writes, answers its record as written, and fails only alone", () =>
    Effect.gen(function* () {
      const sessions = yield* SessionStore
      const turns = yield* TurnStore
      yield* createSessionS1(sessions)
      yield* createTurnsT1T2(turns)
      yield* turns.appendEvents("t1", [{ seq: 1, attempt: 1, kind: "fact", type: "Dispatching", bodyJson: "{}" }])
      // Submitted together (one batch): t1's append fails (its seq is taken), so the batch is committed again write
      // by write; both settles are still stored and answered with their own records.
      const [taken, settled, other] = yield* Effect.all([
        turns.appendEvents("t1", [{ seq: 1, attempt: 1, kind: "fact", type: "Dispatched", bodyJson: "{}" }]),
        turns.settle("t2", { status: "completed", content: "ok", native_session_id: "native-2" }, "s1"),
        turns.settle("t1", { status: "failed", error_code: "delivery_unknown" })
      ], { concurrency: "unbounded", mode: "result" })
      assert.strictEqual(taken._tag, "Failure")
      assert.isTrue(settled._tag === "Success" && Option.isSome(settled.success))
      if (settled._tag === "Success") assert.deepStrictEqual(settled.success, yield* turns.get("t2"))
      assert.isTrue(other._tag === "Success" && Option.isSome(other.success) && other.success.value.status === "failed")
      assert.strictEqual(Option.getOrThrow(yield* sessions.get("s1")).nativeSessionId, "native-2")
      // A settle and an append in one batch, the settle of a Turn already terminal: nothing written, none answered.
      const [appended, again] = yield* Effect.all([
        turns.appendEvents("t1", [{ seq: 2, attempt: 1, kind: "fact", type: "Dispatched", bodyJson: "{}" }]),
        turns.settle("t2", { status: "cancelled" })
      ], { concurrency: "unbounded" })
      assert.isUndefined(appended)
      assert.isTrue(Option.isNone(again))
      assert.strictEqual(Option.getOrThrow(yield* turns.get("t2")).status, "completed")
      assert.deepStrictEqual((yield* turns.events("t1", 0)).map((e) => e.seq), [1, 2])
    }).pipe(Effect.provide(store)))

  it.effect("an append carrying an attempt's begin begins it in the same transaction, and only a Turn not terminal", () =>
    Effect.gen(function* () {
      const sessions = yield* SessionStore
      const turns = yield* TurnStore
      yield* createSessionS1(sessions)
      yield* createTurnsT1T2(turns)
      const state = (turnId: string) =>
        Effect.map(turns.get(turnId), (t) => Option.map(t, (r) => [r.status, r.attempt, r.deviceId] as const))
      // Both appends commit together (one group commit): each begins its own Turn's attempt.
      yield* Effect.all([
        turns.appendEvents("t1", [{ seq: 1, attempt: 1, kind: "fact", type: "Dispatching", bodyJson: "{}" }], { begin: { deviceId: "dev-a" } }),
        turns.appendEvents("t2", [{ seq: 1, attempt: 1, kind: "fact", type: "Dispatching", bodyJson: "{}" }], { begin: { deviceId: "dev-b" } })
      ], { concurrency: "unbounded" })
      assert.deepStrictEqual(yield* state("t1"), Option.some(["running", 1, "dev-a"] as const))
      assert.deepStrictEqual(yield* state("t2"), Option.some(["running", 1, "dev-b"] as const))
      assert.deepStrictEqual((yield* turns.events("t1", 0)).map((e) => [e.seq, e.attempt]), [[1, 1]])
      // A failing append (its seq is taken) stores nothing and begins nothing.
      yield* turns.requeue("t1")
      const taken = yield* Effect.exit(
        turns.appendEvents("t1", [{ seq: 1, attempt: 2, kind: "fact", type: "Dispatching", bodyJson: "{}" }], { begin: { deviceId: "dev-c" } })
      )
      assert.isTrue(taken._tag === "Failure")
      assert.deepStrictEqual(yield* state("t1"), Option.some(["queued", 1, "dev-a"] as const))
      // A terminal Turn begins no attempt.
      assert.isTrue(yield* turns.complete("t2", { status: "completed", content: "ok" }))
      yield* turns.appendEvents("t2", [{ seq: 2, attempt: 2, kind: "fact", type: "Dispatching", bodyJson: "{}" }], { begin: { deviceId: "dev-c" } })
      assert.deepStrictEqual(yield* state("t2"), Option.some(["completed", 1, "dev-b"] as const))
    }).pipe(Effect.provide(store)))

  it.effect("reads the latest suspension attempt of each listed device in one statement", () =>
    Effect.gen(function* () {
      const credentials = yield* DeviceCredentials
      const sql = yield* SqlClient.SqlClient
      for (const device of ["dev-a", "dev-b", "dev-c"]) yield* credentials.issue(device)
      const attempt = (id: string, device: string, state: string, at: number) =>
        sql`INSERT INTO suspension_attempts (suspend_id, device_id, environment_id, state, reason, created_at_ms, updated_at_ms)
          VALUES (${id}, ${device}, ${"env-1"}, ${state}, ${null}, ${at}, ${at})`
      yield* attempt("s1", "dev-a", "resumed", 1)
      yield* attempt("s2", "dev-a", "suspended", 2)
      yield* attempt("s3", "dev-b", "quiescing", 5)
      const suspensions = yield* Suspensions.Suspensions
      const latest = yield* suspensions.latestOf(["dev-a", "dev-b", "dev-c"])
      assert.deepStrictEqual(
        [...latest].map(([device, view]) => [device, view.suspend_id, view.state]).sort(),
        [["dev-a", "s2", "suspended"], ["dev-b", "s3", "quiescing"]]
      )
      for (const device of ["dev-a", "dev-b", "dev-c"]) {
        assert.deepStrictEqual(Option.getOrNull(yield* suspensions.latest(device)), latest.get(device) ?? null)
      }
      assert.strictEqual((yield* suspensions.latestOf([])).size, 0)
    }).pipe(Effect.provide(Suspensions.layer.pipe(Layer.provideMerge(store), Layer.provide(noGateway), Layer.provide(DevIds.layerTest)))))
}
