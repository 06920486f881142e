/**
 * A minimal operator API client for the turns suite, in the bench process: plain `node:http` with a keep-alive
 * agent (as a real client holds its connections), the Bearer token in a header. `follow` reads a Turn's SSE
 * stream (`GET /turns/{id}/events`) until its `outcome` event, the way an operator client waits for a Turn.
 */
import { Agent, request } from "node:http"

export interface OperatorClient {
  /** A JSON request; resolves with the status, the parsed body and the time to the full response (ms). */
  readonly call: (method: "GET" | "POST", path: string, body?: unknown) => Promise<{ readonly status: number; readonly body: unknown; readonly ms: number }>
  /** Follows `GET /turns/{turnId}/events` to its `outcome` event; resolves with the outcome's `status`. */
  readonly follow: (turnId: string) => Promise<string>
  readonly close: () => void
}

export const operatorClient = (baseUrl: string, token: string): OperatorClient => {
  const agent = new Agent({ keepAlive: true, maxSockets: 1024 })
  const api = `${baseUrl}/api/v1/operator`
  const headers = { authorization: `Bearer ${token}`, "content-type": "application/json" }
  const call: OperatorClient["call"] = (method, path, body) =>
    new Promise((resolve, reject) => {
      const t0 = performance.now()
      const req = request(`${api}${path}`, { method, agent, headers }, (res) => {
        const chunks: Array<Buffer> = []
        res.on("data", (c: Buffer) => chunks.push(c))
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8")
          resolve({ status: res.statusCode ?? 0, body: text === "" ? undefined : JSON.parse(text), ms: performance.now() - t0 })
        })
        res.on("error", reject)
      })
      req.on("error", reject)
      req.end(body === undefined ? undefined : JSON.stringify(body))
    })
  const follow: OperatorClient["follow"] = (turnId) =>
    new Promise((resolve, reject) => {
      const req = request(`${api}/turns/${encodeURIComponent(turnId)}/events`, { method: "GET", agent, headers }, (res) => {
        if (res.statusCode !== 200) {
          res.resume()
          return reject(new Error(`GET /turns/{id}/events answered ${res.statusCode}`))
        }
        let buffer = ""
        let settled = false
        res.setEncoding("utf8")
        res.on("data", (chunk: string) => {
          buffer += chunk
          // SSE events end with a blank line; the outcome event is the last one of the stream.
          let end: number
          while (!settled && (end = buffer.indexOf("\n\n")) >= 0) {
            const event = buffer.slice(0, end)
            buffer = buffer.slice(end + 2)
            if (!event.startsWith("event: outcome")) continue
            const data = event.split("\n").find((l) => l.startsWith("data: "))
            settled = true
            resolve(data === undefined ? "unknown" : (JSON.parse(data.slice(6)) as { status: string }).status)
          }
        })
        res.on("end", () => settled || reject(new Error("the Turn's event stream ended without an outcome")))
        res.on("error", reject)
      })
      req.on("error", reject)
      req.end()
    })
  return { call, follow, close: () => agent.destroy() }
}
