/**
 * The `agentwire sessions create` flags of a Session's environment initialization (docs/dev-core.md "Session
 * initialization"): the CLI reads every local file and sends its bytes (Core never reads a path of its own
 * machine for an operator).
 *
 *   --init-file LOCAL:/workspace/PATH   a local file installed at that logical path (repeatable)
 *   --init-skill ZIP                    a skill archive; its name and description are read from its SKILL.md (repeatable)
 *   --init-env-file FILE                NAME=VALUE lines the setup command runs with (values stay off argv)
 *   --init-setup CMD                    the setup command (`/bin/sh -c CMD` on the device)
 *   --init-setup-cwd /workspace/DIR     its working directory (default /workspace)
 *   --init-setup-network enabled|disabled
 */
import { Effect, Option } from "effect"
import { Flag } from "effect/cli"
import { readFileSync } from "node:fs"
import { inflateRawSync } from "node:zlib"
import { CapabilityArchiveLimits, manifestOf, parseFrontMatter } from "../../runtime/transfer/internal/capabilityRules.js"
import { readDirectory } from "../../runtime/transfer/internal/zipReader.js"
import { CommandFailed, ExitCode } from "../Exit.js"

export const initFlags = {
  initFile: Flag.String("init-file").pipe(
    Flag.withDescription("LOCAL:/workspace/PATH — install this local file at that path before the first Turn (repeatable)"),
    Flag.atLeast(0)
  ),
  initSkill: Flag.String("init-skill").pipe(
    Flag.withDescription("A skill zip (one root directory with SKILL.md; name and description from its front matter), installed under .agentwire/skills/NAME (repeatable)"),
    Flag.atLeast(0)
  ),
  initEnvFile: Flag.String("init-env-file").pipe(
    Flag.withDescription("A file of NAME=VALUE lines the setup command runs with (values are never printed or returned)"),
    Flag.optional
  ),
  initSetup: Flag.String("init-setup").pipe(Flag.withDescription("A setup command run in the workspace before the first Turn"), Flag.optional),
  initSetupCwd: Flag.String("init-setup-cwd").pipe(Flag.withDescription("The setup command's directory, under /workspace (default /workspace)"), Flag.optional),
  initSetupNetwork: Flag.Literals("init-setup-network", ["enabled", "disabled"]).pipe(
    Flag.withDescription("Network for the setup command (default: enabled only on an Environment with network access enabled)"),
    Flag.optional
  )
}

export interface InitFlags {
  readonly initFile: ReadonlyArray<string>
  readonly initSkill: ReadonlyArray<string>
  readonly initEnvFile: Option.Option<string>
  readonly initSetup: Option.Option<string>
  readonly initSetupCwd: Option.Option<string>
  readonly initSetupNetwork: Option.Option<"enabled" | "disabled">
}

const usage = (text: string) => new CommandFailed({ text, exitCode: ExitCode.usage })

const readLocal = (path: string, what: string) =>
  Effect.try({ try: () => readFileSync(path), catch: () => usage(`${what}: cannot read ${path}`) })

/** The name and description a skill archive's `SKILL.md` front matter declares. */
export const skillMetadata = (zip: Uint8Array): { readonly name: string; readonly description: string } | string => {
  try {
    const dir = readDirectory(zip, CapabilityArchiveLimits)
    const manifest = manifestOf("skill", dir)
    const entry = manifest === undefined ? undefined : dir.entries.find((e) => e.name === manifest)
    if (entry === undefined) return "no <root>/SKILL.md"
    const view = Buffer.from(zip.buffer, zip.byteOffset, zip.byteLength)
    const start = entry.localOffset + 30 + view.readUInt16LE(entry.localOffset + 26) + view.readUInt16LE(entry.localOffset + 28)
    const data = view.subarray(start, start + entry.compressedSize)
    const text = (entry.method === 8 ? inflateRawSync(data, { maxOutputLength: 1024 * 1024 }) : data).toString("utf8")
    const fm = parseFrontMatter(text)
    if (fm?.name === undefined || fm.description === undefined) return "SKILL.md has no front matter with name and description"
    return { name: fm.name, description: fm.description.trim() }
  } catch (e) {
    return e instanceof Error && e.name === "ArchiveRefused" ? `not a valid skill archive (${e.message})` : "not a valid skill archive"
  }
}

