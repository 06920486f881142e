/**
 * Path safety (issue #13, workspace/internal/safeFs.ts), as properties over generated paths and generated trees
 * (seeded, so every run checks the same cases): the grammar accepts exactly the workspace-relative paths; no
 * accepted open ever yields a file outside the root, a symlink at the final component, a special file or a
 * hard-linked file; a FIFO never hangs a read; a listing never follows a symlink.
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import { execFileSync } from "node:child_process"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import {
  components,
  openDirectoryChain,
  openDirectoryForList,
  openFileForRead,
  readPrefix,
  SafeFsError
} from "../../../src/runtime/workspace/internal/safeFs.js"
import { listDirectory } from "../../../src/runtime/workspace/internal/safeListing.js"
import { seeded } from "../../support/seededRandom.js"
import { workspaceAndOutside } from "../../support/workspaceDaemon.js"

const SECRET = "SECRET-OUTSIDE-THE-ROOT"

/** The grammar as a model: slash-separated, no leading slash, no empty/./.. element, no \\ NUL CR LF, ≤ 4096 bytes. */
const modelAccepts = (p: string, allowRoot: boolean): boolean => {
  if (p === "") return allowRoot
  if (Buffer.byteLength(p, "utf8") > 4096) return false
  if (/[\\\u0000\r\n]/.test(p)) return false
  return p.split("/").every((c) => c !== "" && c !== "." && c !== "..")
}

const reasonOf = async (f: () => Promise<unknown>): Promise<string> => {
  try {
    await f()
    return "ok"
  } catch (e) {
    if (!(e instanceof SafeFsError)) throw e
    return e.reason
  }
}

describe("safeFs path grammar", () => {
  it("accepts exactly the workspace-relative paths of the model (2000 generated paths, seed 13)", () => {
    const random = seeded(13)
    const pieces = ["a", "b.txt", "..", ".", "", "/", "\\", "\u0000", "\r", "\n", "é", "x".repeat(300), "..a", "a..", " "]
    for (let i = 0; i < 2000; i++) {
      const n = 1 + random.int(6)
      let p = ""
      for (let j = 0; j < n; j++) p += random.pick(pieces) + (random.bool(0.7) ? "/" : "")
      if (random.bool(0.2)) p = p.replace(/\/+$/, "")
      for (const allowRoot of [true, false]) {
        let accepted = true
        try {
          const parts = components(p, { allowRoot })
          assert.notInclude(parts, "..")
          assert.isFalse(p.startsWith("/"))
        } catch (e) {
          assert.instanceOf(e, SafeFsError)
          accepted = false
        }
        assert.strictEqual(accepted, modelAccepts(p, allowRoot), JSON.stringify(p))
      }
    }
  })
})


/**
 * Builds a generated tree in `root`: directories, files (content = their path), symlinks pointing inside, at
 * the outside secret, or dangling, FIFOs, and hard links to the outside secret. Returns the expected regular
 * files (the only ones a read may return) and every created path.
 */
const buildTree = (root: string, outside: string, seed: number) => {
  const random = seeded(seed)
  const files = new Map<string, string>()
  const all: Array<string> = []
  const dirs = [""]
  for (let i = 0; i < 40; i++) {
    const parent = random.pick(dirs)
    const name = `n${i}`
    const rel = parent === "" ? name : `${parent}/${name}`
    const abs = Path.join(root, rel)
    const what = random.pick(["dir", "dir", "file", "file", "file", "link_in", "link_out", "link_out_dir", "dangling", "fifo", "hardlink"] as const)
    switch (what) {
      case "dir":
        Fs.mkdirSync(abs)
        dirs.push(rel)
        break
      case "file":
        Fs.writeFileSync(abs, rel)
        files.set(rel, rel)
        break
      case "link_in":
        Fs.symlinkSync(Path.join(root, random.pick(dirs)), abs)
        break
      case "link_out":
        Fs.symlinkSync(Path.join(outside, "secret"), abs)
        break
      case "link_out_dir":
        Fs.symlinkSync(outside, abs)
        break
      case "dangling":
        Fs.symlinkSync(Path.join(root, "missing"), abs)
        break
      case "fifo":
        execFileSync("mkfifo", [abs])
        break
      case "hardlink":
        Fs.linkSync(Path.join(outside, "secret"), abs)
        break
    }
    all.push(rel)
  }
  return { files, all, dirs }
}

