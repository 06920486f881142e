/**
 * The daemon's process-level services, built once per process and shared by every connection: the harness
 * registry (the selected kinds of `HarnessKinds`, default `scripted`, each built once by its constructor in the
 * registry layer's scope and released at daemon shutdown), resource ownership (cleanups not yet confirmed), the
 * runtime policy (capacity bounds, idle expiry, cleanup retry) and id generation, plus the scripted harness's
 * signals. Per-connection state (routing, admission handles, Runs) is built fresh by `Connection.run`.
 */
import { type Duration, Layer } from "effect"
import type { CapabilityName } from "../proto/Capabilities.js"
import type { CodexSettings } from "./harness/codex/CodexHarness.js"
import type { ClaudeCodeSettings } from "./harness/claude_code/ClaudeCodeSettings.js"
import { type Harness, HarnessEntry } from "./harness/Harness.js"
import { defaultHarnessKinds, entriesFor, type HarnessKindName } from "./harness/HarnessKinds.js"
import { HarnessRegistry } from "./harness/HarnessRegistry.js"
import type { ScriptedOperation } from "./harness/scripted/ScriptedHarness.js"
import { ScriptedSignals } from "./harness/scripted/ScriptedSignals.js"
import { Ownership } from "./Ownership.js"
import { RuntimeIds } from "./RuntimeIds.js"
import { RuntimePolicy, type RuntimePolicyShape } from "./RuntimePolicy.js"
import { TransferSettings } from "./transfer/TransferSettings.js"
import { type PersistedSuspension, SuspensionStore } from "./SuspensionStore.js"
import { type Binding, EnvironmentBinding } from "./workspace/EnvironmentBinding.js"
import { WorkspaceFs, type WorkspaceFsShape } from "./workspace/WorkspaceFs.js"

export interface ScriptedHarnessOptions {
  /**
   * Further capabilities the scripted harness declares as unsupported (default: none, i.e. its production
   * declaration `scriptedCapabilities`: 26 of 30 supported). Narrowing only: nothing can be added.
   */
  readonly disabledCapabilities?: ReadonlyArray<CapabilityName>
  /** Declared availability (default true). */
  readonly available?: boolean
  /**
   * Operations the scripted adapter answers "unsupported" although its declaration supports them, so tests
   * can exercise the Runtime's `contract_violation` path (default: none).
   */
  readonly contractViolations?: ReadonlyArray<ScriptedOperation>
}

export interface RuntimeProcessOptions {
  /** Bound on active preparations and executions, counting closing or uncertain ones (default 4). */
  readonly maxActive?: number
  /** Bound on idle retained Executors (default 16). */
  readonly maxIdleExecutors?: number
  /** Idle Executor expiry (default 10 minutes). */
  readonly idleExecutorTtl?: Duration.Duration
  readonly scripted?: ScriptedHarnessOptions
  /** Settings of the `codex` kind (binary, `-c` overrides, environment, profile); used when it is selected. */
  readonly codex?: CodexSettings
  /** Bound on one native close attempt (default 10 s); a timeout counts as a failed attempt. */
  readonly closeAttemptTimeout?: Duration.Duration
  /** Id generation: random UUIDs (default) or sequential `handle-1`, `executor-1`, … for tests and scenarios. */
  readonly ids?: "uuid" | "sequential"
  /** Settings of the `claude_code` kind (endpoint, key, binary, profile paths), when it is selected. */
  readonly claudeCode?: ClaudeCodeSettings | undefined
  /** The kinds of `HarnessKinds` to register, in order (default `["scripted"]`). */
  readonly kinds?: ReadonlyArray<HarnessKindName>
  /** Further Harness kinds to register after them; an incomplete declaration fails the layer (a defect). */
  readonly harnesses?: ReadonlyArray<Harness>
  /** The local Environment binding (absent: none; the workspace capabilities are declared false). */
  readonly environment?: Binding | undefined
  /**
   * The daemon's environment, from which initialization commands (`runtime_prepare` npm / python / setup) inherit
   * only an allowlist (transfer/TransferSettings.ts); absent: an empty environment.
   */
  readonly childEnv?: Readonly<Record<string, string | undefined>> | undefined
  /**
   * The persisted suspension state (SuspensionStore.ts): the file in the profile directory and its content
   * read at start. Absent: kept in memory for the process (tests, scenarios).
   */
  readonly suspension?: { readonly file: string; readonly initial: PersistedSuspension } | undefined
  /** Test-only: replaces the suspension store (fault injection: a disk that refuses writes). */
  readonly suspensionStore?: Layer.Layer<SuspensionStore> | undefined
  /** Test-only: wraps the workspace implementation (fault injection: failing closes, hanging reads). */
  readonly wrapWorkspaceFs?: ((fs: WorkspaceFsShape) => WorkspaceFsShape) | undefined
}

/** The services `layer` provides. */
export type RuntimeProcessServices =
  | HarnessRegistry
  | Ownership
  | RuntimePolicy
  | RuntimeIds
  | ScriptedSignals
  | EnvironmentBinding
  | WorkspaceFs
  | SuspensionStore
  | TransferSettings

const policyOverrides = (options: RuntimeProcessOptions): Partial<RuntimePolicyShape> => ({
  ...(options.maxActive === undefined ? {} : { maxActive: options.maxActive }),
  ...(options.maxIdleExecutors === undefined ? {} : { maxIdleExecutors: options.maxIdleExecutors }),
  ...(options.idleExecutorTtl === undefined ? {} : { idleExecutorTtl: options.idleExecutorTtl }),
  ...(options.closeAttemptTimeout === undefined ? {} : { closeAttemptTimeout: options.closeAttemptTimeout })
})

/** Builds the process-level services. Build it once per process (connections share its `Ownership`). */
export const layer = (options: RuntimeProcessOptions): Layer.Layer<RuntimeProcessServices> => {
  const entries = [
    ...entriesFor(options.kinds ?? defaultHarnessKinds, {
      scripted: { ...options.scripted, workspaceRoot: options.environment?.root },
      codex: options.codex,
      claudeCode: options.claudeCode
    }),
    ...(options.harnesses ?? []).map(HarnessEntry.succeed)
  ]
  return Layer.mergeAll(
    HarnessRegistry.layerFrom(entries).pipe(Layer.provideMerge(ScriptedSignals.layer)),
    Ownership.layer,
    RuntimePolicy.layer(policyOverrides(options)),
    options.ids === "sequential" ? RuntimeIds.layerTest : RuntimeIds.layer,
    EnvironmentBinding.layer(options.environment),
    WorkspaceFs.layer(options.environment?.root, options.wrapWorkspaceFs),
    TransferSettings.layer(options.childEnv),
    options.suspensionStore ?? SuspensionStore.layer({ file: options.suspension?.file, initial: options.suspension?.initial })
  )
}
