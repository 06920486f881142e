/**
 * Codec suite: strict decode + validate of each measured frame kind against `JSON.parse` alone (the target
 * baseline) and against `JSON.parse` + an ajv validator compiled from the same schema, plus `encodeMessage`
 * against `JSON.stringify`. Every contender of a kind runs in the same rounds (interleaved), and every kind
 * runs in the same process, so the codec's validators see the mixed traffic they see in production.
 */
import { Result, Schema } from "effect"
import { Ajv2020 } from "ajv/dist/2020.js"
import { Messages } from "../../src/proto/index.js"
import { frameClass, frameKinds, type FrameKind, messages, texts } from "../frames.js"
import { figure, type Figure } from "../lib/figures.js"
import type { Suite, SuiteContext, SuiteResult } from "../lib/suite.js"
import { compareThroughput, contender } from "../lib/throughput.js"

const strict = { onExcessProperty: "error" } as const

const schemaOf = (kind: FrameKind): Schema.Top =>
  frameClass[kind].direction === "runtimeToCore"
    ? Messages.runtimeToCore[kind as keyof typeof Messages.runtimeToCore].schema
    : Messages.coreToRuntime[kind as keyof typeof Messages.coreToRuntime].schema

const decoderOf = (kind: FrameKind): (text: string) => Result.Result<unknown, unknown> =>
  frameClass[kind].direction === "runtimeToCore" ? Messages.decodeRuntimeToCore : Messages.decodeCoreToRuntime

/**
 * An ajv validator compiled from the schema's derived JSON Schema (draft 2020-12, excess members rejected in
 * every payload struct). The envelope itself stays open, as the codec's is: unknown envelope members are
 * ignored (later protocol versions add some).
 */
const ajvValidator = (ajv: InstanceType<typeof Ajv2020>, kind: FrameKind) => {
  const document = Schema.toJsonSchemaDocument(schemaOf(kind), strict)
  const { additionalProperties: _closed, ...envelope } = document.schema as Record<string, unknown>
  return ajv.compile({ ...envelope, $defs: document.definitions })
}

/** Adds an unknown member to the object at `path` of a copy of `value` (JSON round trip). */
const withExcess = (value: unknown, path: ReadonlyArray<string | number>): unknown => {
  const copy = JSON.parse(JSON.stringify(value)) as Record<string, unknown>
  let at: Record<string, unknown> = copy
  for (const key of path) at = at[key as string] as Record<string, unknown>
  at["zz_unknown"] = 1
  return copy
}

/** Objects nested in a value, as paths (for the strictness check). */
const objectPaths = (value: unknown, path: Array<string | number> = []): Array<Array<string | number>> => {
  if (typeof value !== "object" || value === null) return []
  const own = Array.isArray(value) ? [] : [path]
  const entries = Array.isArray(value) ? value.map((v, i) => [i, v] as const) : Object.entries(value)
  return [...own, ...entries.flatMap(([k, v]) => objectPaths(v, [...path, k]))]
}

