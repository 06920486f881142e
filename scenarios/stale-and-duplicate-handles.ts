import {
  admissionNames,
  completeMessage,
  deltaFrame,
  doneFrame,
  openMessage,
  heartbeat,
  prepare,
  preparedConfiguration,
  rejected,
  release,
  script,
  SessionA,
  start,
  status
} from "./Fixtures.js"
import { bind, check, connect, core, runtime, runtimeStep, scenario, settle } from "./WireScenario.js"

const input = script({ wait: "finish" }, { delta: "ok" })
const names = admissionNames("prep-1")

export default scenario({
  name: "stale-and-duplicate-handles",
  description:
    "Connection-local identity and fingerprint rules: a repeated identical request re-publishes the current " +
    "status; the same request id with another payload is request_conflict; a handle that does not belong to the " +
    "request, or a wrong Executor id, cannot start anything; a repeated start re-publishes; releasing after " +
    "start never cancels the Run. On Core's side, older, repeated and foreign-handle statuses are ignored.",
  sections: ["Preparation and execution order", "Failures, retries and cleanup"],
  replay: {
    runtime: { asserts: "re-published statuses keep their revision; conflicts and stale handles get their finite codes; the Run survives the release" },
    core: { asserts: "the preparation subscription applies only revisions 1..4 of the first handle" }
  },
  steps: [
    connect(),
    heartbeat(),
    prepare("prep-1", SessionA),
    status("prep-1", 1, "preparing"),
    status("prep-1", 2, "ready"),
    // Core's side: the Runtime repeats and reorders statuses; Core must ignore them.
    { ...status("prep-1", 2, "ready"), sides: ["core"], note: "a repeated revision" },
    { ...status("prep-1", 1, "preparing"), sides: ["core"], note: "an older revision" },
    {
      ...runtime({
        type: "preparation_status",
        id: "prep-1",
        payload: { executor_id: "executor-x", handle: "handle-foreign", revision: 3, state: "released", expires_at: 1 }
      }),
      sides: ["core"],
      note: "a status for another handle"
    },
    // The Runtime's side: duplicates and conflicts from Core.
    { ...prepare("prep-1", SessionA), sides: ["runtime"], note: "identical repeat: re-publishes the current status" },
    { ...status("prep-1", 2, "ready"), sides: ["runtime"] },
    {
      ...core({
        type: "execution_prepare",
        id: "prep-1",
        payload: { session_id: SessionA, configuration: { ...preparedConfiguration(SessionA), observe_messages: false } }
      }),
      sides: ["runtime"],
      note: "same request id, another payload"
    },
    { ...rejected("prep-1", "execution_prepare", "request_conflict"), sides: ["runtime"] },
    {
      ...core({
        type: "execution_start",
        id: "prep-1",
        payload: { executor_id: bind(names.executor, "executor-1"), handle: "handle-stale", run_id: "run-1", input }
      }),
      sides: ["runtime"],
      note: "a handle that is not this request's"
    },
    { ...rejected("prep-1", "execution_start", "unknown_preparation"), sides: ["runtime"] },
    {
      ...core({
        type: "execution_start",
        id: "prep-1",
        payload: { executor_id: "executor-other", handle: bind(names.handle, "handle-1"), run_id: "run-1", input }
      }),
      sides: ["runtime"],
      note: "a wrong Executor id"
    },
    { ...rejected("prep-1", "execution_start", "unknown_executor"), sides: ["runtime"] },
    start("prep-1", "run-1", input),
    status("prep-1", 3, "starting", { run_id: "run-1" }),
    status("prep-1", 4, "started", { run_id: "run-1" }),
    { ...start("prep-1", "run-1", input), sides: ["runtime"], note: "identical repeat: re-publishes" },
    { ...status("prep-1", 4, "started", { run_id: "run-1" }), sides: ["runtime"] },
    { ...release("prep-1"), sides: ["runtime"], note: "release after start never cancels the Run" },
    { ...status("prep-1", 4, "started", { run_id: "run-1" }), sides: ["runtime"] },
    settle("finish"),
    runtimeStep(openMessage("run-1", 1)),
    runtimeStep(deltaFrame("run-1", "ok", 1, 1)),
    runtimeStep(completeMessage("run-1", 1, "ok")),
    runtimeStep(doneFrame("run-1", "ok")),
    check("core", { _tag: "PreparationObserved", request: "prep-1", states: ["preparing", "ready", "starting", "started"] }),
    check("core", { _tag: "RunCompleted", run: "run-1", events: ["output_message", "delta", "output_message", "done"] })
  ]
})
