/**
 * A small, strict parser of the Prometheus text exposition format (0.0.4) for the observability tests. It
 * accepts `# HELP`, `# TYPE` and other comments, and samples `name{label="value",…} value [timestamp]`, and
 * throws (naming the line number) on anything else: a bad metric or label name, an unterminated or badly
 * escaped label value, a duplicate label, a value that is not a Go float (`+Inf`, `-Inf`, `NaN` allowed), a
 * second `TYPE` for a family, a `TYPE` after the family's samples, or a sample whose family (for histograms:
 * `_bucket`, `_sum`, `_count`) has a different TYPE.
 */
export interface Sample {
  readonly name: string
  readonly labels: Readonly<Record<string, string>>
  readonly value: number
}

export interface Family {
  readonly name: string
  type: string | undefined
  help: string | undefined
  readonly samples: Array<Sample>
}

export interface Exposition {
  readonly families: ReadonlyMap<string, Family>
  readonly samples: ReadonlyArray<Sample>
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/
const TYPES = new Set(["counter", "gauge", "histogram", "summary", "untyped"])

const parseValue = (text: string, line: number): number => {
  if (text === "+Inf" || text === "Inf") return Infinity
  if (text === "-Inf") return -Infinity
  if (text === "NaN") return NaN
  if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(text)) throw new Error(`line ${line}: invalid value ${JSON.stringify(text)}`)
  return Number(text)
}

/** The labels between `{` and `}` (the text after the opening brace); returns them and the rest after `}`. */
const parseLabels = (text: string, line: number): { labels: Record<string, string>; rest: string } => {
  const labels: Record<string, string> = {}
  let i = 0
  while (true) {
    if (text[i] === "}") return { labels, rest: text.slice(i + 1) }
    const eq = text.indexOf("=", i)
    if (eq < 0) throw new Error(`line ${line}: label without '='`)
    const name = text.slice(i, eq).trim()
    if (!LABEL_NAME.test(name)) throw new Error(`line ${line}: invalid label name ${JSON.stringify(name)}`)
    if (name in labels) throw new Error(`line ${line}: duplicate label ${name}`)
    if (text[eq + 1] !== "\"") throw new Error(`line ${line}: label value of ${name} is not quoted`)
    let j = eq + 2
    let value = ""
    while (true) {
      const c = text[j]
      if (c === undefined) throw new Error(`line ${line}: unterminated label value of ${name}`)
      if (c === "\"") break
      if (c === "\\") {
        const next = text[j + 1]
        if (next === "\\") value += "\\"
        else if (next === "\"") value += "\""
        else if (next === "n") value += "\n"
        else throw new Error(`line ${line}: invalid escape in label value of ${name}`)
        j += 2
        continue
      }
      if (c === "\n") throw new Error(`line ${line}: raw newline in label value`)
      value += c
      j++
    }
    labels[name] = value
    i = j + 1
    if (text[i] === ",") {
      i++
      continue
    }
    if (text[i] !== "}") throw new Error(`line ${line}: expected ',' or '}' after label ${name}`)
  }
}

/** The family a sample belongs to: a histogram's / summary's suffixed series belong to the base name. */
const familyOf = (families: Map<string, Family>, name: string): Family | undefined => {
  for (const suffix of ["_bucket", "_sum", "_count"]) {
    if (name.endsWith(suffix)) {
      const base = families.get(name.slice(0, -suffix.length))
      if (base !== undefined && (base.type === "histogram" || base.type === "summary")) return base
    }
  }
  return families.get(name)
}

export const parsePrometheusText = (text: string): Exposition => {
  const families = new Map<string, Family>()
  const samples: Array<Sample> = []
  const lines = text.split("\n")
  if (lines[lines.length - 1] === "") lines.pop()
  lines.forEach((raw, index) => {
    const line = index + 1
    if (raw.trim() === "") return
    if (raw.startsWith("#")) {
      const m = /^# (HELP|TYPE) (\S+)(?: (.*))?$/.exec(raw)
      if (m === null) return // a plain comment
      const [, kind, name, rest = ""] = m
      if (!METRIC_NAME.test(name!)) throw new Error(`line ${line}: invalid metric name ${JSON.stringify(name)}`)
      const family = families.get(name!) ?? { name: name!, type: undefined, help: undefined, samples: [] }
      families.set(name!, family)
      if (kind === "TYPE") {
        if (!TYPES.has(rest)) throw new Error(`line ${line}: invalid type ${JSON.stringify(rest)}`)
        if (family.type !== undefined) throw new Error(`line ${line}: second TYPE for ${name}`)
        if (family.samples.length > 0) throw new Error(`line ${line}: TYPE after samples of ${name}`)
        family.type = rest
      } else {
        if (family.help !== undefined) throw new Error(`line ${line}: second HELP for ${name}`)
        family.help = rest
      }
      return
    }
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(.*)$/.exec(raw)
    if (m === null) throw new Error(`line ${line}: not a sample: ${JSON.stringify(raw.slice(0, 80))}`)
    const name = m[1]!
    let rest = m[2]!
    let labels: Record<string, string> = {}
    if (rest.startsWith("{")) {
      const parsed = parseLabels(rest.slice(1), line)
      labels = parsed.labels
      rest = parsed.rest
    }
    const parts = rest.trim().split(/ +/)
    if (!rest.startsWith(" ") || parts.length < 1 || parts.length > 2) throw new Error(`line ${line}: expected ' value [timestamp]'`)
    const value = parseValue(parts[0]!, line)
    if (parts.length === 2 && !/^-?\d+$/.test(parts[1]!)) throw new Error(`line ${line}: invalid timestamp`)
    const sample = { name, labels, value }
    const family = familyOf(families, name)
    if (family !== undefined) family.samples.push(sample)
    else families.set(name, { name, type: undefined, help: undefined, samples: [sample] })
    samples.push(sample)
  })
  return { families, samples }
}

/** The value of the one sample `name` whose labels include `labels` (0 when there is none; throws for several). */
export const valueOf = (exposition: Exposition, name: string, labels: Record<string, string> = {}): number => {
  const found = exposition.samples.filter((s) =>
    s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
  if (found.length > 1) throw new Error(`${found.length} samples of ${name} match ${JSON.stringify(labels)}`)
  return found[0]?.value ?? 0
}

/** The sum of every sample `name` whose labels include `labels`. */
export const sumOf = (exposition: Exposition, name: string, labels: Record<string, string> = {}): number =>
  exposition.samples
    .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((total, s) => total + s.value, 0)
