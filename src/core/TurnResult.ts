/**
 * A Turn's typed result: the fact an admission refusal is journaled as, and `toResult`, which hands a
 * resolved Turn to its caller as success (`completed`, `cancelled`) or the typed error the projection settled
 * on. Total: it never throws and never rebuilds an error from the outcome's strings.
 */
import { Result } from "effect"
import type { AdmissionRefusal, TurnFact } from "./TurnFact.js"
import type { Resolved, TurnError, TurnOutcome } from "./TurnOutcome.js"

/** The journal fact of an admission refusal (it carries the refusal itself; `detail` is for the outcome). */
export const admissionFact = (rejection: AdmissionRefusal): TurnFact => {
  switch (rejection._tag) {
    case "CapabilitiesUndeclared":
      return { _tag: "AdmissionRejected", rejection: "capabilities_undeclared", detail: rejection.kind, error: rejection }
    case "HarnessUnavailable":
      return { _tag: "AdmissionRejected", rejection: "harness_unavailable", detail: rejection.reason, error: rejection }
    case "BindingInvalid":
      return { _tag: "AdmissionRejected", rejection: "binding_invalid", detail: rejection.reason, error: rejection }
    case "CapabilityUnsupported":
      return {
        _tag: "AdmissionRejected",
        rejection: "capability_unsupported",
        detail: `${rejection.source}:${rejection.capability}`,
        error: rejection
      }
    case "ConfigurationRejected":
      return { _tag: "AdmissionRejected", rejection: "configuration_rejected", detail: rejection.issue, error: rejection }
  }
}

/**
 * A resolved Turn as a typed result: `completed` and `cancelled` succeed with the outcome; a failed or
 * unclaimed Turn fails with the error its resolution carries.
 */
export const toResult = (resolution: Resolved): Result.Result<TurnOutcome, TurnError> => {
  if (resolution._tag === "Unclaimed") return Result.fail(resolution.error)
  return "error" in resolution ? Result.fail(resolution.error) : Result.succeed(resolution.outcome)
}
