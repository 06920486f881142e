/**
 * The scripted harness's workspace steps (`write_file`, `read_file`): a Turn of a bound daemon runs with the
 * workspace root as its working directory, so relative paths resolve below it, through the same path-safe
 * access as the workspace families (workspace/internal/safeFs.ts). A refusal is a finite reason, never an
 * errno text or a path.
 */
import * as FsP from "node:fs/promises"
import { Effect } from "effect"
import {
  attempt,
  components,
  fdPath,
  O_CREAT,
  O_NOFOLLOW,
  O_WRONLY,
  openDirectoryChain,
  openFileForRead,
  readPrefix,
  SafeFsError,
  type SafeFsReason
} from "../../workspace/internal/safeFs.js"

const MaxReadBytes = 1024 * 1024

const reasonOf = (e: unknown): SafeFsReason => (e instanceof SafeFsError ? e.reason : "io")

/** Writes `text` to `path` below `root` (truncating an existing regular file; a symlink is refused). */
export const writeFile = (root: string, path: string, text: string): Effect.Effect<void, SafeFsReason> =>
  Effect.tryPromise({
    try: async () => {
      const parts = components(path, { allowRoot: false })
      const dir = await openDirectoryChain(root, parts.slice(0, -1), { create: true, followLast: true })
      try {
        const name = parts[parts.length - 1]!
        const file = await attempt(() => FsP.open(fdPath(dir.fd, name), O_WRONLY | O_CREAT | O_NOFOLLOW | FsP.constants.O_NONBLOCK, 0o644))
        try {
          const stat = await attempt(() => file.stat())
          if (!stat.isFile()) throw new SafeFsError("special_file")
          await attempt(() => file.truncate(0))
          await attempt(() => file.writeFile(text))
        } finally {
          await file.close()
        }
      } finally {
        await dir.close().catch(() => undefined)
      }
    },
    catch: reasonOf
  })

/** Reads at most 1 MiB of `path` below `root` as UTF-8 text. */
export const readFile = (root: string, path: string): Effect.Effect<string, SafeFsReason> =>
  Effect.tryPromise({
    try: async () => {
      const { handle } = await openFileForRead(root, path)
      try {
        const { bytes } = await readPrefix(handle, MaxReadBytes)
        return new TextDecoder().decode(bytes)
      } finally {
        await handle.close()
      }
    },
    catch: reasonOf
  })
