/**
 * The closure stage of the codec's in-place validator (fastValidator.ts): one closure per AST node, the
 * reference form and the fallback where generated code is unavailable. Any node it does not understand (a
 * transformation, an unknown declaration, a non-string property name, more than one rest element) makes it
 * return `undefined`, and the caller uses Schema's decoder.
 */
import { SchemaAST } from "effect"
import { compileChecks, hasOwn, isJson, isPlainObject, type Validator } from "./validatorShared.js"

/** The closure form: one closure per AST node. */
export const compileClosures = (ast: SchemaAST.AST): Validator | undefined => {
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
