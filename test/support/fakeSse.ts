/**
 * What the fake model servers share (fakeAnthropic.ts for Messages, fakeResponses.ts for Responses): a scoped
 * HTTP server on 127.0.0.1 (an ephemeral port, every request body collected before the handler runs, closed
 * with its connections when the Scope closes), server-sent events, and JSON replies.
 */
import { Effect, type Scope } from "effect"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"

/** One request as a fake sees it: the complete body as text. */
export type FakeHandler = (req: Http.IncomingMessage, res: Http.ServerResponse, body: string) => void

/** Starts `handler` on 127.0.0.1 for the enclosing Scope; returns the port. */
export const loopbackServer = (handler: FakeHandler): Effect.Effect<number, never, Scope.Scope> =>
  Effect.map(
    Effect.acquireRelease(
      Effect.callback<Http.Server>((resume) => {
        const server = Http.createServer((req, res) => {
          const chunks: Array<Buffer> = []
          req.on("data", (c: Buffer) => chunks.push(c))
          req.on("end", () => handler(req, res, Buffer.concat(chunks).toString("utf8")))
        })
        server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
      }),
      (server) =>
        Effect.callback<void>((resume) => {
          server.closeAllConnections()
          server.close(() => resume(Effect.void))
        })
    ),
    (server) => (server.address() as AddressInfo).port
  )

/** Starts an SSE response. */
export const sseHead = (res: Http.ServerResponse) =>
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" })

/** Writes one server-sent event (`event: <name>`, `data: <json>`). */
export const sse = (res: Http.ServerResponse, event: string, data: unknown) =>
  res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`)

/** A complete JSON reply; `x-should-retry: false` on errors so the clients send one request only. */
export const jsonReply = (res: Http.ServerResponse, status: number, body: unknown) => {
  res.writeHead(status, { "content-type": "application/json", ...(status >= 400 ? { "x-should-retry": "false" } : {}) })
  res.end(JSON.stringify(body))
}