export const codecSuite: Suite = {
  name: "codec",
  describe: "strict decode + validate per frame kind vs JSON.parse and ajv; encodeMessage vs JSON.stringify",
  run: async (ctx: SuiteContext): Promise<SuiteResult> => {
    const options = ctx.quick
      ? { rounds: 3, samplesPerRound: 5, sampleMs: 1, warmupMs: 20 }
      : { rounds: 9, samplesPerRound: 15, sampleMs: 1, warmupMs: 150 }
    const ajv = new Ajv2020({ strict: false, allErrors: false, validateFormats: false })
    const figures: Array<Figure> = []
    const notes: Array<string> = []
    const disagreements: Array<string> = []
    let rejectedByBoth = 0
    let acceptedByBoth = 0

    const prepared = frameKinds.map((kind) => {
      const text = texts[kind]
      const decode = decoderOf(kind)
      const validate = ajvValidator(ajv, kind)
      const interpreted = Schema.decodeUnknownResult(schemaOf(kind) as Schema.Codec<unknown, unknown>, strict)
      const parsed = JSON.parse(text) as unknown
      if (Result.isFailure(decode(text))) throw new Error(`codec bench: the ${kind} sample does not decode`)
      if (!validate(parsed)) throw new Error(`codec bench: the ${kind} sample fails its ajv schema`)
      // Same strictness: an unknown member added at each object of the sample is rejected by both or
      // accepted by both (the envelope and opaque JSON values accept it).
      for (const path of objectPaths(parsed)) {
        const bad = withExcess(parsed, path)
        const ours = Result.isFailure(decode(JSON.stringify(bad)))
        const theirs = !validate(bad)
        if (ours !== theirs) {
          disagreements.push(`${kind} at /${path.join("/")}: codec ${ours ? "rejects" : "accepts"}, ajv ${theirs ? "rejects" : "accepts"}`)
        } else if (ours) rejectedByBoth++
        else acceptedByBoth++
      }
      return { kind, text, decode, validate, interpreted, message: messages[kind] as Messages.Message }
    })

    // Warm every decoder and encoder on every kind first (by time: on a busy machine the optimizing compiler's
    // background thread is slow to finish), so no kind is measured on monomorphic or unoptimized validators.
    const warmUntil = performance.now() + (ctx.quick ? 100 : 1500)
    while (performance.now() < warmUntil) {
      for (let i = 0; i < 100; i++) {
        for (const p of prepared) {
          p.decode(p.text)
          Messages.encodeMessage(p.message)
        }
      }
    }

    for (const p of prepared) {
      ctx.log(`codec: ${p.kind} (${p.text.length} bytes)`)
      const { text, decode, validate, interpreted, message } = p
      const samples = compareThroughput(
        [
          contender("parse", () => JSON.parse(text)),
          contender("codec", () => decode(text)),
          contender("ajv", () => validate(JSON.parse(text)) ? true : undefined),
          contender("schema", () => interpreted(JSON.parse(text))),
          contender("stringify", () => JSON.stringify(message)),
          contender("encode", () => Messages.encodeMessage(message))
        ],
        options
      )
      const target = frameClass[p.kind].target
      figures.push(
        figure({
          suite: "codec",
          name: `decode ${p.kind}`,
          unit: "frames/s",
          samples: samples["codec"]!,
          baseline: { name: "JSON.parse", samples: samples["parse"]! },
          ...(target === undefined ? {} : { target: { on: "ratio", op: ">=", value: target } })
        }),
        figure({
          suite: "codec",
          name: `decode ${p.kind} vs ajv`,
          unit: "frames/s",
          samples: samples["codec"]!,
          baseline: { name: "JSON.parse+ajv", samples: samples["ajv"]! }
        }),
        figure({
          suite: "codec",
          name: `schema-only decode ${p.kind}`,
          unit: "frames/s",
          samples: samples["schema"]!,
          baseline: { name: "JSON.parse", samples: samples["parse"]! },
          note: "JSON.parse + Schema.decodeUnknownResult (strict), without the codec's compiled validator"
        }),
        figure({
          suite: "codec",
          name: `encode ${p.kind}`,
          unit: "frames/s",
          samples: samples["encode"]!,
          baseline: { name: "JSON.stringify", samples: samples["stringify"]! }
        })
      )
    }
    notes.push(
      `codec: ${frameKinds.length} kinds, frame sizes ${frameKinds.map((k) => `${k} ${texts[k].length} B`).join(", ")}`,
      "codec: ajv 8.20.0 validators are compiled from Schema.toJsonSchemaDocument(schema, {onExcessProperty: \"error\"}) " +
        "(draft 2020-12, additionalProperties: false on every struct); they do not carry the schemas' custom filters " +
        "(UTF-8 byte bounds, canonical UUIDs, unique kinds, cross-field rules) nor the JSON-value walk, so ajv does less work",
      disagreements.length === 0
        ? `codec: same strictness: an unknown member added at each of the samples' objects is rejected by both the codec ` +
          `and ajv (${rejectedByBoth} places) or accepted by both (${acceptedByBoth}: the envelope and opaque JSON values)`
        : `codec: strictness DIFFERS: ${disagreements.join("; ")}`
    )
    return { figures, notes }
  }
}
