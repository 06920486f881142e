/**
 * The Files client of a Session's `self_hosted` workspace (docs/operator-api.md "Files"):
 *
 *   agentwire files list   --session ID [--path DIR] [--max-entries N]
 *   agentwire files read   --session ID --path FILE [--max-bytes N] [--output FILE]
 *   agentwire files write  --session ID --path FILE (--from FILE | --text TEXT)
 *   agentwire files export --session ID --output FILE.tar
 *   agentwire files settle --session ID --write WRITE_ID --status completed|failed
 *
 * Same connection flags, token rule and exit codes as the operator client (operator.ts). `read` prints the
 * bytes to stdout (or `--output`), and says on stderr when they were truncated. `export` streams the tar into
 * `--output` under a temporary name and renames it only once the archive is complete. `settle` records how an
 * operator found a file whose write was left unknown (look first with `read`), so the Session can write again.
 */
import { Console, Effect, type FileSystem, Option, Redacted, Stream } from "effect"
import { Command, Flag } from "effect/cli"
import { FetchHttpClient, HttpClient, HttpClientRequest } from "effect/http"
import { closeSync, openSync, readFileSync, renameSync, rmSync, writeSync } from "node:fs"
import { CommandFailed, ExitCode } from "../Exit.js"
import { examples } from "../Help.js"
import * as OperatorClient from "../OperatorClient.js"

type Target = OperatorClient.OperatorTarget

/** The operator client's connection flags (operator.ts) and their parsed values. */
export interface ConnectionFlags {
  readonly url: Flag.Flag<Option.Option<string>>
  readonly dataDir: Flag.Flag<Option.Option<string>>
  readonly operatorTokenFile: Flag.Flag<Option.Option<string>>
  readonly json: Flag.Flag<boolean>
}
type C = {
  readonly url: Option.Option<string>
  readonly dataDir: Option.Option<string>
  readonly operatorTokenFile: Option.Option<string>
  readonly json: boolean
}

export interface FilesCommandOptions {
  readonly connection: ConnectionFlags
  readonly target: (c: C) => Effect.Effect<Target, CommandFailed, FileSystem.FileSystem>
  readonly request: (
    c: C,
    method: "GET" | "POST" | "PUT",
    path: string,
    body?: unknown,
    change?: boolean
  ) => Effect.Effect<any, CommandFailed, FileSystem.FileSystem>
  readonly print: (c: C, body: unknown, human: () => ReadonlyArray<string>) => Effect.Effect<void>
}

const usage = (text: string) => new CommandFailed({ text, exitCode: ExitCode.usage })
const failure = (text: string) => new CommandFailed({ text, exitCode: ExitCode.failure })
const seg = encodeURIComponent

