/**
 * A real temporary workspace directory for the Runtime's workspace tests, scoped: created with `mkdtemp` under
 * the OS temp dir and removed (recursively) when the test's scope closes. `binding` is the matching
 * Environment binding and `local` the `local_environment` Core would send for it.
 */
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { Effect } from "effect"
import type { LocalEnvironment } from "../../src/proto/Execution.js"
import type { Binding } from "../../src/runtime/workspace/EnvironmentBinding.js"

export const EnvironmentId = "e4b2c1d0-9f8e-4a7b-b6c5-d4e3f2a1b0c9"

export interface TempWorkspace {
  readonly root: string
  readonly binding: Binding
  readonly local: LocalEnvironment
  /** Absolute path of a workspace-relative path. */
  readonly at: (relative: string) => string
}

export const tempWorkspace = Effect.acquireRelease(
  Effect.sync((): TempWorkspace => {
    const root = Fs.realpathSync(Fs.mkdtempSync(Path.join(Os.tmpdir(), "agentwire-ws-")))
    return {
      root,
      binding: { environmentId: EnvironmentId, root, configured: root, networkAccess: "disabled" },
      local: { id: EnvironmentId, workspace_directory: root, capability_sources: null },
      at: (relative) => Path.join(root, relative)
    }
  }),
  (ws) => Effect.sync(() => Fs.rmSync(ws.root, { recursive: true, force: true }))
)
