/**
 * The generated-code stage of the codec's in-place validator (fastValidator.ts): one JavaScript function per
 * struct, array and union of a schema the closure stage accepted, with constant member names and Schema's
 * common numeric and length checks inlined, so V8's inline caches stay monomorphic per struct.
 */
import { SchemaAST } from "effect"
import { type Check, isJson, noOptions, type Validator } from "./validatorShared.js"

/** A filter's `representation` annotation, when it is one of Schema's built-in checks. */
const representationOf = (filter: SchemaAST.Filter<unknown>): { readonly id?: unknown; readonly payload?: unknown } | undefined =>
  (filter.annotations as { readonly representation?: { readonly id?: unknown; readonly payload?: unknown } } | undefined)
    ?.representation

const finiteMember = (payload: unknown, key: string): number | undefined => {
  const value = (payload as Record<string, unknown> | null | undefined)?.[key]
  return typeof value === "number" && Number.isFinite(value) ? value : undefined
}

/**
 * Inline JavaScript for one of Schema's built-in checks on `v` (already known to have the node's base type),
 * or `undefined` to run the filter itself. Each inlined form is exactly the built-in predicate.
 */
const inlineCheck = (filter: SchemaAST.Filter<unknown>, v: string): string | undefined => {
  const representation = representationOf(filter)
  const payload = representation?.payload
  const bound = (key: string, op: string) => {
    const n = finiteMember(payload, key)
    return n === undefined ? undefined : `${v} ${op} ${n}`
  }
  switch (representation?.id) {
    case "effect/schema/isInt":
      return `Number.isSafeInteger(${v})`
    case "effect/schema/isFinite":
      return `Number.isFinite(${v})`
    case "effect/schema/isGreaterThanOrEqualTo":
      return bound("minimum", ">=")
    case "effect/schema/isGreaterThan":
      return bound("exclusiveMinimum", ">")
    case "effect/schema/isLessThanOrEqualTo":
      return bound("maximum", "<=")
    case "effect/schema/isLessThan":
      return bound("exclusiveMaximum", "<")
    case "effect/schema/isMinLength": {
      const n = finiteMember(payload, "minLength")
      return n === undefined ? undefined : `${v}.length >= ${n}`
    }
    case "effect/schema/isMaxLength": {
      const n = finiteMember(payload, "maxLength")
      return n === undefined ? undefined : `${v}.length <= ${n}`
    }
    default:
      return undefined
  }
}

const isSimpleLiteral = (node: SchemaAST.AST): node is SchemaAST.Literal =>
  node._tag === "Literal" && (node.checks === undefined || node.checks.length === 0) &&
  (typeof node.literal === "string" || typeof node.literal === "boolean" ||
    (typeof node.literal === "number" && Number.isFinite(node.literal)))

/**
 * Generates the validator's source from an AST the closure stage accepted (so every node here is supported),
 * and instantiates it; `undefined` when code generation is not allowed in this environment.
 */