export const makeFilesCommand = (o: FilesCommandOptions) => {
  const session = Flag.String("session").pipe(Flag.withDescription("(required) The Session whose workspace to use"))
  const base = (c: { readonly session: string }) => `/sessions/${seg(c.session)}/files`

  const list = Command.make("list", {
    ...o.connection,
    session,
    path: Flag.String("path").pipe(Flag.withDescription("Workspace-relative directory (default: the root)"), Flag.optional),
    maxEntries: Flag.Int("max-entries").pipe(Flag.withDescription("1-1024 (default 1024)"), Flag.optional)
  }, (c) => {
    const query = new URLSearchParams({ path: Option.getOrElse(c.path, () => "") })
    if (Option.isSome(c.maxEntries)) query.set("max_entries", String(c.maxEntries.value))
    return Effect.flatMap(o.request(c, "GET", `${base(c)}?${query}`), (page) =>
      o.print(c, page, () => [
        ...page.entries.map((e: any) => `${String(e.kind).padEnd(9)} ${String(e.size_bytes ?? "-").padStart(10)}  ${e.name}`),
        ...(page.truncated ? ["(truncated: more entries exist)"] : [])
      ]))
  }).pipe(
    Command.withDescription("List one directory level of the Session's workspace"),
    examples("agentwire files list --session SESSION_ID", "agentwire files list --session SESSION_ID --path src --json")
  )

  const read = Command.make("read", {
    ...o.connection,
    session,
    path: Flag.String("path").pipe(Flag.withDescription("(required) Workspace-relative file")),
    maxBytes: Flag.Int("max-bytes").pipe(Flag.withDescription("1-1048576 (default 1 MiB)"), Flag.optional),
    output: Flag.String("output").pipe(Flag.withDescription("Write the bytes to this file instead of stdout"), Flag.optional)
  }, (c) =>
    Effect.gen(function* () {
      const query = new URLSearchParams({ path: c.path })
      if (Option.isSome(c.maxBytes)) query.set("max_bytes", String(c.maxBytes.value))
      const body = yield* o.request(c, "GET", `${base(c)}/content?${query}`)
      if (c.json) return yield* Console.log(JSON.stringify(body, null, 2))
      const bytes = Buffer.from(String(body.data), "base64")
      if (Option.isSome(c.output)) {
        yield* Effect.try({ try: () => writeAtomically(c.output.pipe(Option.getOrThrow), [bytes]), catch: () => failure(`cannot write ${Option.getOrThrow(c.output)}`) })
      } else {
        yield* Effect.sync(() => process.stdout.write(bytes))
      }
      if (body.truncated === true) yield* Console.error(`(truncated at ${bytes.length} bytes)`)
    })).pipe(
    Command.withDescription("Read up to 1 MiB of a file of the Session's workspace"),
    examples("agentwire files read --session SESSION_ID --path README.md", "agentwire files read --session SESSION_ID --path logo.png --output logo.png")
  )

  const write = Command.make("write", {
    ...o.connection,
    session,
    path: Flag.String("path").pipe(Flag.withDescription("(required) Workspace-relative destination file")),
    from: Flag.String("from").pipe(Flag.withDescription("Local file with the content (at most 5 MiB)"), Flag.optional),
    text: Flag.String("text").pipe(Flag.withDescription("The content as text"), Flag.optional)
  }, (c) =>
    Effect.gen(function* () {
      if (Option.isSome(c.from) === Option.isSome(c.text)) return yield* usage("give exactly one of --from and --text")
      const content = Option.isSome(c.text)
        ? Buffer.from(c.text.value, "utf8")
        : yield* Effect.try({ try: () => readFileSync(Option.getOrThrow(c.from)), catch: () => usage(`cannot read ${Option.getOrThrow(c.from)}`) })
      const body = yield* o.request(c, "PUT", `${base(c)}/content`, { path: c.path, data: content.toString("base64") }, true)
      yield* o.print(c, body, () => [`${body.size_bytes} bytes  sha256 ${body.sha256}  write ${body.write_id}`])
    })).pipe(
    Command.withDescription("Create or replace a file in the Session's workspace"),
    examples("agentwire files write --session SESSION_ID --path notes.txt --text \"hello\"", "agentwire files write --session SESSION_ID --path data.json --from ./data.json")
  )

  const exportCommand = Command.make("export", {
    ...o.connection,
    session,
    output: Flag.String("output").pipe(Flag.withDescription("(required) Where to write the tar archive"))
  }, (c) =>
    Effect.gen(function* () {
      const t = yield* o.target(c)
      const size = yield* download(t, `${base(c)}/export`, c.output)
      yield* Console.log(`${size} bytes written to ${c.output}`)
    })).pipe(
    Command.withDescription("Download the Session's workspace as a tar archive"),
    examples("agentwire files export --session SESSION_ID --output workspace.tar")
  )

  const settle = Command.make("settle", {
    ...o.connection,
    session,
    write: Flag.String("write").pipe(Flag.withDescription("(required) The write id left unknown (the write_unknown answer names it)")),
    status: Flag.Literals("status", ["completed", "failed"]).pipe(
      Flag.withDescription("(required) completed: the file holds the new content; failed: it does not")
    )
  }, (c) =>
    Effect.flatMap(
      o.request(c, "POST", `${base(c)}/writes/${seg(c.write)}/settle`, { status: c.status }, true),
      (body) => o.print(c, body, () => [`write ${body.write_id} settled ${body.status}`])
    )).pipe(
    Command.withDescription("Settle a write left unknown, as you found the file (the Session can write again)"),
    examples("agentwire files settle --session SESSION_ID --write WRITE_ID --status completed")
  )

  return Command.make("files").pipe(
    Command.withDescription("List, read, write or export the files of a Session's self_hosted workspace"),
    examples("agentwire files list --session SESSION_ID", "agentwire files export --session SESSION_ID --output workspace.tar"),
    Command.withSubcommands([list, read, write, exportCommand, settle])
  )
}

/** Writes `chunks` to `path` under a temporary name, renamed over it once complete. */
const writeAtomically = (path: string, chunks: ReadonlyArray<Uint8Array>) => {
  const temp = `${path}.partial-${process.pid}`
  const fd = openSync(temp, "w", 0o600)
  try {
    for (const chunk of chunks) writeSync(fd, chunk)
  } finally {
    closeSync(fd)
  }
  renameSync(temp, path)
}

/** The JSON of an error answer, or undefined when it is not JSON. */
const parseJson = (text: string): unknown => {
  try {
    return JSON.parse(text) as unknown
  } catch {
    return undefined
  }
}

/** Streams an export to `output` (temporary name, renamed when the response ended cleanly). */
const download = (t: Target, path: string, output: string) =>
  Effect.gen(function* () {
    const client = yield* HttpClient.HttpClient
    const url = `${t.url.replace(/\/+$/, "")}${OperatorClient.OperatorPrefix}${path}`
    const response = yield* client.execute(HttpClientRequest.get(url).pipe(HttpClientRequest.bearerToken(Redacted.value(t.token))))
    if (response.status !== 200) {
      const body = parseJson(yield* response.text)
      return yield* new CommandFailed({
        text: OperatorClient.errorLine({ status: response.status, body }),
        exitCode: response.status === 400 || response.status === 401 ? ExitCode.usage : ExitCode.failure
      })
    }
    const temp = `${output}.partial-${process.pid}`
    const fd = yield* Effect.acquireRelease(
      Effect.try({ try: () => openSync(temp, "w", 0o600), catch: () => failure(`cannot write ${output}`) }),
      (fd, exit) =>
        Effect.sync(() => {
          closeSync(fd)
          if (exit._tag === "Failure") rmSync(temp, { force: true })
        })
    )
    let size = 0
    yield* Stream.runForEach(response.stream, (chunk) =>
      Effect.sync(() => {
        writeSync(fd, chunk)
        size += chunk.length
      }))
    yield* Effect.try({ try: () => renameSync(temp, output), catch: () => failure(`cannot write ${output}`) })
    return size
  }).pipe(
    Effect.scoped,
    Effect.catchTag("HttpClientError", (e) => Effect.fail(failure(`the export did not complete (${e.reason._tag}); nothing was written to ${output}`))),
    Effect.provide(FetchHttpClient.layer)
  )
