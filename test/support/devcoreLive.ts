/**
 * Helpers for the dev Core's end-to-end tests (test/e2e/devcore*.live.test.ts): run the real bundled binary
 * `dist/agentwire.mjs` (built by the global setup) as `agentwire core`, `agentwire core credential …`,
 * `agentwire daemon …` and `agentwire demo` child processes on 127.0.0.1, talk to the operator API with
 * fetch, and read its Server-Sent Events. Every process a helper starts is stopped by `stopAll`.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process"
import { chmodSync, mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { request as httpRequest } from "node:http"
import { join, resolve } from "node:path"

export const binary = resolve(import.meta.dirname, "../../dist/agentwire.mjs")

const started = new Set<ChildProcess>()

export interface Proc {
  readonly child: ChildProcess
  stdout: string
  stderr: string
  readonly exited: Promise<number | null>
}

/**
 * Spawns `node dist/agentwire.mjs …args` and collects its output. With `nofile`, the process runs with that
 * limit on open file descriptors (soft and hard; set by `sh`'s `ulimit -n`, which then execs node, so the child
 * is the node process itself).
 */
export const run = (args: ReadonlyArray<string>, env: NodeJS.ProcessEnv = {}, options: { readonly nofile?: number } = {}): Proc => {
  const command = options.nofile === undefined
    ? [process.execPath, binary, ...args]
    : ["sh", "-c", `ulimit -n ${options.nofile} && exec "$0" "$@"`, process.execPath, binary, ...args]
  const child = spawn(command[0]!, command.slice(1), {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, ...env }
  })
  started.add(child)
  const proc: Proc = {
    child,
    stdout: "",
    stderr: "",
    exited: new Promise((done) => child.on("exit", (code) => {
      started.delete(child)
      done(code)
    }))
  }
  child.stdout!.on("data", (chunk: Buffer) => (proc.stdout += chunk.toString("utf8")))
  child.stderr!.on("data", (chunk: Buffer) => (proc.stderr += chunk.toString("utf8")))
  return proc
}

/** Runs a short command to completion. */
export const runToEnd = (args: ReadonlyArray<string>) =>
  new Promise<{ code: number | null; stdout: string; stderr: string }>((done) => {
    execFile(process.execPath, [binary, ...args], { timeout: 30_000 }, (error, stdout, stderr) =>
      done({ code: error === null ? 0 : (error as { code?: number }).code ?? 1, stdout, stderr }))
  })

/** Stops every process a helper started (SIGTERM, then SIGKILL). */
export const stopAll = async () => {
  const all = [...started]
  for (const child of all) child.kill("SIGTERM")
  await Promise.all(all.map((child) =>
    new Promise<void>((done) => {
      if (child.exitCode !== null || child.signalCode !== null) return done()
      const timer = setTimeout(() => {
        child.kill("SIGKILL")
        done()
      }, 10_000)
      child.on("exit", () => {
        clearTimeout(timer)
        done()
      })
    })
  ))
}

