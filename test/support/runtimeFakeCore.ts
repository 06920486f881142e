/**
 * A small scripted Core for the daemon's transport tests: a real HTTP server on 127.0.0.1 (port 0) with the two
 * machine routes the daemon uses, `POST /api/v1/agent-daemon/bootstrap` and the WebSocket upgrade at
 * `GET /api/v1/agent-daemon/ws`, backed by the `ws` package.
 *
 * Each route answers from a FIFO script (`scriptBootstrap`, `scriptUpgrade`); when the script is empty it gives
 * the default answer: bootstrap 200 with a `ws_url` pointing at this server, the upgrade accepted. Every request
 * is recorded as Core saw it (method, URL with query, headers, body) so tests can assert where the credential
 * went. Accepted connections are handed out in order by `nextConnection`.
 *
 * Not a Core implementation: no device store, no frame handling beyond what a test scripts.
 */
import { Deferred, Effect, Exit, Queue, Result, type Scope } from "effect"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { WebSocket, WebSocketServer } from "ws"
import { Messages } from "../../src/proto/index.js"

/** One HTTP request as the fake Core received it. */
export interface SeenRequest {
  readonly route: "bootstrap" | "upgrade" | "other"
  readonly method: string
  /** Path and query exactly as sent. */
  readonly url: string
  readonly headers: Readonly<Record<string, string | ReadonlyArray<string> | undefined>>
  readonly body: string
}

/** How the bootstrap route answers one request. */
export type BootstrapReply =
  | { readonly _tag: "default"; readonly heartbeat_seconds?: number; readonly protocol_version?: string; readonly ws_url?: string }
  | { readonly _tag: "raw"; readonly status: number; readonly body: string }
  | { readonly _tag: "hang" }

/** How the upgrade route answers one request. */
export type UpgradeReply =
  | { readonly _tag: "accept" }
  | { readonly _tag: "refuse"; readonly status: number; readonly body: string }
  | { readonly _tag: "hang" }

/** The Core side of one accepted WebSocket connection. */
export interface CoreConnection {
  /** The upgrade request's path and query. */
  readonly url: string
  readonly headers: SeenRequest["headers"]
  /** Next text frame the daemon sent, raw. */
  readonly receivedText: Effect.Effect<string>
  /** Next frame the daemon sent, decoded strictly as Core would (dies when it does not decode). */
  readonly received: Effect.Effect<Messages.RuntimeToCore>
  /** Frames received and not yet taken. */
  readonly pending: Effect.Effect<number>
  /** Sends a message (encoded with the real codec) or raw text as a text frame. */
  readonly send: (frame: Messages.CoreToRuntime | string) => Effect.Effect<void>
  readonly sendBinary: (bytes: Uint8Array) => Effect.Effect<void>
  /** Starts Core's closing handshake with a code. */
  readonly close: (code: number, reason?: string) => Effect.Effect<void>
  /** Drops the TCP connection without a close frame. */
  readonly terminate: Effect.Effect<void>
  /** Completes when the connection closed, with the close code and reason Core received (1005/1006 when none). */
  readonly closed: Effect.Effect<{ readonly code: number; readonly reason: string }>
}

export interface FakeCore {
  /** `http://127.0.0.1:<port>` */
  readonly origin: string
  /** `http://127.0.0.1:<port>/api/v1` */
  readonly apiBase: string
  readonly port: number
  readonly scriptBootstrap: (...replies: ReadonlyArray<BootstrapReply>) => Effect.Effect<void>
  readonly scriptUpgrade: (...replies: ReadonlyArray<UpgradeReply>) => Effect.Effect<void>
  /** Every request so far, in arrival order. */
  readonly requests: Effect.Effect<ReadonlyArray<SeenRequest>>
  /** Waits for the next request (any route). */
  readonly nextRequest: Effect.Effect<SeenRequest>
  /** Waits for the next accepted WebSocket connection. */
  readonly nextConnection: Effect.Effect<CoreConnection>
}

const json = (status: number, body: unknown) => ({ _tag: "raw", status, body: JSON.stringify(body) }) as const

/** Convenience replies. */
export const reply = {
  bootstrapError: (status: number, error: string, detail = "") => json(status, { error, detail }),
  upgradeError: (status: number, error: string, detail = "") =>
    ({ _tag: "refuse", status, body: JSON.stringify({ error, detail }) }) as const
}

const readBody = (req: Http.IncomingMessage): Promise<string> =>
  new Promise((resolve) => {
    const chunks: Array<Buffer> = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")))
    req.on("error", () => resolve(""))
  })