/** The `initialization` member of the create request, or nothing when no flag was given. */
export const initializationBody = (c: InitFlags) =>
  Effect.gen(function* () {
    const given = c.initFile.length > 0 || c.initSkill.length > 0 || Option.isSome(c.initEnvFile) || Option.isSome(c.initSetup)
    if (!given) {
      if (Option.isSome(c.initSetupCwd) || Option.isSome(c.initSetupNetwork)) return yield* usage("--init-setup-cwd / --init-setup-network need --init-setup")
      return undefined
    }
    const files = []
    for (const spec of c.initFile) {
      const at = spec.lastIndexOf(":/workspace/")
      if (at <= 0) return yield* usage(`--init-file ${spec}: expected LOCAL:/workspace/PATH`)
      const bytes = yield* readLocal(spec.slice(0, at), "--init-file")
      files.push({ path: spec.slice(at + 1), content_base64: bytes.toString("base64") })
    }
    const skills = []
    for (const path of c.initSkill) {
      const zip = yield* readLocal(path, "--init-skill")
      const meta = skillMetadata(zip)
      if (typeof meta === "string") return yield* usage(`--init-skill ${path}: ${meta}`)
      skills.push({ ...meta, archive_base64: zip.toString("base64") })
    }
    let env: Record<string, string> | undefined
    if (Option.isSome(c.initEnvFile)) {
      const text = (yield* readLocal(c.initEnvFile.value, "--init-env-file")).toString("utf8")
      env = {}
      for (const [n, line] of text.split(/\r?\n/).entries()) {
        if (line.trim() === "" || line.trimStart().startsWith("#")) continue
        const eq = line.indexOf("=")
        // Never echo the line: it may hold a secret.
        if (eq <= 0) return yield* usage(`--init-env-file: line ${n + 1} is not NAME=VALUE`)
        env[line.slice(0, eq).trim()] = line.slice(eq + 1)
      }
    }
    if (Option.isNone(c.initSetup) && (Option.isSome(c.initSetupCwd) || Option.isSome(c.initSetupNetwork) || env !== undefined)) {
      return yield* usage("--init-env-file / --init-setup-cwd / --init-setup-network need --init-setup")
    }
    const setup = Option.isNone(c.initSetup) ? undefined : {
      command: c.initSetup.value,
      ...(Option.isSome(c.initSetupCwd) ? { cwd: c.initSetupCwd.value } : {}),
      ...(Option.isSome(c.initSetupNetwork) ? { network: c.initSetupNetwork.value } : {})
    }
    return {
      ...(files.length > 0 ? { files } : {}),
      ...(skills.length > 0 ? { skills } : {}),
      ...(env !== undefined ? { env } : {}),
      ...(setup !== undefined ? { setup } : {})
    }
  })

/** The human lines of a Session's initialization (`sessions show`). */
export const initializationLines = (init: any): ReadonlyArray<string> =>
  init === null || init === undefined ? [] : [
    `initialization ${init.state}  ${init.bytes_sent}/${init.bytes_total} bytes${init.detail ? `  (${init.detail})` : ""}`,
    ...init.steps.map((s: any, i: number) =>
      `  ${i === init.current_step ? "*" : " "} ${String(s.kind).padEnd(9)} ${String(s.state).padEnd(9)} ${s.bytes_sent}/${s.bytes_total}  ${s.label}${
        s.error_code ? `  (${s.error_code}${s.exit_code === undefined ? "" : `, exit ${s.exit_code}`})` : ""
      }`)
  ]
