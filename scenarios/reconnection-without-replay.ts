import { heartbeat, prepare, rejected, SessionA, script, start, status, text } from "./Fixtures.js"
import { check, connect, disconnect, reconnect, scenario, silence } from "./WireScenario.js"

export default scenario({
  name: "reconnection-without-replay",
  description:
    "Each physical connection has fresh routing and admission handles. Reconnection reestablishes the transport " +
    "and the capability declaration and never replays input, initialization, transfers or unresolved requests; " +
    "a handle from the old connection is unknown on the new one.",
  sections: ["Ownership and connection", "Failures, retries and cleanup"],
  replay: {
    runtime: { asserts: "after the drop only a heartbeat arrives; the old handle is rejected as unknown_preparation" },
    core: { asserts: "Core replays nothing on the new connection; the old Run's subscription ended with ObservationLost" }
  },
  steps: [
    connect(),
    heartbeat(),
    prepare("prep-1", SessionA),
    status("prep-1", 1, "preparing"),
    status("prep-1", 2, "ready"),
    start("prep-1", "run-1", script({ hang: true })),
    status("prep-1", 3, "starting", { run_id: "run-1" }),
    status("prep-1", 4, "started", { run_id: "run-1" }),
    disconnect(),
    check("core", { _tag: "RunObservationLost", run: "run-1", reason: "disconnected", events: [] }),
    check("core", { _tag: "TurnResolved", run: "run-1", status: "failed", errorCode: "event_stream_incomplete" }),
    reconnect(),
    heartbeat(),
    silence("1 minute", { note: "neither side replays anything" }),
    { ...start("prep-1", "run-2", text("again")), sides: ["runtime"], note: "the old handle on the new connection" },
    { ...rejected("prep-1", "execution_start", "unknown_preparation"), sides: ["runtime"] },
    check("runtime", { _tag: "NoRuns" }),
    check("runtime", { _tag: "CleanupConfirmed" })
  ]
})
