/**
 * Fixtures of the suspension scenarios (reference §8.1): `environment_quiesce` / `environment_resume` for the
 * Environment the workspace fixture binds (`Workspace.EnvironmentId`), and their replies. A reply echoes the
 * request's Environment and suspend id exactly; `accepted: false` carries the category.
 */
import type { SuspensionErrorCode } from "../src/proto/ErrorCodes.js"
import { EnvironmentId } from "./Workspace.js"
import { core, type CoreStep, runtime, type RuntimeStep } from "./WireScenario.js"

interface RequestOptions {
  readonly environmentId?: string
  readonly rollback?: boolean
  readonly refusedByCore?: string
  readonly note?: string
}

const payload = (suspendId: string, options: RequestOptions) => ({
  environment_id: options.environmentId ?? EnvironmentId,
  suspend_id: suspendId,
  ...(options.rollback === undefined ? {} : { rollback: options.rollback })
})
const stepOptions = (options: RequestOptions) => ({
  ...(options.refusedByCore === undefined ? {} : { refusedByCore: options.refusedByCore }),
  ...(options.note === undefined ? {} : { note: options.note })
})

export const quiesce = (id: string, suspendId: string, options: RequestOptions = {}): CoreStep =>
  core({ type: "environment_quiesce", id, payload: payload(suspendId, options) }, stepOptions(options))
export const resume = (id: string, suspendId: string, options: RequestOptions = {}): CoreStep =>
  core({ type: "environment_resume", id, payload: payload(suspendId, options) }, stepOptions(options))

const reply = (suspendId: string, code: SuspensionErrorCode | undefined, environmentId: string) =>
  code === undefined
    ? { environment_id: environmentId, suspend_id: suspendId, accepted: true }
    : { environment_id: environmentId, suspend_id: suspendId, accepted: false, error_code: code }

export const quiesced = (id: string, suspendId: string, code?: SuspensionErrorCode, environmentId: string = EnvironmentId): RuntimeStep =>
  runtime({ type: "environment_quiesced", id, payload: reply(suspendId, code, environmentId) })
export const resumed = (id: string, suspendId: string, code?: SuspensionErrorCode, environmentId: string = EnvironmentId): RuntimeStep =>
  runtime({ type: "environment_resumed", id, payload: reply(suspendId, code, environmentId) })
