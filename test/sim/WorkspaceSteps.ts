/**
 * The workspace steps of a schedule (Plan.ts): `self_hosted` Sessions bound to the device's Environment (some with
 * initialization files, which Core sends as `runtime_prepare` transfers before the Session's first Turn), and the
 * operator's Files operations on them (on the n-th one, or the next idle one) — write, read, and the settle of a write left `unknown` (as the operator
 * finds the file: the in-memory workspace tells). Steps are intentions: "the n-th self_hosted Session" is taken
 * modulo the ones that exist; without any, the step does nothing.
 */
import { Context, Effect, Option } from "effect"
import { SqlClient } from "effect/sql"
import { SessionStore } from "../../src/core/dev/SessionStore.js"
import { TurnStore } from "../../src/core/dev/TurnStore.js"
import type { Checker } from "./Invariants.js"
import { type WorkspaceLedger, writeTempName } from "./MemoryWorkspace.js"
import type { PlannedFile, Step } from "./Plan.js"
import * as World from "./World.js"

/** The bytes of a planned file: a function of its path and size only. */
export const fileBytes = (file: PlannedFile): Uint8Array => {
  let h = 0
  for (let i = 0; i < file.path.length; i++) h = (h * 31 + file.path.charCodeAt(i)) & 0xff
  const bytes = new Uint8Array(file.size)
  for (let i = 0; i < bytes.length; i++) bytes[i] = (h + i * 7 + (i >> 9)) & 0xff
  return bytes
}

export interface WorkspaceContext {
  readonly world: World.World
  readonly ws: WorkspaceLedger
  readonly checker: Checker
  /** The ids of the `self_hosted` Sessions, in creation order. */
  readonly hosted: Array<string>
  readonly trace: (line: string) => void
  readonly operate: <A, E>(label: string, action: Effect.Effect<A, E>) => Effect.Effect<void>
}

const toBase64 = (bytes: Uint8Array) => Buffer.from(bytes).toString("base64")

/** Creates a `self_hosted` Session `id` bound on the device, with its initialization files (if any). */
export const createHosted = (
  ctx: WorkspaceContext,
  id: string,
  configuration: Record<string, unknown>,
  init: ReadonlyArray<PlannedFile>
) =>
  Effect.gen(function* () {
    const store = Context.get(ctx.world.storeContext, SessionStore)
    yield* store.create({
      sessionId: id,
      agentKind: "scripted",
      environmentType: "self_hosted",
      environment: World.selfHosted,
      configuration,
      deviceId: World.DeviceId
    }).pipe(Effect.orDie)
    for (const f of init) if (f.fault !== undefined) ctx.ws.faults.set(f.path, f.fault)
    if (init.length > 0) {
      const files = init.map((f) => ({ path: `/workspace/${f.path}`, content_base64: toBase64(fileBytes(f)) }))
      yield* ctx.world.sessionInitialization.create(id, { files }, undefined).pipe(Effect.orDie)
    }
    ctx.hosted.push(id)
  })

/** The first write of `session` left `unknown`, if any. */
const unknownWrite = (ctx: WorkspaceContext, session: string) =>
  Effect.gen(function* () {
    const sql = Context.get(ctx.world.storeContext, SqlClient.SqlClient)
    const rows = yield* sql`SELECT reservation_id FROM write_reservations WHERE session_id = ${session} AND status = 'unknown'
      ORDER BY created_at_ms LIMIT 1`.pipe(Effect.orElseSucceed(() => []))
    return rows.length === 0 ? undefined : String(rows[0]!.reservation_id)
  })

/** The n-th self_hosted Session, or the next one without an unfinished Turn (a Files write needs an idle Session). */
const idleHosted = (ctx: WorkspaceContext, n: number) =>
  Effect.gen(function* () {
    const turns = Context.get(ctx.world.storeContext, TurnStore)
    for (let i = 0; i < ctx.hosted.length; i++) {
      const session = ctx.hosted[(n + i) % ctx.hosted.length]!
      const unfinished = yield* turns.unfinishedOf(session).pipe(Effect.orElseSucceed(() => Option.none()))
      if (Option.isNone(unfinished)) return session
    }
    return ctx.hosted[n % ctx.hosted.length]!
  })

/** Runs a write, read or settle step. */
export const execute = (ctx: WorkspaceContext, step: Extract<Step, { readonly k: "write" | "read" | "settle" }>) =>
  Effect.gen(function* () {
    const core = ctx.world.core()
    if (ctx.hosted.length === 0) return
    const session = yield* idleHosted(ctx, step.session)
    if (core === undefined) return ctx.trace(`  ${step.k} on ${session}: core down`)
    switch (step.k) {
      case "write": {
        if (step.file.fault !== undefined) ctx.ws.faults.set(step.file.path, step.file.fault)
        return yield* ctx.operate(`write ${step.file.path} on ${session}`, core.files.write(session, step.file.path, fileBytes(step.file)))
      }
      case "read":
        return yield* ctx.operate(
          `read ${step.path} on ${session}`,
          Effect.map(core.files.read(session, step.path, 1024 * 1024), (r) => ({ size: r.data.length, truncated: r.truncated }))
        )
      case "settle": {
        const writeId = yield* unknownWrite(ctx, session)
        if (writeId === undefined) return
        // The operator looks at the workspace: the file is there exactly when the install was applied.
        const status = (ctx.ws.installs.get(writeTempName(writeId)) ?? 0) > 0 ? "completed" : "failed"
        ctx.checker.workspace.operatorSettled(writeId)
        return yield* ctx.operate(`settle ${writeId} ${status}`, core.files.settle(session, writeId, status))
      }
    }
  })

/** Checks the workspace invariants against Core's store (after every step). */
export const check = (ctx: WorkspaceContext, sessions: ReadonlyArray<string>) =>
  ctx.checker.workspace.store(
    Context.get(ctx.world.storeContext, SqlClient.SqlClient),
    ctx.world.initializationStore,
    sessions
  )
