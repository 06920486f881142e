/**
 * The bounded zip reader of runtime_prepare archives (src/runtime/transfer/internal/zipReader.ts): property tests
 * of the entry-name rules (seeded, reproducible), the refusals (traversal, absolute paths, symlinks, special
 * entries, duplicates, several roots, too many entries, encryption / zip64-free formats) and zip bombs, which are
 * stopped while inflating: the output never exceeds the declared size or the 20 MiB total.
 */
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { CapabilityArchiveLimits, parseFrontMatter, skillMatches, validSkillName } from "../../../src/runtime/transfer/internal/capabilityRules.js"
import { ArchiveRefused, checkEntryName, extract, readDirectory } from "../../../src/runtime/transfer/internal/zipReader.js"
import { seeded } from "../../support/seededRandom.js"
import { buildZip, skillZip } from "../../support/zipWriter.js"

const issueOf = (f: () => unknown): string => {
  try {
    f()
    return "ok"
  } catch (e) {
    if (e instanceof ArchiveRefused) return e.issue
    throw e
  }
}

const issueOfAsync = async (f: () => Promise<unknown>): Promise<string> => {
  try {
    await f()
    return "ok"
  } catch (e) {
    if (e instanceof ArchiveRefused) return e.issue
    throw e
  }
}

const tempDir = () => Fs.mkdtempSync(Path.join(Os.tmpdir(), "agentwire-zip-"))

describe("zip entry names", () => {
  it("accepts clean relative names and refuses every unsafe form (seeded property)", () => {
    const random = seeded(1401)
    const segments = ["a", "b.txt", "SKILL.md", "dir", "é", "x-y_z", ".hidden", "...", "a b"]
    const bad = ["..", ".", "", "a\\b", "a\u0000b", "a\rb", "a\nb"]
    for (let i = 0; i < 500; i++) {
      const parts = Array.from({ length: 1 + random.int(4) }, () => random.pick(segments))
      const clean = parts.join("/")
      assert.deepStrictEqual(checkEntryName(Buffer.from(clean)), { name: clean, directory: false }, clean)
      assert.deepStrictEqual(checkEntryName(Buffer.from(`${clean}/`)), { name: clean, directory: true }, clean)
      // One unsafe segment anywhere, an absolute form or a drive letter is refused.
      const at = random.int(parts.length) // before a segment: a trailing "" would be a directory slash
      const broken = [...parts.slice(0, at), random.pick(bad), ...parts.slice(at)].join("/")
      assert.strictEqual(issueOf(() => checkEntryName(Buffer.from(broken))), "unsafe_name", JSON.stringify(broken))
      assert.strictEqual(issueOf(() => checkEntryName(Buffer.from(`/${clean}`))), "unsafe_name")
      assert.strictEqual(issueOf(() => checkEntryName(Buffer.from(`C:${clean}`))), "unsafe_name")
    }
    assert.strictEqual(issueOf(() => checkEntryName(new Uint8Array([0x61, 0xff, 0x62]))), "unsafe_name")
    assert.strictEqual(issueOf(() => checkEntryName(Buffer.from("a".repeat(4097)))), "unsafe_name")
  })
})

describe("zip directory", () => {
  it("reads a valid archive with a single root", () => {
    const dir = readDirectory(skillZip("demo", "A demo."), CapabilityArchiveLimits)
    assert.strictEqual(dir.root, "demo")
    assert.deepStrictEqual(dir.entries.map((e) => [e.name, e.directory]), [["demo", true], ["demo/SKILL.md", false]])
  })

  it("refuses traversal, symlinks, special entries, duplicates, several roots and top-level files", () => {
    const cases: Array<[string, Buffer]> = [
      ["unsafe_name", buildZip([{ name: "demo/../../etc/passwd", data: "x" }])],
      ["unsafe_name", buildZip([{ name: "/etc/passwd", data: "x" }])],
      ["symlink", buildZip([{ name: "demo/" }, { name: "demo/link", data: "/etc/passwd", mode: 0o120777 }])],
      ["special_entry", buildZip([{ name: "demo/" }, { name: "demo/fifo", mode: 0o010644 }])],
      ["special_entry", buildZip([{ name: "demo/" }, { name: "demo/dev", mode: 0o020644 }])],
      ["duplicate_entry", buildZip([{ name: "demo/a", data: "1" }, { name: "demo/a", data: "2" }])],
      ["not_single_root", buildZip([{ name: "demo/a", data: "1" }, { name: "other/b", data: "2" }])],
      ["not_single_root", buildZip([{ name: "SKILL.md", data: "1" }])],
      ["not_zip", Buffer.from("not a zip at all, just some bytes here")]
    ]
    for (const [issue, zip] of cases) assert.strictEqual(issueOf(() => readDirectory(zip, CapabilityArchiveLimits)), issue)
  })

  it("counts entries from the end record: 1000 pass, 1001 are refused before the directory is walked", () => {
    const many = (n: number) => buildZip(Array.from({ length: n }, (_, i) => ({ name: i === 0 ? "r/" : `r/f${i}`, method: 0 as const })))
    assert.strictEqual(readDirectory(many(1000), CapabilityArchiveLimits).entries.length, 1000)
    assert.strictEqual(issueOf(() => readDirectory(many(1001), CapabilityArchiveLimits)), "too_many_entries")
  })

  it("refuses an archive over 5 MiB compressed and declared sizes over 20 MiB", () => {
    const limits = CapabilityArchiveLimits
    assert.strictEqual(issueOf(() => readDirectory(new Uint8Array(limits.maxCompressed + 1), limits)), "compressed_too_large")
    const declared = buildZip([{ name: "r/a", data: "x", declaredSize: limits.maxExpanded + 1 }])
    assert.strictEqual(issueOf(() => readDirectory(declared, limits)), "expanded_too_large")
  })
})

