/**
 * The persisted initialization of each Session (`session_initializations`, migration 8): the request with its
 * bytes until the initialization ends (then cleared: nothing is ever sent twice, so nothing needs keeping),
 * the public summary (setup command, env names), the state, the step being attempted, each step's progress,
 * and `committing`: whether the current step's commit may have been sent (written before it is), which is what
 * makes an interrupted step `unknown` rather than `failed` at the next start.
 */
import { Clock, Context, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import type { InitializationRequest, StepProgress, StepState } from "./InitializationSpec.js"
import { type StoreFailed, storeFailed, toBool, toIntOrUndefined, toStringOrUndefined } from "./StoreErrors.js"

export interface InitSummary {
  readonly env_names: ReadonlyArray<string>
  readonly setup: { readonly command: string; readonly cwd: string } | null
}

export interface InitRecord {
  readonly sessionId: string
  /** The request with its bytes; `None` once the initialization ended. */
  readonly request: Option.Option<InitializationRequest>
  readonly summary: InitSummary
  readonly state: StepState
  readonly currentStep: number | undefined
  readonly steps: ReadonlyArray<StepProgress>
  readonly committing: boolean
  readonly detail: string | undefined
}

export interface InitUpdate {
  readonly state: StepState
  readonly currentStep: number | undefined
  readonly steps: ReadonlyArray<StepProgress>
  readonly committing: boolean
  readonly detail: string | undefined
  /** Clears the stored bytes (the initialization ended). */
  readonly clearRequest: boolean
}

export class InitializationStore extends Context.Service<InitializationStore, {
  readonly create: (
    sessionId: string,
    request: InitializationRequest,
    summary: InitSummary,
    steps: ReadonlyArray<StepProgress>
  ) => Effect.Effect<void, StoreFailed>
  readonly get: (sessionId: string) => Effect.Effect<Option.Option<InitRecord>, StoreFailed>
  readonly update: (sessionId: string, update: InitUpdate) => Effect.Effect<void, StoreFailed>
}>()("agentwire/core/dev/InitializationStore") {}

const read = (row: Record<string, unknown>): InitRecord => {
  const request = toStringOrUndefined(row.request_json)
  return {
    sessionId: String(row.session_id),
    request: request === undefined ? Option.none() : Option.some(JSON.parse(request) as InitializationRequest),
    summary: JSON.parse(String(row.summary_json)) as InitSummary,
    state: String(row.state) as StepState,
    currentStep: toIntOrUndefined(row.current_step),
    steps: JSON.parse(String(row.steps_json)) as ReadonlyArray<StepProgress>,
    committing: toBool(row.committing) === true,
    detail: toStringOrUndefined(row.detail)
  }
}

const make = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  return InitializationStore.of({
    create: (sessionId, request, summary, steps) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        sql`INSERT INTO session_initializations ${
          sql.insert({
            session_id: sessionId,
            request_json: JSON.stringify(request),
            summary_json: JSON.stringify(summary),
            state: "pending",
            current_step: null,
            steps_json: JSON.stringify(steps),
            committing: false,
            detail: null,
            updated_at_ms: now
          })
        }`).pipe(Effect.asVoid, storeFailed("create_initialization")),
    get: (sessionId) =>
      sql`SELECT * FROM session_initializations WHERE session_id = ${sessionId}`.pipe(
        Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), read)),
        storeFailed("get_initialization")
      ),
    update: (sessionId, u) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        u.clearRequest
          ? sql`UPDATE session_initializations SET state = ${u.state}, current_step = ${u.currentStep ?? null},
              steps_json = ${JSON.stringify(u.steps)}, committing = ${u.committing}, detail = ${u.detail ?? null},
              request_json = NULL, updated_at_ms = ${now} WHERE session_id = ${sessionId}`
          : sql`UPDATE session_initializations SET state = ${u.state}, current_step = ${u.currentStep ?? null},
              steps_json = ${JSON.stringify(u.steps)}, committing = ${u.committing}, detail = ${u.detail ?? null},
              updated_at_ms = ${now} WHERE session_id = ${sessionId}`).pipe(Effect.asVoid, storeFailed("update_initialization"))
  })
})

export const layer = Layer.effect(InitializationStore, make)
