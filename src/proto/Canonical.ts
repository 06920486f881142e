/**
 * Canonical JSON: the stable re-encoding of a decoded value that fingerprints are computed over (request
 * idempotency, Executor reuse, input and decision conflicts). Object keys are sorted by code unit at every
 * depth, arrays keep their order, `undefined` members are dropped. Never fingerprint raw frame text: two
 * encodings of the same request must compare equal.
 *
 * The encoding walks the value with an explicit stack, never by recursion, so its cost is bounded by the value's
 * size whatever its depth (decoded peer values are already bounded: JsonBounds.ts).
 */

type Frame =
  | { readonly kind: "array"; readonly items: ReadonlyArray<unknown>; index: number }
  | { readonly kind: "object"; readonly record: Record<string, unknown>; readonly keys: ReadonlyArray<string>; index: number }

/**
 * Walks `value`'s canonical encoding in order, handing each piece of text to `write`. `takeScalar`, when given,
 * sees each scalar first and may write it its own way (returns true) instead of as its JSON text
 * (`runtime/Fingerprint.ts` hashes long strings raw).
 */
export const walkCanonical = (
  value: unknown,
  write: (text: string) => void,
  takeScalar?: (scalar: unknown) => boolean
): void => {
  const stack: Array<Frame> = []
  /** Writes a scalar, or opens a container and pushes its frame. */
  const visit = (v: unknown) => {
    if (v === null || typeof v !== "object") {
      if (takeScalar === undefined || !takeScalar(v)) write(JSON.stringify(v) ?? "null")
    } else if (Array.isArray(v)) {
      write("[")
      stack.push({ kind: "array", items: v, index: 0 })
    } else {
      const record = v as Record<string, unknown>
      write("{")
      stack.push({ kind: "object", record, keys: Object.keys(record).filter((k) => record[k] !== undefined).sort(), index: 0 })
    }
  }
  visit(value)
  while (stack.length > 0) {
    const frame = stack[stack.length - 1]!
    if (frame.kind === "array") {
      if (frame.index === frame.items.length) {
        stack.pop()
        write("]")
        continue
      }
      if (frame.index > 0) write(",")
      const item = frame.items[frame.index++]
      visit(item === undefined ? null : item)
    } else {
      if (frame.index === frame.keys.length) {
        stack.pop()
        write("}")
        continue
      }
      if (frame.index > 0) write(",")
      const key = frame.keys[frame.index++]!
      write(JSON.stringify(key))
      write(":")
      visit(frame.record[key])
    }
  }
}

export const canonicalJson = (value: unknown): string => {
  const out: Array<string> = []
  walkCanonical(value, (text) => {
    out.push(text)
  })
  return out.join("")
}

/** Deep equality of two decoded JSON values through their canonical encodings. */
export const canonicalEquals = (a: unknown, b: unknown): boolean => canonicalJson(a) === canonicalJson(b)

/** Removes the given top-level keys (e.g. `delivery_id`) before fingerprinting a payload. */
export const omitKeys = <A extends object>(value: A, keys: ReadonlyArray<string>): Partial<A> => {
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(value)) if (!keys.includes(k)) out[k] = v
  return out as Partial<A>
}
