/**
 * A scripted Turn's body: its script's steps in order, or the echo of its input (`Script.ts`). One generator function
 * for every Turn, not one made per Turn: V8 keeps what a freshly made generator function closes over alive through
 * young collections (docs/performance.md, "generators").
 */
import { Effect } from "effect"
import type { TurnContext } from "./ScriptedTurnState.js"
import { echoFragments, type ParsedInput, type Step } from "./Script.js"

/** What the body uses of its Turn: the output helpers (`ScriptedTurnState.makeOutput`) and the step runner. */
export interface ScriptOps {
  readonly emit: TurnContext["sink"]["emit"]
  readonly delta: (text: string, phase?: string) => Effect.Effect<void>
  readonly deltaUnsafe: (text: string, phase?: string) => Effect.Effect<void> | undefined
  readonly completeMessage: Effect.Effect<void>
  readonly runStep: (step: Step) => Effect.Effect<"continue" | "stop">
}

export const runScript = Effect.fnUntraced(function* (parsed: ParsedInput, ops: ScriptOps) {
  switch (parsed._tag) {
    case "Echo":
      for (const fragment of echoFragments(parsed.text)) yield* ops.delta(fragment)
      yield* ops.completeMessage
      return
    case "InvalidScript":
      yield* ops.emit({
        type: "error",
        payload: { error: parsed.index === undefined ? "invalid script" : `invalid script (step ${parsed.index})` }
      })
      return
    case "Script": {
      const steps: Array<Step | undefined> = parsed.steps
      // Indexed: an iterator's result object per step was about 30 bytes allocated per delta (issue 18, relay).
      // Each step is let go once it runs (the steps are this Turn's own, parsed from its input for it alone): a
      // long script's run steps no longer live, and are copied by the collector, until the Turn ends.
      for (let i = 0; i < steps.length; i++) {
        const step = steps[i]!
        steps[i] = undefined
        // The common step without the step dispatcher and, while the Run's buffer has room, without an Effect
        // (the relay's hot loop; the fiber still suspends when the buffer is full, at most every 64 deltas).
        if ("delta" in step) {
          for (let times = step.repeat ?? 1; times > 0; times--) {
            const rest = ops.deltaUnsafe(step.delta, step.phase)
            if (rest !== undefined) yield* rest
          }
        } else if ((yield* ops.runStep(step)) === "stop") return
      }
      yield* ops.completeMessage
      return
    }
  }
})
