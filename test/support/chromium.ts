/**
 * Headless Chromium for the web console tests (test/e2e/console*.live.test.ts): the Debian `chromium` package
 * at /usr/bin/chromium (scripts/install-chromium.sh installs it), driven by playwright-core. Without the binary
 * the tests are skipped with a message, unless AGENTWIRE_REQUIRE_CHROMIUM=1 (set by .ci/run) makes that a
 * failure. Also a small PNG reader to check a screenshot is a real, non-blank picture.
 */
import { existsSync } from "node:fs"
import { inflateSync } from "node:zlib"
import { type Browser, chromium } from "playwright-core"

export const ChromiumPath = process.env.AGENTWIRE_CHROMIUM_PATH ?? "/usr/bin/chromium"
export const chromiumRequired = process.env.AGENTWIRE_REQUIRE_CHROMIUM === "1"
export const chromiumPresent = existsSync(ChromiumPath)

/** True when the console tests should be skipped (and says why, once). */
export const skipChromium = (): boolean => {
  if (chromiumPresent || chromiumRequired) return false
  console.warn(
    `console tests skipped: no Chromium at ${ChromiumPath} (run scripts/install-chromium.sh; AGENTWIRE_REQUIRE_CHROMIUM=1 makes this a failure)`
  )
  return true
}

export const launchChromium = (): Promise<Browser> => {
  if (!chromiumPresent) throw new Error(`AGENTWIRE_REQUIRE_CHROMIUM=1 but there is no Chromium at ${ChromiumPath}: run scripts/install-chromium.sh`)
  return chromium.launch({
    executablePath: ChromiumPath,
    headless: true,
    args: [
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-default-apps",
      "--disable-sync",
      "--disable-gpu",
      "--disable-dev-shm-usage",
      "--no-first-run",
      "--metrics-recording-only",
      "--mute-audio"
    ]
  })
}

export interface PngInfo {
  readonly width: number
  readonly height: number
  /** Distinct byte values of the decompressed image data (a blank page has very few). */
  readonly distinctBytes: number
  /** How many of the decompressed bytes are not the most frequent value (0..1). */
  readonly nonBackground: number
}

/** Reads a PNG's header and decompresses its image data (enough to tell a blank page from a rendered one). */
export const readPng = (png: Buffer): PngInfo => {
  const signature = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])
  if (!png.subarray(0, 8).equals(signature)) throw new Error("not a PNG")
  let offset = 8
  let width = 0
  let height = 0
  const idat: Array<Buffer> = []
  while (offset < png.length) {
    const length = png.readUInt32BE(offset)
    const type = png.subarray(offset + 4, offset + 8).toString("ascii")
    const data = png.subarray(offset + 8, offset + 8 + length)
    if (type === "IHDR") {
      width = data.readUInt32BE(0)
      height = data.readUInt32BE(4)
    } else if (type === "IDAT") idat.push(data)
    offset += 12 + length
  }
  const pixels = inflateSync(Buffer.concat(idat))
  const counts = new Map<number, number>()
  for (const byte of pixels) counts.set(byte, (counts.get(byte) ?? 0) + 1)
  const top = Math.max(...counts.values())
  return { width, height, distinctBytes: counts.size, nonBackground: 1 - top / pixels.length }
}
