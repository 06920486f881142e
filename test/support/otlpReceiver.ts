/**
 * A small OTLP/HTTP receiver (JSON encoding, `OTEL_EXPORTER_OTLP_PROTOCOL=http/json`) on 127.0.0.1 for the
 * observability tests: it accepts `POST /v1/traces` and `POST /v1/metrics`, keeps every request's decoded body
 * and answers 200 with an empty JSON object (a full success). Anything else is answered 404 / 415 / 400 and
 * counted as rejected, so a test can assert that exporters sent what the receiver understands.
 */
import { createServer, type IncomingMessage, type Server } from "node:http"
import type { AddressInfo } from "node:net"

export interface OtlpAttribute {
  readonly key: string
  readonly value: Record<string, unknown>
}

/** One received span, flattened with its resource's `service.name` and every attribute as a plain value. */
export interface ReceivedSpan {
  readonly service: string
  readonly resource: Readonly<Record<string, unknown>>
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId: string | undefined
  readonly name: string
  readonly attributes: Readonly<Record<string, unknown>>
  /** Attribute values of the span's events (exceptions, logs), flattened. */
  readonly eventAttributes: ReadonlyArray<Readonly<Record<string, unknown>>>
  readonly startTimeUnixNano: string
  readonly endTimeUnixNano: string
}

/** The plain value of an OTLP AnyValue. */
export const anyValue = (value: Record<string, unknown> | undefined): unknown => {
  if (value === undefined) return undefined
  if ("stringValue" in value) return value.stringValue
  if ("boolValue" in value) return value.boolValue
  if ("intValue" in value) return Number(value.intValue)
  if ("doubleValue" in value) return value.doubleValue
  if ("arrayValue" in value) {
    const values = (value.arrayValue as { values?: Array<Record<string, unknown>> }).values ?? []
    return values.map(anyValue)
  }
  if ("kvlistValue" in value) {
    const values = (value.kvlistValue as { values?: Array<OtlpAttribute> }).values ?? []
    return attributesOf(values)
  }
  if ("bytesValue" in value) return value.bytesValue
  return undefined
}

export const attributesOf = (attributes: ReadonlyArray<OtlpAttribute> | undefined): Record<string, unknown> => {
  const out: Record<string, unknown> = {}
  for (const a of attributes ?? []) out[a.key] = anyValue(a.value)
  return out
}

export interface OtlpReceiver {
  readonly url: string
  /** Every decoded request body, by signal, in arrival order. */
  readonly bodies: { readonly traces: Array<any>; readonly metrics: Array<any> }
  /** Requests the receiver could not accept (wrong path, content type or body). */
  readonly rejected: () => number
  readonly spans: () => ReadonlyArray<ReceivedSpan>
  /** Names of every metric received (all resources). */
  readonly metricNames: () => ReadonlySet<string>
  readonly close: () => Promise<void>
}

const readBody = (req: IncomingMessage): Promise<string> =>
  new Promise((done, fail) => {
    const chunks: Array<Buffer> = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => done(Buffer.concat(chunks).toString("utf8")))
    req.on("error", fail)
  })

/** Starts the receiver on 127.0.0.1 (a free port). */
export const startOtlpReceiver = async (): Promise<OtlpReceiver> => {
  const bodies = { traces: [] as Array<any>, metrics: [] as Array<any> }
  let rejected = 0
  const server: Server = createServer(async (req, res) => {
    const body = await readBody(req)
    const signal = req.url === "/v1/traces" ? "traces" : req.url === "/v1/metrics" ? "metrics" : undefined
    if (req.method !== "POST" || signal === undefined) {
      rejected++
      res.writeHead(404).end()
      return
    }
    if (!(req.headers["content-type"] ?? "").startsWith("application/json")) {
      rejected++
      res.writeHead(415).end()
      return
    }
    try {
      bodies[signal].push(JSON.parse(body))
    } catch {
      rejected++
      res.writeHead(400).end()
      return
    }
    res.writeHead(200, { "content-type": "application/json" }).end("{}")
  })
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done))
  const port = (server.address() as AddressInfo).port
  const spans = (): ReadonlyArray<ReceivedSpan> =>
    bodies.traces.flatMap((body) =>
      (body.resourceSpans ?? []).flatMap((rs: any) => {
        const resource = attributesOf(rs.resource?.attributes)
        return (rs.scopeSpans ?? []).flatMap((ss: any) =>
          (ss.spans ?? []).map((span: any): ReceivedSpan => ({
            service: String(resource["service.name"]),
            resource,
            traceId: span.traceId,
            spanId: span.spanId,
            parentSpanId: span.parentSpanId === undefined || span.parentSpanId === "" ? undefined : span.parentSpanId,
            name: span.name,
            attributes: attributesOf(span.attributes),
            eventAttributes: (span.events ?? []).map((e: any) => attributesOf(e.attributes)),
            startTimeUnixNano: span.startTimeUnixNano,
            endTimeUnixNano: span.endTimeUnixNano
          }))
        )
      })
    )
  const metricNames = () =>
    new Set<string>(bodies.metrics.flatMap((body) =>
      (body.resourceMetrics ?? []).flatMap((rm: any) =>
        (rm.scopeMetrics ?? []).flatMap((sm: any) => (sm.metrics ?? []).map((m: any) => String(m.name))))))
  return {
    url: `http://127.0.0.1:${port}`,
    bodies,
    rejected: () => rejected,
    spans,
    metricNames,
    close: () => new Promise<void>((done) => server.close(() => done()))
  }
}