/** Polls `check` every 50 ms until it returns a value (or throws after `ms`). */
export const eventually = async <A>(check: () => Promise<A | undefined> | A | undefined, ms = 20_000, what = "condition"): Promise<A> => {
  const deadline = Date.now() + ms
  while (true) {
    const value = await check()
    if (value !== undefined) return value
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

export const tempDir = (prefix = "agentwire-e2e-") => mkdtempSync(join(tmpdir(), prefix))

export interface CoreProc extends Proc {
  readonly url: string
  readonly port: number
  readonly dataDir: string
}

/**
 * Starts `agentwire core --port PORT --data-dir DIR` and reads the URL from its first stdout line (the URL
 * alone, as a script would), checking the human-readable line that follows names the same URL.
 */
export const startCore = async (
  dataDir: string,
  port = 0,
  extra: {
    readonly args?: ReadonlyArray<string>
    readonly env?: NodeJS.ProcessEnv
    /** The bootstrap's heartbeat cadence (default 1 s; `null`: Core's own default). */
    readonly heartbeatSeconds?: number | null
    /** How long to wait for the URL (default 20 s). */
    readonly listenWithinMs?: number
    /** A limit on Core's open file descriptors (`ulimit -n`). */
    readonly nofile?: number
  } = {}
): Promise<CoreProc> => {
  const heartbeat = extra.heartbeatSeconds === null ? [] : ["--heartbeat-seconds", String(extra.heartbeatSeconds ?? 1)]
  const args = ["core", "--port", String(port), "--data-dir", dataDir, ...heartbeat, ...(extra.args ?? [])]
  const proc = run(args, extra.env, extra.nofile === undefined ? {} : { nofile: extra.nofile })
  const lines = await eventually(() => {
    const all = proc.stdout.split("\n")
    return all.length > 2 ? all : undefined
  }, extra.listenWithinMs ?? 20_000, "core to listen")
  const url = lines[0]!
  if (!/^http:\/\/127\.0\.0\.1:\d+$/.test(url) || lines[1] !== `agentwire core listening on ${url}`) {
    throw new Error(`unexpected first lines of agentwire core: ${JSON.stringify(lines.slice(0, 2))}`)
  }
  return Object.assign(proc, { url, port: Number(new URL(url).port), dataDir })
}

/** `agentwire core credential create` into a 0600 file; returns the credential and the file. */
export const createCredential = async (dataDir: string, deviceId: string) => {
  const result = await runToEnd(["core", "credential", "create", "--device-id", deviceId, "--data-dir", dataDir])
  if (result.code !== 0) throw new Error(`credential create failed: ${result.stderr}`)
  const credential = result.stdout.trim()
  const file = join(dataDir, `${deviceId}.cred`)
  writeFileSync(file, credential + "\n", { mode: 0o600 })
  chmodSync(file, 0o600)
  return { credential, file, stdout: result.stdout }
}

export const startDaemon = (
  url: string,
  deviceId: string,
  credentialFile: string,
  profile: string,
  extra: { readonly args?: ReadonlyArray<string>; readonly env?: NodeJS.ProcessEnv } = {}
) =>
  run(["daemon", "--core-url", url, "--device-id", deviceId, "--credential-file", credentialFile, "--profile", profile, ...(extra.args ?? [])], extra.env)

/** A small operator API client. */
export const operator = (url: string, token: string) => {
  const request = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${url}/api/v1/operator${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    })
    const text = await res.text()
    return { status: res.status, body: text === "" ? undefined : JSON.parse(text) as any }
  }
  /**
   * A GET is idempotent: when the pooled keep-alive socket it went out on was being closed by the server (Node
   * closes idle sockets on its own timers, late on a loaded machine), it is sent once more on a new socket, as
   * any HTTP client does. Only that socket error is retried; a response of any status is returned as it is.
   */
  const get = async (path: string) => {
    try {
      return await request("GET", path)
    } catch (e) {
      const code = (e as { cause?: { code?: string } }).cause?.code
      if (code !== "UND_ERR_SOCKET" && code !== "ECONNRESET") throw e
      return request("GET", path)
    }
  }
  return {
    get,
    post: (path: string, body?: unknown) => request("POST", path, body ?? {}),
    del: (path: string) => request("DELETE", path)
  }
}

export interface SseEvent {
  readonly event: string
  readonly id: string | undefined
  readonly data: string
}

/**
 * Reads a Turn's SSE stream until it ends (after `outcome`), calling `onEvent` for each event in order
 * (returning "stop" ends the read early); resolves with every event read.
 */
export const readSse = async (
  url: string,
  token: string,
  turnId: string,
  onEvent: (event: SseEvent) => Promise<void | "stop"> | void | "stop" = () => undefined,
  after?: number
): Promise<ReadonlyArray<SseEvent>> => {
  const abort = new AbortController()
  const res = await fetch(`${url}/api/v1/operator/turns/${turnId}/events${after === undefined ? "" : `?after=${after}`}`, {
    headers: { authorization: `Bearer ${token}` },
    signal: abort.signal
  })
  if (res.status !== 200 || res.body === null) throw new Error(`SSE status ${res.status}`)
  const events: Array<SseEvent> = []
  const decoder = new TextDecoder()
  let buffer = ""
  const reader = res.body.getReader()
  while (true) {
    const { done, value: chunk } = await reader.read()
    if (done) break
    buffer += decoder.decode(chunk, { stream: true })
    let index: number
    while ((index = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, index)
      buffer = buffer.slice(index + 2)
      let event = "message"
      let id: string | undefined
      const data: Array<string> = []
      for (const line of block.split("\n")) {
        if (line.startsWith("event: ")) event = line.slice(7)
        else if (line.startsWith("id: ")) id = line.slice(4)
        else if (line.startsWith("data: ")) data.push(line.slice(6))
      }
      const parsed = { event, id, data: data.join("\n") }
      events.push(parsed)
      if ((await onEvent(parsed)) === "stop") {
        await reader.cancel().catch(() => undefined)
        abort.abort()
        return events
      }
    }
  }
  return events
}

/** Sends a raw WebSocket upgrade request and resolves with the HTTP status Core answered (101 on success). */
export const upgradeStatus = (url: string, headers: Record<string, string>) =>
  new Promise<number>((done, fail) => {
    const request = httpRequest(url, {
      headers: {
        connection: "Upgrade",
        upgrade: "websocket",
        "sec-websocket-version": "13",
        "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==",
        ...headers
      }
    })
    request.on("response", (res) => {
      res.resume()
      done(res.statusCode ?? 0)
    })
    request.on("upgrade", (_res, socket) => {
      socket.destroy()
      done(101)
    })
    request.on("error", fail)
    request.end()
  })

/** A MessageInput with one text part. */
export const text = (value: string) => [{ content: [{ type: "input_text", text: value }] }]

/** A scripted-harness script as Turn input. */
export const script = (steps: ReadonlyArray<unknown>) => text(JSON.stringify({ script: steps }))
