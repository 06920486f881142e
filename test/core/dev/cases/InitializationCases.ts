/**
 * Session initialization records, shared by every store dialect (docs/store.md `session_initializations`): the
 * request kept until the initialization ends, progress and `committing` round-tripped, and what a step a
 * stopped process left `running` becomes when next looked at (never replayed: `unknown` once its commit may
 * have been sent, else `failed`).
 */
import { assert, it } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import type { SqlClient } from "effect/sql"
import * as Initialization from "../../../../src/core/dev/Initialization.js"
import { plan, initialProgress, type InitializationRequest } from "../../../../src/core/dev/InitializationSpec.js"
import * as InitializationStore from "../../../../src/core/dev/InitializationStore.js"
import { SessionStore } from "../../../../src/core/dev/SessionStore.js"
import type * as Store from "../../../../src/core/dev/Store.js"
import type { DeviceSession } from "../../../../src/core/DeviceSession.js"

const request: InitializationRequest = {
  files: [{ path: "/workspace/a.txt", content: "hello" }],
  env: { TOKEN: "secret-value" },
  setup: { command: "make" }
}

const session = (id: string) =>
  Effect.flatMap(SessionStore, (s) => s.create({ sessionId: id, agentKind: "scripted", environmentType: "none", configuration: {}, deviceId: undefined }))

const ensure = (sessionId: string) =>
  Effect.flatMap(Initialization.SessionInitialization, (init) =>
    init.ensure({
      sessionId,
      session: undefined as unknown as DeviceSession, // never used: nothing is sent on these paths
      environment: { id: "5c2f7b7e-1a0b-4e7e-9d55-6b1f0a2c3d4e", workspace_directory: "/w", capability_sources: null },
      durable: (_operation, write) => Effect.orDie(write),
      notify: () => Effect.void
    }))

export const initializationCases = (store: Layer.Layer<Store.StoreServices | SqlClient.SqlClient, unknown>) => {
  const layer = Initialization.layer().pipe(Layer.provideMerge(InitializationStore.layer), Layer.provideMerge(store))

  it.effect("keeps the request until the initialization ends; the view never holds env values", () =>
    Effect.gen(function* () {
      yield* session("s-1")
      const init = yield* Initialization.SessionInitialization
      const records = yield* InitializationStore.InitializationStore
      yield* init.create("s-1", request, undefined)
      const stored = Option.getOrThrow(yield* records.get("s-1"))
      assert.deepStrictEqual(Option.getOrThrow(stored.request), request)
      assert.deepStrictEqual([stored.state, stored.committing, stored.currentStep], ["pending", false, undefined])
      assert.deepStrictEqual(stored.steps.map((s) => [s.kind, s.state, s.bytes_total]), [["file", "pending", 5], ["configure", "pending", 0], ["setup", "pending", 0]])
      const view = Option.getOrThrow(yield* init.view("s-1"))
      assert.deepStrictEqual([view.env_names, view.setup, view.bytes_total], [["TOKEN"], { command: "make", cwd: "/workspace" }, 5])
      assert.notInclude(JSON.stringify(view), "secret-value")
      assert.isTrue(Option.isNone(yield* init.blocked("s-1")))
      yield* records.update("s-1", { state: "running", currentStep: 0, steps: stored.steps, committing: true, detail: undefined, clearRequest: false })
      const running = Option.getOrThrow(yield* records.get("s-1"))
      assert.deepStrictEqual([running.state, running.committing, running.currentStep, Option.isSome(running.request)], ["running", true, 0, true])
      yield* records.update("s-1", { state: "completed", currentStep: 2, steps: stored.steps, committing: false, detail: undefined, clearRequest: true })
      const done = Option.getOrThrow(yield* records.get("s-1"))
      assert.deepStrictEqual([done.state, done.committing, Option.isNone(done.request)], ["completed", false, true])
      assert.deepStrictEqual(yield* ensure("s-1"), { _tag: "Ready" })
      assert.deepStrictEqual(yield* ensure("no-initialization"), { _tag: "Ready" })
    }).pipe(Effect.provide(layer)))

  it.effect("a step left running by a stopped process: unknown once its commit may have been sent, else failed; never replayed", () =>
    Effect.gen(function* () {
      const init = yield* Initialization.SessionInitialization
      const records = yield* InitializationStore.InitializationStore
      const steps = initialProgress(plan(request, undefined))
      for (const [id, committing] of [["s-c", true], ["s-n", false]] as const) {
        yield* session(id)
        yield* init.create(id, request, undefined)
        yield* records.update(id, { state: "running", currentStep: 2, steps, committing, detail: undefined, clearRequest: false })
      }
      assert.deepStrictEqual(yield* ensure("s-c"), { _tag: "Unknown", detail: "setup: core_restarted" })
      assert.deepStrictEqual(yield* ensure("s-n"), { _tag: "Failed", detail: "setup: core_restarted" })
      // Settled once: looked at again, the same answer, with nothing left to send.
      assert.deepStrictEqual(yield* ensure("s-c"), { _tag: "Unknown", detail: "setup: core_restarted" })
      const c = Option.getOrThrow(yield* records.get("s-c"))
      assert.deepStrictEqual([c.state, c.committing, Option.isNone(c.request), c.steps[2]!.state], ["unknown", false, true, "unknown"])
      assert.deepStrictEqual(yield* init.blocked("s-c"), Option.some("unknown"))
      assert.deepStrictEqual(yield* init.blocked("s-n"), Option.some("failed"))
    }).pipe(Effect.provide(layer)))
}
