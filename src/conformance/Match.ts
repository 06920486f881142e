/**
 * Template matching and materialization for the wire scenarios (the rules are listed in
 * `scenarios/WireScenario.ts`). Pure functions: `match` compares a decoded message with a template and
 * returns the extended bindings or the first mismatch; `materialize` turns a template into a concrete message
 * a scripted peer can send, substituting bound values and binding unbound tokens to their samples.
 *
 * Reports never carry unbounded peer text: rendered values are truncated, and secret-bearing members
 * (`agent_options`, `bearer_token`, `credential`) are replaced by a marker.
 */
import { Result } from "effect"
import { isToken, type Token, TokenTypeId } from "../../scenarios/WireScenario.js"
import { canonicalEquals } from "../proto/Canonical.js"

/** Values bound so far, by token name. Immutable: every bind returns a new map (matching can backtrack). */
export type Bindings = ReadonlyMap<string, unknown>
export const emptyBindings: Bindings = new Map()

/** The first place a message differs from its template. */
export interface Mismatch {
  /** Dotted path inside the message, e.g. `payload.state`. */
  readonly path: string
  readonly expected: string
  readonly actual: string
}

const isRecord = (u: unknown): u is Record<string, unknown> =>
  typeof u === "object" && u !== null && !Array.isArray(u)

const SECRET_KEYS = new Set(["agent_options", "bearer_token", "credential", "api_key"])
const MAX_RENDER = 240

/** A short, redacted JSON rendering of a value or template, safe for reports. */
export const render = (value: unknown): string => {
  const text = JSON.stringify(value, (key, v: unknown) => {
    if (SECRET_KEYS.has(key)) return "<redacted>"
    if (isToken(v)) return renderToken(v)
    return v
  })
  if (text === undefined) return "<absent>"
  return text.length > MAX_RENDER ? `${text.slice(0, MAX_RENDER)}…(${text.length} chars)` : text
}

const renderToken = (t: Token<unknown>): string => {
  switch (t[TokenTypeId]) {
    case "bind":
      return `<bind ${t.name}>`
    case "any":
      return "<any>"
    case "optional":
      return `<optional ${render(t.inner)}>`
  }
}

const join = (path: string, key: string | number) =>
  typeof key === "number" ? `${path}[${key}]` : path === "" ? key : `${path}.${key}`

const mismatch = (path: string, expected: unknown, actual: unknown, expectedText?: string): Result.Result<Bindings, Mismatch> =>
  Result.fail({
    path: path === "" ? "<message>" : path,
    expected: expectedText ?? render(expected),
    actual: actual === undefined ? "<absent>" : render(actual)
  })

/**
 * Matches a decoded value against a template. Success carries the bindings extended with every token bound on
 * the way; failure names the first differing path.
 */
export const match = (template: unknown, actual: unknown, bindings: Bindings, path = ""): Result.Result<Bindings, Mismatch> => {
  if (isToken(template)) {
    switch (template[TokenTypeId]) {
      case "any":
        return actual === undefined ? mismatch(path, template, actual) : Result.succeed(bindings)
      case "optional":
        return actual === undefined ? Result.succeed(bindings) : match(template.inner, actual, bindings, path)
      case "bind": {
        if (actual === undefined) return mismatch(path, template, actual)
        if (bindings.has(template.name)) {
          const bound = bindings.get(template.name)
          return canonicalEquals(bound, actual)
            ? Result.succeed(bindings)
            : mismatch(path, bound, actual, `${render(bound)} (bound to ${template.name})`)
        }
        return Result.succeed(new Map(bindings).set(template.name, actual))
      }
    }
  }
  if (Array.isArray(template)) {
    if (!Array.isArray(actual)) return mismatch(path, template, actual)
    if (actual.length !== template.length) {
      return mismatch(path, template, actual, `an array of ${template.length} (${render(template)})`)
    }
    let current = bindings
    for (let i = 0; i < template.length; i++) {
      const r = match(template[i], actual[i], current, join(path, i))
      if (Result.isFailure(r)) return r
      current = r.success
    }
    return Result.succeed(current)
  }
  if (isRecord(template)) {
    if (!isRecord(actual)) return mismatch(path, template, actual)
    let current = bindings
    for (const key of Object.keys(template)) {
      const r = match(template[key], actual[key], current, join(path, key))
      if (Result.isFailure(r)) return r
      current = r.success
    }
    for (const key of Object.keys(actual)) {
      if (!(key in template) && actual[key] !== undefined) {
        return mismatch(join(path, key), undefined, actual[key], "<no such member>")
      }
    }
    return Result.succeed(current)
  }
  return Object.is(template, actual) ? Result.succeed(bindings) : mismatch(path, template, actual)
}

