/**
 * A validator compiled once from a schema's AST, for the codec's hot path. It answers the same question as a
 * strict Schema decode (`onExcessProperty: "error"`) for schemas without transformations, but validates the
 * parsed JSON in place instead of rebuilding it, so a valid frame costs one walk and no allocation. Every
 * filter (`check`) of the schema runs exactly as Schema runs it. Anything it does not understand (a
 * transformation, an unknown declaration) makes `compileValidator` return `undefined`, and the caller uses
 * the Schema decoder instead. Property tests check that both always agree.
 */
import { SchemaAST } from "effect"

/** True when the input is valid; on success the decoded value is the input itself. */
export type Validator = (input: unknown) => boolean

const noOptions: SchemaAST.ParseOptions = { onExcessProperty: "error" }

type Check = SchemaAST.Check<unknown>

const compileChecks = (ast: SchemaAST.AST): ((value: unknown) => boolean) | undefined => {
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

const isPlainObject = (u: unknown): u is Record<string, unknown> =>
  typeof u === "object" && u !== null && !Array.isArray(u)

const hasOwn = Object.prototype.hasOwnProperty

/** A JSON value: null, string, boolean, finite number, or arrays / plain objects of them (depth-bounded). */
const isJson = (u: unknown, depth = 0): boolean => {
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

/** Compiles a validator, or `undefined` when the schema needs Schema's own decoder. */
export const compileValidator = (ast: SchemaAST.AST): Validator | undefined => {
  const cache = new Map<SchemaAST.AST, Validator | undefined>()
  let unsupported = false

  const compile = (node: SchemaAST.AST): Validator => {
    const cached = cache.get(node)
    if (cached !== undefined) return cached
    if (node.encoding !== undefined) {
      unsupported = true
      return () => false
    }
    // a forwarding entry first, so recursive schemas compile once
    let actual: Validator = () => false
    cache.set(node, (u) => actual(u))
    const base = compileBase(node)
    const checks = compileChecks(node)
    actual = checks === undefined ? base : (u) => base(u) && checks(u)
    cache.set(node, actual)
    return actual
  }

  const compileBase = (node: SchemaAST.AST): Validator => {
    switch (node._tag) {
      case "Unknown":
      case "Any":
        return () => true
      case "Never":
        return () => false
      case "Null":
        return (u) => u === null
      case "Undefined":
        return (u) => u === undefined
      case "String":
        return (u) => typeof u === "string"
      case "Number":
        return (u) => typeof u === "number"
      case "Boolean":
        return (u) => typeof u === "boolean"
      case "Literal": {
        const literal = node.literal
        return (u) => u === literal
      }
      case "Declaration": {
        const representation = (node.annotations as { readonly representation?: { readonly id?: string } } | undefined)
          ?.representation
        if (representation?.id === "effect/schema/Json" && node.typeParameters.length === 0) return isJson
        unsupported = true
        return () => false
      }
      case "Arrays": {
        if (node.rest.length > 1) {
          unsupported = true
          return () => false
        }
        const elements = node.elements.map((e) => ({ validate: compile(e), optional: SchemaAST.isOptional(e) }))
        const rest = node.rest.length === 1 ? compile(node.rest[0]!) : undefined
        return (u) => {
          if (!Array.isArray(u)) return false
          if (rest === undefined && u.length > elements.length) return false
          for (let i = 0; i < elements.length; i++) {
            if (i >= u.length) {
              if (!elements[i]!.optional) return false
              continue
            }
            if (!elements[i]!.validate(u[i])) return false
          }
          if (rest !== undefined) {
            for (let i = elements.length; i < u.length; i++) if (!rest(u[i])) return false
          }
          return true
        }
      }
      case "Objects": {
        const props: Array<{ readonly name: string; readonly validate: Validator; readonly optional: boolean }> = []
        for (const ps of node.propertySignatures) {
          if (typeof ps.name !== "string") {
            unsupported = true
            return () => false
          }
          props.push({ name: ps.name, validate: compile(ps.type), optional: SchemaAST.isOptional(ps.type) })
        }
        const names = new Set(props.map((p) => p.name))
        const index = node.indexSignatures.map((sig) => ({ key: compile(sig.parameter), value: compile(sig.type) }))
        return (u) => {
          if (!isPlainObject(u)) return false
          let present = 0
          for (let i = 0; i < props.length; i++) {
            const p = props[i]!
            if (!hasOwn.call(u, p.name)) {
              if (!p.optional) return false
              continue
            }
            present++
            if (!p.validate(u[p.name])) return false
          }
          if (index.length === 0) {
            // strict: no member beyond the declared ones (count first, then look only when needed)
            let count = 0
            for (const k in u) if (hasOwn.call(u, k)) count++
            return count === present
          }
          for (const k in u) {
            if (!hasOwn.call(u, k) || names.has(k)) continue
            let matched = false
            for (const sig of index) {
              if (sig.key(k)) {
                matched = true
                if (!sig.value(u[k])) return false
              }
            }
            if (!matched) return false
          }
          return true
        }
      }
      case "Union": {
        const members = node.types.map(compile)
        return (u) => {
          for (let i = 0; i < members.length; i++) if (members[i]!(u)) return true
          return false
        }
      }
      case "Suspend":
        return compile(node.thunk())
      default:
        unsupported = true
        return () => false
    }
  }

  const validator = compile(ast)
  return unsupported ? undefined : validator
}
