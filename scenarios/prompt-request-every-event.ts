import { completeMessage, deltaFrame, doneFrame, heartbeat, openMessage, promptRequest, script } from "./Fixtures.js"
import { check, connect, frame, runtime, runtimeStep, scenario } from "./WireScenario.js"

const first = {
  tokens: { input_tokens: 100, cached_input_tokens: 20, output_tokens: 10, reasoning_output_tokens: 5, total_tokens: 110 }
}
const last = {
  tokens: { input_tokens: 200, cached_input_tokens: 40, output_tokens: 30, reasoning_output_tokens: 10, total_tokens: 230 },
  provider: "scripted",
  model: "scripted-model"
}
const observation = { kind: "command", status: "completed", command: "ls", exit_code: 0 } as const

export default scenario({
  name: "prompt-request-every-event",
  description:
    "prompt_request starts a Run directly, without an admission. With the opt-ins Core always sets " +
    "(observe_messages, observe_tool_observations) the Run reports thinking, message boundaries with the native " +
    "item id on every delta, tool calls with their engine-neutral observation before and after, cumulative usage " +
    "snapshots, and done with the full content, the last usage snapshot and the native Session.",
  sections: ["Message families", "Preparation and execution order"],
  replay: {
    runtime: { asserts: "every event type in script order, sequences from 1, done carrying the last snapshot" },
    core: { asserts: "the Run subscription delivers every event in order and ends after done" }
  },
  steps: [
    connect(),
    heartbeat(),
    promptRequest(
      "run-1",
      script(
        { thinking: "plan the answer" },
        { delta: "Listing" },
        { tool_call: { id: "tool-a", name: "shell", args: { cmd: "ls" }, result: { stdout: "README.md" }, observation } },
        { usage: first },
        { delta: " done" },
        { usage: last }
      )
    ),
    runtime({ type: "thinking", id: "run-1", payload: { text: "plan the answer", sequence: 1 } }),
    runtimeStep(openMessage("run-1", 1)),
    runtimeStep(deltaFrame("run-1", "Listing", 1, 1)),
    runtimeStep(completeMessage("run-1", 1, "Listing")),
    runtimeStep(frame({
      type: "tool_call",
      id: "run-1",
      payload: { id: "tool-a", name: "shell", stage: "before", args: { cmd: "ls" }, observation: { ...observation, status: "in_progress" } }
    })),
    runtimeStep(frame({
      type: "tool_call",
      id: "run-1",
      payload: { id: "tool-a", name: "shell", stage: "after", args: { cmd: "ls" }, result: { stdout: "README.md" }, observation }
    })),
    runtime({ type: "usage", id: "run-1", payload: first }),
    runtimeStep(openMessage("run-1", 2)),
    runtimeStep(deltaFrame("run-1", " done", 2, 2)),
    runtimeStep(completeMessage("run-1", 2, " done")),
    runtime({ type: "usage", id: "run-1", payload: last }),
    runtimeStep(doneFrame("run-1", "Listing done", last)),
    check("core", {
      _tag: "RunCompleted",
      run: "run-1",
      events: [
        "thinking",
        "output_message",
        "delta",
        "output_message",
        "tool_call",
        "tool_call",
        "usage",
        "output_message",
        "delta",
        "output_message",
        "usage",
        "done"
      ]
    }),
    check("core", { _tag: "LatestUsage", run: "run-1", usage: last }),
    check("core", { _tag: "TurnResolved", run: "run-1", status: "completed" }),
    check("runtime", { _tag: "NoRuns" })
  ]
})
