/**
 * Canonical JSON: the stable re-encoding of a decoded value that fingerprints are computed over (request
 * idempotency, Executor reuse, input and decision conflicts). Object keys are sorted by code unit at every
 * depth, arrays keep their order, `undefined` members are dropped. Never fingerprint raw frame text: two
 * encodings of the same request must compare equal.
 */

export const canonicalJson = (value: unknown): string => {
  if (value === null || typeof value !== "object") return JSON.stringify(value) ?? "null"
  if (Array.isArray(value)) return `[${value.map((v) => (v === undefined ? "null" : canonicalJson(v))).join(",")}]`
  const record = value as Record<string, unknown>
  const keys = Object.keys(record).filter((k) => record[k] !== undefined).sort()
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(record[k])}`).join(",")}}`
}

/** Deep equality of two decoded JSON values through their canonical encodings. */
export const canonicalEquals = (a: unknown, b: unknown): boolean => canonicalJson(a) === canonicalJson(b)

/** Removes the given top-level keys (e.g. `delivery_id`) before fingerprinting a payload. */
export const omitKeys = <A extends object>(value: A, keys: ReadonlyArray<string>): Partial<A> => {
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(value)) if (!keys.includes(k)) out[k] = v
  return out as Partial<A>
}
