/**
 * The rules a skill or plugin archive must meet beyond the zip itself (reference part 2 §6.2): the skill name
 * grammar, the archive limits, `SKILL.md` front matter that matches the metadata, and the plugin manifest
 * `.codex-plugin/plugin.json` (its full format is unconfirmed; see docs/runtime.md "runtime_prepare").
 */
import type { SourceMetadata } from "../../../proto/Execution.js"
import type { ArchiveLimits, ZipDirectory } from "./zipReader.js"

/** Skill (and plugin) archive limits: 5 MiB compressed, 20 MiB expanded, 1000 entries. */
export const CapabilityArchiveLimits: ArchiveLimits = {
  maxCompressed: 5 * 1024 * 1024,
  maxExpanded: 20 * 1024 * 1024,
  maxEntries: 1000
}

const NAME = /^[a-z0-9]+(?:[-_][a-z0-9]+)*$/

/** The skill name grammar: `^[a-z0-9]+(?:[-_][a-z0-9]+)*$`, at most 64 characters. */
export const validSkillName = (name: string): boolean => name.length <= 64 && NAME.test(name)

/** Why an archive's content does not match its metadata. */
export type ContentIssue = "missing_manifest" | "manifest_mismatch"

const unquote = (value: string): string => {
  const v = value.trim()
  if (v.length >= 2 && ((v.startsWith("\"") && v.endsWith("\"")) || (v.startsWith("'") && v.endsWith("'")))) return v.slice(1, -1)
  return v
}

/**
 * The `name` and `description` of a `SKILL.md` front matter: the file starts with a `---` line and the front
 * matter ends at the next `---` line; `key: value` lines (values optionally quoted). Undefined when absent.
 */
export const parseFrontMatter = (text: string): { readonly name?: string; readonly description?: string } | undefined => {
  const lines = text.split(/\r?\n/)
  if (lines[0] !== "---") return undefined
  const end = lines.indexOf("---", 1)
  if (end < 0) return undefined
  const out: { name?: string; description?: string } = {}
  for (const line of lines.slice(1, end)) {
    const m = /^([A-Za-z_][A-Za-z0-9_-]*):(.*)$/.exec(line)
    if (m === null) continue
    if (m[1] === "name") out.name = unquote(m[2]!)
    if (m[1] === "description") out.description = unquote(m[2]!)
  }
  return out
}

/** The front matter of a skill must name exactly the metadata's name and description. */
export const skillMatches = (text: string, metadata: SourceMetadata): boolean => {
  const fm = parseFrontMatter(text)
  return fm !== undefined && fm.name === metadata.name && fm.description?.trim() === metadata.description.trim()
}

/** A plugin manifest must be a JSON object whose `name` is the metadata's name. */
export const pluginMatches = (text: string, metadata: SourceMetadata): boolean => {
  try {
    const parsed: unknown = JSON.parse(text)
    return typeof parsed === "object" && parsed !== null && !Array.isArray(parsed) && (parsed as { name?: unknown }).name === metadata.name
  } catch {
    return false
  }
}

/** The manifest file an archive kind must carry below its root. */
export const manifestOf = (kind: "skill" | "plugin", dir: ZipDirectory): string | undefined => {
  const wanted = kind === "skill" ? `${dir.root}/SKILL.md` : `${dir.root}/.codex-plugin/plugin.json`
  const entry = dir.entries.find((e) => e.name === wanted && !e.directory)
  return entry === undefined || entry.size > 1024 * 1024 ? undefined : wanted
}
