/**
 * What both stages of the codec's in-place validator share (fastValidator.ts): the validator type, the strict
 * parse options Schema's filters run with, a node's filters as one predicate, and the bounded JSON-value test
 * used for `Schema.Json`.
 */
import type { SchemaAST } from "effect"

/** True when the input is valid; on success the decoded value is the input itself. */
export type Validator = (input: unknown) => boolean

export const noOptions: SchemaAST.ParseOptions = { onExcessProperty: "error" }

export type Check = SchemaAST.Check<unknown>

export const compileChecks = (ast: SchemaAST.AST): ((value: unknown) => boolean) | undefined => {
  const checks = ast.checks as ReadonlyArray<Check> | undefined
  if (checks === undefined || checks.length === 0) return undefined
  const filters: Array<SchemaAST.Filter<unknown>> = []
  const collect = (check: Check) => {
    if (check._tag === "Filter") filters.push(check)
    else for (const inner of check.checks) collect(inner)
  }
  for (const check of checks) collect(check)
  return (value) => {
    for (let i = 0; i < filters.length; i++) {
      if (filters[i]!.run(value, ast, noOptions) !== undefined) return false
    }
    return true
  }
}

export const isPlainObject = (u: unknown): u is Record<string, unknown> =>
  typeof u === "object" && u !== null && !Array.isArray(u)

export const hasOwn = Object.prototype.hasOwnProperty

/** A JSON value: null, string, boolean, finite number, or arrays / plain objects of them (depth-bounded). */
export const isJson = (u: unknown, depth = 0): boolean => {
  if (u === null || typeof u === "string" || typeof u === "boolean") return true
  if (typeof u === "number") return Number.isFinite(u)
  if (depth > 512 || typeof u !== "object") return false
  if (Array.isArray(u)) {
    for (let i = 0; i < u.length; i++) if (!isJson(u[i], depth + 1)) return false
    return true
  }
  const proto = Object.getPrototypeOf(u)
  if (proto !== Object.prototype && proto !== null) return false
  for (const k in u) if (hasOwn.call(u, k) && !isJson((u as Record<string, unknown>)[k], depth + 1)) return false
  return true
}