/**
 * Matches a whole message. The envelope `trace` is diagnostic correlation only: it is compared only when the
 * template states it.
 */
export const matchMessage = (template: unknown, actual: unknown, bindings: Bindings): Result.Result<Bindings, Mismatch> => {
  if (isRecord(template) && isRecord(actual) && !("trace" in template) && "trace" in actual) {
    const { trace: _trace, ...rest } = actual
    return match(template, rest, bindings)
  }
  return match(template, actual, bindings)
}

/** A template cannot be sent: it has a free value without a sample. A scenario authoring error. */
export interface NotMaterializable {
  readonly path: string
}

/**
 * Builds a concrete value from a template: bound tokens become their values, unbound `bind` tokens their
 * samples (and are bound to them), `any` its sample, and `optional` members are omitted.
 */
export const materialize = (
  template: unknown,
  bindings: Bindings,
  path = ""
): Result.Result<{ readonly value: unknown; readonly bindings: Bindings }, NotMaterializable> => {
  if (isToken(template)) {
    switch (template[TokenTypeId]) {
      case "bind":
        return bindings.has(template.name)
          ? Result.succeed({ value: bindings.get(template.name), bindings })
          : Result.succeed({ value: template.sample, bindings: new Map(bindings).set(template.name, template.sample) })
      case "any":
        return "sample" in template
          ? Result.succeed({ value: template.sample, bindings })
          : Result.fail({ path: path === "" ? "<message>" : path })
      case "optional":
        return Result.succeed({ value: undefined, bindings })
    }
  }
  if (Array.isArray(template)) {
    const out: Array<unknown> = []
    let current = bindings
    for (let i = 0; i < template.length; i++) {
      const r = materialize(template[i], current, join(path, i))
      if (Result.isFailure(r)) return r
      out.push(r.success.value)
      current = r.success.bindings
    }
    return Result.succeed({ value: out, bindings: current })
  }
  if (isRecord(template)) {
    const out: Record<string, unknown> = {}
    let current = bindings
    for (const key of Object.keys(template)) {
      const r = materialize(template[key], current, join(path, key))
      if (Result.isFailure(r)) return r
      if (r.success.value !== undefined) out[key] = r.success.value
      current = r.success.bindings
    }
    return Result.succeed({ value: out, bindings: current })
  }
  return Result.succeed({ value: template, bindings })
}

/**
 * Matches frames of several ordered streams that may interleave: `actual` must be a merge of the streams that
 * keeps each stream's order. Tries every assignment (streams are short), so a token bound by one choice does
 * not leak into another.
 */
export const matchInterleaved = (
  streams: ReadonlyArray<ReadonlyArray<unknown>>,
  actual: ReadonlyArray<unknown>,
  bindings: Bindings
): Result.Result<Bindings, Mismatch & { readonly index: number }> => {
  let deepest: (Mismatch & { readonly index: number }) | undefined
  const go = (positions: ReadonlyArray<number>, i: number, current: Bindings): Bindings | undefined => {
    if (i === actual.length) return positions.every((p, s) => p === streams[s]!.length) ? current : undefined
    for (let s = 0; s < streams.length; s++) {
      const stream = streams[s]!
      const p = positions[s]!
      if (p >= stream.length) continue
      const r = matchMessage(stream[p], actual[i], current)
      if (Result.isFailure(r)) {
        if (deepest === undefined || i > deepest.index) deepest = { ...r.failure, index: i }
        continue
      }
      const next = positions.map((q, k) => (k === s ? q + 1 : q))
      const found = go(next, i + 1, r.success)
      if (found !== undefined) return found
    }
    return undefined
  }
  const found = go(streams.map(() => 0), 0, bindings)
  if (found !== undefined) return Result.succeed(found)
  return Result.fail(deepest ?? { path: "<message>", expected: "an interleaving of the expected streams", actual: "<none>", index: 0 })
}
