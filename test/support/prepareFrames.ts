/**
 * Core-side `runtime_prepare` frames for the Runtime's transfer tests (reference part 2 §6): begin headers for
 * each action, chunks and commit.
 */
import type { Messages } from "../../src/proto/index.js"
import type { Initialization, RuntimePreparePayload } from "../../src/proto/RuntimePrepare.js"
import type { CapabilitySources } from "../../src/proto/Execution.js"
import { unsafeMake } from "../../src/proto/Ids.js"
import { sha256Hex } from "./workspaceFrames.js"

export const SessionUuid = "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"

export type PrepareFrame = Extract<Messages.CoreToRuntime, { readonly type: "runtime_prepare" }>

const frame = (id: string, payload: RuntimePreparePayload): PrepareFrame => ({
  type: "runtime_prepare",
  id: unsafeMake.transferId(id),
  payload
})

const byteLength = (body: Uint8Array | string) => (typeof body === "string" ? Buffer.byteLength(body) : body.length)

export const fileBegin = (id: string, environmentId: string, path: string, body: Uint8Array | string, overrides: Partial<RuntimePreparePayload> = {}) =>
  frame(id, {
    step: "begin", environment_id: environmentId, session_id: SessionUuid, action: "file", file: { path },
    size_bytes: byteLength(body), sha256: sha256Hex(body), ...overrides
  })

export const skillBegin = (id: string, environmentId: string, name: string, description: string, body: Uint8Array, overrides: Partial<RuntimePreparePayload> = {}) =>
  frame(id, {
    step: "begin", environment_id: environmentId, session_id: SessionUuid, action: "skill",
    skill: { type: "inline", name, description }, size_bytes: body.length, sha256: sha256Hex(body), ...overrides
  })

export const pluginBegin = (id: string, environmentId: string, slot: number, name: string, body: Uint8Array) =>
  frame(id, {
    step: "begin", environment_id: environmentId, session_id: SessionUuid, action: "plugin", slot,
    plugin: { type: "inline", name, description: `${name} plugin` }, size_bytes: body.length, sha256: sha256Hex(body)
  })

export const initializeBegin = (id: string, environmentId: string, initialization: Initialization) =>
  frame(id, { step: "begin", environment_id: environmentId, session_id: SessionUuid, action: "initialize", initialization })

export const finalizeBegin = (id: string, environmentId: string, sources: CapabilitySources) =>
  frame(id, { step: "begin", environment_id: environmentId, session_id: SessionUuid, action: "finalize", sources })

export const prepareChunk = (id: string, offset: number, data: Uint8Array | string) =>
  frame(id, { step: "chunk", ...(offset === 0 ? {} : { offset }), data: Buffer.from(data).toString("base64") })

export const prepareCommit = (id: string) => frame(id, { step: "commit" })
