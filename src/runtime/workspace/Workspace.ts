/**
 * The workspace families of one connection (protocol "Workspace operations", reference part 2 §7) as a
 * connection service: `workspace_read` (Reads.ts), `workspace_write` (Writes.ts) and `workspace_export`
 * (Exports.ts), all served by the daemon's own implementation (`WorkspaceFs`) below the bound root. Each read,
 * write and export is an owned resource in a Scope; nothing is replayed on a later connection.
 */
import { Context, Effect, Layer } from "effect"
import type { OperationId } from "../../proto/Ids.js"
import type { WorkspaceExportPayload, WorkspaceReadPayload, WorkspaceWritePayload } from "../../proto/Workspace.js"
import { makeExports } from "./Exports.js"
import { makeReads } from "./Reads.js"
import { makeWrites } from "./Writes.js"

export interface WorkspaceShape {
  /** Handles one `workspace_read`; returns at once (the native work and the reply run in connection fibers). */
  readonly read: (id: OperationId, payload: WorkspaceReadPayload, trace: string | undefined) => Effect.Effect<void>
  /** Handles one `workspace_write` frame; returns at once. */
  readonly write: (id: OperationId, payload: WorkspaceWritePayload, trace: string | undefined) => Effect.Effect<void>
  /** Handles one `workspace_export` frame; returns at once. */
  readonly export: (id: OperationId, payload: WorkspaceExportPayload, trace: string | undefined) => Effect.Effect<void>
  /** Reads whose native work has not finished. */
  readonly activeReads: Effect.Effect<number>
  /** True while a read, a write or an export is in progress (runtime_prepare refuses to begin meanwhile). */
  readonly busy: Effect.Effect<boolean>
}

/** The workspace families of one connection. */
export class Workspace extends Context.Service<Workspace, WorkspaceShape>()("agentwire/runtime/Workspace") {
  static readonly layer = Layer.effect(
    Workspace,
    Effect.gen(function* () {
      const reads = yield* makeReads
      // A write and an export exclude each other (reference §7.5); each asks the other lazily.
      let writeActive: Effect.Effect<boolean> = Effect.succeed(false)
      const exports = yield* makeExports(Effect.suspend(() => writeActive))
      const writes = yield* makeWrites(reads.active, exports.active)
      writeActive = writes.active
      const busy = Effect.gen(function* () {
        return (yield* reads.active) > 0 || (yield* writes.active) || (yield* exports.active)
      })
      return Workspace.of({ read: reads.read, write: writes.write, export: exports.handle, activeReads: reads.active, busy })
    })
  )
}
