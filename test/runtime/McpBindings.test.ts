/**
 * MCP connection authority, Runtime side (issue #14; reference §8.2): the common validator refuses a bad origin,
 * a bad server URL and a bearer server without HTTPS before any factory runs; public servers become transient
 * effective bindings the scripted Harness shows to a script (the bearer only as its presence, never its text on
 * the wire); a `required` server is initialized with a real MCP `initialize` POST (carrying the bearer) and one
 * that fails stops the preparation before any input.
 */
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option, Redacted } from "effect"
import type { McpHttpServer, PromptRequestPayload } from "../../src/proto/Execution.js"
import { validateConfiguration } from "../../src/proto/Execution.js"
import { describe as describeMcp, initializeRequired, resolveMcpBindings } from "../../src/runtime/harness/McpBindings.js"
import { connect, next, prepareFrame, processLayer, promptFrame, same, script } from "../support/runtimeTestWire.js"

const server = (extra: Partial<McpHttpServer> = {}): McpHttpServer => ({
  connection_origin: "service",
  server_label: "tickets",
  server_url: "https://mcp.example.org/mcp",
  allowed_tools: ["lookup"],
  ...extra
})
const Token = "mcp-bearer-secret-7f3a"

/** A local MCP endpoint: answers `initialize` with `status` (200: a JSON-RPC result) and records the requests. */
const endpoint = (status: number) =>
  Effect.acquireRelease(
    Effect.promise(() =>
      new Promise<{ url: string; seen: Array<{ method: string; authorization: string | undefined; body: string }>; server: Http.Server }>((done) => {
        const seen: Array<{ method: string; authorization: string | undefined; body: string }> = []
        const srv = Http.createServer((req, res) => {
          let body = ""
          req.on("data", (c: Buffer) => (body += c.toString("utf8")))
          req.on("end", () => {
            seen.push({ method: req.method ?? "", authorization: req.headers.authorization, body })
            res.writeHead(status, { "content-type": "application/json" })
            res.end(status === 200 ? JSON.stringify({ jsonrpc: "2.0", id: 1, result: { protocolVersion: "2025-06-18", capabilities: {} } }) : "{}")
          })
        })
        srv.listen(0, "127.0.0.1", () => done({ url: `http://127.0.0.1:${(srv.address() as AddressInfo).port}/mcp`, seen, server: srv }))
      })),
    (e) => Effect.promise(() => new Promise<void>((done) => e.server.close(() => done())))
  )

describe("MCP bindings (Runtime)", () => {
  it("the common validator: origin rules, the URL rule, and HTTPS with a host for bearer servers", () => {
    const base: PromptRequestPayload = { agent_kind: "scripted", conversation_id: "", run_id: "", disable_execution_environment: true }
    const issue = (s: McpHttpServer) => Option.getOrUndefined(validateConfiguration({ ...base, mcp_http_servers: [s] }))
    same(issue(server()), undefined)
    same(issue(server({ bearer_token: Token })), undefined)
    same(issue(server({ server_url: "http://mcp.example.org/mcp" })), undefined, "plain http without a bearer is allowed")
    same(issue(server({ server_url: "http://mcp.example.org/mcp", bearer_token: Token })), "mcp_bearer_insecure")
    for (const url of ["https://user:pw@mcp.example.org/", "https://mcp.example.org/?q=1", "https://mcp.example.org/#f", "ftp://mcp.example.org/", "/relative", "https://"]) {
      same(issue(server({ server_url: url })), "mcp_server_url", url)
    }
    same(issue(server({ connection_origin: "environment" })), "mcp_origin_environment")
    same(
      Option.getOrUndefined(validateConfiguration({ ...base, disable_execution_environment: false, mcp_http_servers: [server()] })),
      "mcp_origin_service"
    )
  })

  it("resolution: public servers first, installed ones by unused label; the description shows the bearer only as presence", () => {
    const config: PromptRequestPayload = {
      agent_kind: "scripted",
      conversation_id: "",
      run_id: "",
      mcp_http_servers: [server({ bearer_token: Token, required: true })]
    }
    const bindings = resolveMcpBindings(config, [
      { label: "tickets", url: "http://127.0.0.1:1/shadowed", allowedTools: null },
      { label: "docs", url: "http://127.0.0.1:2/mcp", allowedTools: null }
    ])
    same(bindings.map((b) => [b.label, b.source]), [["tickets", "public"], ["docs", "installed"]])
    assert.isTrue(Redacted.isRedacted(Option.getOrThrow(bindings[0]!.bearer)))
    assert.notInclude(JSON.stringify(bindings), Token)
    assert.notInclude(String(bindings[0]!.bearer), Token)
    same(describeMcp(bindings)[0], { label: "tickets", url: "https://mcp.example.org/mcp", origin: "service", allowed_tools: ["lookup"], required: true, bearer: true, source: "public" })
  })

  it.effect("a script sees the effective bindings; the bearer never appears on the wire", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* core.toRuntime(promptFrame("run-1", script([{ mcp_servers: true }]), { mcp_http_servers: [server({ bearer_token: Token })] }))
      const delta = yield* next(core, "delta")
      same(JSON.parse(delta.payload.delta), [
        { label: "tickets", url: "https://mcp.example.org/mcp", origin: "service", allowed_tools: ["lookup"], required: false, bearer: true, source: "public" }
      ])
      yield* next(core, "done")
      assert.notInclude(JSON.stringify(yield* core.sent), Token)
    }).pipe(Effect.provide(processLayer())))

  it.effect("a bearer server over plain http is refused before any factory: invalid_configuration", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* core.toRuntime(prepareFrame("prep-1", { mcp_http_servers: [server({ server_url: "http://mcp.example.org/mcp", bearer_token: Token })] }))
      const status = yield* next(core, "preparation_status")
      same([status.payload.state, status.payload.error_code], ["rejected", "invalid_configuration"])
    }).pipe(Effect.provide(processLayer())))

  it.live("a required server is initialized (the bearer sent as Authorization); one that fails stops the preparation", () =>
    Effect.gen(function* () {
      const ok = yield* endpoint(200)
      const bad = yield* endpoint(503)
      yield* initializeRequired(resolveMcpBindings(
        { agent_kind: "scripted", conversation_id: "", run_id: "", mcp_http_servers: [server({ server_url: ok.url, required: true, bearer_token: Token }), server({ server_label: "optional", server_url: bad.url })] },
        []
      ))
      same(ok.seen.length, 1)
      same(ok.seen[0]!.authorization, `Bearer ${Token}`)
      same(JSON.parse(ok.seen[0]!.body).method, "initialize")
      same(bad.seen.length, 0, "an optional server is not contacted")

      const { core } = yield* connect()
      yield* core.toRuntime(prepareFrame("prep-ok", { mcp_http_servers: [server({ server_url: ok.url, required: true })] }))
      same((yield* next(core, "preparation_status")).payload.state, "preparing")
      same((yield* next(core, "preparation_status")).payload.state, "ready")
      yield* core.toRuntime(prepareFrame("prep-bad", { mcp_http_servers: [server({ server_label: "broken", server_url: bad.url, required: true })] }, "c1d2e3f4-0000-4000-8000-000000000002"))
      same((yield* next(core, "preparation_status")).payload.state, "preparing")
      const failed = yield* next(core, "preparation_status")
      same(failed.payload.state, "failed")
      same(bad.seen.length, 1)
    }).pipe(Effect.provide(processLayer())))
})
