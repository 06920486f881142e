/**
 * Test helpers that read the wire (encoded) shape of a message schema from its AST, so the rejection and
 * property tests can mutate any payload generically: which payload members are required, which accept
 * `null`, and where a payload holds a strict object (a struct, not a record or opaque JSON) into which an
 * unknown member can be injected. Also the mutations themselves, applied to wire JSON.
 */
import { Result, Schema, SchemaAST } from "effect"

/** A path of keys and array indices from the payload root. */
export type Path = ReadonlyArray<string | number>

const unwrap = (ast: SchemaAST.AST): SchemaAST.AST => (SchemaAST.isSuspend(ast) ? unwrap(ast.thunk()) : ast)

/** The encoded AST of a message schema's `payload` member, or undefined for a body-less message. */
export const payloadAst = (message: Schema.Top): SchemaAST.Objects | undefined => {
  const encoded = unwrap(SchemaAST.toEncoded(message.ast))
  if (!SchemaAST.isObjects(encoded)) throw new Error("a message schema encodes to an object")
  const member = encoded.propertySignatures.find((p) => p.name === "payload")
  if (member === undefined) return undefined
  const payload = unwrap(member.type)
  if (!SchemaAST.isObjects(payload)) throw new Error("every payload encodes to an object")
  return payload
}

/** Names of the members a payload must carry, in schema order. */
export const requiredMembers = (payload: SchemaAST.Objects): ReadonlyArray<string> =>
  payload.propertySignatures.filter((p) => !SchemaAST.isOptional(p.type)).map((p) => String(p.name))

const decodesNull = new Map<SchemaAST.AST, boolean>()
/** True when the member's wire schema accepts JSON `null` (NullOr, opaque JSON, unknown). */
export const acceptsNull = (payload: SchemaAST.Objects, member: string): boolean => {
  const signature = payload.propertySignatures.find((p) => p.name === member)
  if (signature === undefined) throw new Error(`no member ${member}`)
  const cached = decodesNull.get(signature.type)
  if (cached !== undefined) return cached
  const probe = Schema.make<Schema.Top>(signature.type)
  const accepts = Result.isSuccess(Schema.decodeUnknownResult(probe as Schema.Codec<unknown, unknown>)(null))
  decodesNull.set(signature.type, accepts)
  return accepts
}

const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v)

const validators = new WeakMap<SchemaAST.AST, (value: unknown) => boolean>()
const matches = (ast: SchemaAST.AST, value: unknown): boolean => {
  let validate = validators.get(ast)
  if (validate === undefined) {
    const decodeMember = Schema.decodeUnknownResult(Schema.make<Schema.Top>(ast) as Schema.Codec<unknown, unknown>)
    validate = (v) => Result.isSuccess(decodeMember(v))
    validators.set(ast, validate)
  }
  return validate(value)
}

/**
 * Every path (excluding the root) at which `value`, read with the wire AST `ast`, holds a strict object:
 * a struct without index signatures. Records and opaque JSON accept any key and are skipped.
 */
export const strictObjectPaths = (ast: SchemaAST.AST, value: unknown, path: Path = []): Array<Path> => {
  const node = unwrap(ast)
  const out: Array<Path> = []
  if (SchemaAST.isObjects(node) && isPlainObject(value)) {
    if (node.indexSignatures.length === 0 && path.length > 0) out.push(path)
    for (const [key, child] of Object.entries(value)) {
      const signature = node.propertySignatures.find((p) => p.name === key)
      const childAst = signature?.type ?? node.indexSignatures[0]?.type
      if (childAst !== undefined) out.push(...strictObjectPaths(childAst, child, [...path, key]))
    }
  } else if (SchemaAST.isArrays(node) && Array.isArray(value)) {
    value.forEach((item, i) => {
      const itemAst = node.elements[i] ?? node.rest[0]
      if (itemAst !== undefined) out.push(...strictObjectPaths(itemAst, item, [...path, i]))
    })
  } else if (SchemaAST.isUnion(node)) {
    const member = node.types.find((t) => matches(t, value))
    if (member !== undefined) out.push(...strictObjectPaths(member, value, path))
  }
  return out
}

// ---------------------------------------------------------------------------------------------- mutations

/** A deep copy of parsed wire JSON. */
export const clone = <A>(value: A): A => JSON.parse(JSON.stringify(value)) as A

const at = (root: unknown, path: Path): Record<string, unknown> => {
  let node: unknown = root
  for (const key of path) node = (node as Record<string | number, unknown>)[key]
  if (!isPlainObject(node)) throw new Error(`no object at ${path.join(".")}`)
  return node
}

/** The unknown member injected by the mutations; no schema declares it. */
export const UnknownMember = "zz_not_in_0_10_0"

/** A copy of the wire frame object with an unknown member added to the payload object at `path`. */
export const withUnknownMember = (frame: Record<string, unknown>, path: Path): Record<string, unknown> => {
  const copy = clone(frame)
  at(copy["payload"], path)[UnknownMember] = true
  return copy
}

/** A copy of the wire frame object without one payload member. */
export const withoutMember = (frame: Record<string, unknown>, member: string): Record<string, unknown> => {
  const copy = clone(frame)
  delete at(copy["payload"], [])[member]
  return copy
}

/** A copy of the wire frame object with one payload member set to `null`. */
export const withNullMember = (frame: Record<string, unknown>, member: string): Record<string, unknown> => {
  const copy = clone(frame)
  at(copy["payload"], [])[member] = null
  return copy
}

/** An id of 129 UTF-8 bytes that starts with a marker, to prove it is never echoed. */
export const oversizedId = (marker: string): string => {
  const id = marker + "x".repeat(129 - marker.length)
  if (new TextEncoder().encode(id).length !== 129) throw new Error("the marker must be ASCII and shorter than 129")
  return id
}

/** True when no rendering of the error mentions `text`. */
export const neverMentions = (error: unknown, text: string): boolean =>
  !String(error).includes(text) &&
  !JSON.stringify(error).includes(text) &&
  !(error instanceof Error && (error.message.includes(text) || (error.stack ?? "").includes(text)))