describe("safeFs over generated trees", () => {
  it.effect("a read returns only regular in-root files, never through a final symlink (6 trees × every path, seeds 1..6)", () =>
    Effect.gen(function* () {
      const seen = new Set<string>()
      for (let seed = 1; seed <= 6; seed++) {
        const { ws, out } = yield* workspaceAndOutside
        Fs.writeFileSync(Path.join(out.root, "secret"), SECRET)
        const { files, all } = buildTree(ws.root, out.root, seed)
        // Every created path, plus paths through intermediate symlinks and missing ones.
        const random = seeded(seed * 100)
        const probes = [...all, ...all.map((p) => `${p}/${random.pick(all).split("/").pop()}`), "missing", "n0/missing/x"]
        for (const probe of probes) {
          const result = yield* Effect.promise(async () => {
            try {
              const { handle } = await openFileForRead(ws.root, probe)
              try {
                const real = await Fs.promises.readlink(`/proc/self/fd/${handle.fd}`)
                const { bytes } = await readPrefix(handle, 1 << 20)
                return { ok: true as const, real, text: Buffer.from(bytes).toString("utf8") }
              } finally {
                await handle.close()
              }
            } catch (e) {
              if (!(e instanceof SafeFsError)) throw e
              return { ok: false as const, reason: e.reason }
            }
          })
          seen.add(result.ok ? "ok" : result.reason)
          if (result.ok) {
            assert.notStrictEqual(result.text, SECRET, `seed ${seed} ${probe}`)
            assert.isTrue(result.real.startsWith(`${ws.root}/`), `seed ${seed} ${probe}`)
            // The file read is the in-root regular file reached by the path (possibly via an in-root directory link).
            assert.strictEqual(result.text, Path.relative(ws.root, result.real), `seed ${seed} ${probe}`)
            assert.isTrue(files.has(result.text))
            assert.isFalse(Fs.lstatSync(Path.join(ws.root, probe)).isSymbolicLink(), `seed ${seed} ${probe}`)
          } else {
            assert.include(
              ["not_found", "symlink", "special_file", "hard_link", "is_directory", "not_directory", "escapes_root"],
              result.reason,
              `seed ${seed} ${probe}`
            )
          }
        }
        // Every plain regular file is readable.
        for (const [rel, content] of files) {
          const text = yield* Effect.promise(async () => {
            const { handle } = await openFileForRead(ws.root, rel)
            try {
              return Buffer.from((await readPrefix(handle, 1 << 20)).bytes).toString("utf8")
            } finally {
              await handle.close()
            }
          })
          assert.strictEqual(text, content)
        }
      }
      // The generated trees exercise every outcome.
      assert.deepStrictEqual([...seen].sort(), ["escapes_root", "hard_link", "is_directory", "not_directory", "not_found", "ok", "special_file", "symlink"])
    }))

  it.effect("a listing is one level, lists symlinks without following them, and never escapes (seeds 1..6)", () =>
    Effect.gen(function* () {
      for (let seed = 1; seed <= 6; seed++) {
        const { ws, out } = yield* workspaceAndOutside
        Fs.writeFileSync(Path.join(out.root, "secret"), SECRET)
        const { all, dirs } = buildTree(ws.root, out.root, seed)
        for (const probe of [...dirs, ...all]) {
          const result = yield* Effect.promise(async () => {
            try {
              const dir = await openDirectoryForList(ws.root, probe)
              try {
                return { ok: true as const, listing: await listDirectory(dir, 1024) }
              } finally {
                await dir.close()
              }
            } catch (e) {
              if (!(e instanceof SafeFsError)) throw e
              return { ok: false as const, reason: e.reason }
            }
          })
          const stat = probe === "" ? Fs.lstatSync(ws.root) : Fs.lstatSync(Path.join(ws.root, probe))
          if (!stat.isDirectory()) {
            assert.isFalse(result.ok, `seed ${seed} ${probe}`)
            if (!result.ok) assert.strictEqual(result.reason, "not_directory")
            continue
          }
          assert.isTrue(result.ok, `seed ${seed} ${probe}`)
          if (!result.ok) continue
          const expected = Fs.readdirSync(Path.join(ws.root, probe)).sort()
          assert.deepStrictEqual(result.listing.entries.map((e) => e.name), expected)
          for (const entry of result.listing.entries) {
            const s = Fs.lstatSync(Path.join(ws.root, probe, entry.name))
            const kind = s.isFile() ? "file" : s.isDirectory() ? "directory" : s.isSymbolicLink() ? "symlink" : "other"
            assert.strictEqual(entry.kind, kind)
            assert.strictEqual(entry.size, kind === "file" ? s.size : null)
          }
        }
      }
    }))

  it.effect("a FIFO is refused without hanging; a directory chain through an outside link is refused", () =>
    Effect.gen(function* () {
      const { ws, out } = yield* workspaceAndOutside
      execFileSync("mkfifo", [ws.at("pipe")])
      Fs.symlinkSync(out.root, ws.at("out"))
      Fs.writeFileSync(Path.join(out.root, "secret"), SECRET)
      assert.strictEqual(yield* Effect.promise(() => reasonOf(() => openFileForRead(ws.root, "pipe"))), "special_file")
      assert.strictEqual(yield* Effect.promise(() => reasonOf(() => openFileForRead(ws.root, "out/secret"))), "escapes_root")
      assert.strictEqual(yield* Effect.promise(() => reasonOf(() => openDirectoryForList(ws.root, "out"))), "not_directory")
      assert.strictEqual(
        yield* Effect.promise(() => reasonOf(() => openDirectoryChain(ws.root, ["out"], { create: false, followLast: true }))),
        "escapes_root"
      )
      assert.strictEqual(
        yield* Effect.promise(() => reasonOf(() => openDirectoryChain(ws.root, ["out", "new"], { create: true, followLast: true }))),
        "escapes_root"
      )
      assert.isFalse(Fs.existsSync(Path.join(out.root, "new")))
    }))
})
