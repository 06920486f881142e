import { heartbeat, prepare, rejected, SessionA, status } from "./Fixtures.js"
import { connect, raw, scenario, silence } from "./WireScenario.js"

export default scenario({
  name: "malformed-requests",
  description:
    "Bad input gets a clear, typed answer and loses nothing: a request whose type and id are known but whose " +
    "payload fails strict decoding is answered with the family's rejection (invalid_request); a frame that is " +
    "not JSON or has an unknown type is dropped; the connection stays open and the next valid request works.",
  sections: ["Envelope and identity", "Preparation and execution order"],
  replay: {
    runtime: { asserts: "the daemon answers the undecodable prepare with invalid_request, ignores the rest, keeps the connection" },
    core: { skip: "Core's encoder never sends a malformed frame (unit-tested in src/proto)" }
  },
  steps: [
    connect(),
    heartbeat(),
    raw("core", "this is not JSON"),
    raw("core", JSON.stringify({ type: "no_such_request", id: "x-1", payload: {} })),
    silence("1 second"),
    raw("core", JSON.stringify({ type: "execution_prepare", id: "prep-bad", payload: { session_id: SessionA, extra: true } })),
    rejected("prep-bad", "execution_prepare", "invalid_request"),
    prepare("prep-1", SessionA),
    status("prep-1", 1, "preparing"),
    status("prep-1", 2, "ready")
  ]
})
