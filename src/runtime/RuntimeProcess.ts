/**
 * STUB (to be replaced; keep the exported names and types).
 *
 * The daemon's process-level services, built once per process and shared by every connection: the harness
 * registry (with the built-in `scripted` harness), resource ownership (cleanups not yet confirmed), the
 * runtime policy (capacity bounds, idle expiry) and id generation.
 */
import { type Duration, Layer } from "effect"
import type { CapabilityName } from "../proto/Capabilities.js"

export interface ScriptedHarnessOptions {
  /** Capabilities the scripted harness declares as unsupported (default: none; it declares all 30). */
  readonly disabledCapabilities?: ReadonlyArray<CapabilityName>
  /** Declared availability (default true). */
  readonly available?: boolean
}

export interface RuntimeProcessOptions {
  /** Bound on active preparations and executions, counting closing or uncertain ones (default 4). */
  readonly maxActive?: number
  /** Bound on idle retained Executors (default 16). */
  readonly maxIdleExecutors?: number
  /** Idle Executor expiry (default 10 minutes). */
  readonly idleExecutorTtl?: Duration.Duration
  readonly scripted?: ScriptedHarnessOptions
}

/** The services `layer` provides. */
export type RuntimeProcessServices = never

export const layer = (_options: RuntimeProcessOptions): Layer.Layer<RuntimeProcessServices> => Layer.empty
