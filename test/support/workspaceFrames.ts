/**
 * Core-side frames of the workspace families for the Runtime's tests: the read-only preparation profile
 * (reference §7.1) for a bound Environment and `workspace_read` requests.
 */
import type { Messages } from "../../src/proto/index.js"
import type { LocalEnvironment } from "../../src/proto/Execution.js"
import { unsafeMake } from "../../src/proto/Ids.js"
import { createHash } from "node:crypto"
import type { WorkspaceReadPayload, WorkspaceWritePayload } from "../../src/proto/Workspace.js"
import { prepareFrame } from "./runtimeTestWire.js"

/** `execution_prepare` with exactly the §7.1 read-only profile for `local`. */
export const readOnlyPrepare = (requestId: string, local: LocalEnvironment, sessionId?: string): Messages.CoreToRuntime => {
  const frame = prepareFrame(requestId, {}, sessionId)
  if (frame.type !== "execution_prepare") throw new Error("unreachable")
  const { disable_execution_environment: _a, execution_controls: _b, observe_tool_observations: _c, ...base } = frame.payload.configuration
  return { ...frame, payload: { ...frame.payload, configuration: { ...base, workspace_read_only: true, local_environment: local } } }
}

export const readFrame = (id: string, payload: Partial<WorkspaceReadPayload> & { readonly environment_id: string }): Messages.CoreToRuntime => ({
  type: "workspace_read",
  id: unsafeMake.operationId(id),
  payload: { path: "", max_bytes: 0, ...payload } as WorkspaceReadPayload
})

export const bytesRead = (id: string, environmentId: string, path: string, maxBytes: number, target: { handle?: string; run_id?: string } = { handle: "handle-1" }) =>
  readFrame(id, { ...target, environment_id: environmentId, path, max_bytes: maxBytes } as never)

export const dirRead = (id: string, environmentId: string, path: string, maxEntries: number, target: { handle?: string; run_id?: string } = { handle: "handle-1" }) =>
  readFrame(id, { ...target, environment_id: environmentId, path, max_bytes: 0, operation: "directory", max_entries: maxEntries } as never)

export const SessionUuid = "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"

export const sha256Hex = (bytes: Uint8Array | string): string =>
  createHash("sha256").update(typeof bytes === "string" ? Buffer.from(bytes) : bytes).digest("hex")

export const writeBegin = (id: string, environmentId: string, path: string, body: Uint8Array | string, overrides: Partial<WorkspaceWritePayload> = {}): Messages.CoreToRuntime => ({
  type: "workspace_write",
  id: unsafeMake.operationId(id),
  payload: {
    step: "begin",
    environment_id: environmentId,
    session_id: SessionUuid,
    path,
    size_bytes: typeof body === "string" ? Buffer.byteLength(body) : body.length,
    sha256: sha256Hex(body),
    ...overrides
  }
})

export const writeChunk = (id: string, offset: number, data: Uint8Array | string): Messages.CoreToRuntime => ({
  type: "workspace_write",
  id: unsafeMake.operationId(id),
  payload: { step: "chunk", offset, data: Buffer.from(data).toString("base64") }
})

export const writeCommit = (id: string): Messages.CoreToRuntime => ({
  type: "workspace_write",
  id: unsafeMake.operationId(id),
  payload: { step: "commit" }
})