/** Starts the fake Core; it stops (server and every connection) when the scope closes. */
export const make: Effect.Effect<FakeCore, never, Scope.Scope> = Effect.gen(function* () {
  // Node callbacks run outside any fiber: they use plain arrays, unsafe queue offers, and this runner.
  const runSync = Effect.runSyncWith(yield* Effect.context<never>())
  const bootstrapScript: Array<BootstrapReply> = []
  const upgradeScript: Array<UpgradeReply> = []
  const log: Array<SeenRequest> = []
  const requestQueue = yield* Queue.unbounded<SeenRequest>()
  const connections = yield* Queue.unbounded<CoreConnection>()
  const sockets = new Set<import("node:net").Socket>()
  const hanging: Array<Http.ServerResponse> = []
  const wss = new WebSocketServer({ noServer: true, maxPayload: 8 * 1024 * 1024 })

  const record = (seen: SeenRequest) => {
    log.push(seen)
    Queue.offerUnsafe(requestQueue, seen)
  }

  const server = Http.createServer((req, res) => {
    void readBody(req).then((body) => {
      const url = req.url ?? "/"
      const route = url.startsWith("/api/v1/agent-daemon/bootstrap") ? "bootstrap" : "other"
      record({ route, method: req.method ?? "", url, headers: { ...req.headers }, body })
      if (route !== "bootstrap") {
        res.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify({ error: "not_found", detail: "" }))
        return
      }
      const next = bootstrapScript.shift() ?? { _tag: "default" }
      if (next._tag === "hang") {
        hanging.push(res)
        return
      }
      if (next._tag === "raw") {
        res.writeHead(next.status, { "content-type": "application/json" }).end(next.body)
        return
      }
      let deviceId = ""
      try {
        deviceId = String((JSON.parse(body) as { device_id?: unknown }).device_id ?? "")
      } catch {
        deviceId = ""
      }
      const port = (server.address() as AddressInfo).port
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({
        device_id: deviceId,
        workspace_id: "3d1e8b60-0b9e-4a8f-8a8e-2f0f9d7c5a10",
        ws_url: next.ws_url ?? `ws://127.0.0.1:${port}/api/v1/agent-daemon/ws`,
        heartbeat_seconds: next.heartbeat_seconds ?? 15,
        protocol_version: next.protocol_version ?? "0.10.0"
      }))
    })
  })

  server.on("connection", (socket) => {
    sockets.add(socket)
    socket.on("close", () => sockets.delete(socket))
  })

  server.on("upgrade", (req, socket, head) => {
    const url = req.url ?? "/"
    record({ route: "upgrade", method: req.method ?? "", url, headers: { ...req.headers }, body: "" })
    const next = upgradeScript.shift() ?? { _tag: "accept" }
    if (next._tag === "hang") return
    if (next._tag === "refuse") {
      const body = Buffer.from(next.body)
      socket.end(
        `HTTP/1.1 ${next.status} ${Http.STATUS_CODES[next.status] ?? "Error"}\r\ncontent-type: application/json\r\ncontent-length: ${body.byteLength}\r\nconnection: close\r\n\r\n${next.body}`
      )
      return
    }
    wss.handleUpgrade(req, socket, head, (ws: WebSocket) => {
      const inbox = runSync(Queue.unbounded<string>())
      const closed = Deferred.makeUnsafe<{ readonly code: number; readonly reason: string }>()
      ws.on("message", (data, isBinary) => {
        const text = isBinary ? `<binary ${(data as Buffer).byteLength}>` : (data as Buffer).toString("utf8")
        Queue.offerUnsafe(inbox, text)
      })
      ws.on("close", (code, reason) => Deferred.doneUnsafe(closed, Exit.succeed({ code, reason: reason.toString("utf8") })))
      ws.on("error", () => undefined)
      const connection: CoreConnection = {
        url,
        headers: { ...req.headers },
        receivedText: Queue.take(inbox),
        received: Effect.flatMap(Queue.take(inbox), (text) => {
          const decoded = Messages.decodeRuntimeToCore(text)
          return Result.isSuccess(decoded)
            ? Effect.succeed(decoded.success)
            : Effect.die(new Error(`fake Core could not decode a frame: ${decoded.failure.message}`))
        }),
        pending: Queue.size(inbox),
        send: (frame) =>
          Effect.callback<void>((resume) => {
            let text: string
            if (typeof frame === "string") text = frame
            else {
              const encoded = Messages.encodeMessage(frame)
              if (Result.isFailure(encoded)) {
                resume(Effect.die(new Error(`test frame ${frame.type} does not encode`)))
                return
              }
              text = encoded.success
            }
            ws.send(text, () => resume(Effect.void))
          }),
        sendBinary: (bytes) => Effect.callback<void>((resume) => ws.send(bytes, { binary: true }, () => resume(Effect.void))),
        close: (code, reason = "") => Effect.sync(() => ws.close(code, reason)),
        terminate: Effect.sync(() => ws.terminate()),
        closed: Deferred.await(closed)
      }
      Queue.offerUnsafe(connections, connection)
    })
  })

  const port = yield* Effect.callback<number>((resume) => {
    server.listen(0, "127.0.0.1", () => resume(Effect.succeed((server.address() as AddressInfo).port)))
  })
  yield* Effect.addFinalizer(() =>
    Effect.callback<void>((resume) => {
      for (const res of hanging) res.destroy()
      for (const client of wss.clients) client.terminate()
      for (const socket of sockets) socket.destroy()
      wss.close()
      server.close(() => resume(Effect.void))
    })
  )

  const origin = `http://127.0.0.1:${port}`
  return {
    origin,
    apiBase: `${origin}/api/v1`,
    port,
    scriptBootstrap: (...replies) => Effect.sync(() => void bootstrapScript.push(...replies)),
    scriptUpgrade: (...replies) => Effect.sync(() => void upgradeScript.push(...replies)),
    requests: Effect.sync(() => [...log]),
    nextRequest: Queue.take(requestQueue),
    nextConnection: Queue.take(connections)
  }
})

export const FakeCore = { make, reply } as const
