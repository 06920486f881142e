/**
 * The opening shared by the workspace end-to-end tests: a real `agentwire core` in a temporary data directory
 * and one real `agentwire daemon` bound to a temporary workspace (`--environment-id`, `--workspace`), waited
 * for until the device is online with a declaration. `close` stops every process and removes both directories.
 */
import { readFileSync, realpathSync, rmSync } from "node:fs"
import { join } from "node:path"
import { type CoreProc, createCredential, eventually, operator, type Proc, run, startCore, stopAll, tempDir } from "./devcoreLive.js"

export interface BoundDevCore {
  readonly dir: string
  /** The workspace's real path (the daemon's root). */
  readonly workspace: string
  readonly core: CoreProc
  /** The daemon process (a test may kill it). */
  readonly daemon: Proc
  readonly token: string
  readonly api: ReturnType<typeof operator>
  /** The `environment` member of a Session bound to this device's Environment. */
  readonly binding: () => { readonly type: "self_hosted"; readonly id: string; readonly workspace_directory: string }
  readonly close: () => Promise<void>
}

export const startBoundDevCore = async (options: {
  readonly name: string
  readonly deviceId: string
  readonly environmentId: string
  /** Fills the workspace before the daemon starts. */
  readonly seed?: (workspace: string) => void
}): Promise<BoundDevCore> => {
  const dir = tempDir(`agentwire-${options.name}-`)
  const workspace = realpathSync(tempDir(`agentwire-${options.name}-root-`))
  options.seed?.(workspace)
  const core = await startCore(dir)
  const token = readFileSync(join(dir, "operator-token"), "utf8").trim()
  const api = operator(core.url, token)
  const credential = await createCredential(dir, options.deviceId)
  const daemon = run([
    "daemon",
    "--core-url", core.url,
    "--device-id", options.deviceId,
    "--credential-file", credential.file,
    "--profile", join(dir, `profile-${options.deviceId}`),
    "--environment-id", options.environmentId,
    "--workspace", workspace
  ])
  await eventually(async () => {
    const device = await api.get(`/devices/${options.deviceId}`)
    return device.body?.online === true && device.body.declaration !== null ? true : undefined
  }, 25_000, `${options.deviceId} online with a declaration`)
  return {
    dir,
    workspace,
    core,
    daemon,
    token,
    api,
    binding: () => ({ type: "self_hosted", id: options.environmentId, workspace_directory: workspace }),
    close: async () => {
      await stopAll()
      rmSync(dir, { recursive: true, force: true })
      rmSync(workspace, { recursive: true, force: true })
    }
  }
}

/** Resolves with the Turn's record once it is neither queued nor running. */
export const turnFinished = (api: ReturnType<typeof operator>, turnId: string, ms = 20_000) =>
  eventually(async () => {
    const turn = await api.get(`/turns/${turnId}`)
    return turn.body.status === "running" || turn.body.status === "queued" ? undefined : turn.body
  }, ms, "the Turn to finish")
