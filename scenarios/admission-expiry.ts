import { heartbeat, prepare, rejected, SessionA, start, status, text } from "./Fixtures.js"
import { advance, check, connect, scenario, silence } from "./WireScenario.js"

export default scenario({
  name: "admission-expiry",
  description:
    "An admission expires five minutes after it is granted (expires_at, Unix ms, is authoritative and never " +
    "extended): not a millisecond earlier the Runtime still holds it; at the deadline it publishes expired, " +
    "and the expired handle can no longer start a Run.",
  sections: ["Preparation and execution order"],
  replay: {
    runtime: { asserts: "expired at exactly 5 minutes (revision 3, same handle and expiry); a later start is rejected" },
    core: { asserts: "the preparation subscription ends with expired" }
  },
  steps: [
    connect(),
    heartbeat(),
    prepare("prep-1", SessionA),
    status("prep-1", 1, "preparing"),
    status("prep-1", 2, "ready"),
    silence("299999 millis"),
    advance("1 millis"),
    status("prep-1", 3, "expired"),
    { ...start("prep-1", "run-1", text("too late")), sides: ["runtime"], note: "Core never starts an expired admission" },
    { ...rejected("prep-1", "execution_start", "preparation_not_ready"), sides: ["runtime"] },
    check("core", { _tag: "PreparationObserved", request: "prep-1", states: ["preparing", "ready", "expired"] })
  ]
})
