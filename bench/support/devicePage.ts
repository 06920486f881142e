/**
 * The scale suite's operator device page figures (`GET /operator/devices?limit=50`, dev Core only; issue 18: "≤ 50 ms
 * for a page at 10k devices, no stall over 20 ms", "flat" judged on CPU per operation, not wall clock).
 *
 * Every request is timed in the dev Core's own process (`gateway-host` `get`): wall time, the event loop's largest
 * delay, the main thread's CPU (`threadCpuUsage`) and the SQLite store's worker thread's CPU (`schedstat`). The
 * main thread also handles the level's heartbeats while a request runs (667 per second at 10k devices × 15 s), and
 * under load a request lasts longer, so more of them land in it: its CPU is taken net of the thread's background
 * rate, measured over the last CPU window just before the requests (µs of CPU per ms of wall, heartbeats, timers and
 * GC of the idle connections). The Core's CPU per request = the main thread's net CPU + the store worker's net CPU;
 * its last level over its middle level is the judged flatness, with the negative control (devices / 50 pages in a
 * row: work proportional to the level) judged the same way. Wall time and stall stay judged against ≤ 50 / ≤ 20 ms
 * per request; the wall-clock flatness is reported, not judged (docs/performance.md, "Device page flatness").
 */
import type { HostGot } from "../children/gatewayHost.js"
import { figure, type Figure, lastVsMiddle } from "../lib/figures.js"

/** A thread's CPU per millisecond of wall time over a window with no request: µs/ms. */
export interface Background {
  readonly mainPerMs: number
  readonly workerPerMs: number
}

export interface PageLevel {
  readonly devices: number
  readonly page: ReadonlyArray<HostGot>
  readonly pageAfterGc: ReadonlyArray<HostGot>
  readonly walk: ReadonlyArray<HostGot>
  readonly background: Background
}

const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]!

/** The Core's CPU for one request (or walk), µs: main thread + store worker, each net of its background rate. */
export const requestCpuUs = (g: HostGot, bg: Background): number => {
  const main = Math.max(0, g.mainCpuUs - bg.mainPerMs * g.ms)
  const worker = Number.isFinite(g.workerCpuUs) ? Math.max(0, g.workerCpuUs - bg.workerPerMs * g.ms) : 0
  return main + worker
}

const fixed = (x: number, digits = 2) => (Number.isFinite(x) ? x.toFixed(digits) : "n/a")

const describe = (gots: ReadonlyArray<HostGot>, bg: Background): string => {
  const ms = (f: (g: HostGot) => number) => fixed(median(gots.map(f)) / 1000)
  return `wall ${fixed(median(gots.map((g) => g.ms)))} ms, Core CPU ${ms((g) => requestCpuUs(g, bg))} ms ` +
    `(main ${ms((g) => g.mainCpuUs)}, store worker ${ms((g) => g.workerCpuUs)}, whole process ${ms((g) => g.cpuUs)} ms before ` +
    `the background is taken out), GC pauses ${gots.reduce((a, g) => a + g.gcCount, 0)} of ` +
    `${fixed(gots.reduce((a, g) => a + g.gcMs, 0), 1)} ms in all`
}

/** The page figures at the top level, judged against the middle level, and the per-level notes. */
export const devicePageFigures = (
  levels: ReadonlyArray<PageLevel>,
  p: { readonly pageSamples: number; readonly pageGapMs: number }
): { readonly figures: Array<Figure>; readonly notes: Array<string> } => {
  const top = levels[levels.length - 1]!
  const mid = levels[Math.floor((levels.length - 1) / 2)]!
  const cpu = (l: PageLevel, gots: ReadonlyArray<HostGot>) => gots.map((g) => requestCpuUs(g, l.background))
  const vsMiddle = (x: number, middle: ReadonlyArray<number>) => lastVsMiddle([median(middle), x])
  const walkRatios = cpu(top, top.walk).map((x) => vsMiddle(x, cpu(mid, mid.walk)))
  const figures = [
    figure({
      suite: "scale",
      name: `GET /operator/devices?limit=50 @ ${top.devices} devices`,
      unit: "ms",
      samples: top.page.map((g) => g.ms),
      target: { on: "value", op: "<=", value: 50, over: "every" },
      note: `per request (wall clock in the Core's process); status ${top.page.map((g) => g.status).join("/")}, ${top.page[0]!.bytes} bytes`
    }),
    figure({
      suite: "scale",
      name: `GET /operator/devices?limit=50 @ ${top.devices} devices: event-loop stall`,
      unit: "ms",
      samples: top.page.map((g) => g.loopMaxMs),
      target: { on: "value", op: "<=", value: 20, over: "every" }
    }),
    figure({
      suite: "scale",
      name: `GET /operator/devices?limit=50: Core CPU per request, last level vs middle level`,
      unit: "×",
      samples: cpu(top, top.page).map((x) => vsMiddle(x, cpu(mid, mid.page))),
      target: { on: "value", op: "<=", value: 1.25 },
      control: { name: "devices / 50 pages in a row (work grows with the level), the Core's CPU the same way", samples: walkRatios },
      note: `each request's Core CPU at ${top.devices} (main thread + store worker thread, net of each thread's background rate ` +
        `over the last CPU window: main ${fixed(top.background.mainPerMs, 3)} / ${fixed(mid.background.mainPerMs, 3)} µs per ms at ` +
        `${top.devices} / ${mid.devices}) over the median at ${mid.devices}; ${p.pageSamples} requests per level ${p.pageGapMs} ms ` +
        `apart after the CPU windows, heartbeats running`
    }),
    figure({
      suite: "scale",
      name: `GET /operator/devices?limit=50: wall clock, last level vs middle level (not judged)`,
      unit: "×",
      samples: top.page.map((g) => vsMiddle(g.ms, mid.page.map((x) => x.ms))),
      note: `reported beside the judged CPU figure; the control's wall clock: ` +
        `${fixed(median(top.walk.map((g) => vsMiddle(g.ms, mid.walk.map((x) => x.ms)))))}×`
    })
  ]
  const notes = [
    `scale: GET /operator/devices?limit=50 per level (medians of ${p.pageSamples}): ` +
      levels.map((l) => `${l.devices}: ${describe(l.page, l.background)}`).join("; "),
    `scale: the same request right after the memory reading's forced GCs (3 per level, not judged), wall ms: ` +
      levels.map((l) => `${l.devices}: ${l.pageAfterGc.map((g) => g.ms.toFixed(1)).join("/")}`).join(", "),
    `scale: control, devices / 50 pages in a row (median of ${top.walk.length}): ` +
      levels.map((l) => `${l.devices} (${l.walk[0]?.bytes ?? 0} pages): ${describe(l.walk, l.background)}`).join("; ")
  ]
  return { figures, notes }
}
