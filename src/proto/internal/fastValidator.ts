/**
 * A validator compiled once from a schema's AST, for the codec's hot path. It answers the same question as a
 * strict Schema decode (`onExcessProperty: "error"`) for schemas without transformations, but validates the
 * parsed JSON in place instead of rebuilding it, so a valid frame costs one walk and no allocation. Every
 * filter (`check`) of the schema runs exactly as Schema runs it. Anything it does not understand (a
 * transformation, an unknown declaration) makes `compileValidator` return `undefined`, and the caller uses
 * the Schema decoder instead. Property tests check that both always agree.
 *
 * Two stages, each its own module: a tree of closures (closureValidator.ts, the reference form, also the
 * fallback) and, on top of it, generated code (generatedValidator.ts): one JavaScript function per struct, array and union of each compiled schema, with
 * constant member names and Schema's common numeric and length checks inlined. Each struct gets its own code,
 * so V8's inline caches stay monomorphic (closures shared by every struct go megamorphic and validated a
 * `done` frame in ~640 ns against ~100 ns generated: docs/performance.md). Where `new Function` is
 * unavailable the closures are used. The generated code may refuse an input the closures accept (a non-plain
 * prototype, a member inherited from a polluted `Object.prototype`); callers already fall back to Schema's
 * decoder on refusal, so such an input is only slower, never judged differently.
 */
import type { SchemaAST } from "effect"
import { compileClosures } from "./closureValidator.js"
import { generate } from "./generatedValidator.js"
import type { Validator } from "./validatorShared.js"

export type { Validator }

/** Compiles a validator, or `undefined` when the schema needs Schema's own decoder. */
export const compileValidator = (ast: SchemaAST.AST): Validator | undefined => {
  const closures = compileClosures(ast)
  return closures === undefined ? undefined : (generate(ast) ?? closures)
}
