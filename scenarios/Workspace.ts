/**
 * Fixtures of the workspace scenarios (reference part 2 §7): a daemon bound to one local Environment, the
 * read-only preparation profile, and the frames of the read, write and export families.
 */
import type { AgentKindCapabilities } from "../src/proto/Capabilities.js"
import type { RuntimePrepareResultPayload } from "../src/proto/RuntimePrepare.js"
import { encodeChunkData } from "../src/proto/Transfer.js"
import type { WorkspaceExportResultPayload, WorkspaceReadResultPayload, WorkspaceWriteResultPayload } from "../src/proto/Workspace.js"
import { admissionNames, AgentKind, heartbeat, scriptedCapabilities } from "./Fixtures.js"
import { bind, core, type CoreStep, runtime, type RuntimeStep } from "./WireScenario.js"

/** The Environment the scripted daemon is bound to. */
export const EnvironmentId = "5c2f7b7e-1a0b-4e7e-9d55-6b1f0a2c3d4e"
export const WorkspaceDirectory = "/srv/agentwire/workspace"

/** The scripted declaration of a daemon with an Environment binding: the workspace capabilities are declared. */
export const boundCapabilities: AgentKindCapabilities = {
  ...scriptedCapabilities,
  local_environment: true,
  workspace_read_preparation: true,
  workspace_output_export: true
}

export const boundHeartbeat = (): RuntimeStep => heartbeat({ capabilities: boundCapabilities })

/** `execution_prepare` with the read-only profile (§7.1): exactly the bound Environment, nothing else. */
export const readOnlyPrepare = (request: string, session: string): CoreStep =>
  core({
    type: "execution_prepare",
    id: request,
    payload: {
      session_id: session,
      configuration: {
        agent_kind: AgentKind,
        conversation_id: "",
        run_id: "",
        local_environment: { id: EnvironmentId, workspace_directory: WorkspaceDirectory, capability_sources: null, network_access: "disabled" },
        workspace_read_only: true,
        agent_state_key: `agents-api-${session}`,
        release_on_completion: true,
        strict_resume: true
      }
    }
  })

/** The handle a preparation's `ready` granted (bound like the preparation fixtures bind it). */
export const handleOf = (request: string) => bind(admissionNames(request).handle, "handle-1")

export const readBytes = (id: string, request: string, path: string, maxBytes: number, options: { readonly refusedByCore?: string } = {}): CoreStep =>
  core({ type: "workspace_read", id, payload: { handle: handleOf(request), environment_id: EnvironmentId, path, max_bytes: maxBytes } }, options)

export const readDirectory = (id: string, request: string, path: string, maxEntries: number): CoreStep =>
  core({
    type: "workspace_read",
    id,
    payload: { handle: handleOf(request), environment_id: EnvironmentId, path, max_bytes: 0, operation: "directory", max_entries: maxEntries }
  })

export const readResult = (id: string, payload: WorkspaceReadResultPayload): RuntimeStep =>
  runtime({ type: "workspace_read_result", id, payload })

export const writeBegin = (id: string, session: string, path: string, body: string, sha256: string, options: { readonly refusedByCore?: string } = {}): CoreStep =>
  core({
    type: "workspace_write",
    id,
    payload: { step: "begin", environment_id: EnvironmentId, session_id: session, path, size_bytes: new TextEncoder().encode(body).length, sha256 }
  }, options)
export const writeChunk = (id: string, offset: number, body: string): CoreStep =>
  core({ type: "workspace_write", id, payload: { step: "chunk", offset, data: b64(body) } })
export const writeCommit = (id: string): CoreStep => core({ type: "workspace_write", id, payload: { step: "commit" } })
export const writeResult = (id: string, payload: WorkspaceWriteResultPayload): RuntimeStep =>
  runtime({ type: "workspace_write_result", id, payload })

export const exportBegin = (id: string, request: string): CoreStep =>
  core({ type: "workspace_export", id, payload: { step: "begin", handle: handleOf(request), environment_id: EnvironmentId } })
export const exportNext = (id: string, offset: number): CoreStep => core({ type: "workspace_export", id, payload: { step: "next", offset } })
export const exportCancel = (id: string): CoreStep => core({ type: "workspace_export", id, payload: { step: "cancel" } })
export const exportResult = (id: string, payload: WorkspaceExportResultPayload): RuntimeStep =>
  runtime({ type: "workspace_export_result", id, payload })

/** Base64 of a text (chunk and read data). */
export const b64 = (text: string): string => encodeChunkData(new TextEncoder().encode(text))

// ---------------------------------------------------------------------------------------------- runtime_prepare

/** `runtime_prepare` begin of a file at its logical `/workspace/…` path. */
export const prepareFileBegin = (id: string, session: string, path: string, body: string, sha256: string, options: { readonly refusedByCore?: string } = {}): CoreStep =>
  core({
    type: "runtime_prepare",
    id,
    payload: {
      step: "begin", environment_id: EnvironmentId, session_id: session, action: "file", file: { path },
      size_bytes: new TextEncoder().encode(body).length, sha256
    }
  }, options)
/** `runtime_prepare` begin of a `setup` initialization (no data: commit follows ready). */
export const prepareSetupBegin = (id: string, session: string, command: string): CoreStep =>
  core({
    type: "runtime_prepare",
    id,
    payload: {
      step: "begin", environment_id: EnvironmentId, session_id: session, action: "initialize",
      initialization: { action: "setup", network: "disabled", cwd: "/workspace", command }
    }
  })
export const prepareChunk = (id: string, offset: number, body: string): CoreStep =>
  core({ type: "runtime_prepare", id, payload: { step: "chunk", ...(offset === 0 ? {} : { offset }), data: b64(body) } })
export const prepareCommit = (id: string): CoreStep => core({ type: "runtime_prepare", id, payload: { step: "commit" } })
export const prepareResult = (id: string, payload: RuntimePrepareResultPayload): RuntimeStep =>
  runtime({ type: "runtime_prepare_result", id, payload })
