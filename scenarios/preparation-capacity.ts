import { heartbeat, prepare, rejected, release, SessionA, SessionB, status } from "./Fixtures.js"
import { check, connect, scenario } from "./WireScenario.js"

export default scenario({
  name: "preparation-capacity",
  description:
    "A full Runtime rejects execution_prepare at once with preparation_capacity: a definite rejection whose own " +
    "contract makes a retry safe (the queued Turn stays unclaimed). Releasing the admission frees the active " +
    "slot, and the retry is admitted.",
  sections: ["Preparation and execution order"],
  replay: {
    runtime: { asserts: "with one active slot, the second prepare is rejected (revision 0, operation) and a retry after release is admitted" },
    core: { asserts: "the rejection reaches Core's caller as PreparationRejected(preparation_capacity), retry-safe" }
  },
  setup: { maxActive: 1 },
  steps: [
    connect(),
    heartbeat(),
    prepare("prep-1", SessionA),
    status("prep-1", 1, "preparing"),
    status("prep-1", 2, "ready"),
    prepare("prep-2", SessionB),
    rejected("prep-2", "execution_prepare", "preparation_capacity"),
    check("core", { _tag: "PreparationRejected", request: "prep-2", code: "preparation_capacity", retrySafe: true }),
    release("prep-1"),
    status("prep-1", 3, "released"),
    prepare("prep-3", SessionB),
    status("prep-3", 1, "preparing"),
    status("prep-3", 2, "ready"),
    check("core", { _tag: "PreparationObserved", request: "prep-1", states: ["preparing", "ready", "released"] })
  ]
})
