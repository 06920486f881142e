import { deltaFrame, doneFrame, plainHeartbeat, prepare, promptRequest, rejected, script, SessionA, status } from "./Fixtures.js"
import type { PromptRequestPayload } from "../src/proto/Execution.js"
import { check, connect, runtimeStep, scenario, silence } from "./WireScenario.js"

type Server = NonNullable<PromptRequestPayload["mcp_http_servers"]>[number]

/** A bearer value that must never come back on the wire: the Runtime shows only its presence. */
const Bearer = "mcp-bearer-scenario-7f3a"
const tickets: Server = {
  connection_origin: "service",
  server_label: "tickets",
  server_url: "https://mcp.example.org/mcp",
  allowed_tools: ["lookup"],
  bearer_token: Bearer
}
/** What the scripted harness's `mcp_servers` step shows for `tickets`: the effective binding, the bearer as presence. */
const Described = JSON.stringify([
  { label: "tickets", url: "https://mcp.example.org/mcp", origin: "service", allowed_tools: ["lookup"], required: false, bearer: true, source: "public" }
])

export default scenario({
  name: "mcp-connection-authority",
  description:
    "MCP connection authority: a public server from the request becomes a transient effective binding the Harness " +
    "sees (the bearer only as its presence); the common validator refuses a bearer server whose URL is not HTTPS " +
    "with a host and an environment-origin server without a networked local Environment, on both sides (Core " +
    "before sending; the Runtime before choosing a factory: invalid_configuration); a required server that fails " +
    "to initialize fails the preparation, so nothing is ever started.",
  sections: ["Message families", "Preparation and execution order"],
  replay: {
    runtime: { asserts: "the binding as the Harness sees it (no bearer text on the wire); invalid_configuration for an insecure bearer, a server URL without a host and an environment origin; failed/preparation_failed for a required server that does not initialize (a closed local port)" },
    core: { asserts: "the servers sent as configured; each invalid configuration refused before sending; the failed preparation is observed and nothing is started" }
  },
  steps: [
    connect(),
    ...plainHeartbeat(),
    promptRequest("run-mcp", script({ mcp_servers: true }), { observeMessages: false, mcpHttpServers: [tickets] }),
    runtimeStep(deltaFrame("run-mcp", Described, 1)),
    runtimeStep(doneFrame("run-mcp", Described)),
    check("core", { _tag: "RunCompleted", run: "run-mcp", events: ["delta", "done"] }),
    { ...prepare("prep-insecure", SessionA, { observeMessages: false, mcpHttpServers: [{ ...tickets, server_url: "http://mcp.example.org/mcp" }] }), refusedByCore: "mcp_bearer_insecure" },
    { ...rejected("prep-insecure", "execution_prepare", "invalid_configuration"), sides: ["runtime"] },
    { ...prepare("prep-no-host", SessionA, { observeMessages: false, mcpHttpServers: [{ ...tickets, server_url: "https://" }] }), refusedByCore: "mcp_server_url" },
    { ...rejected("prep-no-host", "execution_prepare", "invalid_configuration"), sides: ["runtime"] },
    { ...prepare("prep-origin", SessionA, { observeMessages: false, mcpHttpServers: [{ ...tickets, connection_origin: "environment" }] }), refusedByCore: "mcp_origin_environment" },
    { ...rejected("prep-origin", "execution_prepare", "invalid_configuration"), sides: ["runtime"] },
    prepare("prep-required", SessionA, {
      observeMessages: false,
      mcpHttpServers: [{ connection_origin: "service", server_label: "broken", server_url: "http://127.0.0.1:1/mcp", allowed_tools: null, required: true }]
    }),
    status("prep-required", 1, "preparing"),
    status("prep-required", 2, "failed", { error_code: "preparation_failed", granted: false }),
    silence("1 minute", { note: "no execution_start and no Run frame: nothing was submitted" }),
    check("core", { _tag: "PreparationObserved", request: "prep-required", states: ["preparing", "failed"] }),
    check("runtime", { _tag: "NoRuns" }),
    check("runtime", { _tag: "CleanupConfirmed" })
  ]
})
