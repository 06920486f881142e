/**
 * The Turn outcome family in one namespace (`Outcome.X`): the fact journal (`TurnFact.ts`), the public outcome
 * and resolution (`TurnOutcome.ts`), the projection (`TurnProjection.ts`), the typed result (`TurnResult.ts`)
 * and the error classes (`TurnErrors.ts`). Each concept lives in its own module; this one only re-exports.
 */
export * from "./TurnErrors.js"
export * from "./TurnFact.js"
export * from "./TurnOutcome.js"
export * from "./TurnProjection.js"
export * from "./TurnResult.js"
