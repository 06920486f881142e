/**
 * The `agentwire sessions create` flags of a Session's HTTP MCP servers (docs/operator-api.md, `configuration.
 * mcp_http_servers`). A bearer token is read from a file, never taken on argv, and sent once in the create
 * request; Core stores it encrypted and never returns it.
 *
 *   --mcp-server LABEL=URL               a server (repeatable)
 *   --mcp-bearer-file LABEL=FILE         its bearer token: the file's first line
 *   --mcp-required LABEL                 a server that must initialize, or the Turn stops before any input
 *   --mcp-allowed-tools LABEL=A,B        only these tools (`LABEL=` allows none; absent: every tool)
 *   --mcp-origin LABEL=service|environment
 */
import { Effect } from "effect"
import { Flag } from "effect/cli"
import { readFileSync } from "node:fs"
import { CommandFailed, ExitCode } from "../Exit.js"

export const mcpFlags = {
  mcpServer: Flag.String("mcp-server").pipe(Flag.withDescription("LABEL=URL — an HTTP MCP server for the Session's Turns (repeatable)"), Flag.atLeast(0)),
  mcpBearerFile: Flag.String("mcp-bearer-file").pipe(
    Flag.withDescription("LABEL=FILE — the server's bearer token, the file's first line (never on argv; stored encrypted, never returned)"),
    Flag.atLeast(0)
  ),
  mcpRequired: Flag.String("mcp-required").pipe(Flag.withDescription("LABEL — a server that must initialize before any input (repeatable)"), Flag.atLeast(0)),
  mcpAllowedTools: Flag.String("mcp-allowed-tools").pipe(
    Flag.withDescription("LABEL=TOOL,TOOL — only these tools of the server (LABEL= allows none; default: every tool)"),
    Flag.atLeast(0)
  ),
  mcpOrigin: Flag.String("mcp-origin").pipe(Flag.withDescription("LABEL=service|environment — where the connection starts (default: Core's rule)"), Flag.atLeast(0))
}

export interface McpFlags {
  readonly mcpServer: ReadonlyArray<string>
  readonly mcpBearerFile: ReadonlyArray<string>
  readonly mcpRequired: ReadonlyArray<string>
  readonly mcpAllowedTools: ReadonlyArray<string>
  readonly mcpOrigin: ReadonlyArray<string>
}

const usage = (text: string) => new CommandFailed({ text, exitCode: ExitCode.usage })

/** `LABEL=VALUE` split at the first `=`; the label must be non-empty. */
const labelled = (flag: string, spec: string) => {
  const eq = spec.indexOf("=")
  return eq <= 0 ? undefined : { label: spec.slice(0, eq), value: spec.slice(eq + 1), flag }
}

interface McpServerBody {
  server_label: string
  server_url: string
  required?: boolean
  allowed_tools: Array<string> | null
  connection_origin?: string
  bearer_token?: string
}

/** The `mcp_http_servers` member of the Session's configuration, or nothing when no flag was given. */
export const mcpServersBody = (c: McpFlags) =>
  Effect.gen(function* () {
    if (c.mcpServer.length === 0) {
      const stray = [...c.mcpBearerFile, ...c.mcpRequired, ...c.mcpAllowedTools, ...c.mcpOrigin]
      if (stray.length > 0) return yield* usage("--mcp-bearer-file / --mcp-required / --mcp-allowed-tools / --mcp-origin need --mcp-server")
      return undefined
    }
    const servers = new Map<string, McpServerBody>()
    for (const spec of c.mcpServer) {
      const s = labelled("--mcp-server", spec)
      if (s === undefined || s.value === "") return yield* usage(`--mcp-server: expected LABEL=URL`)
      if (servers.has(s.label)) return yield* usage(`--mcp-server: the label ${s.label} is given twice`)
      servers.set(s.label, { server_label: s.label, server_url: s.value, allowed_tools: null })
    }
    const serverOf = (flag: string, label: string) =>
      servers.get(label) ?? usage(`${flag}: no --mcp-server with the label ${label}`)
    for (const label of c.mcpRequired) {
      const server = serverOf("--mcp-required", label)
      if (server instanceof CommandFailed) return yield* server
      server.required = true
    }
    for (const [flag, specs] of [["--mcp-bearer-file", c.mcpBearerFile], ["--mcp-allowed-tools", c.mcpAllowedTools], ["--mcp-origin", c.mcpOrigin]] as const) {
      for (const spec of specs) {
        const s = labelled(flag, spec)
        if (s === undefined) return yield* usage(`${flag}: expected LABEL=…`)
        const server = serverOf(flag, s.label)
        if (server instanceof CommandFailed) return yield* server
        if (flag === "--mcp-allowed-tools") {
          server.allowed_tools = s.value === "" ? [] : s.value.split(",").map((t) => t.trim())
        } else if (flag === "--mcp-origin") {
          if (s.value !== "service" && s.value !== "environment") return yield* usage("--mcp-origin: expected LABEL=service or LABEL=environment")
          server.connection_origin = s.value
        } else {
          // Never echo the file's content: it is a secret.
          const text = yield* Effect.try({ try: () => readFileSync(s.value, "utf8"), catch: () => usage(`--mcp-bearer-file: cannot read ${s.value}`) })
          const token = text.split(/\r?\n/, 1)[0]!.trim()
          if (token === "") return yield* usage(`--mcp-bearer-file: ${s.value} has no token on its first line`)
          server.bearer_token = token
        }
      }
    }
    return [...servers.values()]
  })
