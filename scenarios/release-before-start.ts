import { admissionNames, heartbeat, prepare, rejected, release, SessionA, start, status, text } from "./Fixtures.js"
import { check, connect, scenario } from "./WireScenario.js"

export default scenario({
  name: "release-before-start",
  description:
    "execution_release abandons an admission before start (released); the released handle can no longer start " +
    "a Run, and releasing never closes the Session's idle Executor: the next preparation for the Session reuses " +
    "it and is ready at once (reused, same Executor id, new handle) without native preparation.",
  sections: ["Preparation and execution order"],
  replay: {
    runtime: { asserts: "released at revision 3, a start with the released handle is rejected, the next prepare reuses the Executor" },
    core: { asserts: "the preparation subscription ends with released; the second preparation is ready with reused" }
  },
  steps: [
    connect(),
    heartbeat(),
    prepare("prep-1", SessionA),
    status("prep-1", 1, "preparing"),
    status("prep-1", 2, "ready"),
    release("prep-1"),
    status("prep-1", 3, "released"),
    { ...start("prep-1", "run-1", text("too late")), sides: ["runtime"], note: "Core never starts a released admission" },
    { ...rejected("prep-1", "execution_start", "preparation_not_ready"), sides: ["runtime"] },
    prepare("prep-2", SessionA),
    status("prep-2", 1, "ready", { reused: true }, { ...admissionNames("prep-2"), executor: "prep-1.executor_id" }),
    check("core", { _tag: "PreparationObserved", request: "prep-1", states: ["preparing", "ready", "released"] }),
    check("core", { _tag: "PreparationObserved", request: "prep-2", states: ["ready"] })
  ]
})
