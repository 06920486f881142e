/**
 * The operator client over a running dev Core's operator API (docs/operator-api.md):
 *
 *   agentwire devices list [--limit N] [--cursor C] | show ID
 *   agentwire sessions list [--limit N] [--cursor C] | show ID | create --agent-kind KIND [--device-id ID]
 *     [--environment-id ID --workspace-directory DIR [--network-access enabled|disabled|restricted]]
 *     [--init-file LOCAL:/workspace/PATH]… [--init-skill ZIP]… [--init-env-file FILE] [--init-setup CMD …] (sessionInit.ts)
 *     [--mcp-server LABEL=URL [--mcp-bearer-file LABEL=FILE] [--mcp-required LABEL] …]… (sessionMcp.ts)
 *   agentwire turns list [--status S] [--session ID] [--device-id ID] [--limit N] [--cursor C] | show ID
 *   agentwire turn start --session ID (--text TEXT | --script FILE) [--watch]
 *   agentwire turn steer ID --text TEXT | cancel ID | watch ID
 *   agentwire turn answer ID --permission REQUEST_ID (--allow | --deny) [--message TEXT]
 *   agentwire turn answer ID --question ASK_ID (--answer QUESTION_ID=ANSWER … | --dismiss)
 *   agentwire files list|read|write|export --session ID … (files.ts)
 *
 * Every command takes `--json` (the API's JSON body on stdout) and the connection flags: `--url` (env
 * AGENTWIRE_OPERATOR_URL; default the URL a Core on `--data-dir` published, else http://127.0.0.1:7400),
 * `--data-dir` (env AGENTWIRE_CORE_DATA_DIR, default ~/.agentwire/core) and `--operator-token-file` (else env
 * AGENTWIRE_OPERATOR_TOKEN, else `<data dir>/operator-token`, read only: the client never creates a token).
 *
 * Exit codes: 0 the API answered 2xx (for steer/cancel/answer, the body says what is proven: `accepted`,
 * `unknown`, … — an `unknown` is not a failure); 1 an error answer or no answer (for a change, "no answer"
 * means it may or may not have happened, and the message says so); 2 a usage error, a 400 or a 401.
 */
import { Config, Console, Effect, Option, Redacted } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import { readFileSync } from "node:fs"
import * as DataDirLock from "../../core/dev/DataDirLock.js"
import * as OperatorToken from "../../core/dev/OperatorToken.js"
import { CommandFailed, ExitCode } from "../Exit.js"
import * as OperatorClient from "../OperatorClient.js"
import { examples } from "../Help.js"
import * as TurnWatch from "../TurnWatch.js"
import { makeFilesCommand } from "./files.js"
import { initFlags, initializationBody, initializationLines } from "./sessionInit.js"
import { mcpFlags, mcpServersBody } from "./sessionMcp.js"

export const OperatorEnvVars = {
  url: "AGENTWIRE_OPERATOR_URL",
  token: "AGENTWIRE_OPERATOR_TOKEN",
  dataDir: "AGENTWIRE_CORE_DATA_DIR"
} as const

export const DefaultOperatorUrl = "http://127.0.0.1:7400"

const connection = {
  url: Flag.String("url").pipe(
    Flag.withDescription(`Core base URL (env ${OperatorEnvVars.url}; default: the URL a Core on --data-dir published, else ${DefaultOperatorUrl})`),
    Flag.withFallbackConfig(Config.String(OperatorEnvVars.url)),
    Flag.optional
  ),
  dataDir: Flag.String("data-dir").pipe(
    Flag.withDescription(`Core data directory, for its URL and operator token (env ${OperatorEnvVars.dataDir}; default ~/.agentwire/core)`),
    Flag.withFallbackConfig(Config.String(OperatorEnvVars.dataDir)),
    Flag.optional
  ),
  operatorTokenFile: Flag.String("operator-token-file").pipe(
    Flag.withDescription(`File holding the operator token (else env ${OperatorEnvVars.token}, else <data dir>/operator-token)`),
    Flag.optional
  ),
  json: Flag.Boolean("json").pipe(Flag.withDescription("Print the API's JSON answer"), Flag.withDefault(false))
}

type Connection = {
  readonly url: Option.Option<string>
  readonly dataDir: Option.Option<string>
  readonly operatorTokenFile: Option.Option<string>
  readonly json: boolean
}

