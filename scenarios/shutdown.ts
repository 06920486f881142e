import { deltaFrame, plainHeartbeat, promptRequest, script } from "./Fixtures.js"
import { check, closed, connect, core, disconnect, runtimeStep, scenario } from "./WireScenario.js"

export default scenario({
  name: "shutdown",
  description:
    "device_shutdown: the Runtime cancels active Runs and closes active and idle Executors, keeps waiting for " +
    "confirmed cleanup, sends no reply frame, then closes the connection and stops without reconnecting. A stop " +
    "is not a cancellation receipt: no receipt is invented for the Run.",
  sections: ["Preparation and execution order", "Failures, retries and cleanup"],
  replay: {
    runtime: { asserts: "no frame after device_shutdown, the daemon closes the connection and stops with every cleanup confirmed" },
    core: { asserts: "Core sends device_shutdown; when the Runtime goes, the Run subscription ends with ObservationLost" }
  },
  steps: [
    connect(),
    ...plainHeartbeat(),
    promptRequest("run-1", script({ delta: "working" }, { hang: true }), { observeMessages: false }),
    runtimeStep(deltaFrame("run-1", "working", 1)),
    core({ type: "device_shutdown", payload: { reason: "operator requested drain" } }),
    closed({ sides: ["runtime"] }),
    disconnect({ sides: ["core"], note: "the scripted Runtime leaves as a daemon does after shutdown" }),
    check("runtime", { _tag: "DaemonStopped", reason: "shutdown" }),
    check("runtime", { _tag: "CleanupConfirmed" }),
    check("core", { _tag: "RunObservationLost", run: "run-1", reason: "disconnected", events: ["delta"] })
  ]
})
