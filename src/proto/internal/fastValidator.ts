/**
 * A validator compiled once from a schema's AST, for the codec's hot path. It answers the same question as a
 * strict Schema decode (`onExcessProperty: "error"`) for schemas without transformations, but validates the
 * parsed JSON in place instead of rebuilding it, so a valid frame costs one walk and no allocation. Every
 * filter (`check`) of the schema runs exactly as Schema runs it. Anything it does not understand (a
 * transformation, an unknown declaration) makes `compileValidator` return `undefined`, and the caller uses
 * the Schema decoder instead. Property tests check that both always agree.
 *
 * Two stages: a tree of closures (below, the reference form, also the fallback) and, on top of it, generated
 * code (`generate`): one JavaScript function per struct, array and union of each compiled schema, with
 * constant member names and Schema's common numeric and length checks inlined. Each struct gets its own code,
 * so V8's inline caches stay monomorphic (closures shared by every struct go megamorphic and validated a
 * `done` frame in ~640 ns against ~100 ns generated: docs/performance.md). Where `new Function` is
 * unavailable the closures are used. The generated code may refuse an input the closures accept (a non-plain
 * prototype, a member inherited from a polluted `Object.prototype`); callers already fall back to Schema's
 * decoder on refusal, so such an input is only slower, never judged differently.
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
  const closures = compileClosures(ast)
  return closures === undefined ? undefined : (generate(ast) ?? closures)
}

/** The closure form: one closure per AST node. */
const compileClosures = (ast: SchemaAST.AST): Validator | undefined => {
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

// ---------------------------------------------------------------------------------------------- generated code

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
const generate = (root: SchemaAST.AST): Validator | undefined => {
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
