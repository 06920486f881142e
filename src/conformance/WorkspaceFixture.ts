/**
 * The workspace scenarios' fixture on disk (scenarios/Workspace.ts `WorkspaceFixture`): the tree a Runtime under
 * test is bound to, with explicit modes and one fixed mtime, so every read, listing and export of it is exact.
 * The in-process runner makes a fresh copy per scenario; the runtime kit makes one copy for the Runtime it serves
 * and restores it before each workspace scenario (a write scenario changes it).
 */
import { Effect, Schema, type Scope } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { FixtureMtimeSeconds, WorkspaceFixture } from "../../scenarios/Workspace.js"

/** The fixture could not be written or removed (the reason is a local errno text, never peer data). */
export class FixtureFailed extends Schema.TaggedError<FixtureFailed>()("FixtureFailed", {
  directory: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `cannot prepare the workspace fixture in ${this.directory} (${this.reason})`
  }
}

const attempt = (directory: string, f: () => void) =>
  Effect.try({ try: f, catch: (e) => new FixtureFailed({ directory, reason: e instanceof Error ? e.message : String(e) }) })

/**
 * Empties `directory` (it is kept: a Runtime may be bound to it) and writes the fixture tree into it: every
 * entry with its mode, then every mtime (after all creations, which move their parents' mtimes).
 */
export const restore = (directory: string): Effect.Effect<void, FixtureFailed> =>
  attempt(directory, () => {
    for (const name of Fs.readdirSync(directory)) Fs.rmSync(Path.join(directory, name), { recursive: true, force: true })
    for (const entry of WorkspaceFixture) {
      const path = Path.join(directory, entry.path)
      if (entry.kind === "directory") {
        Fs.mkdirSync(path)
        Fs.chmodSync(path, entry.mode)
      } else if (entry.kind === "file") {
        Fs.writeFileSync(path, entry.content)
        Fs.chmodSync(path, entry.mode)
      } else {
        Fs.symlinkSync(entry.target, path)
      }
    }
    for (const entry of WorkspaceFixture) {
      const path = Path.join(directory, entry.path)
      if (entry.kind === "symlink") Fs.lutimesSync(path, FixtureMtimeSeconds, FixtureMtimeSeconds)
      else Fs.utimesSync(path, FixtureMtimeSeconds, FixtureMtimeSeconds)
    }
  })

/** A new temporary directory holding the fixture (its real path); removed with everything in it when the scope closes. */
export const scoped: Effect.Effect<string, FixtureFailed, Scope.Scope> = Effect.acquireRelease(
  Effect.gen(function* () {
    let directory = Os.tmpdir()
    yield* attempt(directory, () => {
      directory = Fs.realpathSync(Fs.mkdtempSync(Path.join(Os.tmpdir(), "agentwire-workspace-fixture-")))
    })
    yield* restore(directory).pipe(Effect.onError(() => Effect.sync(() => Fs.rmSync(directory, { recursive: true, force: true }))))
    return directory
  }),
  (directory) => Effect.sync(() => Fs.rmSync(directory, { recursive: true, force: true }))
)