const usage = (text: string) => new CommandFailed({ text, exitCode: ExitCode.usage })
const failure = (text: string) => new CommandFailed({ text, exitCode: ExitCode.failure })

export const makeOperatorCommands = (options: { readonly defaultDataDir: string }) => {
  const target = (c: Connection) =>
    Effect.gen(function* () {
      const dataDir = Option.getOrElse(c.dataDir, () => options.defaultDataDir)
      const url = Option.isSome(c.url)
        ? c.url.value
        : Option.match(DataDirLock.readAddress(dataDir), { onNone: () => DefaultOperatorUrl, onSome: (a) => a.url })
      if (!/^https?:\/\/[^\s/]+/.test(url)) return yield* usage("--url must be an http(s) URL")
      if (Option.isSome(c.operatorTokenFile)) {
        const token = yield* OperatorToken.readFile(c.operatorTokenFile.value).pipe(Effect.mapError((e) => usage(e.message)))
        return { url, token }
      }
      const fromEnv = yield* Config.option(Config.Redacted(OperatorEnvVars.token)).pipe(Effect.orElseSucceed(() => Option.none()))
      if (Option.isSome(fromEnv) && Redacted.value(fromEnv.value).trim() !== "") {
        return { url, token: Redacted.make(Redacted.value(fromEnv.value).trim()) }
      }
      const file = OperatorToken.tokenFile(dataDir)
      const token = yield* Effect.try({
        try: () => readFileSync(file, "utf8").trim(),
        catch: () => usage(`no operator token: pass --operator-token-file, set ${OperatorEnvVars.token}, or point --data-dir at the Core's data directory (${file} is not readable)`)
      })
      if (token === "") return yield* usage(`the operator token file ${file} is empty`)
      return { url, token: Redacted.make(token) }
    })

  /** One call; a non-2xx answer fails with its one-line error. `change` says the call may have changed something. */
  const request = (c: Connection, method: "GET" | "POST" | "PUT" | "DELETE", path: string, body?: unknown, change = false) =>
    Effect.gen(function* () {
      const t = yield* target(c)
      const reply = yield* OperatorClient.call(t, method, path, body).pipe(
        Effect.mapError((e) => failure(change ? `${e.message}; it may or may not have happened` : e.message))
      )
      if (reply.status >= 200 && reply.status < 300) return reply.body as any
      const line = OperatorClient.errorLine(reply)
      return yield* new CommandFailed({ text: line, exitCode: reply.status === 400 || reply.status === 401 ? ExitCode.usage : ExitCode.failure })
    })

  const print = (c: Connection, body: unknown, human: () => ReadonlyArray<string>) =>
    c.json ? Console.log(JSON.stringify(body, null, 2)) : Effect.forEach(human(), (line) => Console.log(line), { discard: true })

  const id = (name: string) => Argument.String(name)
  const seg = encodeURIComponent
  const when = (ms: unknown) => (typeof ms === "number" ? new Date(ms).toISOString() : "-")

  const deviceLine = (d: any) =>
    `${String(d.device_id).padEnd(24)} ${d.online ? "online " : "offline"} ${d.revoked ? "revoked " : ""}kinds: ${
      (d.declaration?.kinds ?? []).map((k: any) => `${k.kind}${k.available ? "" : " (unavailable)"}`).join(", ") || "unknown (no heartbeat yet)"
    }`
  const suspensionLine = (v: any) =>
    `suspension ${v.suspend_id}  ${v.state}${v.reason ? ` (${v.reason})` : ""}  environment ${v.environment_id}`
  const sessionLine = (s: any) => `${String(s.session_id).padEnd(24)} ${String(s.agent_kind).padEnd(12)} device ${s.device_id ?? "-"}  created ${when(s.created_at_ms)}`
  const turnLine = (t: any) =>
    `${String(t.turn_id).padEnd(24)} ${String(t.status).padEnd(10)} session ${t.session_id}  device ${t.device_id ?? "-"}  created ${when(t.created_at_ms)}${
      t.outcome?.error_code ? `  (${t.outcome.error_code})` : ""
    }`

  // Paged listings (docs/operator-api.md "Listings").
  const paging = {
    limit: Flag.Int("limit").pipe(Flag.withDescription("Page size, 1-200 (default 50)"), Flag.optional),
    cursor: Flag.String("cursor").pipe(Flag.withDescription("The next_cursor of the previous page"), Flag.optional)
  }
  const pageQuery = (c: { readonly limit: Option.Option<number>; readonly cursor: Option.Option<string> }) => {
    const query = new URLSearchParams()
    if (Option.isSome(c.limit)) query.set("limit", String(c.limit.value))
    if (Option.isSome(c.cursor)) query.set("cursor", c.cursor.value)
    const qs = query.toString()
    return qs === "" ? "" : `?${qs}`
  }
  const moreHint = (what: string, body: any) =>
    body.next_cursor === null || body.next_cursor === undefined ? [] : [`more: agentwire ${what} list --cursor ${body.next_cursor}`]

  const devices = Command.make("devices").pipe(
    Command.withDescription("List devices or show one (declared kinds, connection state); quiesce or resume one"),
    Command.withSubcommands([
      Command.make("list", { ...connection, ...paging }, (c) =>
        Effect.flatMap(request(c, "GET", `/devices${pageQuery(c)}`), (body) =>
          print(c, body, () => [...body.devices.map(deviceLine), ...moreHint("devices", body)]))).pipe(
          Command.withDescription("List devices, oldest first, paged: online state and declared kinds (prints a --cursor hint when there is more)"),
          examples("agentwire devices list", "agentwire devices list --limit 200 --json --url http://127.0.0.1:7400")
        ),
      Command.make("show", { ...connection, id: id("device-id") }, (c) =>
        Effect.flatMap(request(c, "GET", `/devices/${seg(c.id)}`), (d) =>
          print(c, d, () => [
            deviceLine(d),
            `connection ${d.connection_number ?? "-"}  credential ${d.has_credential ? "yes" : "no"}  daemon ${d.declaration?.daemon_version ?? "-"}`,
            ...(d.suspension ? [suspensionLine(d.suspension)] : [])
          ]))).pipe(
          Command.withDescription("Show one device: connection, credential, daemon version, declared kinds"),
          examples("agentwire devices show laptop-1", "agentwire devices show laptop-1 --json")
        ),
      Command.make("quiesce", {
        ...connection,
        id: id("device-id"),
        environmentId: Flag.String("environment-id").pipe(Flag.withDescription("(required) The Environment the daemon is bound to"))
      }, (c) =>
        Effect.flatMap(request(c, "POST", `/devices/${seg(c.id)}/quiesce`, { environment_id: c.environmentId }, true), (r) =>
          print(c, r, () => [suspensionLine(r)]))).pipe(
          Command.withDescription("Suspend a device's Environment: prints suspended, quiesce_rejected (with its reason) or quiesce_unknown"),
          examples("agentwire devices quiesce laptop-1 --environment-id ENV_ID")
        ),
      Command.make("resume", {
        ...connection,
        id: id("device-id"),
        rollback: Flag.Boolean("rollback").pipe(Flag.withDescription("Resume the still-running source after an uncertain quiesce (implied after quiesce_unknown)"), Flag.withDefault(false))
      }, (c) =>
        Effect.flatMap(request(c, "POST", `/devices/${seg(c.id)}/resume`, c.rollback ? { rollback: true } : {}, true), (r) =>
          print(c, r, () => [suspensionLine(r)]))).pipe(
          Command.withDescription("Resume a device's latest suspension: prints resumed, resume_rejected or resume_unknown"),
          examples("agentwire devices resume laptop-1", "agentwire devices resume laptop-1 --rollback")
        )
    ]),
    examples("agentwire devices list", "agentwire devices show laptop-1 --json", "agentwire devices quiesce laptop-1 --environment-id ENV_ID")
  )

  const sessions = Command.make("sessions").pipe(
    Command.withDescription("List, show or create Sessions"),
    Command.withSubcommands([
      Command.make("list", { ...connection, ...paging }, (c) =>
        Effect.flatMap(request(c, "GET", `/sessions${pageQuery(c)}`), (body) =>
          print(c, body, () => [...body.sessions.map(sessionLine), ...moreHint("sessions", body)]))).pipe(
          Command.withDescription("List Sessions, oldest first, paged (prints a --cursor hint when there is more)"),
          examples("agentwire sessions list", "agentwire sessions list --limit 20 --json")
        ),
      Command.make("show", { ...connection, id: id("session-id") }, (c) =>
        Effect.flatMap(request(c, "GET", `/sessions/${seg(c.id)}`), (s) =>
          print(c, s, () => [sessionLine(s), ...initializationLines(s.initialization), ...s.turns.map((t: any) => `  ${turnLine(t)}`)]))).pipe(
          Command.withDescription("Show one Session with its Turns"),
          examples("agentwire sessions show SESSION_ID")
        ),
      Command.make("create", {
        ...connection,
        agentKind: Flag.String("agent-kind").pipe(Flag.withDescription("(required) The agent kind, e.g. scripted")),
        deviceId: Flag.String("device-id").pipe(Flag.withDescription("Pin the Session to this device"), Flag.optional),
        environmentId: Flag.String("environment-id").pipe(
          Flag.withDescription("A self_hosted Environment: the id the device's daemon is bound to (needs --device-id, --workspace-directory)"),
          Flag.optional
        ),
        workspaceDirectory: Flag.String("workspace-directory").pipe(Flag.withDescription("The daemon's --workspace (self_hosted)"), Flag.optional),
        networkAccess: Flag.String("network-access").pipe(Flag.withDescription("The daemon's --network-access (self_hosted; default disabled)"), Flag.optional),
        ...initFlags,
        ...mcpFlags
      }, (c) =>
        Effect.gen(function* () {
          if (Option.isSome(c.environmentId) !== Option.isSome(c.workspaceDirectory)) {
            return yield* usage("give --environment-id and --workspace-directory together")
          }
          const environment = Option.isSome(c.environmentId)
            ? {
              environment: {
                type: "self_hosted",
                id: c.environmentId.value,
                workspace_directory: Option.getOrThrow(c.workspaceDirectory),
                ...(Option.isSome(c.networkAccess) ? { network_access: c.networkAccess.value } : {})
              }
            }
            : {}
          const initialization = yield* initializationBody(c)
          const mcpServers = yield* mcpServersBody(c)
          const s = yield* request(c, "POST", "/sessions", {
            agent_kind: c.agentKind,
            ...(Option.isSome(c.deviceId) ? { device_id: c.deviceId.value } : {}),
            ...environment,
            ...(mcpServers === undefined ? {} : { configuration: { mcp_http_servers: mcpServers } }),
            ...(initialization === undefined ? {} : { initialization })
          }, true)
          return yield* print(c, s, () => [s.session_id])
        })).pipe(
          Command.withDescription("Create a Session; prints its id"),
          examples(
            "agentwire sessions create --agent-kind scripted",
            "agentwire sessions create --agent-kind scripted --device-id laptop-1 --environment-id env-1 --workspace-directory /srv/work",
            "agentwire sessions create --agent-kind scripted --device-id laptop-1 --environment-id ENV --workspace-directory /srv/work --init-file ./notes.md:/workspace/notes.md --init-skill ./review.zip --init-setup 'npm ci'",
            "agentwire sessions create --agent-kind claude_code --mcp-server tickets=https://mcp.example.org/mcp --mcp-bearer-file tickets=./tickets.token --mcp-required tickets"
          )
        )
    ]),
    examples("agentwire sessions create --agent-kind scripted", "agentwire sessions list")
  )

  const turns = Command.make("turns").pipe(
    Command.withDescription("List Turns (newest first, paged) or show one"),
    Command.withSubcommands([
      Command.make("list", {
        ...connection,
        status: Flag.String("status").pipe(Flag.withDescription("queued, running, completed, failed or cancelled"), Flag.optional),
        session: Flag.String("session").pipe(Flag.withDescription("Only this Session's Turns"), Flag.optional),
        deviceId: Flag.String("device-id").pipe(Flag.withDescription("Only this device's Turns"), Flag.optional),
        limit: Flag.Int("limit").pipe(Flag.withDescription("Page size, 1-200 (default 50)"), Flag.optional),
        cursor: Flag.String("cursor").pipe(Flag.withDescription("The next_cursor of the previous page"), Flag.optional)
      }, (c) => {
        const query = new URLSearchParams()
        for (const [key, value] of [["status", c.status], ["session_id", c.session], ["device_id", c.deviceId], ["cursor", c.cursor]] as const) {
          if (Option.isSome(value)) query.set(key, value.value)
        }
        if (Option.isSome(c.limit)) query.set("limit", String(c.limit.value))
        const qs = query.toString()
        return Effect.flatMap(request(c, "GET", `/turns${qs === "" ? "" : `?${qs}`}`), (page) =>
          print(c, page, () => [
            ...page.turns.map(turnLine),
            ...(page.next_cursor === null ? [] : [`more: agentwire turns list --cursor ${page.next_cursor}`])
          ]))
      }).pipe(
        Command.withDescription("List Turns, newest first, paged (prints a --cursor hint when there is more)"),
        examples("agentwire turns list --status running", "agentwire turns list --session SESSION_ID --limit 20 --json")
      ),
      Command.make("show", { ...connection, id: id("turn-id") }, (c) =>
        Effect.flatMap(request(c, "GET", `/turns/${seg(c.id)}`), (t) =>
          print(c, t, () => [
            turnLine(t),
            `input cursor ${t.input_cursor}  attempt ${t.attempt}`,
            ...(t.inputs ?? []).map((i: any) => `  input ${i.input_id} ${i.status}${i.position === null ? "" : ` @${i.position}`}`),
            ...(t.interactions ?? []).map((i: any) => `  ${i.kind} ${i.interaction_id} ${i.status}${i.outcome ? ` (${i.outcome})` : ""}`)
          ]))).pipe(
          Command.withDescription("Show one Turn with its inputs and interactions"),
          examples("agentwire turns show TURN_ID", "agentwire turns show TURN_ID --json")
        )
    ]),
    examples("agentwire turns list", "agentwire turns show TURN_ID")
  )

  const textInput = (text: string) => [{ content: [{ type: "input_text", text }] }]
  const now = () => Date.now()

  const watchTurn = (c: Connection, turnId: string) =>
    Effect.gen(function* () {
      const t = yield* target(c)
      const status = yield* TurnWatch.watch(t, turnId, { json: c.json, nowMs: now }).pipe(Effect.mapError((e) => failure(e.message)))
      if (status !== "completed") return yield* failure(`the Turn ended ${status}`)
    })

  const start = Command.make("start", {
    ...connection,
    session: Flag.String("session").pipe(Flag.withDescription("(required) The Session to run the Turn in")),
    text: Flag.String("text").pipe(Flag.withDescription("The Turn's input text"), Flag.optional),
    script: Flag.String("script").pipe(Flag.withDescription("A scripted-harness script file (JSON) as the input"), Flag.optional),
    watch: Flag.Boolean("watch").pipe(Flag.withDescription("Follow the Turn live until its outcome (as turn watch)"), Flag.withDefault(false))
  }, (c) =>
    Effect.gen(function* () {
      if (Option.isSome(c.text) === Option.isSome(c.script)) return yield* usage("give exactly one of --text and --script")
      const text = Option.isSome(c.text)
        ? c.text.value
        : yield* Effect.try({ try: () => readFileSync(Option.getOrThrow(c.script), "utf8"), catch: () => usage(`cannot read the script file ${Option.getOrThrow(c.script)}`) })
      const turn = yield* request(c, "POST", `/sessions/${seg(c.session)}/turns`, { input: textInput(text) }, true)
      if (!c.watch) return yield* print(c, turn, () => [turn.turn_id])
      if (!c.json) yield* Console.log(`turn ${turn.turn_id} (run ${turn.run_id})`)
      yield* watchTurn(c, turn.turn_id)
    })).pipe(
    Command.withDescription("Start a Turn in a Session; prints its id (or follows it with --watch)"),
    Command.withExamples([
      { command: "agentwire turn start --session session-1 --text \"hello\" --watch" },
      { command: "agentwire turn start --session session-1 --script demo.json", description: "a script for the scripted harness" }
    ])
  )

  // A steer or cancel answers with `status`, an answer with `outcome` (applied, rejected, unknown).
  const result = (c: Connection, body: any) =>
    print(c, body, () => [
      [body.status ?? body.outcome, body.position !== undefined && body.position !== null ? `position ${body.position}` : "", body.error_code ?? "", body.reason ?? ""].filter((x) => x !== "").join(" ")
    ])

  const turn = Command.make("turn").pipe(
    Command.withDescription("Start, steer, cancel, answer or watch one Turn"),
    Command.withSubcommands([
      start,
      Command.make("steer", { ...connection, id: id("turn-id"), text: Flag.String("text").pipe(Flag.withDescription("(required) The active input")) }, (c) =>
        Effect.flatMap(request(c, "POST", `/turns/${seg(c.id)}/steer`, { input: textInput(c.text) }, true), (r) => result(c, r))).pipe(
          Command.withDescription("Send an active input; prints accepted (with its position), rejected or unknown"),
          examples("agentwire turn steer TURN_ID --text \"also check the tests\"")
        ),
      Command.make("cancel", { ...connection, id: id("turn-id") }, (c) =>
        Effect.flatMap(request(c, "POST", `/turns/${seg(c.id)}/cancel`, {}, true), (r) => result(c, r))).pipe(
          Command.withDescription("Cancel a Turn; prints cancelled, rejected or unconfirmed"),
          examples("agentwire turn cancel TURN_ID")
        ),
      Command.make("answer", {
        ...connection,
        id: id("turn-id"),
        permission: Flag.String("permission").pipe(Flag.withDescription("The permission request to answer"), Flag.optional),
        allow: Flag.Boolean("allow").pipe(Flag.withDescription("Approve the permission request"), Flag.withDefault(false)),
        deny: Flag.Boolean("deny").pipe(Flag.withDescription("Deny the permission request"), Flag.withDefault(false)),
        message: Flag.String("message").pipe(Flag.withDescription("A message with the permission answer"), Flag.optional),
        question: Flag.String("question").pipe(Flag.withDescription("The question (ask) to answer"), Flag.optional),
        answer: Flag.String("answer").pipe(Flag.withDescription("QUESTION_ID=ANSWER (repeatable)"), Flag.atLeast(0)),
        dismiss: Flag.Boolean("dismiss").pipe(Flag.withDescription("Dismiss the question without answers"), Flag.withDefault(false))
      }, (c) =>
        Effect.gen(function* () {
          if (Option.isSome(c.permission) === Option.isSome(c.question)) return yield* usage("give exactly one of --permission and --question")
          if (Option.isSome(c.permission)) {
            if (c.allow === c.deny) return yield* usage("give exactly one of --allow and --deny")
            const body = { approved: c.allow, ...(Option.isSome(c.message) ? { message: c.message.value } : {}) }
            return yield* Effect.flatMap(request(c, "POST", `/turns/${seg(c.id)}/permissions/${seg(c.permission.value)}`, body, true), (r) => result(c, r))
          }
          const answers: Array<{ question_id: string; answers: Array<string> }> = []
          for (const pair of c.answer) {
            const at = pair.indexOf("=")
            if (at <= 0) return yield* usage("--answer must be QUESTION_ID=ANSWER")
            const questionId = pair.slice(0, at)
            const existing = answers.find((a) => a.question_id === questionId)
            if (existing === undefined) answers.push({ question_id: questionId, answers: [pair.slice(at + 1)] })
            else existing.answers.push(pair.slice(at + 1))
          }
          if (c.dismiss === answers.length > 0) return yield* usage("give --answer QUESTION_ID=ANSWER (one or more) or --dismiss")
          const body = c.dismiss ? { cancelled: true } : { question_answers: answers }
          return yield* Effect.flatMap(request(c, "POST", `/turns/${seg(c.id)}/questions/${seg(Option.getOrThrow(c.question))}`, body, true), (r) => result(c, r))
        })).pipe(
          Command.withDescription("Answer a permission request or a question; prints applied, rejected or unknown"),
          examples("agentwire turn answer TURN_ID --permission perm_1 --allow", "agentwire turn answer TURN_ID --question ask_1 --answer q1=yes")
        ),
      Command.make("watch", { ...connection, id: id("turn-id") }, (c) => watchTurn(c, c.id)).pipe(
        Command.withDescription("Follow a Turn live (the demo's view: frames, facts, outcome); exits 0 when it completed, 1 otherwise"),
        examples("agentwire turn watch TURN_ID", "agentwire turn watch TURN_ID --json")
      )
    ]),
    examples("agentwire turn start --session SESSION_ID --text hello --watch", "agentwire turn cancel TURN_ID")
  )

  return { devices, sessions, turns, turn, files: makeFilesCommand({ connection, target, request, print }) }
}
