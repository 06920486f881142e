/**
 * Fixtures of the workspace scenarios (reference part 2 §7): a daemon bound to one local Environment, the
 * read-only preparation profile, and the frames of the read, write and export families.
 */
import type { AgentKindCapabilities } from "../src/proto/Capabilities.js"
import type { RuntimePrepareResultPayload } from "../src/proto/RuntimePrepare.js"
import { encodeChunkData } from "../src/proto/Transfer.js"
import type { WorkspaceExportResultPayload, WorkspaceReadResultPayload, WorkspaceWriteResultPayload } from "../src/proto/Workspace.js"
import { admissionNames, AgentKind, heartbeat, scriptedCapabilities, status } from "./Fixtures.js"
import { bind, connect, core, type CoreStep, runtime, type RuntimeStep, type Step } from "./WireScenario.js"

/** The Environment the scripted daemon is bound to. */
export const EnvironmentId = "5c2f7b7e-1a0b-4e7e-9d55-6b1f0a2c3d4e"
/** The sample workspace directory (Core side). The Runtime side binds it to its copy of the fixture tree. */
export const WorkspaceDirectory = "/srv/agentwire/workspace"
/** The bind name of `workspace_directory`: a Runtime-side runner seeds it with its fixture copy's path. */
export const WorkspaceDirectoryBinding = "workspace_directory"

// ---------------------------------------------------------------------------------------------- fixture tree

/** One entry of the workspace fixture: a Runtime-side runner materializes exactly these, nothing else. */
export type FixtureEntry =
  | { readonly path: string; readonly kind: "file"; readonly content: string; readonly mode: number }
  | { readonly path: string; readonly kind: "directory"; readonly mode: number }
  | { readonly path: string; readonly kind: "symlink"; readonly target: string }

/**
 * The tree a Runtime-side runner binds its daemon to (a fresh copy per scenario; the kit restores it before each
 * workspace scenario): parents before children. Every entry's mtime is `FixtureMtimeSeconds`; modes are set
 * explicitly (no umask dependence), so the export's tar bytes are exact (`fixtureTar`).
 */
export const WorkspaceFixture: ReadonlyArray<FixtureEntry> = [
  { path: "README.md", kind: "file", content: "hello", mode: 0o644 },
  { path: "link", kind: "symlink", target: "README.md" },
  { path: "notes", kind: "directory", mode: 0o755 },
  { path: "src", kind: "directory", mode: 0o755 },
  { path: "src/main.ts", kind: "file", content: "export {}\n", mode: 0o600 }
]

export const FixtureMtimeSeconds = 1_767_225_600

/**
 * The fixture's export, as the reference's output rules make it (docs/runtime.md "Workspace export"):
 * depth-first, names sorted; ustar headers with owner and group 0 and empty names, permission bits only, the
 * directory path with a trailing slash, a symlink with mode 0777 and its target; file data padded to 512-byte
 * blocks; two zero blocks at the end. Encoded here from the format description, independently of the daemon.
 */
export const fixtureTar = (): Uint8Array => {
  const enc = new TextEncoder()
  const octal = (block: Uint8Array, at: number, width: number, n: number) =>
    block.set(enc.encode(n.toString(8).padStart(width - 1, "0")), at)
  const header = (name: string, flag: string, size: number, mode: number, link: string) => {
    const b = new Uint8Array(512)
    b.set(enc.encode(name), 0)
    octal(b, 100, 8, mode)
    octal(b, 108, 8, 0)
    octal(b, 116, 8, 0)
    octal(b, 124, 12, size)
    octal(b, 136, 12, FixtureMtimeSeconds)
    b.fill(0x20, 148, 156)
    b[156] = flag.charCodeAt(0)
    b.set(enc.encode(link), 157)
    b.set(enc.encode("ustar\u000000"), 257)
    const sum = b.reduce((n, x) => n + x, 0)
    b.set(enc.encode(sum.toString(8).padStart(6, "0")), 148)
    b[154] = 0
    b[155] = 0x20
    return b
  }
  const depth = (p: string) => p.split("/")
  const sorted = [...WorkspaceFixture].sort((a, b) => {
    const x = depth(a.path)
    const y = depth(b.path)
    for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return x[i]! < y[i]! ? -1 : 1
    return x.length - y.length
  })
  const blocks: Array<Uint8Array> = []
  for (const e of sorted) {
    if (e.kind === "directory") blocks.push(header(`${e.path}/`, "5", 0, e.mode, ""))
    else if (e.kind === "symlink") blocks.push(header(e.path, "2", 0, 0o777, e.target))
    else {
      const data = enc.encode(e.content)
      blocks.push(header(e.path, "0", data.length, e.mode, ""), data, new Uint8Array((512 - (data.length % 512)) % 512))
    }
  }
  blocks.push(new Uint8Array(1024))
  const out = new Uint8Array(blocks.reduce((n, b) => n + b.length, 0))
  let at = 0
  for (const b of blocks) {
    out.set(b, at)
    at += b.length
  }
  return out
}

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
        local_environment: { id: EnvironmentId, workspace_directory: bind(WorkspaceDirectoryBinding, WorkspaceDirectory), capability_sources: null, network_access: "disabled" },
        workspace_read_only: true,
        agent_state_key: `agents-api-${session}`,
        release_on_completion: true,
        strict_resume: true
      }
    }
  })

/** The opening of the read and export scenarios: a bound daemon connects and declares, a read-only preparation is ready. */
export const boundReadOnlyReady = (request: string, session: string): ReadonlyArray<Step> => [
  connect(),
  boundHeartbeat(),
  readOnlyPrepare(request, session),
  status(request, 1, "preparing"),
  status(request, 2, "ready")
]

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

/** Base64 of bytes (an export chunk's data). */
export const b64Bytes = (bytes: Uint8Array): string => encodeChunkData(bytes)

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
