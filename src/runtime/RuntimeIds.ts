/**
 * Identity generation for Runtime-owned resources: admission handles and Executor ids (protocol "Envelope and
 * identity"). The production layer draws random UUIDs; the test layer yields `handle-1`, `executor-1`, … so
 * wire scenarios and tests are deterministic. Nothing else in the daemon generates ids.
 */
import { Context, Effect, Layer } from "effect"
import { randomUUID } from "node:crypto"
import type { AdmissionHandle, ExecutorId } from "../proto/Ids.js"
import { unsafeMake } from "../proto/Ids.js"

export class RuntimeIds extends Context.Service<RuntimeIds, {
  /** A fresh connection-local admission handle. */
  readonly handle: Effect.Effect<AdmissionHandle>
  /** A fresh Executor id (Runtime-owned native resource). */
  readonly executorId: Effect.Effect<ExecutorId>
}>()("agentwire/runtime/RuntimeIds") {
  /** Random UUIDs: the only place in the daemon that draws randomness for ids. */
  static readonly layer = Layer.succeed(RuntimeIds, RuntimeIds.of({
    handle: Effect.sync(() => unsafeMake.admissionHandle(randomUUID())),
    executorId: Effect.sync(() => unsafeMake.executorId(randomUUID()))
  }))

  /** Sequential ids (`handle-1`, `executor-1`, …), one counter per kind, for tests and scenarios. */
  static readonly layerTest = Layer.sync(RuntimeIds, () => {
    let handles = 0
    let executors = 0
    return RuntimeIds.of({
      handle: Effect.sync(() => unsafeMake.admissionHandle(`handle-${++handles}`)),
      executorId: Effect.sync(() => unsafeMake.executorId(`executor-${++executors}`))
    })
  })
}
