import { doneFrame, plainHeartbeat, promptRequest, script } from "./Fixtures.js"
import { check, connect, runtime, runtimeStep, scenario } from "./WireScenario.js"

const a = {
  tokens: { input_tokens: 100, cached_input_tokens: 0, output_tokens: 10, reasoning_output_tokens: 0, total_tokens: 110 }
}
const b = {
  tokens: { input_tokens: 150, cached_input_tokens: 50, output_tokens: 25, reasoning_output_tokens: 5, total_tokens: 175 },
  cost_usd: 0.002
}
/** A snapshot without a token measurement: the tokens are unknown now, not zero and not b's. */
const c = { provider: "scripted", model: "scripted-model" }

export default scenario({
  name: "usage-snapshots",
  description:
    "Usage frames and the final done.usage each carry the cumulative measurement of the current execution and " +
    "replace the previous snapshot; they are never added. An absent measurement is unknown, not zero.",
  sections: ["Message families"],
  replay: {
    runtime: { asserts: "each snapshot is sent as reported and done carries the last one unchanged" },
    core: { asserts: "Core keeps the last snapshot (no sum, no invented zero tokens)" }
  },
  steps: [
    connect(),
    ...plainHeartbeat(),
    promptRequest("run-1", script({ usage: a }, { usage: b }, { usage: c }), { observeMessages: false }),
    runtime({ type: "usage", id: "run-1", payload: a }),
    runtime({ type: "usage", id: "run-1", payload: b }),
    runtime({ type: "usage", id: "run-1", payload: c }),
    runtimeStep(doneFrame("run-1", "", c)),
    check("core", { _tag: "LatestUsage", run: "run-1", usage: c }),
    check("core", { _tag: "TurnResolved", run: "run-1", status: "completed" }),
    check("core", { _tag: "RunCompleted", run: "run-1", events: ["usage", "usage", "usage", "done"] })
  ]
})