export const generate = (root: SchemaAST.AST): Validator | undefined => {
  const externals: Array<unknown> = []
  const external = (value: unknown): string => {
    const i = externals.indexOf(value)
    if (i >= 0) return `E[${i}]`
    externals.push(value)
    return `E[${externals.length - 1}]`
  }
  const functions: Array<string> = []
  const names = new Map<SchemaAST.AST, string>()
  const inherited = (name: string) => name in Object.prototype

  /** Name of the function validating `node` completely (base and checks), generating it on first use. */
  const functionFor = (node: SchemaAST.AST): string => {
    const known = names.get(node)
    if (known !== undefined) return known
    const name = `f${names.size}`
    names.set(node, name) // before the body, so recursive schemas refer to themselves
    functions.push(`function ${name}(u) {\n${body(node)}\n}`)
    return name
  }

  /** The node's checks on `v` as one expression, or `undefined` when it has none. */
  const checks = (node: SchemaAST.AST, v: string): string | undefined => {
    const list = node.checks as ReadonlyArray<Check> | undefined
    if (list === undefined || list.length === 0) return undefined
    const parts: Array<string> = []
    const collect = (check: Check) => {
      if (check._tag !== "Filter") {
        for (const inner of check.checks) collect(inner)
        return
      }
      parts.push(inlineCheck(check, v) ?? `${external(check)}.run(${v}, ${external(node)}, O) === undefined`)
    }
    for (const check of list) collect(check)
    return parts.join(" && ")
  }

  /** A boolean expression validating the identifier `v` against `node` (base type, then checks). */
  const test = (node: SchemaAST.AST, v: string): string => {
    switch (node._tag) {
      case "Objects":
      case "Arrays":
      case "Suspend":
        return `${functionFor(node)}(${v})`
      case "Union":
        if (node.types.every(isSimpleLiteral) && (node.checks === undefined || node.checks.length === 0)) {
          return `(${node.types.map((t) => `${v} === ${JSON.stringify((t as SchemaAST.Literal).literal)}`).join(" || ")})`
        }
        return `${functionFor(node)}(${v})`
      default: {
        const base = baseTest(node, v)
        const extra = checks(node, v)
        return extra === undefined ? base : `(${base} && ${extra})`
      }
    }
  }

  const baseTest = (node: SchemaAST.AST, v: string): string => {
    switch (node._tag) {
      case "Unknown":
      case "Any":
        return "true"
      case "Never":
        return "false"
      case "Null":
        return `${v} === null`
      case "Undefined":
        return `${v} === undefined`
      case "String":
        return `typeof ${v} === "string"`
      case "Number":
        return `typeof ${v} === "number"`
      case "Boolean":
        return `typeof ${v} === "boolean"`
      case "Literal":
        return isSimpleLiteral(node)
          ? `${v} === ${JSON.stringify(node.literal)}`
          : `${v} === ${external((node as SchemaAST.Literal).literal)}`
      case "Declaration":
        return `${external(isJson)}(${v})` // the closure stage accepted only the JSON declaration
      default:
        throw new Error(`fastValidator: no inline test for ${node._tag}`)
    }
  }

  const withChecks = (node: SchemaAST.AST): string => {
    const extra = checks(node, "u")
    return extra === undefined ? "return true" : `return ${extra}`
  }

  const body = (node: SchemaAST.AST): string => {
    switch (node._tag) {
      case "Suspend":
        return `return ${test(node.thunk(), "u")}${node.checks?.length ? ` && ${checks(node, "u")}` : ""}`
      case "Union": {
        const members = node.types.map((t) => test(t, "u")).join(" || ")
        const extra = checks(node, "u")
        return `return (${members})${extra === undefined ? "" : ` && ${extra}`}`
      }
      case "Arrays": {
        const lines = ["if (!IA(u)) return false", "var n = u.length"]
        if (node.rest.length === 0) lines.push(`if (n > ${node.elements.length}) return false`)
        node.elements.forEach((element, i) => {
          const required = SchemaAST.isOptional(element) ? "" : " return false;"
          lines.push(`if (n <= ${i}) {${required} } else { var e${i} = u[${i}]; if (!(${test(element, `e${i}`)})) return false }`)
        })
        if (node.rest.length === 1) {
          lines.push(`for (var i = ${node.elements.length}; i < n; i++) { var r = u[i]; if (!(${test(node.rest[0]!, "r")})) return false }`)
        }
        lines.push(withChecks(node))
        return lines.join("\n")
      }
      case "Objects": {
        // Plain objects only (JSON.parse gives Object.prototype); anything else goes to the slower, exact path.
        const lines = [
          "if (typeof u !== \"object\" || u === null || IA(u)) return false",
          "var p = GP(u)",
          "if (p !== OP && p !== null) return false",
          "var c = 0"
        ]
        const declared: Array<string> = []
        node.propertySignatures.forEach((ps, i) => {
          const name = ps.name as string
          const key = JSON.stringify(name)
          declared.push(key)
          const x = `x${i}`
          const read = inherited(name) ? `H.call(u, ${key}) ? u[${key}] : undefined` : `u[${key}]`
          const missing = SchemaAST.isOptional(ps.type) ? "" : "return false"
          lines.push(
            `var ${x} = ${read}`,
            `if (${x} !== undefined || H.call(u, ${key})) { c++; if (!(${test(ps.type, x)})) return false } else { ${missing} }`
          )
        })
        if (node.indexSignatures.length === 0) {
          // strict: every own enumerable key is a declared, present member (own only: a polluted
          // Object.prototype can neither add nor hide a member here)
          lines.push("var k = 0", "for (var _ in u) if (H.call(u, _)) k++", "if (k !== c) return false")
        } else {
          const isDeclared = declared.length === 0 ? "false" : declared.map((d) => `k === ${d}`).join(" || ")
          const signatures = node.indexSignatures.map((sig) =>
            `if (${test(sig.parameter, "k")}) { m = true; var y = u[k]; if (!(${test(sig.type, "y")})) return false }`
          )
          lines.push(
            "for (var k in u) {",
            "  if (!H.call(u, k)) return false",
            `  if (${isDeclared}) continue`,
            "  var m = false",
            ...signatures.map((l) => `  ${l}`),
            "  if (!m) return false",
            "}"
          )
        }
        lines.push(withChecks(node))
        return lines.join("\n")
      }
      default:
        return `return ${test(node, "u")}`
    }
  }

  try {
    const entry = functionFor(root)
    const source = [
      "\"use strict\"",
      "var H = Object.prototype.hasOwnProperty, OP = Object.prototype, GP = Object.getPrototypeOf, IA = Array.isArray",
      `var O = ${external(noOptions)}`,
      ...functions,
      `return ${entry}`
    ].join("\n")
    return new Function("E", source)(externals) as Validator
  } catch {
    return undefined
  }
}