describe("zip extraction", () => {
  it("extracts files and directories with their content", async () => {
    const target = tempDir()
    try {
      const zip = skillZip("demo", "A demo.", { extra: [{ name: "demo/scripts/run.sh", data: "echo hi\n", mode: 0o100755 }] })
      const dir = readDirectory(zip, CapabilityArchiveLimits)
      await extract(zip, dir, target, CapabilityArchiveLimits)
      assert.include(Fs.readFileSync(Path.join(target, "demo/SKILL.md"), "utf8"), "name: demo")
      assert.strictEqual(Fs.readFileSync(Path.join(target, "demo/scripts/run.sh"), "utf8"), "echo hi\n")
      assert.strictEqual(Fs.statSync(Path.join(target, "demo/scripts/run.sh")).mode & 0o777, 0o755)
    } finally {
      Fs.rmSync(target, { recursive: true, force: true })
    }
  })

  it("stops a zip bomb that lies about its size at the first chunk past the declared size", async () => {
    const target = tempDir()
    try {
      // 64 MiB of zeros deflate to ~64 KiB; the entry claims 1 KiB.
      const zip = buildZip([{ name: "r/bomb", data: Buffer.alloc(64 * 1024 * 1024), declaredSize: 1024 }])
      assert.isBelow(zip.length, 100 * 1024)
      const dir = readDirectory(zip, CapabilityArchiveLimits)
      assert.strictEqual(await issueOfAsync(() => extract(zip, dir, target, CapabilityArchiveLimits)), "corrupt")
      // Nothing past the bound reached the disk.
      assert.isAtMost(Fs.statSync(Path.join(target, "r/bomb")).size, 1024)
    } finally {
      Fs.rmSync(target, { recursive: true, force: true })
    }
  })

  it("bounds the expanded total while inflating (a small limit stops a truthful archive)", async () => {
    const target = tempDir()
    try {
      const zip = buildZip([{ name: "r/a", data: Buffer.alloc(300 * 1024) }, { name: "r/b", data: Buffer.alloc(300 * 1024) }])
      const limits = { ...CapabilityArchiveLimits, maxExpanded: 400 * 1024 }
      assert.strictEqual(issueOf(() => readDirectory(zip, limits)), "expanded_too_large")
      const dir = readDirectory(zip, CapabilityArchiveLimits)
      assert.strictEqual(await issueOfAsync(() => extract(zip, dir, target, limits)), "expanded_too_large")
      assert.isAtMost(Fs.statSync(Path.join(target, "r/b")).size, 100 * 1024)
    } finally {
      Fs.rmSync(target, { recursive: true, force: true })
    }
  })

  it("refuses a CRC mismatch", async () => {
    const target = tempDir()
    try {
      const zip = buildZip([{ name: "r/a", data: "hello", method: 0 }])
      zip[30 + 3] = "j".charCodeAt(0) // the stored data, after the 30-byte header and the 3-byte name
      const dir = readDirectory(zip, CapabilityArchiveLimits)
      assert.strictEqual(await issueOfAsync(() => extract(zip, dir, target, CapabilityArchiveLimits)), "corrupt")
    } finally {
      Fs.rmSync(target, { recursive: true, force: true })
    }
  })
})

describe("skill rules", () => {
  it("name grammar", () => {
    for (const ok of ["a", "demo", "my-skill", "my_skill2", "a".repeat(64)]) assert.isTrue(validSkillName(ok), ok)
    for (const bad of ["", "A", "-a", "a-", "a--b", "a.b", "a b", "a".repeat(65), "../x"]) assert.isFalse(validSkillName(bad), bad)
  })

  it("front matter must match the metadata", () => {
    const text = "---\nname: demo\ndescription: \"A demo.\"\n---\nbody\n"
    assert.deepStrictEqual(parseFrontMatter(text), { name: "demo", description: "A demo." })
    assert.isTrue(skillMatches(text, { type: "inline", name: "demo", description: "A demo." }))
    assert.isFalse(skillMatches(text, { type: "inline", name: "other", description: "A demo." }))
    assert.isFalse(skillMatches(text, { type: "inline", name: "demo", description: "Else." }))
    assert.isFalse(skillMatches("no front matter", { type: "inline", name: "demo", description: "A demo." }))
  })
})
