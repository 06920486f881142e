/**
 * The shared setup of the Runtime's workspace family tests (Reads, Writes, Exports): the daemon's process layer
 * bound to a temporary workspace (`workspaceDir.ts`), optionally with the real `WorkspaceFs` wrapped for fault
 * injection; a connection holding a ready read-only preparation; each family's next reply as `[id, payload]`.
 */
import { Effect } from "effect"
import type { WorkspaceFsShape } from "../../src/runtime/workspace/WorkspaceFs.js"
import { connect, next, processLayer, same } from "./runtimeTestWire.js"
import { tempWorkspace, type TempWorkspace } from "./workspaceDir.js"
import { readOnlyPrepare } from "./workspaceFrames.js"

export type Core = Effect.Success<ReturnType<typeof connect>>["core"]

/** Provides the daemon's process layer bound to `ws` (`wrap`: the real `WorkspaceFs` wrapped, to inject faults). */
export const boundTo = (ws: TempWorkspace, wrap?: (fs: WorkspaceFsShape) => WorkspaceFsShape) =>
  Effect.provide(processLayer({ environment: ws.binding, ...(wrap === undefined ? {} : { wrapWorkspaceFs: wrap }) }))

/** A workspace and a second temporary directory outside it (what an escape would reach), both removed at scope end. */
export const workspaceAndOutside = Effect.all({ ws: tempWorkspace, out: tempWorkspace })

/** A connection with a ready read-only preparation (`prep-ro`, handle-1) of `ws`'s Environment. */
export const readyReadOnly = (ws: TempWorkspace) =>
  Effect.gen(function* () {
    const c = yield* connect()
    yield* c.core.toRuntime(readOnlyPrepare("prep-ro", ws.local))
    same((yield* next(c.core, "preparation_status")).payload.state, "preparing")
    same((yield* next(c.core, "preparation_status")).payload.state, "ready")
    return c
  })

/** The next reply of each family, as `[id, payload]`. */
export const readResult = (core: Core) => Effect.map(next(core, "workspace_read_result"), (f) => [f.id, f.payload] as const)
export const writeResult = (core: Core) => Effect.map(next(core, "workspace_write_result"), (f) => [f.id, f.payload] as const)
export const exportResult = (core: Core) => Effect.map(next(core, "workspace_export_result"), (f) => [f.id, f.payload] as const)
